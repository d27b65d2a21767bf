//! A SnapDeals job: the input checked (partition count, commitments, the vanilla proofs
//! verified against them), split into per-partition circuits (storage-proofs-update's
//! `EmptySectorUpdateCompound::circuit`), each partition's witness made in pieces on several
//! threads (`snap::witness`), and the public inputs to verify against.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{anyhow, bail, ensure, Context, Result};
use blstrs::Scalar as Fr;
use filecoin_hashers::Domain;
use filecoin_proofs::{DefaultPieceDomain, MerkleTreeTrait};
use filecoin_proofs_api::RegisteredUpdateProof;
use rayon::prelude::*;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::{
    EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PartitionProof,
    PublicInputs, PublicParams,
};

use super::input::SnapInput;
use super::witness::{self, Piece};
use super::{params, update_config, update_proof_name};
use crate::groth16::{CompactWitness, Proof, R1cs, R1csCache, Srs, SrsCache};
use crate::job::{proof_bytes, verify_partitions, ProofJob};

/// The per-sector-shape part of a job, behind a trait object so that one `SnapJob` type
/// serves every sector size.
trait Partitions: Send + Sync {
    fn count(&self) -> usize;
    /// The update circuit of this sector size, recorded from its blank circuit.
    fn record(&self, circuit_id: &str) -> Result<R1cs>;
    fn witness(&self, k: usize) -> Result<CompactWitness>;
    fn public_inputs(&self, k: usize) -> Result<Vec<Fr>>;

    /// Partition `k`'s witness from storage-proofs-update's circuit synthesized as it is, in
    /// one piece on one thread (every hash through bellperson's gadgets): what `witness` must
    /// reproduce.
    #[cfg(test)]
    fn reference_witness(&self, k: usize) -> Result<CompactWitness>;

    /// bellperson's own proof of partition `k`: the reference c2q is compared with.
    #[cfg(test)]
    fn reference_proof(&self, k: usize, srs: &Srs, r: Fr, s: Fr) -> Result<Proof>;

    /// The CPU seconds of each piece of partition `k`'s witness, made one after another.
    #[cfg(test)]
    fn piece_seconds(&self, k: usize) -> Result<Vec<(Piece, f64)>>;
}

