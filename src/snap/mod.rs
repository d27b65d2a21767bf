//! SnapDeals (`ProveReplicaUpdate2`): the SNARK that upgrades a committed-capacity sector with
//! deal data. Its input is the vanilla partition proofs filecoin-ffi makes
//! (`generate_partition_proofs`), the three commitments and the registered update proof; its
//! output is the bytes `generate_update_proof_with_vanilla` returns (192 per partition).
//! Circuits and public inputs come from storage-proofs-update; proving is `groth16`'s, through
//! the same pipeline as PoRep.

pub mod commitment;
mod input;
mod job;
pub mod params;
pub mod shape;
pub mod testdata;
mod witness;

use filecoin_proofs::SectorUpdateConfig;
use filecoin_proofs_api::RegisteredUpdateProof;

pub use input::{
    is_snap_input, is_snap_input_file, parse_snap_input, read_snap_input_file, SnapInput,
    MAX_SNAP_INPUT_BYTES,
};
pub use job::{SnapJob, SHAPE_ONLY_REFUSED};

/// Every registered update proof, smallest sector first.
pub const REGISTERED_UPDATE_PROOFS: [RegisteredUpdateProof; 5] = [
    RegisteredUpdateProof::StackedDrg2KiBV1,
    RegisteredUpdateProof::StackedDrg8MiBV1,
    RegisteredUpdateProof::StackedDrg512MiBV1,
    RegisteredUpdateProof::StackedDrg32GiBV1,
    RegisteredUpdateProof::StackedDrg64GiBV1,
];

/// An update proof's name as filecoin-proofs-api spells it (`StackedDrg32GiBV1`): what a
/// `snap-prove` job's `registered_proof` holds.
pub fn update_proof_name(proof: RegisteredUpdateProof) -> String {
    format!("{proof:?}")
}

/// The update proof of this name, or of this number (lotus's and Curio's
/// `abi.RegisteredUpdateProof`: 0 for 2 KiB up to 4 for 64 GiB).
pub fn update_proof_from_name(name: &str) -> anyhow::Result<RegisteredUpdateProof> {
    let by_number = name
        .parse::<usize>()
        .ok()
        .and_then(|n| REGISTERED_UPDATE_PROOFS.get(n).copied());
    by_number
        .or_else(|| {
            REGISTERED_UPDATE_PROOFS
                .iter()
                .copied()
                .find(|p| update_proof_name(*p) == name)
        })
        .ok_or_else(|| {
            anyhow::anyhow!(
                "unknown registered update proof {name:?} (one of {}, or their numbers 0 to 4)",
                REGISTERED_UPDATE_PROOFS.map(update_proof_name).join(", ")
            )
        })
}

/// The update proof of a sector size, in bytes.
pub fn update_proof_for_size(sector_size: u64) -> Option<RegisteredUpdateProof> {
    REGISTERED_UPDATE_PROOFS
        .iter()
        .copied()
        .find(|p| u64::from(p.sector_size()) == sector_size)
}

/// The update circuit's configuration: partitions, nodes and `h` of its sector size.
pub(crate) fn update_config(proof: RegisteredUpdateProof) -> SectorUpdateConfig {
    SectorUpdateConfig::from_porep_config(&proof.as_v1_config())
}

/// How many partitions (circuits) an update proof of this kind has: 1 for 2 KiB, 4 for
/// 8 MiB, 16 from 512 MiB up.
pub fn partitions(proof: RegisteredUpdateProof) -> usize {
    usize::from(update_config(proof).update_partitions)
}

/// The key of an update circuit's parameters (one set per sector size).
pub fn srs_key(sector_size: u64) -> crate::groth16::SrsKey {
    crate::groth16::SrsKey::new(format!("snap-{sector_size}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_proofs_are_named_as_filecoin_spells_them_or_numbered() {
        for (i, proof) in REGISTERED_UPDATE_PROOFS.iter().enumerate() {
            let name = update_proof_name(*proof);
            assert_eq!(update_proof_from_name(&name).unwrap(), *proof);
            assert_eq!(update_proof_from_name(&i.to_string()).unwrap(), *proof);
            assert_eq!(
                update_proof_for_size(u64::from(proof.sector_size())),
                Some(*proof)
            );
        }
        assert_eq!(
            update_proof_name(RegisteredUpdateProof::StackedDrg32GiBV1),
            "StackedDrg32GiBV1"
        );
        let e = update_proof_from_name("StackedDrg32GiBV1_1").unwrap_err();
        assert!(e.to_string().contains("StackedDrg64GiBV1"), "{e}");
        assert!(update_proof_from_name("5").is_err());
    }

    #[test]
    fn partitions_follow_the_sector_size() {
        use RegisteredUpdateProof::*;
        assert_eq!(partitions(StackedDrg2KiBV1), 1);
        assert_eq!(partitions(StackedDrg8MiBV1), 4);
        assert_eq!(partitions(StackedDrg512MiBV1), 16);
        assert_eq!(partitions(StackedDrg32GiBV1), 16);
        assert_eq!(partitions(StackedDrg64GiBV1), 16);
    }
}
