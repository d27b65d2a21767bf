//! A PoRep C2 job: the C1 output checked, split into per-partition circuits (through
//! storage-proofs-porep's `StackedCompound::circuit`), and the public inputs to verify against.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{anyhow, bail, ensure, Context, Result};
use bellperson::ConstraintSystem;
use blstrs::Scalar as Fr;
use ff::Field;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::{
    as_safe_commitment, parameters::setup_params, DefaultPieceDomain, DefaultPieceHasher,
    MerkleTreeTrait, PoRepConfig,
};
use filecoin_proofs_api::seal::{SealCommitPhase1Output, VanillaSealProof};
use filecoin_proofs_api::RegisteredSealProof;
use rayon::prelude::*;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_porep::stacked::{self, StackedCompound, StackedDrg};

use super::input::{proof_name, C1Input};
use super::params;
use super::witness::{self, Commitments, CHALLENGE_NAMESPACE};
use crate::groth16::witness::CompactValues;
use crate::groth16::{CompactWitness, Proof, R1cs, R1csCache, Srs, SrsCache, WitnessBuilder};
use crate::job::{verify_partitions, ProofJob};

/// The per-sector-shape part of a job, behind a trait object so that one `PorepJob` type
/// serves every sector size.
trait Partitions: Send + Sync {
    fn count(&self) -> usize;
    /// The constraints of this shape's circuit, recorded from its blank circuit (the shape
    /// comes from the public parameters alone, never from the input).
    fn record(&self, circuit_id: &str) -> Result<R1cs>;
    fn witness(&self, k: usize) -> Result<CompactWitness>;
    fn public_inputs(&self, k: usize) -> Result<Vec<Fr>>;

    /// Partition `k` synthesized in one piece with every linear combination evaluated: what
    /// the recorded constraints and the per-challenge witness must reproduce.
    #[cfg(test)]
    fn sequential_assignment(&self, k: usize) -> Result<crate::groth16::Assignment>;

    /// Partition `k`'s witness as `witness` makes it, but with storage-proofs' circuit
    /// synthesized as it is (every hash through bellperson's gadgets): what `witness` must
    /// reproduce.
    #[cfg(test)]
    fn reference_witness(&self, k: usize) -> Result<CompactWitness>;

    /// Challenge `i` of partition `k`'s piece of the witness (inputs, aux).
    #[cfg(test)]
    fn challenge_witness(
        &self,
        k: usize,
        i: usize,
        how: Synthesis,
    ) -> Result<(CompactValues, CompactValues)>;

    /// bellperson's own proof of partition `k`: the reference c2q is compared with.
    #[cfg(test)]
    fn reference_proof(&self, k: usize, srs: &Srs, r: Fr, s: Fr) -> Result<Proof>;
}

/// How a challenge's circuit is synthesized for its witness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Synthesis {
    /// `porep::witness`: the circuit's synthesis with its SHA-256 hashes on bits.
    Native,
    /// storage-proofs' circuit as it is, every hash through bellperson's gadgets: the
    /// reference `Native` reproduces.
    #[cfg(test)]
    Gadgets,
}

type PublicInputs<Tree> = stacked::PublicInputs<
    <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain,
    DefaultPieceDomain,
>;

struct TreePartitions<Tree: 'static + MerkleTreeTrait> {
    public_inputs: PublicInputs<Tree>,
    vanilla_params: stacked::PublicParams<Tree>,
    proofs: Vec<Vec<stacked::Proof<Tree, DefaultPieceHasher>>>,
}

