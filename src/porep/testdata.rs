//! Test sectors: seal a small sector of random data with filecoin-proofs and run Commit1 on it,
//! producing a C1 output exactly as a sealing pipeline would. For trying c2q without a sealing
//! pipeline (`c2q testdata c1`) and for tests. 2 KiB sectors take milliseconds.

use std::fs::OpenOptions;
use std::io::Write;

use anyhow::{ensure, Context, Result};
use filecoin_proofs_api::seal::{self, SealCommitPhase1Output};
use filecoin_proofs_api::{PieceInfo, RegisteredSealProof, UnpaddedBytesAmount};
use rand::{RngCore, SeedableRng};

use super::input::proof_name;

/// A sealed test sector and everything its verification needs.
pub struct Sealed {
    pub proof: RegisteredSealProof,
    pub miner: u64,
    pub sector: u64,
    pub c1: SealCommitPhase1Output,
    pub comm_r: [u8; 32],
    pub comm_d: [u8; 32],
    pub ticket: [u8; 32],
    pub seed: [u8; 32],
}

impl Sealed {
    /// The C1 output as filecoin-ffi serializes it.
    pub fn c1_json(&self) -> Result<Vec<u8>> {
        Ok(serde_json::to_vec(&self.c1)?)
    }

    /// The same C1 in lotus-bench's `Commit2In` envelope.
    pub fn commit2in_json(&self) -> Result<Vec<u8>> {
        use base64::Engine;
        let inner = self.c1_json()?;
        Ok(serde_json::to_vec(&serde_json::json!({
            "SectorNum": self.sector,
            "Phase1Out": base64::engine::general_purpose::STANDARD.encode(inner),
            "SectorSize": u64::from(self.proof.sector_size()),
        }))?)
    }
}

/// Seal a 2 KiB sector (any 2 KiB registered proof) filled with random data drawn from
/// `rng_seed`, for `miner` and `sector`. For synthetic PoRep the synthetic proofs are made after
/// pre-commit, as a sealing pipeline does, and Commit1 draws its challenges from them.
pub fn seal_2kib(
    proof: RegisteredSealProof,
    miner: u64,
    sector: u64,
    rng_seed: u64,
) -> Result<Sealed> {
    ensure!(
        u64::from(proof.sector_size()) == 2048,
        "test sectors are 2 KiB; {} is not",
        proof_name(proof)
    );
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(rng_seed);
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let cache = dir.path().join("cache");
    std::fs::create_dir_all(&cache)?;
    let staged = dir.path().join("staged");
    let sealed = dir.path().join("sealed");

    let size = UnpaddedBytesAmount(2032);
    let mut data = vec![0u8; 2032];
    rng.fill_bytes(&mut data);
    let mut staged_file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&staged)?;
    let (piece, _) = seal::add_piece(proof, &data[..], &mut staged_file, size, &[])
        .context("add_piece failed")?;
    staged_file.flush()?;
    std::fs::File::create(&sealed)?;
    let pieces: Vec<PieceInfo> = vec![piece];

    let prover_id = super::prover_id(miner);
    // Tickets and seeds are field elements in Filecoin: clear the top bits.
    let mut ticket = [0u8; 32];
    rng.fill_bytes(&mut ticket);
    ticket[31] &= 0x3f;
    let mut seed = [0u8; 32];
    rng.fill_bytes(&mut seed);
    seed[31] &= 0x3f;

    let pc1 = seal::seal_pre_commit_phase1(
        proof,
        &cache,
        &staged,
        &sealed,
        prover_id,
        sector.into(),
        ticket,
        &pieces,
    )
    .context("pre-commit phase 1 failed")?;
    let pc2 =
        seal::seal_pre_commit_phase2(pc1, &cache, &sealed).context("pre-commit phase 2 failed")?;
    let (comm_r, comm_d) = (pc2.comm_r, pc2.comm_d);
    if proof_name(proof).contains("Synthetic") {
        seal::generate_synth_proofs(
            &cache,
            &sealed,
            prover_id,
            sector.into(),
            ticket,
            pc2.clone(),
            &pieces,
        )
        .context("generating the synthetic proofs failed")?;
    }
    let c1 = seal::seal_commit_phase1(
        &cache,
        &sealed,
        prover_id,
        sector.into(),
        ticket,
        seed,
        pc2,
        &pieces,
    )
    .context("commit phase 1 failed")?;
    Ok(Sealed {
        proof,
        miner,
        sector,
        c1,
        comm_r,
        comm_d,
        ticket,
        seed,
    })
}
