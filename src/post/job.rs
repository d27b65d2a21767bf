//! A PoSt job: the vanilla proofs checked (decoded for the proof's sector shape, in ascending
//! sector order, verified against the randomness), the partition's vanilla proof assembled and
//! padded as filecoin-proofs does (`single_partition_vanilla_proofs`), one circuit
//! (storage-proofs-post's `FallbackPoStCompound::circuit`), and the public inputs filecoin-proofs'
//! verifier derives for it.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{anyhow, bail, ensure, Context, Result};
#[cfg(test)]
use bellperson::Circuit;
use bellperson::ConstraintSystem;
use blstrs::Scalar as Fr;
use ff::Field;
use filecoin_hashers::Hasher;
use filecoin_proofs::{FallbackPoStSectorProof, MerkleTreeTrait, PoStType, VanillaProof};
use filecoin_proofs_api::{ApiVersion, PublicReplicaInfo, RegisteredPoStProof};
use rayon::prelude::*;
use storage_proofs_core::compound_proof::CompoundProof;
#[cfg(test)]
use storage_proofs_post::fallback::FallbackPoStCircuit;
use storage_proofs_post::fallback::{self, FallbackPoStCompound};

use super::input::PostInput;
use super::{config, params, post_proof_name, witness};
use crate::groth16::witness::CompactValues;
use crate::groth16::{CompactWitness, Proof, R1cs, R1csCache, Srs, SrsCache, WitnessBuilder};
use crate::job::{proof_bytes, verify_partitions, ProofJob};

type Domain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;

/// The per-sector-shape part of a job, behind a trait object so that one `PostJob` type
/// serves every sector size.
trait Partition: Send + Sync {
    /// The circuit of this proof, recorded from its blank circuit.
    fn record(&self, circuit_id: &str) -> Result<R1cs>;
    fn witness(&self) -> Result<CompactWitness>;
    fn public_inputs(&self) -> Result<Vec<Fr>>;

    /// bellperson's own proof of the partition: the reference c2q is compared with.
    #[cfg(test)]
    fn reference_proof(&self, srs: &Srs, r: Fr, s: Fr) -> Result<Proof>;

    /// The whole circuit synthesized in one piece on one thread, as storage-proofs lays it
    /// out: what the pieces of `witness` must reproduce, variable for variable.
    #[cfg(test)]
    fn sequential_witness(&self) -> Result<CompactWitness>;

    /// The witness in pieces of `per_piece` sectors, computed `how`.
    #[cfg(test)]
    fn witness_in_pieces_of(&self, per_piece: usize, how: Synthesis) -> Result<CompactWitness>;
}

struct TreePartition<Tree: 'static + MerkleTreeTrait> {
    public_params: fallback::PublicParams,
    /// The sectors as the prover lays them out (filecoin-proofs' `generate_*_with_vanilla`).
    prover_inputs: fallback::PublicInputs<Domain<Tree>>,
    /// The sectors as filecoin-proofs' verifier lays them out (`verify_window_post`,
    /// `verify_winning_post`): for WinningPoSt its one sector once per challenge.
    verifier_inputs: fallback::PublicInputs<Domain<Tree>>,
    /// The partition's vanilla proof, padded to the circuit's sector count.
    proof: VanillaProof<Tree>,
}

impl<Tree: 'static + MerkleTreeTrait> TreePartition<Tree> {
    /// storage-proofs' circuit of the partition: what bellperson proves, and what the witness
    /// is checked against.
    #[cfg(test)]
    fn circuit(&self) -> Result<FallbackPoStCircuit<Tree>> {
        // filecoin-proofs proves the partition as the first (only) of the proofs it is given.
        <FallbackPoStCompound<Tree> as CompoundProof<_, _>>::circuit(
            &self.prover_inputs,
            Default::default(),
            &self.proof,
            &self.public_params,
            Some(0),
        )
    }
}

/// Sectors of the circuit computed into one piece of the witness. A 32 GiB WindowPoSt
/// partition's 2,349 sectors (about 53,000 variables each) make 147 pieces: enough for every
/// thread to stay busy to the end, few enough that each piece's set-up and the joining of the
/// pieces cost nothing measurable.
const SECTORS_PER_PIECE: usize = 16;

/// How the circuit's sectors are computed into the witness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Synthesis {
    /// `post::witness`: the values computed on field elements, as the gadgets allocate them.
    Native,
    /// storage-proofs' `&Sector: Circuit` as it is, every hash through neptune's gadget: the
    /// reference `Native` reproduces.
    #[cfg(test)]
    Gadgets,
}