impl<Tree: 'static + MerkleTreeTrait> TreePartitions<Tree> {
    fn partition(&self, k: usize) -> Result<&Vec<stacked::Proof<Tree, DefaultPieceHasher>>> {
        let proofs = self
            .proofs
            .get(k)
            .ok_or_else(|| anyhow!("partition {k} does not exist"))?;
        ensure!(!proofs.is_empty(), "partition {k} has no challenges");
        Ok(proofs)
    }

    /// The challenges of a partition are independent after a short shared preamble (the
    /// replica id's bits, the commitments), so each is synthesized on its own thread as a
    /// circuit of that one challenge: the first keeps the preamble, the others drop theirs.
    /// Concatenated in challenge order, the pieces are the sequential witness, variable for
    /// variable.
    fn partition_witness(&self, k: usize, how: Synthesis) -> Result<CompactWitness> {
        let proofs = self.partition(k)?;
        // What storage-proofs checks when it makes a partition's circuit: each challenge's
        // circuit takes these roots from its own proof.
        let first = &proofs[0];
        ensure!(
            proofs
                .iter()
                .all(|p| p.comm_r_last() == first.comm_r_last()),
            "inconsistent comm_r_lasts in partition {k}"
        );
        ensure!(
            proofs.iter().all(|p| p.comm_c() == first.comm_c()),
            "inconsistent comm_cs in partition {k}"
        );
        // storage-proofs asserts on malformed vanilla proofs; a bad C1 must be an error, not a
        // crashed worker.
        let built = catch_unwind(AssertUnwindSafe(|| {
            let pieces: Vec<Result<_>> = (0..proofs.len())
                .into_par_iter()
                .map(|i| self.challenge_piece(k, i, how))
                .collect();
            let mut witness = CompactWitness::default();
            for piece in pieces {
                let (input, aux) = piece?;
                witness.input.push(input);
                witness.aux.push(aux);
            }
            Ok::<_, anyhow::Error>(witness)
        }));
        match built {
            Ok(result) => result.with_context(|| format!("synthesis of partition {k} failed")),
            Err(_) => bail!("C1 output is malformed: synthesis of partition {k} aborted"),
        }
    }

    /// Challenge `i` of partition `k` as a circuit of its own: its piece of the partition's
    /// witness (inputs, aux), with the preamble for the first challenge only.
    fn challenge_piece(
        &self,
        k: usize,
        i: usize,
        how: Synthesis,
    ) -> Result<(CompactValues, CompactValues)> {
        let proof = self
            .partition(k)?
            .get(i)
            .ok_or_else(|| anyhow!("partition {k} has no challenge {i}"))?;
        let mut cs = if i == 0 {
            let mut cs = WitnessBuilder::new();
            cs.alloc_input(|| "one", || Ok(Fr::ONE))?;
            cs
        } else {
            WitnessBuilder::skipping_before(CHALLENGE_NAMESPACE)
        };
        match how {
            Synthesis::Native => {
                let commitments = Commitments::<Tree> {
                    replica_id: self.public_inputs.replica_id,
                    comm_d: self.public_inputs.tau.as_ref().map(|t| t.comm_d),
                    comm_r: self.public_inputs.tau.as_ref().map(|t| t.comm_r),
                };
                let layers = self.vanilla_params.num_layers;
                witness::synthesize_challenge(&mut cs, &commitments, proof, layers)
            }
            #[cfg(test)]
            Synthesis::Gadgets => {
                use bellperson::Circuit;
                let circuit = self.circuit(k, &vec![proof.clone()])?;
                circuit.synthesize(&mut cs).map_err(anyhow::Error::from)
            }
        }
        .with_context(|| format!("challenge {i}"))?;
        ensure!(
            cs.reached(),
            "the circuit has no `{CHALLENGE_NAMESPACE}…` namespace: this storage-proofs version \
             synthesizes differently"
        );
        Ok(cs.into_compact())
    }

    /// Partition `k`'s circuit over `proofs` (all of its challenges, or some of them).
    #[cfg(test)]
    fn circuit(
        &self,
        k: usize,
        // storage-proofs takes the vanilla proofs as a `Vec`.
        #[allow(clippy::ptr_arg)] proofs: &Vec<stacked::Proof<Tree, DefaultPieceHasher>>,
    ) -> Result<stacked::StackedCircuit<Tree, DefaultPieceHasher>> {
        <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
            StackedDrg<'_, Tree, DefaultPieceHasher>,
            _,
        >>::circuit(
            &self.public_inputs,
            (),
            proofs,
            &self.vanilla_params,
            Some(k),
        )
    }
}

