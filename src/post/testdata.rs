//! Test PoSt inputs: seal 2 KiB sectors with filecoin-proofs and make their vanilla PoSt
//! proofs for a randomness exactly as a proving pipeline does (`generate_fallback_sector_challenges`,
//! then `generate_single_vanilla_proof` per sector), for `c2q testdata post` and tests. Sealing
//! a 2 KiB sector takes milliseconds.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{anyhow, ensure, Context, Result};
use filecoin_proofs_api::{post, seal, PieceInfo, RegisteredPoStProof, RegisteredSealProof};
use filecoin_proofs_api::{PrivateReplicaInfo, UnpaddedBytesAmount};
use rand::{RngCore, SeedableRng};

use super::input::PostInput;
use super::post_proof_name;

/// The sealing proof of the test sectors.
const SEAL_PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;

/// Unpadded bytes of a 2 KiB sector's data.
const DATA_BYTES: u64 = 2032;

/// A sealed 2 KiB sector whose replica and trees are still on disk.
pub struct Sector {
    pub number: u64,
    pub comm_r: [u8; 32],
    cache: PathBuf,
    replica: PathBuf,
}

/// 2 KiB sectors of one miner, sealed into a temporary directory that lives as long as this.
pub struct Sectors {
    pub miner: u64,
    pub sectors: Vec<Sector>,
    _dir: tempfile::TempDir,
}

/// Seal one 2 KiB sector of random data drawn from `rng_seed` for `miner` under each of
/// `numbers`.
pub fn seal_2kib(miner: u64, numbers: &[u64], rng_seed: u64) -> Result<Sectors> {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(rng_seed);
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let prover_id = crate::porep::prover_id(miner);
    let mut sectors = Vec::with_capacity(numbers.len());
    for &number in numbers {
        let here = dir.path().join(number.to_string());
        let cache = here.join("cache");
        std::fs::create_dir_all(&cache)?;
        let (staged, replica) = (here.join("staged"), here.join("sealed"));
        let mut data = vec![0u8; DATA_BYTES as usize];
        rng.fill_bytes(&mut data);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&staged)
            .with_context(|| format!("cannot create {}", staged.display()))?;
        let (piece, _) = seal::add_piece(
            SEAL_PROOF,
            &data[..],
            &mut file,
            UnpaddedBytesAmount(DATA_BYTES),
            &[],
        )
        .context("add_piece failed")?;
        file.flush()?;
        std::fs::File::create(&replica)?;
        let pieces: Vec<PieceInfo> = vec![piece];
        let mut ticket = [0u8; 32];
        rng.fill_bytes(&mut ticket);
        ticket[31] &= 0x3f;
        let pc1 = seal::seal_pre_commit_phase1(
            SEAL_PROOF,
            &cache,
            &staged,
            &replica,
            prover_id,
            number.into(),
            ticket,
            &pieces,
        )
        .with_context(|| format!("pre-commit phase 1 of sector {number} failed"))?;
        let pc2 = seal::seal_pre_commit_phase2(pc1, &cache, &replica)
            .with_context(|| format!("pre-commit phase 2 of sector {number} failed"))?;
        sectors.push(Sector {
            number,
            comm_r: pc2.comm_r,
            cache,
            replica,
        });
    }
    Ok(Sectors {
        miner,
        sectors,
        _dir: dir,
    })
}

impl Sectors {
    /// The PoSt input for `proof` over the sectors numbered `numbers` (all of them when
    /// empty), challenged by `randomness`: each sector's vanilla proof as
    /// `generate_single_vanilla_proof` makes it.
    pub fn post_input(
        &self,
        proof: RegisteredPoStProof,
        randomness: [u8; 32],
        numbers: &[u64],
    ) -> Result<PostInput> {
        ensure!(
            u64::from(proof.sector_size()) == 2048,
            "test sectors are 2 KiB; {} is not",
            post_proof_name(proof)
        );
        let chosen: Vec<&Sector> = if numbers.is_empty() {
            self.sectors.iter().collect()
        } else {
            numbers
                .iter()
                .map(|n| {
                    self.sectors
                        .iter()
                        .find(|s| s.number == *n)
                        .ok_or_else(|| anyhow!("sector {n} was not sealed"))
                })
                .collect::<Result<_>>()?
        };
        let prover_id = crate::porep::prover_id(self.miner);
        let ids: Vec<_> = chosen.iter().map(|s| s.number.into()).collect();
        let challenges =
            post::generate_fallback_sector_challenges(proof, &randomness, &ids, prover_id)
                .context("generating the sectors' challenges failed")?;
        let vanilla_proofs = chosen
            .iter()
            .map(|s| {
                let id = s.number.into();
                let replica =
                    PrivateReplicaInfo::new(proof, s.comm_r, s.cache.clone(), s.replica.clone());
                let challenged = challenges
                    .get(&id)
                    .ok_or_else(|| anyhow!("no challenges for sector {}", s.number))?;
                post::generate_single_vanilla_proof(proof, id, &replica, challenged)
                    .with_context(|| format!("the vanilla proof of sector {} failed", s.number))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(PostInput {
            registered_proof: proof,
            miner_id: self.miner,
            randomness,
            partition_index: 0,
            vanilla_proofs,
            shape_only: false,
        })
    }
}

/// Randomness as the chain draws it, from a seed: 32 bytes, the top bits of byte 31 cleared
/// so that it is a field element.
pub fn randomness(seed: u64) -> [u8; 32] {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let mut out = [0u8; 32];
    rng.fill_bytes(&mut out);
    out[31] &= 0x3f;
    out
}

/// A 2 KiB WindowPoSt partition of `sectors` sectors (1 or 2: a 2 KiB partition holds two)
/// of `miner`, challenged by randomness drawn from `seed`.
pub fn window_2kib(miner: u64, sectors: usize, seed: u64) -> Result<PostInput> {
    let numbers: Vec<u64> = (1..=sectors as u64).collect();
    seal_2kib(miner, &numbers, seed)?.post_input(
        RegisteredPoStProof::StackedDrgWindow2KiBV1_2,
        randomness(seed),
        &[],
    )
}

/// A 2 KiB WinningPoSt of one sector of `miner`, challenged by randomness drawn from `seed`.
pub fn winning_2kib(miner: u64, seed: u64) -> Result<PostInput> {
    seal_2kib(miner, &[1], seed)?.post_input(
        RegisteredPoStProof::StackedDrgWinning2KiBV1,
        randomness(seed),
        &[],
    )
}