impl<Tree: 'static + MerkleTreeTrait> TreePartition<Tree> {
    /// The witness in pieces of `per_piece` sectors, computed on rayon's threads and
    /// concatenated in order.
    ///
    /// storage-proofs' circuit (`synthesize_default`) is nothing but its sectors one after
    /// another, each under a namespace of its own, and a sector's synthesis (`&Sector:
    /// Circuit`: comm_r_last, comm_c, comm_r as an input, their hash, one private inclusion
    /// proof per challenge with its packed path as an input) reads nothing that an earlier
    /// sector allocated. So the pieces, the first holding the constant `one` input in front,
    /// are the sequential witness cut at sector boundaries: inputs and aux variables alike,
    /// value for value.
    fn pieces(&self, per_piece: usize, how: Synthesis) -> Result<CompactWitness> {
        let proofs = &self.proof.sectors;
        let public = &self.prover_inputs.sectors;
        // What storage-proofs checks when it makes the circuit.
        ensure!(
            proofs.len() == self.public_params.sector_count,
            "{} sector proofs for a circuit of {} sectors",
            proofs.len(),
            self.public_params.sector_count
        );
        ensure!(
            !public.is_empty() && public.len() <= proofs.len(),
            "{} sectors for a circuit of {}",
            public.len(),
            proofs.len()
        );
        #[cfg(test)]
        let circuit = match how {
            Synthesis::Gadgets => Some(self.circuit()?),
            Synthesis::Native => None,
        };
        let sector = |cs: &mut WitnessBuilder, i: usize| -> Result<()> {
            match how {
                Synthesis::Native => {
                    // The compound circuit repeats the last public sector over the padding.
                    let comm_r = public[i.min(public.len() - 1)].comm_r.into();
                    witness::synthesize_sector::<Tree>(cs, comm_r, &proofs[i])
                }
                #[cfg(test)]
                Synthesis::Gadgets => {
                    let sectors = &circuit.as_ref().expect("made above").sectors;
                    Ok((&sectors[i]).synthesize(cs)?)
                }
            }
        };
        // storage-proofs asserts on malformed vanilla proofs; a bad input must be an error,
        // not a crashed worker.
        let built = catch_unwind(AssertUnwindSafe(|| {
            let starts: Vec<usize> = (0..proofs.len()).step_by(per_piece.max(1)).collect();
            let pieces: Vec<Result<(CompactValues, CompactValues)>> = starts
                .par_iter()
                .map(|&first| {
                    let mut cs = WitnessBuilder::new();
                    if first == 0 {
                        cs.alloc_input(|| "one", || Ok(Fr::ONE))?;
                    }
                    let end = (first + per_piece.max(1)).min(proofs.len());
                    for i in first..end {
                        let before = (cs.aux().len(), cs.aux().values().len());
                        sector(&mut cs, i).with_context(|| format!("sector {i}"))?;
                        if i == first {
                            // Sectors are alike: room for the rest of the piece's at once.
                            let rest = end - first - 1;
                            let values = cs.aux().len() - before.0;
                            let others = cs.aux().values().len() - before.1;
                            cs.reserve(values * rest, others * rest);
                        }
                    }
                    Ok(cs.into_compact())
                })
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
            Ok(result) => result.context("synthesis of the PoSt circuit failed"),
            Err(_) => bail!("PoSt input is malformed: synthesis aborted"),
        }
    }
}

impl<Tree: 'static + MerkleTreeTrait> Partition for TreePartition<Tree> {
    /// The blank circuit's sectors are alike and each reads only its own variables (see
    /// `pieces`): one sector recorded, repeated.
    fn record(&self, circuit_id: &str) -> Result<R1cs> {
        let blank =
            <FallbackPoStCompound<Tree> as CompoundProof<_, _>>::blank_circuit(&self.public_params);
        let sector = blank
            .sectors
            .first()
            .context("a PoSt circuit without sectors")?;
        R1cs::record_repeated(circuit_id, sector, blank.sectors.len())
    }

    fn witness(&self) -> Result<CompactWitness> {
        self.pieces(SECTORS_PER_PIECE, Synthesis::Native)
    }

    fn public_inputs(&self) -> Result<Vec<Fr>> {
        <FallbackPoStCompound<Tree> as CompoundProof<_, _>>::generate_public_inputs(
            &self.verifier_inputs,
            &self.public_params,
            Some(0),
        )
    }

    #[cfg(test)]
    fn reference_proof(&self, srs: &Srs, r: Fr, s: Fr) -> Result<Proof> {
        let params = srs.to_bellperson();
        Ok(bellperson::groth16::create_proof::<blstrs::Bls12, _, _>(
            self.circuit()?,
            &params,
            r,
            s,
        )?)
    }

    #[cfg(test)]
    fn witness_in_pieces_of(&self, per_piece: usize, how: Synthesis) -> Result<CompactWitness> {
        self.pieces(per_piece, how)
    }

    #[cfg(test)]
    fn sequential_witness(&self) -> Result<CompactWitness> {
        let circuit = self.circuit()?;
        let built = catch_unwind(AssertUnwindSafe(|| {
            let mut cs = WitnessBuilder::new();
            cs.alloc_input(|| "one", || Ok(Fr::ONE))?;
            circuit.synthesize(&mut cs)?;
            let (input, aux) = cs.into_compact();
            Ok::<_, anyhow::Error>(CompactWitness {
                input: vec![input],
                aux: vec![aux],
            })
        }));
        match built {
            Ok(result) => result.context("synthesis of the PoSt circuit failed"),
            Err(_) => bail!("PoSt input is malformed: synthesis aborted"),
        }
    }
}

/// One PoSt job (a WindowPoSt partition or a WinningPoSt), ready to prove.
pub struct PostJob {
    pub input: PostInput,
    /// The `.params` file this job's circuit needs.
    pub params_path: PathBuf,
    /// The circuit's id (the parameter file's stem): what its recorded constraints are for.
    circuit_id: String,
    /// `(sector number, comm_r)` of each sector proved, in order.
    sectors: Vec<(u64, [u8; 32])>,
    partition: Box<dyn Partition>,
}

impl std::fmt::Debug for PostJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostJob")
            .field(
                "registered_proof",
                &post_proof_name(self.input.registered_proof),
            )
            .field("miner_id", &self.input.miner_id)
            .field("sectors", &self.sectors.len())
            .finish()
    }
}