impl<Tree: 'static + MerkleTreeTrait> Partitions for TreePartitions<Tree> {
    fn count(&self) -> usize {
        self.proofs.len()
    }

    fn record(&self, circuit_id: &str) -> Result<R1cs> {
        let blank = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
            StackedDrg<'_, Tree, DefaultPieceHasher>,
            _,
        >>::blank_circuit(&self.vanilla_params);
        R1cs::record(circuit_id, blank)
    }

    fn witness(&self, k: usize) -> Result<CompactWitness> {
        self.partition_witness(k, Synthesis::Native)
    }

    fn public_inputs(&self, k: usize) -> Result<Vec<Fr>> {
        <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
            StackedDrg<'_, Tree, DefaultPieceHasher>,
            _,
        >>::generate_public_inputs(&self.public_inputs, &self.vanilla_params, Some(k))
    }

    #[cfg(test)]
    fn reference_witness(&self, k: usize) -> Result<CompactWitness> {
        self.partition_witness(k, Synthesis::Gadgets)
    }

    #[cfg(test)]
    fn challenge_witness(
        &self,
        k: usize,
        i: usize,
        how: Synthesis,
    ) -> Result<(CompactValues, CompactValues)> {
        self.challenge_piece(k, i, how)
    }

    #[cfg(test)]
    fn sequential_assignment(&self, k: usize) -> Result<crate::groth16::Assignment> {
        let circuit = self.circuit(k, &self.proofs[k])?;
        Ok(crate::groth16::synthesize(circuit)?)
    }

    #[cfg(test)]
    fn reference_proof(&self, k: usize, srs: &Srs, r: Fr, s: Fr) -> Result<Proof> {
        let circuit = self.circuit(k, &self.proofs[k])?;
        let params = srs.to_bellperson();
        Ok(bellperson::groth16::create_proof::<blstrs::Bls12, _, _>(
            circuit, &params, r, s,
        )?)
    }
}

/// One PoRep C2 job, ready to prove.
pub struct PorepJob {
    pub registered_proof: RegisteredSealProof,
    pub miner_id: u64,
    pub sector_number: u64,
    /// The `.params` file this job's circuits need.
    pub params_path: PathBuf,
    /// The circuit's id (the parameter file's stem): what its recorded constraints are for.
    circuit_id: String,
    partitions: Box<dyn Partitions>,
}

impl std::fmt::Debug for PorepJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PorepJob")
            .field("registered_proof", &proof_name(self.registered_proof))
            .field("miner_id", &self.miner_id)
            .field("sector_number", &self.sector_number)
            .field("partitions", &self.partitions.count())
            .finish()
    }
}

impl PorepJob {
    /// Check a C1 output against the miner and sector it is said to be for, and prepare its
    /// partitions. Fails on anything a sealing pipeline could not have produced for them.
    pub fn new(c1: C1Input, miner_id: u64, sector_number: u64) -> Result<PorepJob> {
        ensure!(!c1.shape_only, "{SHAPE_ONLY_REFUSED}");
        PorepJob::build(c1, miner_id, sector_number, VanillaCheck::Verify)
    }

    /// A job for benchmarking synthesis and proving, which also accepts shape-only C1 outputs
    /// (`c2q testdata c1 --shape-only`): real shape, random values. It skips the one check such
    /// values cannot pass, the verification of the vanilla proofs; everything else is checked
    /// as in [`PorepJob::new`] (proof version, sector number, sector size tag, partition count,
    /// non-empty partitions, commitments, and the replica id, which the generator derives from
    /// the miner and sector as sealing does). Its partitions synthesize into circuits of the
    /// real size, but their proofs of a shape-only input do not verify.
    pub fn for_benchmark(c1: C1Input, miner_id: u64, sector_number: u64) -> Result<PorepJob> {
        PorepJob::build(c1, miner_id, sector_number, VanillaCheck::Skip)
    }