struct TreePartitions<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> {
    public_inputs: PublicInputs,
    public_params: PublicParams,
    proofs: Vec<PartitionProof<Tree>>,
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> TreePartitions<Tree> {
    fn circuit(&self, k: usize) -> Result<EmptySectorUpdateCircuit<Tree>> {
        let proof = self
            .proofs
            .get(k)
            .ok_or_else(|| anyhow!("partition {k} does not exist"))?;
        <EmptySectorUpdateCompound<Tree> as CompoundProof<_, _>>::circuit(
            &self.public_inputs,
            (),
            proof,
            &self.public_params,
            Some(k),
        )
    }
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> Partitions for TreePartitions<Tree> {
    fn count(&self) -> usize {
        self.proofs.len()
    }

    fn record(&self, circuit_id: &str) -> Result<R1cs> {
        let blank = <EmptySectorUpdateCompound<Tree> as CompoundProof<_, _>>::blank_circuit(
            &self.public_params,
        );
        R1cs::record(circuit_id, blank)
    }

    /// The preamble and each challenge as pieces of their own, on rayon's threads, joined in
    /// order (`snap::witness`).
    fn witness(&self, k: usize) -> Result<CompactWitness> {
        // storage-proofs asserts on malformed vanilla proofs (an empty partition, for one, when
        // its circuit is made); a bad input must be an error, not a crashed worker.
        let built = catch_unwind(AssertUnwindSafe(|| {
            let circuit = self.circuit(k)?;
            witness::check(&circuit)?;
            let pieces: Vec<(Piece, Result<_>)> = witness::pieces(&circuit.pub_params)
                .into_par_iter()
                .map(|piece| (piece, witness::synthesize_piece(&circuit, piece)))
                .collect();
            let mut witness = CompactWitness::default();
            for (piece, values) in pieces {
                let (input, aux) = values.with_context(|| format!("{piece}"))?;
                witness.input.push(input);
                witness.aux.push(aux);
            }
            Ok::<_, anyhow::Error>(witness)
        }));
        match built {
            Ok(result) => result.with_context(|| format!("synthesis of partition {k} failed")),
            Err(_) => bail!("SnapDeals input is malformed: synthesis of partition {k} aborted"),
        }
    }

    #[cfg(test)]
    fn reference_witness(&self, k: usize) -> Result<CompactWitness> {
        use bellperson::{Circuit, ConstraintSystem};
        let built = catch_unwind(AssertUnwindSafe(|| {
            let circuit = self.circuit(k)?;
            let mut cs = crate::groth16::WitnessBuilder::new();
            cs.alloc_input(|| "one", || Ok(<Fr as ff::Field>::ONE))?;
            circuit.synthesize(&mut cs)?;
            let (input, aux) = cs.into_compact();
            Ok::<_, anyhow::Error>(CompactWitness {
                input: vec![input],
                aux: vec![aux],
            })
        }));
        match built {
            Ok(result) => result.with_context(|| format!("synthesis of partition {k} failed")),
            Err(_) => bail!("SnapDeals input is malformed: synthesis of partition {k} aborted"),
        }
    }

    fn public_inputs(&self, k: usize) -> Result<Vec<Fr>> {
        <EmptySectorUpdateCompound<Tree> as CompoundProof<_, _>>::generate_public_inputs(
            &self.public_inputs,
            &self.public_params,
            Some(k),
        )
    }

    #[cfg(test)]
    fn piece_seconds(&self, k: usize) -> Result<Vec<(Piece, f64)>> {
        let thread_cpu = || {
            // SAFETY: clock_gettime fills the struct it is given.
            let t = unsafe {
                let mut t: libc::timespec = std::mem::zeroed();
                libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t);
                t
            };
            t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
        };
        let circuit = self.circuit(k)?;
        witness::check(&circuit)?;
        witness::pieces(&circuit.pub_params)
            .into_iter()
            .map(|piece| {
                let started = thread_cpu();
                witness::synthesize_piece(&circuit, piece)?;
                Ok((piece, thread_cpu() - started))
            })
            .collect()
    }

    #[cfg(test)]
    fn reference_proof(&self, k: usize, srs: &Srs, r: Fr, s: Fr) -> Result<Proof> {
        let params = srs.to_bellperson();
        Ok(bellperson::groth16::create_proof::<blstrs::Bls12, _, _>(
            self.circuit(k)?,
            &params,
            r,
            s,
        )?)
    }
}

/// One SnapDeals job, ready to prove.
pub struct SnapJob {
    pub input: SnapInput,
    /// The `.params` file this job's circuits need.
    pub params_path: PathBuf,
    /// The circuit's id (the parameter file's stem): what its recorded constraints are for.
    circuit_id: String,
    partitions: Box<dyn Partitions>,
}

impl std::fmt::Debug for SnapJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapJob")
            .field(
                "registered_proof",
                &update_proof_name(self.input.registered_proof),
            )
            .field("partitions", &self.partitions.count())
            .finish()
    }
}

impl SnapJob {
    /// Check a SnapDeals input and prepare its partitions: as many vanilla proofs as the
    /// update proof has partitions, each of the sector size named, all verifying against the
    /// commitments given (proofs of another sector, or tampered ones, are refused here, before
    /// any proving). A shape-only input (`c2q testdata snap --shape-only`) is refused.
    pub fn new(input: SnapInput) -> Result<SnapJob> {
        ensure!(!input.shape_only, "{SHAPE_ONLY_REFUSED}");
        SnapJob::build(input, VanillaCheck::Verify)
    }

    /// A job for benchmarking synthesis and proving, which also accepts shape-only inputs
    /// (`snap::shape`): real structure, random values. It skips the one check such values
    /// cannot pass, the verification of the vanilla proofs; everything else is checked as in
    /// [`SnapJob::new`] (proof version, partition count, each vanilla proof decoded for the
    /// sector shape with its apex leaves and challenges counted, commitments field elements).
    /// Its partitions synthesize into circuits of the real size, but their proofs of a
    /// shape-only input do not verify.
    pub fn for_benchmark(input: SnapInput) -> Result<SnapJob> {
        SnapJob::build(input, VanillaCheck::Skip)
    }