impl PostJob {
    /// Check a PoSt input and prepare its circuit: each vanilla proof decodes for the proof's
    /// sector shape, the sectors come in ascending order without repeats (as the chain's
    /// verifier lays them out), and every proof verifies for this randomness (proofs made for
    /// another randomness, and so for another miner, whose randomness the chain draws with its
    /// address, or tampered or truncated ones, are refused here, before any proving).
    pub fn new(input: PostInput) -> Result<PostJob> {
        ensure!(!input.shape_only, "{SHAPE_ONLY_REFUSED}");
        PostJob::build(input, VanillaCheck::Verify)
    }

    /// A job for benchmarking synthesis and proving, which also accepts shape-only inputs
    /// (`c2q testdata post --shape-only`, [`super::shape::generate`]): real shape, random
    /// values. It skips the one check such values cannot pass, the verification of the
    /// vanilla proofs for the randomness; everything else is as in [`PostJob::new`] (proof
    /// version, miner, sector count, each vanilla proof decoded for the sector shape, ascending
    /// sector numbers, the randomness a field element), and each sector proof must have the
    /// proof's number of challenges. The partition is padded and unrolled as filecoin-proofs
    /// does it, so the circuit is the real one, of the real size; a shape-only input's proof
    /// does not verify.
    pub fn for_benchmark(input: PostInput) -> Result<PostJob> {
        PostJob::build(input, VanillaCheck::Skip)
    }

    fn build(input: PostInput, vanilla: VanillaCheck) -> Result<PostJob> {
        let proof = input.registered_proof;
        ensure!(
            proof.major_version() == 1,
            "registered PoSt proof {} is not version 1",
            post_proof_name(proof)
        );
        crate::porep::check_sector_identity(input.miner_id, 0)?;
        let (partition, sectors) =
            filecoin_proofs::with_shape!(input.sector_size(), build_partition, &input, vanilla,)?;
        let circuit_id = params::cache_id(proof)?;
        Ok(PostJob {
            params_path: crate::porep::params::params_path(&circuit_id),
            circuit_id,
            sectors,
            partition,
            input,
        })
    }

    pub fn registered_proof(&self) -> RegisteredPoStProof {
        self.input.registered_proof
    }

    pub fn sector_size(&self) -> u64 {
        self.input.sector_size()
    }

    /// The sector numbers proved, in order.
    pub fn sector_numbers(&self) -> Vec<u64> {
        self.sectors.iter().map(|(n, _)| *n).collect()
    }

    /// The verifying key filecoin-proofs reads for this job's circuit.
    pub fn verifying_key_path(&self) -> PathBuf {
        self.params_path.with_extension("vk")
    }

    /// Whether the proof bytes verify as the chain checks them: filecoin-proofs'
    /// `verify_window_post` (the partition alone: its sectors as a deadline of one partition)
    /// or `verify_winning_post`, with the verifying key from the parameter directory. An error
    /// when there is no verdict (no verifying key, a verifier failure).
    pub fn check_proof(&self, proof: &[u8]) -> Result<bool> {
        let vk = self.verifying_key_path();
        ensure!(
            vk.is_file(),
            "the verifying key {} is missing (it comes with the parameters)",
            vk.display()
        );
        let input = &self.input;
        let replicas: BTreeMap<_, _> = self
            .sectors
            .iter()
            .map(|(n, comm_r)| {
                (
                    (*n).into(),
                    PublicReplicaInfo::new(input.registered_proof, *comm_r),
                )
            })
            .collect();
        let prover_id = crate::porep::prover_id(input.miner_id);
        catch_unwind(AssertUnwindSafe(|| {
            if input.is_window() {
                filecoin_proofs_api::post::verify_window_post(
                    &input.randomness,
                    &[(input.registered_proof, proof)],
                    &replicas,
                    prover_id,
                )
            } else {
                filecoin_proofs_api::post::verify_winning_post(
                    &input.randomness,
                    proof,
                    &replicas,
                    prover_id,
                )
            }
        }))
        .map_err(|_| anyhow!("filecoin-proofs' PoSt verifier aborted"))?
        .context("filecoin-proofs' PoSt verifier failed")
    }
}

impl ProofJob for PostJob {
    fn partitions(&self) -> usize {
        1
    }

    fn srs(&self) -> Result<Arc<Srs>> {
        params::require(&self.params_path, self.input.registered_proof)?;
        SrsCache::global().get(
            &super::srs_key(self.input.is_window(), self.sector_size()),
            &self.params_path,
        )
    }

    fn r1cs(&self) -> Result<Arc<R1cs>> {
        let file = self.params_path.with_extension("c2q-r1cs");
        let params = super::srs_key(self.input.is_window(), self.sector_size());
        R1csCache::global().get(&self.circuit_id, &params, Some(&file), || {
            self.partition.record(&self.circuit_id)
        })
    }

    fn witness(&self, partition: usize) -> Result<CompactWitness> {
        ensure!(
            partition == 0,
            "a PoSt job has one partition, not {partition}"
        );
        self.partition.witness()
    }

    /// The proof against the public inputs filecoin-proofs' verifier derives, then through
    /// filecoin-proofs' own verifier.
    fn verify(&self, proofs: &[Proof]) -> Result<()> {
        verify_partitions(&*self.srs()?, proofs, 1, |_| self.partition.public_inputs())?;
        let name = if self.input.is_window() {
            "verify_window_post"
        } else {
            "verify_winning_post"
        };
        ensure!(
            self.check_proof(&proof_bytes(proofs)?)?,
            "filecoin-proofs' {name} rejects the proof"
        );
        Ok(())
    }
}

/// Why `PostJob::new` refuses a shape-only input, on one line.
pub const SHAPE_ONLY_REFUSED: &str = "this PoSt input was made by `c2q testdata post \
    --shape-only`: it has the shape of a real partition but random values and cannot be \
    proved (benchmarks only)";