    fn build(
        c1: C1Input,
        miner_id: u64,
        sector_number: u64,
        vanilla: VanillaCheck,
    ) -> Result<PorepJob> {
        super::check_request(&c1, miner_id, sector_number)?;
        let proof = c1.registered_proof();
        let config = proof.as_v1_config();
        let prover_id = super::prover_id(miner_id);
        let size = u64::from(proof.sector_size());
        let (partitions, cache_id) = filecoin_proofs::with_shape!(
            size,
            build_partitions,
            c1.output,
            &config,
            prover_id,
            sector_number,
            vanilla,
        )?;
        Ok(PorepJob {
            registered_proof: proof,
            miner_id,
            sector_number,
            params_path: params::params_path(&cache_id),
            circuit_id: cache_id,
            partitions,
        })
    }

    /// Parse C1 bytes (either accepted form) and build the job.
    pub fn from_c1_bytes(bytes: &[u8], miner_id: u64, sector_number: u64) -> Result<PorepJob> {
        PorepJob::new(super::parse_c1(bytes)?, miner_id, sector_number)
    }

    pub fn sector_size(&self) -> u64 {
        u64::from(self.registered_proof.sector_size())
    }

    pub fn is_non_interactive(&self) -> bool {
        proof_name(self.registered_proof).contains("NonInteractive")
    }
}

impl ProofJob for PorepJob {
    fn partitions(&self) -> usize {
        self.partitions.count()
    }

    fn srs(&self) -> Result<Arc<Srs>> {
        params::require(&self.params_path, self.registered_proof)?;
        SrsCache::global().get(&super::srs_key(self.sector_size()), &self.params_path)
    }

    fn r1cs(&self) -> Result<Arc<R1cs>> {
        let file = self.params_path.with_extension("c2q-r1cs");
        R1csCache::global().get(
            &self.circuit_id,
            &super::srs_key(self.sector_size()),
            Some(&file),
            || self.partitions.record(&self.circuit_id),
        )
    }

    fn witness(&self, partition: usize) -> Result<CompactWitness> {
        self.partitions.witness(partition)
    }

    fn verify(&self, proofs: &[Proof]) -> Result<()> {
        verify_partitions(&*self.srs()?, proofs, self.partitions.count(), |k| {
            self.partitions.public_inputs(k)
        })?;
        Ok(())
    }
}

/// The refusal of a shape-only C1 output by [`PorepJob::new`].
pub const SHAPE_ONLY_REFUSED: &str = "this C1 output was made by `c2q testdata c1 --shape-only`: \
    it has the shape of a real sector but random values and cannot be proved (benchmarks only)";

/// Whether the vanilla proofs are verified when a job is built.
#[derive(Clone, Copy, PartialEq, Eq)]
enum VanillaCheck {
    Verify,
    /// Benchmarks: shape-only inputs have random values that cannot verify.
    Skip,
}

