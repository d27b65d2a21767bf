//! Test SnapDeals inputs: seal a 2 KiB committed-capacity sector with filecoin-proofs, encode
//! new data into it, and make the vanilla partition proofs, exactly as a SnapDeals pipeline
//! would (`c2q testdata snap` and tests). Takes well under a second.

use std::fs::OpenOptions;
use std::io::Write;

use anyhow::{Context, Result};
use filecoin_proofs_api::{seal, update, PieceInfo, RegisteredSealProof, UnpaddedBytesAmount};
use filecoin_proofs_api::{RegisteredUpdateProof, Ticket};
use rand::{RngCore, SeedableRng};

use super::input::SnapInput;

/// The sealing proof of the committed-capacity sectors a 2 KiB update applies to.
const SEAL_PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;

/// Unpadded bytes of a 2 KiB sector's data.
const DATA_BYTES: u64 = 2032;

/// Seal a 2 KiB committed-capacity sector for `miner` and `sector`, encode `DATA_BYTES` of
/// random data drawn from `rng_seed` into it, and return the update's input: the vanilla
/// partition proofs filecoin-ffi makes and the commitments they prove.
pub fn update_2kib(miner: u64, sector: u64, rng_seed: u64) -> Result<SnapInput> {
    let proof = RegisteredUpdateProof::StackedDrg2KiBV1;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(rng_seed);
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let path = |name: &str| dir.path().join(name);
    let (key_cache, new_cache) = (path("key-cache"), path("new-cache"));
    std::fs::create_dir_all(&key_cache)?;
    std::fs::create_dir_all(&new_cache)?;

    // The sector key: a committed-capacity sector (zeros), sealed.
    let zeros = vec![0u8; DATA_BYTES as usize];
    let cc_piece = add_piece(&zeros, &path("cc-staged"))?;
    std::fs::File::create(path("sector-key"))?;
    let mut ticket: Ticket = [0u8; 32];
    rng.fill_bytes(&mut ticket);
    ticket[31] &= 0x3f;
    let pc1 = seal::seal_pre_commit_phase1(
        SEAL_PROOF,
        &key_cache,
        path("cc-staged"),
        path("sector-key"),
        crate::porep::prover_id(miner),
        sector.into(),
        ticket,
        &[cc_piece],
    )
    .context("pre-commit phase 1 of the sector key failed")?;
    let pc2 = seal::seal_pre_commit_phase2(pc1, &key_cache, path("sector-key"))
        .context("pre-commit phase 2 of the sector key failed")?;

    // The deal data, encoded into a new replica.
    let mut data = vec![0u8; DATA_BYTES as usize];
    rng.fill_bytes(&mut data);
    let piece = add_piece(&data, &path("staged"))?;
    // The new replica is written in place: a file of the sector's size.
    std::fs::File::create(path("replica"))?.set_len(u64::from(proof.sector_size()))?;
    let encoded = update::empty_sector_update_encode_into(
        proof,
        path("replica"),
        &new_cache,
        path("sector-key"),
        &key_cache,
        path("staged"),
        &[piece],
    )
    .context("encoding the update failed")?;
    let vanilla = update::generate_partition_proofs(
        proof,
        pc2.comm_r,
        encoded.comm_r_new,
        encoded.comm_d_new,
        path("sector-key"),
        &key_cache,
        path("replica"),
        &new_cache,
    )
    .context("generating the vanilla partition proofs failed")?;
    Ok(SnapInput {
        registered_proof: proof,
        comm_r_old: pc2.comm_r,
        comm_r_new: encoded.comm_r_new,
        comm_d_new: encoded.comm_d_new,
        vanilla_proofs: vanilla.into_iter().map(|p| p.0).collect(),
        shape_only: false,
    })
}

/// Write `data` as one piece filling a 2 KiB sector into `staged`.
fn add_piece(data: &[u8], staged: &std::path::Path) -> Result<PieceInfo> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(staged)
        .with_context(|| format!("cannot create {}", staged.display()))?;
    let (piece, _) = seal::add_piece(
        SEAL_PROOF,
        data,
        &mut file,
        UnpaddedBytesAmount(DATA_BYTES),
        &[],
    )
    .context("add_piece failed")?;
    file.flush()?;
    Ok(piece)
}