/// Whether the vanilla proofs are verified for the randomness when a job is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum VanillaCheck {
    Verify,
    /// Benchmarks: the partition assembled as filecoin-proofs assembles it, unverified.
    Skip,
}

type Built = (Box<dyn Partition>, Vec<(u64, [u8; 32])>);

fn build_partition<Tree: 'static + MerkleTreeTrait>(
    input: &PostInput,
    vanilla: VanillaCheck,
) -> Result<Built> {
    let proof = input.registered_proof;
    let name = post_proof_name(proof);
    let config = config(proof);
    let window = input.is_window();
    let given = input.vanilla_proofs.len();
    if window {
        ensure!(
            given >= 1 && given <= config.sector_count,
            "{given} vanilla proofs, a {name} partition holds 1 to {} sectors",
            config.sector_count
        );
        // Before V1_2 a sector's challenges depended on its index in the deadline, which
        // filecoin-proofs' single-partition prover takes as partition 0's: another index would
        // give a proof that cannot verify.
        ensure!(
            input.partition_index == 0 || proof.version() == ApiVersion::V1_2_0,
            "partition_index {}: {name} partitions are proved as partition 0",
            input.partition_index
        );
    } else {
        ensure!(
            given == config.sector_count,
            "{given} vanilla proofs, a {name} proves {} sector",
            config.sector_count
        );
        ensure!(
            input.partition_index == 0,
            "partition_index {}: a WinningPoSt has one partition",
            input.partition_index
        );
    }
    // Sector shapes share Rust types (2 KiB and 8 MiB trees are alike), so decoding cannot
    // tell them apart; the challenges' range and the path lengths, checked below, can.
    let proofs = input
        .vanilla_proofs
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            bincode::deserialize::<FallbackPoStSectorProof<Tree>>(bytes).map_err(|e| {
                anyhow!("vanilla proof {i} is not a {name} sector proof (truncated or of another kind): {e}")
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let numbers: Vec<u64> = proofs.iter().map(|p| u64::from(p.sector_id)).collect();
    // filecoin-proofs' verifiers take the sectors in ascending order (a map by number): a
    // partition proved in another order, or with a sector twice, could never be accepted.
    if let Some(w) = numbers.windows(2).find(|w| w[0] >= w[1]) {
        bail!(
            "vanilla proofs are not in ascending sector order without repeats (sector {} \
             comes after {})",
            w[1],
            w[0]
        );
    }
    let randomness: Domain<Tree> =
        filecoin_proofs::as_safe_commitment(&input.randomness, "randomness")
            .context("randomness is not a field element")?;
    let prover_id: Domain<Tree> =
        filecoin_proofs::as_safe_commitment(&crate::porep::prover_id(input.miner_id), "prover_id")?;
    let public_params = params::public_params::<Tree>(proof)?;
    let sectors: Vec<fallback::PublicSector<Domain<Tree>>> = proofs
        .iter()
        .map(|p| fallback::PublicSector {
            id: p.sector_id,
            comm_r: p.comm_r,
        })
        .collect();
    let prover_inputs = fallback::PublicInputs {
        randomness,
        prover_id,
        sectors: sectors.clone(),
        k: Some(if window {
            input.partition_index as usize
        } else {
            0
        }),
    };
    // The partition's vanilla proof as filecoin-proofs assembles it: WindowPoSt sectors
    // padded by repeating the last, a WinningPoSt's one sector unrolled into one "sector" per
    // challenge; then verified for this randomness.
    let partition_proof = match vanilla {
        VanillaCheck::Verify => {
            let assembled = catch_unwind(AssertUnwindSafe(|| {
                filecoin_proofs::single_partition_vanilla_proofs(
                    &config,
                    &public_params,
                    &prover_inputs,
                    &proofs,
                )
            }));
            match assembled {
                Ok(Ok(p)) => p,
                Ok(Err(e)) => bail!(
                    "the vanilla proofs do not verify for randomness {} as {name} sector proofs \
                     (made for another randomness, miner or sector size, or tampered): {e:#}",
                    hex::encode(input.randomness)
                ),
                Err(_) => bail!("the vanilla proofs are malformed: checking them aborted"),
            }
        }
        VanillaCheck::Skip => assemble_unverified(&config, &public_params, &proofs, &name)?,
    };
    let verifier_sectors = if window {
        sectors
    } else {
        // `verify_winning_post` lists the sector once per challenge of the circuit.
        std::iter::repeat_n(sectors[0].clone(), public_params.sector_count).collect()
    };
    let verifier_inputs = fallback::PublicInputs {
        randomness,
        prover_id,
        sectors: verifier_sectors,
        k: None,
    };
    let identities = proofs
        .iter()
        .map(|p| {
            let mut comm_r = [0u8; 32];
            comm_r.copy_from_slice(AsRef::<[u8]>::as_ref(&p.comm_r));
            (u64::from(p.sector_id), comm_r)
        })
        .collect();
    Ok((
        Box::new(TreePartition::<Tree> {
            public_params,
            prover_inputs,
            verifier_inputs,
            proof: partition_proof,
        }),
        identities,
    ))
}

/// The partition's vanilla proof as filecoin-proofs' `single_partition_vanilla_proofs`
/// assembles it from sector proofs in ascending order (as `build_partition` has checked them),
/// without its final verification: what a benchmark of shape-only input needs. Each sector
/// proof must hold one sector with the proof's number of challenges, as
/// `generate_single_vanilla_proof` makes them.
fn assemble_unverified<Tree: 'static + MerkleTreeTrait>(
    config: &filecoin_proofs::PoStConfig,
    public_params: &fallback::PublicParams,
    proofs: &[FallbackPoStSectorProof<Tree>],
    name: &str,
) -> Result<VanillaProof<Tree>> {
    for (i, p) in proofs.iter().enumerate() {
        let sectors = &p.vanilla_proof.sectors;
        ensure!(
            sectors.len() == 1,
            "vanilla proof {i} holds {} sector proofs, not one",
            sectors.len()
        );
        let challenges = sectors[0].inclusion_proofs.len();
        ensure!(
            challenges == config.challenge_count,
            "vanilla proof {i} has {challenges} challenges, a {name} sector {}",
            config.challenge_count
        );
    }
    let mut sectors: Vec<_> = match config.typ {
        PoStType::Window => proofs
            .iter()
            .flat_map(|p| p.vanilla_proof.sectors.iter().cloned())
            .collect(),
        PoStType::Winning => {
            ensure!(proofs.len() == 1, "a WinningPoSt proves one sector");
            let sector = &proofs[0].vanilla_proof.sectors[0];
            sector
                .inclusion_proofs
                .iter()
                .map(|path| fallback::SectorProof {
                    inclusion_proofs: vec![path.clone()],
                    comm_c: sector.comm_c,
                    comm_r_last: sector.comm_r_last,
                })
                .collect()
        }
    };
    ensure!(
        !sectors.is_empty() && sectors.len() <= public_params.sector_count,
        "{} sector proofs for a circuit of {}",
        sectors.len(),
        public_params.sector_count
    );
    while sectors.len() < public_params.sector_count {
        let last = sectors[sectors.len() - 1].clone();
        sectors.push(last);
    }
    Ok(VanillaProof::<Tree> { sectors })
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use super::*;
    use crate::groth16::{self, setup::Quiet, CpuBackend};
    use crate::post::shape;
    use crate::post::testdata::{self, Sectors};
    use rand::SeedableRng;
    use RegisteredPoStProof::{
        StackedDrgWindow2KiBV1_2 as WINDOW, StackedDrgWinning2KiBV1 as WINNING,
    };

    const TEST_PARAMS: &str = "/var/tmp/c2q-test-params";

    fn with_test_params(proof: RegisteredPoStProof) {
        params::ensure(proof, std::path::Path::new(TEST_PARAMS), &Quiet).unwrap();
    }

    /// Two 2 KiB sectors of miner 1000 and one of miner 2000, sealed once for every test here.
    fn sectors() -> &'static (Sectors, Sectors) {
        static SEALED: OnceLock<(Sectors, Sectors)> = OnceLock::new();
        SEALED.get_or_init(|| {
            (
                testdata::seal_2kib(1000, &[3, 7], 1).unwrap(),
                testdata::seal_2kib(2000, &[3], 2).unwrap(),
            )
        })
    }

    /// c2q's proof equals bellperson's for the same r and s, and passes both verifiers.
    fn assert_identical_and_verified(job: &PostJob, seed: u64) -> Proof {
        let srs = job.srs().unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let (r, s) = (Fr::random(&mut rng), Fr::random(&mut rng));
        let ours = groth16::prove(&CpuBackend, &srs, job.synthesize(0).unwrap(), r, s).unwrap();
        let reference = job.partition.reference_proof(&srs, r, s).unwrap();
        let bytes = |p: &Proof| proof_bytes(std::slice::from_ref(p)).unwrap();
        assert_eq!(bytes(&ours), bytes(&reference));
        assert_eq!(bytes(&ours).len(), 192);
        job.verify(std::slice::from_ref(&ours)).unwrap();
        ours
    }

    /// A full 2 KiB WindowPoSt partition (two sectors) and one of a single sector, which
    /// filecoin-proofs pads by repeating it: byte-identical to bellperson, accepted by
    /// `verify_window_post`; a partition's proof does not pass for another randomness.
    #[test]
    fn window_partitions_full_and_short_are_identical_to_bellperson() {
        with_test_params(WINDOW);
        let (mine, _) = sectors();
        let full = PostJob::new(
            mine.post_input(WINDOW, testdata::randomness(5), &[])
                .unwrap(),
        )
        .unwrap();
        assert_eq!(full.sector_numbers(), [3, 7]);
        let proof = assert_identical_and_verified(&full, 42);

        let short = PostJob::new(
            mine.post_input(WINDOW, testdata::randomness(5), &[7])
                .unwrap(),
        )
        .unwrap();
        assert_eq!(short.sector_numbers(), [7]);
        assert_identical_and_verified(&short, 43);

        let other = PostJob::new(
            mine.post_input(WINDOW, testdata::randomness(6), &[])
                .unwrap(),
        )
        .unwrap();
        let e = other.verify(&[proof]).unwrap_err();
        assert!(format!("{e:#}").contains("does not verify"), "{e:#}");
    }

    /// A 2 KiB WinningPoSt: byte-identical to bellperson, accepted by `verify_winning_post`.
    #[test]
    fn winning_post_is_identical_to_bellperson() {
        with_test_params(WINNING);
        let (mine, _) = sectors();
        let job = PostJob::new(
            mine.post_input(WINNING, testdata::randomness(8), &[7])
                .unwrap(),
        )
        .unwrap();
        assert_identical_and_verified(&job, 44);
    }

    /// Inputs a PoSt pipeline could not have made for this miner and randomness are refused
    /// when the job is built, each with its reason on one line.
    #[test]
    fn bad_post_inputs_are_refused_with_a_reason() {
        let (mine, theirs) = sectors();
        let randomness = testdata::randomness(5);
        let good = mine.post_input(WINDOW, randomness, &[]).unwrap();
        let refused = |input: PostInput| {
            let e = format!("{:#}", PostJob::new(input).unwrap_err());
            assert!(!e.contains('\n'), "{e}");
            e
        };

        // Another proof number: the window proofs are not a WinningPoSt's, nor 8 MiB ones.
        let mut winning = good.clone();
        winning.registered_proof = WINNING;
        assert!(refused(winning).contains("2 vanilla proofs"));
        let mut bigger = good.clone();
        bigger.registered_proof = RegisteredPoStProof::StackedDrgWindow8MiBV1_2;
        let e = refused(bigger);
        assert!(e.contains("StackedDrgWindow8MiBV1_2"), "{e}");

        // Another randomness.
        let mut elsewhen = good.clone();
        elsewhen.randomness = testdata::randomness(6);
        assert!(refused(elsewhen).contains("do not verify for randomness"));

        // Another miner's sector, challenged by that miner's randomness (the chain draws it
        // with the miner's address), offered under this miner's.
        let mut other_miner = good.clone();
        other_miner.vanilla_proofs = theirs
            .post_input(WINDOW, testdata::randomness(9), &[])
            .unwrap()
            .vanilla_proofs;
        assert!(refused(other_miner).contains("do not verify for randomness"));

        // Truncated, tampered, out of order, repeated.
        let mut truncated = good.clone();
        let half = truncated.vanilla_proofs[1].len() / 2;
        truncated.vanilla_proofs[1].truncate(half);
        assert!(refused(truncated).contains("vanilla proof 1 is not a StackedDrgWindow2KiBV1_2"));
        let mut tampered = good.clone();
        let last = tampered.vanilla_proofs[0].len() - 40;
        tampered.vanilla_proofs[0][last] ^= 1;
        let e = refused(tampered);
        assert!(e.contains("do not verify") || e.contains("vanilla"), "{e}");
        let mut swapped = good.clone();
        swapped.vanilla_proofs.reverse();
        assert!(refused(swapped).contains("ascending sector order"));
        let mut twice = good.clone();
        twice.vanilla_proofs[1] = twice.vanilla_proofs[0].clone();
        assert!(refused(twice).contains("ascending sector order"));

        // Randomness that is not a field element.
        let mut wide = good.clone();
        wide.randomness[31] = 0xff;
        assert!(refused(wide).contains("randomness"));

        PostJob::new(good).unwrap();
    }

    /// The same values, or where they first differ.
    fn assert_same_values(ours: &[Fr], reference: &[Fr], what: &str) {
        assert_eq!(ours.len(), reference.len(), "{what}: number of values");
        if let Some(at) = ours.iter().zip(reference).position(|(a, b)| a != b) {
            panic!("{what}: first difference at value {at} of {}", ours.len());
        }
    }

    /// The witness, native, in pieces of sectors (the production size, and pieces of one and
    /// of three sectors, so that pieces begin at every kind of sector), and through the gadgets
    /// in pieces, is the sequential gadget synthesis of the whole circuit, inputs and aux
    /// variables, value for value.
    fn assert_pieces_are_the_sequential_witness(job: &PostJob, what: &str) {
        let sequential = job.partition.sequential_witness().unwrap();
        let (inputs, aux) = sequential.expand();
        assert!(aux.len() > 1000, "{what}: {} aux variables", aux.len());
        let packed = sequential.packed();
        for (per_piece, how) in [
            (SECTORS_PER_PIECE, Synthesis::Native),
            (1, Synthesis::Native),
            (3, Synthesis::Native),
            (SECTORS_PER_PIECE, Synthesis::Gadgets),
        ] {
            let ours = if (per_piece, how) == (SECTORS_PER_PIECE, Synthesis::Native) {
                job.partition.witness().unwrap()
            } else {
                job.partition.witness_in_pieces_of(per_piece, how).unwrap()
            };
            let what = format!("{what}, {how:?}, {per_piece} sectors a piece");
            let (our_inputs, our_aux) = ours.expand();
            assert_same_values(&our_inputs, &inputs, &format!("{what}: inputs"));
            assert_same_values(&our_aux, &aux, &format!("{what}: aux"));
            assert_eq!(ours.packed(), packed, "{what}");
            assert_eq!(ours.input.len(), ours.aux.len());
        }
    }

    /// Real 2 KiB partitions, full and padded, and a WinningPoSt (66 one-challenge "sectors",
    /// so several pieces): the parallel witness is the sequential one; a job built for a
    /// benchmark (the partition assembled without filecoin-proofs' verification) has the same
    /// witness as the checked job.
    #[test]
    fn witness_in_pieces_is_the_sequential_synthesis_of_real_inputs() {
        let (mine, _) = sectors();
        for (proof, numbers, what) in [
            (WINDOW, &[][..], "full 2 KiB window partition"),
            (WINDOW, &[7][..], "padded 2 KiB window partition"),
            (WINNING, &[3][..], "2 KiB WinningPoSt"),
        ] {
            let input = mine
                .post_input(proof, testdata::randomness(5), numbers)
                .unwrap();
            let job = PostJob::new(input.clone()).unwrap();
            assert_pieces_are_the_sequential_witness(&job, what);
            let bench = PostJob::for_benchmark(input).unwrap();
            assert_eq!(bench.sector_numbers(), job.sector_numbers());
            assert_eq!(
                bench.partition.witness().unwrap().packed(),
                job.partition.witness().unwrap().packed(),
                "{what}: the benchmark's partition"
            );
            assert_eq!(
                bench.partition.public_inputs().unwrap(),
                job.partition.public_inputs().unwrap()
            );
        }
    }

    /// Shape-only inputs of larger sectors, every tree shape the PoSt proofs use: an 8 MiB
    /// WindowPoSt partition (oct trees), a 32 GiB WinningPoSt (66 challenges of ten-level
    /// paths with an oct sub-tree level) and a 64 GiB one (and a binary top-tree level).
    #[test]
    fn witness_in_pieces_is_the_sequential_synthesis_of_shape_only_inputs() {
        use RegisteredPoStProof::{
            StackedDrgWindow8MiBV1_2, StackedDrgWinning32GiBV1, StackedDrgWinning64GiBV1,
        };
        for proof in [
            StackedDrgWindow8MiBV1_2,
            StackedDrgWinning32GiBV1,
            StackedDrgWinning64GiBV1,
        ] {
            let job = PostJob::for_benchmark(shape::generate(proof, 1000, 2).unwrap()).unwrap();
            assert_pieces_are_the_sequential_witness(&job, &post_proof_name(proof));
        }
    }

    /// A PoSt circuit recorded as one sector repeated is the circuit recorded whole: every
    /// tree shape the registered proofs use, one sector, several, and WinningPoSt's one sector
    /// of 66 challenges.
    #[test]
    fn one_sector_repeated_records_the_whole_circuit() {
        fn check<Tree: 'static + MerkleTreeTrait>(challenges: usize, sectors: usize) {
            let public_params = fallback::PublicParams {
                sector_size: 1 << 11,
                challenge_count: challenges,
                sector_count: sectors,
                api_version: ApiVersion::V1_2_0,
            };
            let blank =
                <FallbackPoStCompound<Tree> as CompoundProof<_, _>>::blank_circuit(&public_params);
            let whole = R1cs::record("post", blank.clone()).unwrap();
            let repeated = R1cs::record_repeated("post", &blank.sectors[0], sectors).unwrap();
            assert_eq!(repeated.inputs, whole.inputs, "{sectors} sectors");
            assert_eq!(repeated.aux, whole.aux, "{sectors} sectors");
            assert!(
                repeated == whole,
                "{sectors} sectors of {challenges} challenges"
            );
        }
        check::<filecoin_proofs::SectorShape2KiB>(10, 1);
        check::<filecoin_proofs::SectorShape2KiB>(10, 2);
        check::<filecoin_proofs::SectorShape2KiB>(10, 5);
        check::<filecoin_proofs::SectorShape2KiB>(66, 1);
        check::<filecoin_proofs::SectorShape8MiB>(10, 3);
        check::<filecoin_proofs::SectorShape512MiB>(3, 3);
        check::<filecoin_proofs::SectorShape32GiB>(2, 3);
        check::<filecoin_proofs::SectorShape64GiB>(2, 2);
    }

    /// A shape-only input is refused for proving, with the reason on one line, and accepted
    /// for benchmarks: its witness has the variables of the circuit's recorded constraints,
    /// and its inputs are the public inputs filecoin-proofs' verifier derives (the sectors'
    /// comm_r and the real challenges).
    #[test]
    fn shape_only_inputs_are_for_benchmarks_with_the_circuits_size() {
        use RegisteredPoStProof::StackedDrgWindow8MiBV1_2;
        for proof in [WINDOW, WINNING, StackedDrgWindow8MiBV1_2] {
            let input = shape::generate(proof, 1000, 6).unwrap();
            let e = format!("{:#}", PostJob::new(input.clone()).unwrap_err());
            assert!(!e.contains('\n'), "{e}");
            assert!(
                e.contains("--shape-only") && e.contains("cannot be proved"),
                "{e}"
            );
            // Through its JSON, as `c2q prove` and the worker read it.
            let parsed = crate::post::parse_post_input(&input.to_json().unwrap()).unwrap();
            assert!(parsed.shape_only);
            assert!(PostJob::new(parsed.clone()).is_err());

            let job = PostJob::for_benchmark(parsed).unwrap();
            assert_eq!(job.sector_numbers().len(), input.vanilla_proofs.len());
            let r1cs = job.partition.record("shape-only").unwrap();
            let witness = job.witness(0).unwrap();
            assert_eq!(witness.inputs(), r1cs.inputs, "{proof:?}");
            assert_eq!(witness.aux_len(), r1cs.aux, "{proof:?}");
            let (inputs, _) = witness.expand();
            let public = job.partition.public_inputs().unwrap();
            assert_eq!(inputs[0], Fr::ONE);
            assert_same_values(&inputs[1..], &public, &format!("{proof:?}: public inputs"));
            if proof == WINDOW {
                // The same circuit as a real partition's.
                let real = PostJob::new(
                    sectors()
                        .0
                        .post_input(WINDOW, testdata::randomness(5), &[])
                        .unwrap(),
                )
                .unwrap();
                assert_eq!(real.params_path, job.params_path);
                assert_eq!(real.partition.record("real").unwrap().aux, r1cs.aux);
            }
        }
    }

    /// A benchmark job still checks the shape: a sector proof short of a challenge is refused.
    #[test]
    fn a_benchmark_job_refuses_a_sector_short_of_a_challenge() {
        type Tree = filecoin_proofs::SectorShape2KiB;
        let mut input = shape::generate(WINDOW, 1000, 7).unwrap();
        let mut sector: FallbackPoStSectorProof<Tree> =
            bincode::deserialize(&input.vanilla_proofs[1]).unwrap();
        sector.vanilla_proof.sectors[0].inclusion_proofs.pop();
        input.vanilla_proofs[1] = bincode::serialize(&sector).unwrap();
        let e = format!("{:#}", PostJob::for_benchmark(input).unwrap_err());
        assert!(e.contains("vanilla proof 1 has 9 challenges"), "{e}");
    }

    /// Wall and CPU time of a shape-only 32 GiB WindowPoSt partition's witness (2,349 sectors,
    /// 125M constraints): native in pieces on rayon's threads, through the gadgets in pieces,
    /// and through the gadgets sequentially on one thread (`C2Q_WITNESS=native`, `gadgets` or
    /// `sequential` for one of them, or a comma-separated list; those made are compared). Not
    /// run by default: `RAYON_NUM_THREADS=2 C2Q_WITNESS=native cargo test --release --lib --
    /// --ignored --nocapture window_post_witness_of_a_32gib_partition_timed`.
    #[test]
    #[ignore]
    fn window_post_witness_of_a_32gib_partition_timed() {
        let proof = RegisteredPoStProof::StackedDrgWindow32GiBV1_2;
        let started = std::time::Instant::now();
        let input = shape::generate(proof, 1000, 3).unwrap();
        let generated = started.elapsed().as_secs_f64();
        let job = PostJob::for_benchmark(input).unwrap();
        eprintln!(
            "shape-only input generated in {generated:.2} s, job built in {:.2} s",
            started.elapsed().as_secs_f64() - generated
        );
        let only = std::env::var("C2Q_WITNESS").unwrap_or_default();
        let mut made = Vec::new();
        for how in ["native", "gadgets", "sequential"] {
            if !only.is_empty() && !only.split(',').any(|o| how.eq_ignore_ascii_case(o.trim())) {
                continue;
            }
            let (started, (user, sys)) = (std::time::Instant::now(), crate::bench::cpu_seconds());
            let witness = match how {
                "native" => job.partition.witness(),
                "gadgets" => job
                    .partition
                    .witness_in_pieces_of(SECTORS_PER_PIECE, Synthesis::Gadgets),
                _ => job.partition.sequential_witness(),
            }
            .unwrap();
            let wall = started.elapsed().as_secs_f64();
            let (user2, sys2) = crate::bench::cpu_seconds();
            let census = witness.census();
            eprintln!(
                "{how}: {} threads, wall {wall:.2} s, user {:.2} s, system {:.2} s, {} pieces, \
                 {} inputs, {} aux variables ({} zeros, {} ones, {} others), {} MB compact",
                rayon::current_num_threads(),
                user2 - user,
                sys2 - sys,
                witness.aux.len(),
                witness.inputs(),
                witness.aux_len(),
                census.zeros,
                census.ones,
                census.others,
                witness.bytes() / 1_000_000
            );
            made.push(witness.packed());
        }
        for other in made.iter().skip(1) {
            assert!(*other == made[0], "the witnesses differ");
        }
    }

    /// Mean wall time of a real 2 KiB WindowPoSt partition's witness (two sectors) and a 2 KiB
    /// WinningPoSt's (66 one-challenge "sectors"), native in pieces and through the gadgets
    /// sequentially. Not run by default: `cargo test --release --lib -- --ignored --nocapture
    /// post_witness_of_2kib_inputs_timed`.
    #[test]
    #[ignore]
    fn post_witness_of_2kib_inputs_timed() {
        let (mine, _) = sectors();
        for (proof, what) in [
            (WINDOW, "2 KiB window partition"),
            (WINNING, "2 KiB WinningPoSt"),
        ] {
            let numbers: &[u64] = if proof == WINDOW { &[] } else { &[3] };
            let job = PostJob::new(
                mine.post_input(proof, testdata::randomness(5), numbers)
                    .unwrap(),
            )
            .unwrap();
            let runs = 50;
            let mean = |f: &dyn Fn() -> CompactWitness| {
                f();
                let started = std::time::Instant::now();
                for _ in 0..runs {
                    f();
                }
                started.elapsed().as_secs_f64() * 1e3 / runs as f64
            };
            let native = mean(&|| job.partition.witness().unwrap());
            let sequential = mean(&|| job.partition.sequential_witness().unwrap());
            eprintln!(
                "{what}: {} threads, native in pieces {native:.3} ms, gadgets sequentially \
                 {sequential:.3} ms, {} aux variables",
                rayon::current_num_threads(),
                job.partition.witness().unwrap().aux_len()
            );
        }
    }

    /// A path element short of a sibling: an error naming the sector and challenge from the
    /// native witness, an error (the gadget's assertion caught) from the gadgets; no panic
    /// escapes.
    #[test]
    fn a_malformed_path_is_an_error() {
        use storage_proofs_core::merkle::{MerkleProof, MerkleProofTrait};
        type Tree = filecoin_proofs::SectorShape2KiB;
        let mut input = shape::generate(WINDOW, 1000, 8).unwrap();
        let mut sector: FallbackPoStSectorProof<Tree> =
            bincode::deserialize(&input.vanilla_proofs[1]).unwrap();
        let proofs = &mut sector.vanilla_proof.sectors[0].inclusion_proofs;
        let mut path = proofs[3].path();
        path[0].0.pop();
        proofs[3] = MerkleProof::from_parts(proofs[3].leaf(), proofs[3].root(), path);
        input.vanilla_proofs[1] = bincode::serialize(&sector).unwrap();
        let job = PostJob::for_benchmark(input).unwrap();
        let e = format!("{:#}", job.witness(0).unwrap_err());
        assert!(e.contains("sector 1: challenge 3"), "{e}");
        assert!(e.contains("6 hashes at a level of arity 8"), "{e}");
        assert!(job
            .partition
            .witness_in_pieces_of(1, Synthesis::Gadgets)
            .is_err());
    }
}
