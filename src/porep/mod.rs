//! Filecoin PoRep Commit2: C1 input, per-partition circuits, parameters and verification.
//! Circuits and public inputs come from storage-proofs-porep; proving is `groth16`'s.

mod input;
mod job;
pub mod params;
pub mod shape;
pub mod testdata;
mod witness;

pub use input::{parse_c1, proof_from_name, proof_name, C1Input, MAX_C1_BYTES};
pub use job::PorepJob;

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
