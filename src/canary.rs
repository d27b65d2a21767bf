//! The canary: a small built-in circuit (about two thousand constraints) proved through the
//! same path as PoRep. Its parameters are generated in-process in milliseconds, so it serves
//! as the worker's health check and keeps queue tests fast.
//!
//! Statement, per partition: "I know x whose 255-bit decomposition packs back to x, and the
//! chain v₀ = x, vᵢ₊₁ = vᵢ² + i ends at the public output y". The bits make the witness
//! mostly 0 and 1, like PoRep's.

use std::sync::Arc;

use anyhow::{anyhow, ensure, Result};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use ff::{Field, PrimeFieldBits};
use rand::SeedableRng;

use crate::groth16::{
    setup, CompactWitness, Proof, R1cs, R1csCache, Srs, SrsCache, SrsKey, WitnessBuilder,
};
use crate::job::ProofJob;

/// Squarings in the chain.
const CHAIN: usize = 1500;
/// The most partitions a canary job may ask for.
pub const MAX_PARTITIONS: usize = 64;

#[derive(Clone)]
struct CanaryCircuit {
    x: Option<Fr>,
}

fn chain_output(x: Fr) -> Fr {
    let mut v = x;
    for i in 0..CHAIN {
        v = v.square() + Fr::from(i as u64);
    }
    v
}

impl Circuit<Fr> for CanaryCircuit {
    fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x_val = self.x;
        let x = cs.alloc(|| "x", || x_val.ok_or(SynthesisError::AssignmentMissing))?;

        // Bit decomposition of x, little-endian, each bit boolean, packing back to x.
        let bits: Vec<Option<bool>> = match x_val {
            Some(x) => x.to_le_bits().iter().take(255).map(|b| Some(*b)).collect(),
            None => vec![None; 255],
        };
        let mut packed = bellperson::LinearCombination::zero();
        let mut coeff = Fr::ONE;
        for (i, bit) in bits.into_iter().enumerate() {
            let b = cs.alloc(
                || format!("bit {i}"),
                || {
                    bit.map(|b| if b { Fr::ONE } else { Fr::ZERO })
                        .ok_or(SynthesisError::AssignmentMissing)
                },
            )?;
            cs.enforce(
                || format!("bit {i} is boolean"),
                |lc| lc + b,
                |lc| lc + CS::one() - b,
                |lc| lc,
            );
            packed = packed + (coeff, b);
            coeff = coeff.double();
        }
        cs.enforce(
            || "bits pack to x",
            |_| packed,
            |lc| lc + CS::one(),
            |lc| lc + x,
        );

        // The squaring chain.
        let mut v = x;
        let mut v_val = x_val;
        for i in 0..CHAIN {
            let next_val = v_val.map(|v| v.square() + Fr::from(i as u64));
            let next = cs.alloc(
                || format!("v{}", i + 1),
                || next_val.ok_or(SynthesisError::AssignmentMissing),
            )?;
            let k = Fr::from(i as u64);
            cs.enforce(
                || format!("step {i}"),
                |lc| lc + v,
                |lc| lc + v,
                |lc| lc + next - (k, CS::one()),
            );
            v = next;
            v_val = next_val;
        }
        let y = cs.alloc_input(|| "y", || v_val.ok_or(SynthesisError::AssignmentMissing))?;
        cs.enforce(
            || "y is the end of the chain",
            |lc| lc + v,
            |lc| lc + CS::one(),
            |lc| lc + y,
        );
        Ok(())
    }
}

/// The name of the canary's circuit and of its parameters.
const NAME: &str = "canary";

/// The key of the canary's parameters.
pub fn srs_key() -> SrsKey {
    SrsKey::new(NAME)
}

/// The canary's parameters: generated once per process from a fixed seed.
pub fn srs() -> Result<Arc<Srs>> {
    SrsCache::global().get_or_make(&srs_key(), || {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(0xc2a9);
        setup::generate(CanaryCircuit { x: None }, &mut rng, NAME, &setup::Quiet)
    })
}

/// A canary job: `partitions` circuits whose secrets derive from `seed`.
#[derive(Clone, Debug)]
pub struct CanaryJob {
    secrets: Vec<Fr>,
}

impl CanaryJob {
    pub fn new(partitions: usize, seed: u64) -> Result<CanaryJob> {
        ensure!(
            (1..=MAX_PARTITIONS).contains(&partitions),
            "a canary job has 1 to {MAX_PARTITIONS} partitions, not {partitions}"
        );
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        Ok(CanaryJob {
            secrets: (0..partitions).map(|_| Fr::random(&mut rng)).collect(),
        })
    }
}

impl ProofJob for CanaryJob {
    fn partitions(&self) -> usize {
        self.secrets.len()
    }

    fn srs(&self) -> Result<Arc<Srs>> {
        srs()
    }

    fn r1cs(&self) -> Result<Arc<R1cs>> {
        R1csCache::global().get(NAME, &srs_key(), None, || {
            R1cs::record(NAME, CanaryCircuit { x: None })
        })
    }

    fn witness(&self, partition: usize) -> Result<CompactWitness> {
        let x = *self
            .secrets
            .get(partition)
            .ok_or_else(|| anyhow!("canary partition {partition} does not exist"))?;
        let mut cs = WitnessBuilder::new();
        cs.alloc_input(|| "one", || Ok(Fr::ONE))?;
        CanaryCircuit { x: Some(x) }.synthesize(&mut cs)?;
        let (input, aux) = cs.into_compact();
        Ok(CompactWitness {
            input: vec![input],
            aux: vec![aux],
        })
    }

    fn verify(&self, proofs: &[Proof]) -> Result<()> {
        ensure!(
            proofs.len() == self.secrets.len(),
            "{} proofs for {} canary partitions",
            proofs.len(),
            self.secrets.len()
        );
        let srs = srs()?;
        let pvk = bellperson::groth16::prepare_verifying_key(&srs.vk);
        for (k, (proof, x)) in proofs.iter().zip(&self.secrets).enumerate() {
            let ok = bellperson::groth16::verify_proof(&pvk, proof, &[chain_output(*x)])
                .map_err(|e| anyhow!("canary partition {k}: {e}"))?;
            ensure!(ok, "canary partition {k}'s proof does not verify");
        }
        Ok(())
    }
}
