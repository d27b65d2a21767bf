//! What every provable job looks like to the pipeline: a number of partitions (one circuit
//! each) that share one SRS and one recorded constraint system, whose witnesses are computed
//! one partition at a time, proved by `groth16`, and verified together before anything is
//! published. PoRep C2 (`porep`) and the built-in `canary` implement it.

use std::sync::Arc;

use anyhow::{anyhow, ensure, Result};
use blstrs::Scalar as Fr;

use crate::groth16::{Assignment, CompactWitness, Proof, R1cs, Srs};

pub trait ProofJob: Send + Sync {
    /// How many circuits (partitions) this job proves.
    fn partitions(&self) -> usize;

    /// The SRS shared by all partitions (loaded once per process and cached).
    fn srs(&self) -> Result<Arc<Srs>>;

    /// The constraints every partition shares, recorded once per circuit shape (minutes for
    /// a 32 GiB sector the first time, then read from disk).
    fn r1cs(&self) -> Result<Arc<R1cs>>;

    /// The witness of one partition, compact: CPU-bound, the bulk of a real sector's CPU work.
    fn witness(&self, partition: usize) -> Result<CompactWitness>;

    /// One partition's full assignment: its witness and the A, B, C evaluations.
    fn synthesize(&self, partition: usize) -> Result<Assignment> {
        self.r1cs()?.assignment(&self.witness(partition)?)
    }

    /// Verify the proofs of all partitions, in order, against this job's public inputs.
    fn verify(&self, proofs: &[Proof]) -> Result<()>;
}

/// Check a job's `proofs`, one per partition of `partitions`, each against its public inputs
/// with bellperson's verifier; the error names the partition that fails.
pub fn verify_partitions(
    srs: &Srs,
    proofs: &[Proof],
    partitions: usize,
    public_inputs: impl Fn(usize) -> Result<Vec<Fr>>,
) -> Result<()> {
    ensure!(
        proofs.len() == partitions,
        "{} partition proofs for a job of {partitions} partitions",
        proofs.len()
    );
    let pvk = bellperson::groth16::prepare_verifying_key(&srs.vk);
    for (k, proof) in proofs.iter().enumerate() {
        let inputs = public_inputs(k)?;
        let ok = bellperson::groth16::verify_proof(&pvk, proof, &inputs)
            .map_err(|e| anyhow!("verification of partition {k} failed: {e}"))?;
        ensure!(ok, "partition {k}'s proof does not verify");
    }
    Ok(())
}

/// The wire form of a multi-partition proof: 192 bytes per partition, in order — the bytes
/// `seal_commit_phase2` returns.
pub fn proof_bytes(proofs: &[Proof]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(proofs.len() * 192);
    for p in proofs {
        p.write(&mut out)?;
    }
    Ok(out)
}