    fn build(input: SnapInput, vanilla: VanillaCheck) -> Result<SnapJob> {
        let proof = input.registered_proof;
        ensure!(
            proof.major_version() == 1,
            "registered update proof {} is not version 1",
            update_proof_name(proof)
        );
        let partitions =
            filecoin_proofs::with_shape!(input.sector_size(), build_partitions, &input, vanilla,)?;
        let circuit_id = params::cache_id(proof)?;
        Ok(SnapJob {
            params_path: crate::porep::params::params_path(&circuit_id),
            circuit_id,
            partitions,
            input,
        })
    }

    pub fn registered_proof(&self) -> RegisteredUpdateProof {
        self.input.registered_proof
    }

    pub fn sector_size(&self) -> u64 {
        self.input.sector_size()
    }

    /// The verifying key filecoin-proofs reads for this job's circuit.
    pub fn verifying_key_path(&self) -> PathBuf {
        self.params_path.with_extension("vk")
    }

    /// Whether the assembled proof bytes verify as the chain checks them: filecoin-proofs'
    /// `verify_empty_sector_update_proof`, with the verifying key from the parameter
    /// directory. An error when there is no verdict (no verifying key, a verifier failure).
    pub fn check_proof(&self, proof: &[u8]) -> Result<bool> {
        let vk = self.verifying_key_path();
        ensure!(
            vk.is_file(),
            "the verifying key {} is missing (it comes with the parameters)",
            vk.display()
        );
        let input = &self.input;
        catch_unwind(AssertUnwindSafe(|| {
            filecoin_proofs_api::update::verify_empty_sector_update_proof(
                input.registered_proof,
                proof,
                input.comm_r_old,
                input.comm_r_new,
                input.comm_d_new,
            )
        }))
        .map_err(|_| anyhow!("filecoin-proofs' update verifier aborted"))?
        .context("filecoin-proofs' update verifier failed")
    }
}

impl ProofJob for SnapJob {
    fn partitions(&self) -> usize {
        self.partitions.count()
    }

