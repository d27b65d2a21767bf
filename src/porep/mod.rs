//! Filecoin PoRep Commit2: C1 input, per-partition circuits, parameters and verification.
//! Circuits and public inputs come from storage-proofs-porep; proving is `groth16`'s.

mod input;
mod job;
pub mod params;
pub mod shape;
pub mod testdata;
pub mod verify;
pub(crate) mod witness;

pub use input::{
    parse_c1, proof_from_name, proof_name, read_c1_file, C1Input, MAX_C1_BYTES, REGISTERED_PROOFS,
};
pub use job::PorepJob;

/// The largest miner actor id Filecoin can address: ID addresses and the prover id
/// filecoin-ffi derives from them refuse ids of 2^63 and above (`toProverID`: "IDs must be less
/// than 2^63"), and the ledger stores the id as a signed 64-bit integer.
pub const MAX_MINER_ID: u64 = i64::MAX as u64;

/// The largest sector number Filecoin allows (`abi.MaxSectorNumber`, 2^63 − 1); the ledger
/// stores it as a signed 64-bit integer too.
pub const MAX_SECTOR_NUMBER: u64 = i64::MAX as u64;

/// Whether a miner id and sector number are ones a Filecoin sector can have; the error names
/// the one that is not.
pub fn check_sector_identity(miner_id: u64, sector_number: u64) -> anyhow::Result<()> {
    anyhow::ensure!(
        miner_id <= MAX_MINER_ID,
        "miner id {miner_id} is not a Filecoin actor id (ids are below 2^63)"
    );
    anyhow::ensure!(
        sector_number <= MAX_SECTOR_NUMBER,
        "sector number {sector_number} is not a Filecoin sector number (at most 2^63 - 1)"
    );
    Ok(())
}

/// What proving and verifying a C1 output both check first: a miner and sector a Filecoin
/// sector can have, a version 1 PoRep, and the sector the input names (when it names one).
pub(crate) fn check_request(c1: &C1Input, miner_id: u64, sector_number: u64) -> anyhow::Result<()> {
    check_sector_identity(miner_id, sector_number)?;
    let proof = c1.registered_proof();
    anyhow::ensure!(
        proof.major_version() == 1,
        "registered proof {} is not a version 1 PoRep",
        proof_name(proof)
    );
    if let Some(n) = c1.sector_number {
        anyhow::ensure!(
            n == sector_number,
            "the input is for sector {n}, but sector {sector_number} was asked for"
        );
    }
    Ok(())
}

/// The key of the parameters every PoRep proof of this sector size uses: Filecoin publishes
/// one parameter set per sector size, shared by its interactive and non-interactive proofs.
pub fn srs_key(sector_size: u64) -> crate::groth16::SrsKey {
    crate::groth16::SrsKey::new(format!("porep-{sector_size}"))
}

/// The prover id Filecoin derives from a miner's actor id: the payload of its ID address (the
/// id as an unsigned LEB128 varint), zero-padded to 32 bytes.
pub fn prover_id(miner_id: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut v = miner_id;
    let mut i = 0;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out[i] = byte;
            break;
        }
        out[i] = byte | 0x80;
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::prover_id;

    #[test]
    fn prover_id_is_the_id_address_payload() {
        assert_eq!(prover_id(0)[..2], [0, 0]);
        assert_eq!(prover_id(1000)[..3], [0xe8, 0x07, 0]);
        assert_eq!(
            prover_id(u64::MAX)[..11],
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0]
        );
    }
}