fn build_partitions<Tree: 'static + MerkleTreeTrait>(
    c1: SealCommitPhase1Output,
    config: &PoRepConfig,
    prover_id: [u8; 32],
    sector_number: u64,
    vanilla: VanillaCheck,
) -> Result<(Box<dyn Partitions>, String)> {
    let SealCommitPhase1Output {
        registered_proof,
        vanilla_proofs,
        comm_r,
        comm_d,
        replica_id,
        seed,
        ticket,
    } = c1;
    let name = proof_name(registered_proof);
    // Sector shapes share Rust types (2 KiB and 8 MiB trees are alike), so the conversion
    // below cannot tell them apart: compare the sector size the proofs were tagged with.
    let tagged = vanilla_sector_size(&vanilla_proofs);
    let expected_size = u64::from(registered_proof.sector_size());
    ensure!(
        tagged == expected_size,
        "registered proof is {name} ({expected_size} bytes), but the vanilla proofs are for another sector size ({tagged} bytes)"
    );
    let proofs: Vec<Vec<stacked::Proof<Tree, DefaultPieceHasher>>> =
        vanilla_proofs.try_into().map_err(|_| {
            anyhow!(
                "registered proof is {name}, but the vanilla proofs are for another sector size"
            )
        })?;
    ensure!(comm_d != [0; 32], "C1 output has an all-zero comm_d");
    ensure!(comm_r != [0; 32], "C1 output has an all-zero comm_r");
    ensure!(seed != [0; 32], "C1 output has an all-zero seed");
    let expected = usize::from(config.partitions);
    ensure!(
        proofs.len() == expected,
        "C1 output has {} partitions, {name} has {expected}",
        proofs.len()
    );
    ensure!(
        proofs.iter().all(|p| !p.is_empty()),
        "C1 output has a partition without vanilla proofs"
    );

    // The replica id binds the C1 to its miner, sector, ticket and data: recompute it as
    // `verify_seal` does, so a C1 for another sector is rejected before any proving.
    let expected_replica = stacked::generate_replica_id::<Tree::Hasher, _>(
        &prover_id,
        sector_number,
        &ticket,
        comm_d,
        &config.porep_id,
    );
    let replica_bytes: [u8; 32] = replica_id.into();
    ensure!(
        expected_replica.into_bytes() == replica_bytes.to_vec(),
        "C1 output was not made for miner and sector {sector_number} as given (replica id differs)"
    );
    let replica_id = <Tree::Hasher as Hasher>::Domain::try_from_bytes(&replica_bytes)
        .context("C1 replica id is not a field element")?;

    let public_inputs = stacked::PublicInputs {
        replica_id,
        tau: Some(stacked::Tau {
            comm_d: DefaultPieceDomain::try_from_bytes(&comm_d)
                .context("C1 comm_d is not a field element")?,
            comm_r: as_safe_commitment(&comm_r, "comm_r")?,
        }),
        k: None,
        seed: Some(seed),
    };
    let compound = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        _,
    >>::setup(&compound_proof::SetupParams {
        vanilla_params: setup_params(config)?,
        partitions: Some(expected),
        priority: false,
    })?;
    let vanilla_params = compound.vanilla_params;

    // Checking the vanilla proofs costs hashing, not proving: a tampered C1 is caught here
    // with a clear error instead of minutes later as a proof that does not verify.
    let valid = catch_unwind(AssertUnwindSafe(|| {
        if vanilla == VanillaCheck::Skip {
            return Ok(true);
        }
        StackedDrg::<Tree, DefaultPieceHasher>::verify_all_partitions(
            &vanilla_params,
            &public_inputs,
            &proofs,
        )
    }));
    match valid {
        Ok(Ok(true)) => {}
        Ok(Ok(false)) => {
            bail!("C1 vanilla proofs do not verify: the C1 output is corrupt or tampered")
        }
        Ok(Err(e)) => bail!("C1 vanilla proofs cannot be checked: {e:#}"),
        Err(_) => bail!("C1 output is malformed: checking its vanilla proofs aborted"),
    }

    let cache_id = <StackedCompound<Tree, DefaultPieceHasher> as CacheableParameters<
        stacked::StackedCircuit<Tree, DefaultPieceHasher>,
        _,
    >>::cache_identifier(&vanilla_params);
    Ok((
        Box::new(TreePartitions {
            public_inputs,
            vanilla_params,
            proofs,
        }),
        cache_id,
    ))
}