    fn srs(&self) -> Result<Arc<Srs>> {
        params::require(&self.params_path, self.input.registered_proof)?;
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

    /// Each partition against its public inputs (naming the one that fails), then the whole
    /// proof through filecoin-proofs' own verifier.
    fn verify(&self, proofs: &[Proof]) -> Result<()> {
        verify_partitions(&*self.srs()?, proofs, self.partitions.count(), |k| {
            self.partitions.public_inputs(k)
        })?;
        ensure!(
            self.check_proof(&proof_bytes(proofs)?)?,
            "filecoin-proofs' verify_empty_sector_update_proof rejects the proof"
        );
        Ok(())
    }
}

/// The refusal of a shape-only input by [`SnapJob::new`].
pub const SHAPE_ONLY_REFUSED: &str = "this SnapDeals input was made by `c2q testdata snap \
    --shape-only`: it has the shape of a real update but random values and cannot be proved \
    (benchmarks only)";

/// Whether the vanilla proofs are verified when a job is built.
#[derive(Clone, Copy, PartialEq, Eq)]
enum VanillaCheck {
    Verify,
    /// Benchmarks: shape-only inputs have random values that cannot verify.
    Skip,
}

fn build_partitions<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    input: &SnapInput,
    vanilla: VanillaCheck,
) -> Result<Box<dyn Partitions>> {
    let proof = input.registered_proof;
    let name = update_proof_name(proof);
    let config = update_config(proof);
    let expected = usize::from(config.update_partitions);
    ensure!(
        input.vanilla_proofs.len() == expected,
        "{} vanilla partition proofs, {name} has {expected} partitions",
        input.vanilla_proofs.len()
    );
    // Sector shapes share Rust types (2 KiB and 8 MiB trees are alike), so decoding cannot
    // tell them apart; the count of apex leaves and challenges, checked below, can.
    let proofs = input
        .vanilla_proofs
        .iter()
        .enumerate()
        .map(|(k, bytes)| {
            bincode::deserialize::<PartitionProof<Tree>>(bytes).map_err(|e| {
                anyhow!("vanilla proof of partition {k} is not a {name} partition proof: {e}")
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let domain = |bytes: &[u8; 32], what: &str| {
        <TreeRHasher as filecoin_hashers::Hasher>::Domain::try_from_bytes(bytes)
            .with_context(|| format!("{what} is not a field element"))
    };
    let public_inputs = PublicInputs {
        k: expected,
        comm_r_old: domain(&input.comm_r_old, "comm_r_old")?,
        comm_d_new: DefaultPieceDomain::try_from_bytes(&input.comm_d_new)
            .context("comm_d_new is not a field element")?,
        comm_r_new: domain(&input.comm_r_new, "comm_r_new")?,
        h: config.h,
    };
    let public_params = params::public_params(proof);
    // What the verifier checks first, and a benchmark's input must pass too.
    for (k, partition) in proofs.iter().enumerate() {
        ensure!(
            partition.apex_leafs.len() == public_params.apex_leaf_count
                && partition.challenge_proofs.len() == public_params.challenge_count,
            "vanilla proof of partition {k} has {} apex leaves and {} challenges, a {name} \
             partition proof {} and {}",
            partition.apex_leafs.len(),
            partition.challenge_proofs.len(),
            public_params.apex_leaf_count,
            public_params.challenge_count
        );
    }
    // Checking the vanilla proofs costs hashing, not proving: a tampered input or one for
    // another sector is caught here with a clear error instead of as a proof that fails.
    let valid = catch_unwind(AssertUnwindSafe(|| {
        if vanilla == VanillaCheck::Skip {
            return Ok(true);
        }
        EmptySectorUpdate::<Tree>::verify_all_partitions(&public_params, &public_inputs, &proofs)
    }));
    match valid {
        Ok(Ok(true)) => {}
        Ok(Ok(false)) => bail!(
            "the vanilla proofs do not verify against comm_r_old, comm_r_new and comm_d_new: \
             they are for another sector or update, or tampered"
        ),
        Ok(Err(e)) => bail!("the vanilla proofs cannot be checked: {e:#}"),
        Err(_) => bail!("the vanilla proofs are malformed: checking them aborted"),
    }
    Ok(Box::new(TreePartitions {
        public_inputs,
        public_params,
        proofs,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::groth16::{self, setup::Quiet, CpuBackend};
    use crate::snap::testdata;
    use ff::Field;
    use rand::SeedableRng;

    const TEST_PARAMS: &str = "/var/tmp/c2q-test-params";

    fn with_test_params() {
        let dir = std::path::Path::new(TEST_PARAMS);
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", dir);
        params::ensure(RegisteredUpdateProof::StackedDrg2KiBV1, dir, &Quiet).unwrap();
    }

    /// A real 2 KiB update: c2q's proof equals bellperson's byte for byte, and passes both
    /// verifiers (per partition, and filecoin-proofs' on the assembled bytes).
    #[test]
    fn snap_partition_is_identical_to_bellperson() {
        with_test_params();
        let input = testdata::update_2kib(1000, 7, 11).unwrap();
        let job = SnapJob::new(input).unwrap();
        assert_eq!(job.partitions(), 1);
        let srs = job.srs().unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
        let (r, s) = (Fr::random(&mut rng), Fr::random(&mut rng));
        let assignment = job.synthesize(0).unwrap();
        let ours = groth16::prove(&CpuBackend, &srs, assignment, r, s).unwrap();
        let reference = job.partitions.reference_proof(0, &srs, r, s).unwrap();
        let bytes = |p: &Proof| {
            let mut v = Vec::new();
            p.write(&mut v).unwrap();
            v
        };
        assert_eq!(bytes(&ours), bytes(&reference));
        job.verify(std::slice::from_ref(&ours)).unwrap();

        // A proof of another update does not pass for this one.
        let other = SnapJob::new(testdata::update_2kib(1000, 7, 12).unwrap()).unwrap();
        let e = other.verify(&[ours]).unwrap_err();
        assert!(format!("{e:#}").contains("does not verify"), "{e:#}");
    }

    /// Inputs a SnapDeals pipeline could not have made for these commitments are refused
    /// when the job is built, each with its reason.
    #[test]
    fn bad_snap_inputs_are_refused_with_a_reason() {
        let good = testdata::update_2kib(1000, 8, 21).unwrap();
        let other = testdata::update_2kib(1000, 8, 22).unwrap();
        let refused = |input: SnapInput| format!("{:#}", SnapJob::new(input).unwrap_err());

        let mut two = good.clone();
        two.vanilla_proofs.push(good.vanilla_proofs[0].clone());
        assert!(refused(two).contains("2 vanilla partition proofs"));

        let mut bigger = good.clone();
        bigger.registered_proof = RegisteredUpdateProof::StackedDrg8MiBV1;
        assert!(refused(bigger).contains("StackedDrg8MiBV1 has 4 partitions"));

        let mut elsewhere = good.clone();
        elsewhere.comm_r_new = other.comm_r_new;
        assert!(refused(elsewhere).contains("do not verify"));

        let mut swapped = good.clone();
        swapped.vanilla_proofs = other.vanilla_proofs.clone();
        assert!(refused(swapped).contains("do not verify"));

        let mut tampered = good.clone();
        let proof = &mut tampered.vanilla_proofs[0];
        let middle = proof.len() / 2;
        proof[middle] ^= 1;
        let e = refused(tampered);
        assert!(e.contains("do not verify") || e.contains("vanilla"), "{e}");

        let mut truncated = good.clone();
        truncated.vanilla_proofs[0].truncate(100);
        assert!(refused(truncated).contains("not a StackedDrg2KiBV1 partition proof"));

        SnapJob::new(good).unwrap();
    }

    fn assert_same(ours: &CompactWitness, reference: &CompactWitness, what: &str) {
        use crate::groth16::CompactValues;
        // Joined, equal values are equal pieces (a 32 GiB partition's 81M values are not
        // expanded unless they differ).
        let joined = |w: &CompactWitness| {
            (
                CompactValues::concat(&w.input),
                CompactValues::concat(&w.aux),
            )
        };
        if joined(ours) == joined(reference) {
            return;
        }
        let (ours, reference) = (ours.expand(), reference.expand());
        for (part, a, b) in [
            ("inputs", &ours.0, &reference.0),
            ("aux", &ours.1, &reference.1),
        ] {
            if a != b {
                let at = a.iter().zip(b).position(|(x, y)| x != y);
                panic!(
                    "{what}, {part}: {} values, {} in the reference; first difference at {at:?}",
                    a.len(),
                    b.len()
                );
            }
        }
    }

    /// Real 2 KiB updates: the witness in pieces with SHA-256 on bits is storage-proofs'
    /// circuit synthesized as it is, variable for variable, and the same on every run.
    #[test]
    fn native_witness_of_real_2kib_updates_is_the_gadget_synthesis() {
        for seed in [31, 32] {
            let job = SnapJob::new(testdata::update_2kib(1000, 9, seed).unwrap()).unwrap();
            let ours = job.partitions.witness(0).unwrap();
            assert_eq!(ours.aux.len(), 1 + 10, "the preamble and 10 challenges");
            assert_eq!(ours.inputs(), 5);
            let reference = job.partitions.reference_witness(0).unwrap();
            assert_same(&ours, &reference, &format!("seed {seed}"));
            assert_eq!(job.partitions.witness(0).unwrap(), ours);
        }
    }

    fn shape_only_job(proof: RegisteredUpdateProof, seed: u64) -> SnapJob {
        SnapJob::for_benchmark(crate::snap::shape::generate(proof, seed).unwrap()).unwrap()
    }

    /// A shape-only 8 MiB update (4 partitions with 2 partition bits, 10 challenges of 18 bits,
    /// 128 apex leaves): the same, for a partition whose bits are not all zero.
    #[test]
    fn native_witness_of_a_shape_only_8mib_update_is_the_gadget_synthesis() {
        let job = shape_only_job(RegisteredUpdateProof::StackedDrg8MiBV1, 5);
        let k = 3;
        let ours = job.partitions.witness(k).unwrap();
        let reference = job.partitions.reference_witness(k).unwrap();
        assert!(ours.aux_len() > 5_000_000, "{} variables", ours.aux_len());
        assert_same(&ours, &reference, &format!("partition {k}"));
    }

    /// Shape-only 32 GiB and 64 GiB updates (TreeR paths with sub-tree levels, and a top-tree
    /// level at 64 GiB; 86 challenges of 30 and 31 bits): the last partition's witness is
    /// the gadget synthesis's. About a minute on two cores, so not run by default: `cargo test
    /// --release --lib -- --ignored native_witness_of_shape_only_32gib_and_64gib`.
    #[test]
    #[ignore]
    fn native_witness_of_shape_only_32gib_and_64gib_updates_is_the_gadget_synthesis() {
        for proof in [
            RegisteredUpdateProof::StackedDrg32GiBV1,
            RegisteredUpdateProof::StackedDrg64GiBV1,
        ] {
            let job = shape_only_job(proof, 6);
            let k = job.partitions() - 1;
            let ours = job.partitions.witness(k).unwrap();
            let reference = job.partitions.reference_witness(k).unwrap();
            assert!(ours.aux_len() > 80_000_000, "{} variables", ours.aux_len());
            assert_same(&ours, &reference, &format!("{proof:?}, partition {k}"));
        }
    }

    /// Refused for proving with a one-line reason naming the command that made it, accepted
    /// for benchmarks, its witness of the size of the recorded circuit.
    #[test]
    fn shape_only_inputs_are_refused_and_benchmarked() {
        with_test_params();
        let shape =
            crate::snap::shape::generate(RegisteredUpdateProof::StackedDrg2KiBV1, 3).unwrap();
        let e = format!("{:#}", SnapJob::new(shape.clone()).unwrap_err());
        assert!(
            e.contains("--shape-only") && e.contains("cannot be proved"),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
        // Without the marker its random proofs do not verify (what the gateway meets).
        let unmarked = SnapInput {
            shape_only: false,
            ..shape.clone()
        };
        let e = format!("{:#}", SnapJob::new(unmarked).unwrap_err());
        assert!(e.contains("do not verify"), "{e}");

        let job = SnapJob::for_benchmark(shape).unwrap();
        let real = SnapJob::new(testdata::update_2kib(1000, 8, 21).unwrap()).unwrap();
        assert_eq!(job.params_path, real.params_path);
        let witness = job.witness(0).unwrap();
        let r1cs = job.r1cs().unwrap();
        assert_eq!(witness.inputs(), r1cs.inputs);
        assert_eq!(witness.aux_len(), r1cs.aux);
        assert_same(
            &witness,
            &job.partitions.reference_witness(0).unwrap(),
            "2 KiB",
        );
    }

    /// A partition proof with a challenge's new leaf that is not the encoding of its data leaf:
    /// an error from either synthesis, no panic escapes.
    #[test]
    fn a_malformed_partition_is_an_error() {
        use filecoin_proofs::SectorShape2KiB;
        let mut input =
            crate::snap::shape::generate(RegisteredUpdateProof::StackedDrg2KiBV1, 4).unwrap();
        let mut proof: PartitionProof<SectorShape2KiB> =
            bincode::deserialize(&input.vanilla_proofs[0]).unwrap();
        proof.challenge_proofs[1].proof_r_new = proof.challenge_proofs[1].proof_r_old.clone();
        input.vanilla_proofs[0] = bincode::serialize(&proof).unwrap();
        let job = SnapJob::for_benchmark(input.clone()).unwrap();
        let e = format!("{:#}", job.witness(0).unwrap_err());
        assert!(e.contains("challenge 1") && e.contains("leaf_r_new"), "{e}");
        assert!(job.partitions.reference_witness(0).is_err());

        // An apex leaf short: refused when the job is built, even for a benchmark.
        let mut proof: PartitionProof<SectorShape2KiB> =
            bincode::deserialize(&input.vanilla_proofs[0]).unwrap();
        proof.apex_leafs.pop();
        input.vanilla_proofs[0] = bincode::serialize(&proof).unwrap();
        let e = format!("{:#}", SnapJob::for_benchmark(input).unwrap_err());
        assert!(e.contains("7 apex leaves"), "{e}");
    }

    /// Wall and CPU time of one partition's witness of a shape-only update, native and through
    /// the gadgets (`C2Q_WITNESS=native` or `gadgets` for one of them; `C2Q_SNAP_PROOF` for
    /// another update proof than StackedDrg32GiBV1). Not run by default:
    /// `RAYON_NUM_THREADS=2 cargo test --release --lib -- --ignored --nocapture
    /// snap_witness_of_a_32gib_partition_timed`.
    #[test]
    #[ignore]
    fn snap_witness_of_a_32gib_partition_timed() {
        let proof = std::env::var("C2Q_SNAP_PROOF").unwrap_or("StackedDrg32GiBV1".into());
        let proof = crate::snap::update_proof_from_name(&proof).unwrap();
        let started = std::time::Instant::now();
        let job = shape_only_job(proof, 1);
        eprintln!(
            "{proof:?}: shape-only input generated and built in {:.2} s",
            started.elapsed().as_secs_f64()
        );
        // The second partition, whose partition bits are not all zero, where there is one.
        let k = 1.min(job.partitions() - 1);
        let only = std::env::var("C2Q_WITNESS").unwrap_or_default();
        if only.is_empty() || only.eq_ignore_ascii_case("native") {
            // What a machine of many cores can make of the pieces: their CPU seconds, each
            // made alone, spread longest first over the threads (rayon steals rather than
            // plans, so this is the best case).
            let pieces = job.partitions.piece_seconds(k).unwrap();
            let total: f64 = pieces.iter().map(|p| p.1).sum();
            let challenges: Vec<f64> = pieces[1..].iter().map(|p| p.1).collect();
            let longest = challenges.iter().copied().fold(0.0, f64::max);
            let spread = |threads: usize| {
                let mut sorted: Vec<f64> = pieces.iter().map(|p| p.1).collect();
                sorted.sort_by(|a, b| b.total_cmp(a));
                let mut load = vec![0.0f64; threads];
                for s in sorted {
                    let least = (0..threads)
                        .min_by(|&a, &b| load[a].total_cmp(&load[b]))
                        .unwrap_or(0);
                    load[least] += s;
                }
                load.into_iter().fold(0.0, f64::max)
            };
            eprintln!(
                "native pieces: {total:.2} CPU s in all, the preamble {:.3} s, {} challenges of \
                 {:.3} s on average and {longest:.3} s at most; spread over 16 threads {:.2} s, \
                 over 8 {:.2} s",
                pieces[0].1,
                challenges.len(),
                challenges.iter().sum::<f64>() / challenges.len() as f64,
                spread(16),
                spread(8)
            );
        }
        for how in ["native", "gadgets"] {
            if !only.is_empty() && !how.eq_ignore_ascii_case(&only) {
                continue;
            }
            let (started, (user, sys)) = (std::time::Instant::now(), crate::bench::cpu_seconds());
            let witness = match how {
                "native" => job.partitions.witness(k),
                _ => job.partitions.reference_witness(k),
            }
            .unwrap();
            let wall = started.elapsed().as_secs_f64();
            let (user2, sys2) = crate::bench::cpu_seconds();
            eprintln!(
                "{how}: {} threads, wall {wall:.2} s, user {:.2} s, system {:.2} s, {} aux \
                 variables in {} pieces",
                rayon::current_num_threads(),
                user2 - user,
                sys2 - sys,
                witness.aux_len(),
                witness.aux.len()
            );
        }
    }
}