fn vanilla_sector_size(proofs: &VanillaSealProof) -> u64 {
    use filecoin_proofs::constants::*;
    match proofs {
        VanillaSealProof::StackedDrg2KiBV1(_) => SECTOR_SIZE_2_KIB,
        VanillaSealProof::StackedDrg8MiBV1(_) => SECTOR_SIZE_8_MIB,
        VanillaSealProof::StackedDrg512MiBV1(_) => SECTOR_SIZE_512_MIB,
        VanillaSealProof::StackedDrg32GiBV1(_) => SECTOR_SIZE_32_GIB,
        VanillaSealProof::StackedDrg64GiBV1(_) => SECTOR_SIZE_64_GIB,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::groth16::{self, setup::Quiet, CpuBackend};
    use crate::porep::testdata;
    use ff::Field;
    use rand::SeedableRng;

    /// A real 2 KiB PoRep partition: c2q's proof equals bellperson's byte for byte.
    #[test]
    fn porep_partition_is_identical_to_bellperson() {
        let dir = std::path::Path::new("/var/tmp/c2q-test-params");
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", dir);
        params::ensure(RegisteredSealProof::StackedDrg2KiBV1_1, dir, &Quiet).unwrap();
        let sealed =
            testdata::seal_2kib(RegisteredSealProof::StackedDrg2KiBV1_1, 1000, 3, 4).unwrap();
        let c1 = C1Input {
            output: sealed.c1,
            sector_number: None,
            shape_only: false,
        };
        let job = PorepJob::new(c1, 1000, 3).unwrap();
        let srs = job.srs().unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
        let (r, s) = (Fr::random(&mut rng), Fr::random(&mut rng));

        // Recorded constraints and a per-challenge witness give the sequential synthesis, with
        // the aux values in compact form beside them.
        let mut assignment = job.synthesize(0).unwrap();
        let compact = assignment.witness.compact_aux.take();
        assert_eq!(compact, Some(CompactValues::new(&assignment.witness.aux)));
        assert_eq!(assignment, job.partitions.sequential_assignment(0).unwrap());
        let ours = groth16::prove(&CpuBackend, &srs, assignment, r, s).unwrap();
        let reference = job.partitions.reference_proof(0, &srs, r, s).unwrap();
        let bytes = |p: &Proof| {
            let mut v = Vec::new();
            p.write(&mut v).unwrap();
            v
        };
        assert_eq!(bytes(&ours), bytes(&reference));
        job.verify(&[ours]).unwrap();
    }

    fn assert_same(ours: &CompactValues, reference: &CompactValues, what: &str) {
        if ours == reference {
            return;
        }
        let (ours, reference) = (ours.to_vec(), reference.to_vec());
        let at = ours.iter().zip(&reference).position(|(a, b)| a != b);
        panic!(
            "{what}: {} values, {} in the reference; first difference at {at:?}",
            ours.len(),
            reference.len()
        );
    }

    /// The native witness of partitions `ks` is the gadget synthesis's, piece for piece.
    fn assert_native_witness_is_the_reference(job: &PorepJob, ks: impl IntoIterator<Item = usize>) {
        for k in ks {
            let ours = job.partitions.witness(k).unwrap();
            let reference = job.partitions.reference_witness(k).unwrap();
            assert_eq!(ours.aux.len(), reference.aux.len(), "partition {k}");
            assert!(ours.aux_len() > 0);
            for (i, (a, b)) in ours.aux.iter().zip(&reference.aux).enumerate() {
                assert_same(a, b, &format!("partition {k}, challenge {i}, aux"));
            }
            for (i, (a, b)) in ours.input.iter().zip(&reference.input).enumerate() {
                assert_same(a, b, &format!("partition {k}, challenge {i}, inputs"));
            }
            assert_eq!(ours, reference, "partition {k}");
        }
    }

    fn sealed_job(proof: RegisteredSealProof, miner: u64, sector: u64) -> PorepJob {
        let sealed = testdata::seal_2kib(proof, miner, sector, 4).unwrap();
        let c1 = C1Input {
            output: sealed.c1,
            sector_number: None,
            shape_only: false,
        };
        PorepJob::new(c1, miner, sector).unwrap()
    }

    fn shape_only_job(proof: RegisteredSealProof, miner: u64, sector: u64) -> PorepJob {
        let shape = crate::porep::shape::generate(proof, miner, sector, 1, &|_, _| {}).unwrap();
        let c1 = C1Input {
            output: shape.output,
            sector_number: None,
            shape_only: true,
        };
        PorepJob::for_benchmark(c1, miner, sector).unwrap()
    }

    /// Real 2 KiB sectors of every PoRep kind (the non-interactive one has 13 partitions): the
    /// witness with SHA-256 on bits is the gadget synthesis's, variable for variable.
    #[test]
    fn native_witness_of_sealed_2kib_sectors_is_the_gadget_synthesis() {
        for proof in [
            RegisteredSealProof::StackedDrg2KiBV1,
            RegisteredSealProof::StackedDrg2KiBV1_1,
            RegisteredSealProof::StackedDrg2KiBV1_1_Feat_SyntheticPoRep,
            RegisteredSealProof::StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
        ] {
            let job = sealed_job(proof, 1000, 3);
            if proof == RegisteredSealProof::StackedDrg2KiBV1_2_Feat_NonInteractivePoRep {
                assert_eq!(job.partitions(), 13);
            }
            assert_native_witness_is_the_reference(&job, 0..job.partitions());
        }
    }

    /// A shape-only 8 MiB sector: real structure (oct trees, real parents), random values.
    #[test]
    fn native_witness_of_a_shape_only_8mib_sector_is_the_gadget_synthesis() {
        let job = shape_only_job(RegisteredSealProof::StackedDrg8MiBV1_1, 1000, 3);
        assert_native_witness_is_the_reference(&job, [0]);
    }

    /// One challenge of a shape-only 32 GiB sector (11 layers, 30-level comm_d path, oct trees
    /// with sub-trees), after the first so that its preamble is dropped.
    #[test]
    fn native_witness_of_a_32gib_challenge_is_the_gadget_synthesis() {
        let job = shape_only_job(RegisteredSealProof::StackedDrg32GiBV1_1, 1000, 3);
        let (k, i) = (job.partitions() - 1, 1);
        let ours = job
            .partitions
            .challenge_witness(k, i, Synthesis::Native)
            .unwrap();
        let reference = job
            .partitions
            .challenge_witness(k, i, Synthesis::Gadgets)
            .unwrap();
        assert!(ours.1.len() > 5_000_000, "{} variables", ours.1.len());
        assert_same(&ours.0, &reference.0, "inputs");
        assert_same(&ours.1, &reference.1, "aux");
    }

    /// A challenge whose proof lacks a DRG parent: an error from either synthesis, no panic
    /// escapes.
    #[test]
    fn a_malformed_challenge_is_an_error() {
        let shape = crate::porep::shape::generate(
            RegisteredSealProof::StackedDrg2KiBV1_1,
            1000,
            3,
            1,
            &|_, _| {},
        )
        .unwrap();
        let mut json: serde_json::Value =
            serde_json::from_slice(&shape.c1_json().unwrap()).unwrap();
        let parents = json["vanilla_proofs"]["StackedDrg2KiBV1"][0][1]["replica_column_proofs"]
            ["drg_parents"]
            .as_array_mut()
            .unwrap();
        parents.pop();
        let c1 = crate::porep::parse_c1(&serde_json::to_vec(&json).unwrap()).unwrap();
        let job = PorepJob::for_benchmark(c1, 1000, 3).unwrap();
        let ours = job.partitions.witness(0).unwrap_err();
        assert!(format!("{ours:#}").contains("challenge 1"), "{ours:#}");
        assert!(job.partitions.reference_witness(0).is_err());
    }

    /// Wall and CPU time of one 32 GiB partition's witness, native and through the gadgets
    /// (`C2Q_WITNESS=native` or `gadgets` for one of them). Not run by default:
    /// `RAYON_NUM_THREADS=2 cargo test --release --lib -- --ignored --nocapture
    /// witness_of_a_32gib_partition_timed`.
    #[test]
    #[ignore]
    fn witness_of_a_32gib_partition_timed() {
        let job = shape_only_job(RegisteredSealProof::StackedDrg32GiBV1_1, 1000, 3);
        let only = std::env::var("C2Q_WITNESS").unwrap_or_default();
        for how in [Synthesis::Native, Synthesis::Gadgets] {
            if !only.is_empty() && !format!("{how:?}").eq_ignore_ascii_case(&only) {
                continue;
            }
            let (started, (user, sys)) = (std::time::Instant::now(), crate::bench::cpu_seconds());
            let witness = match how {
                Synthesis::Native => job.partitions.witness(0),
                Synthesis::Gadgets => job.partitions.reference_witness(0),
            }
            .unwrap();
            let wall = started.elapsed().as_secs_f64();
            let (user2, sys2) = crate::bench::cpu_seconds();
            eprintln!(
                "{how:?}: {} threads, wall {wall:.2} s, user {:.2} s, system {:.2} s, {} aux \
                 variables",
                rayon::current_num_threads(),
                user2 - user,
                sys2 - sys,
                witness.aux_len()
            );
        }
    }
}
