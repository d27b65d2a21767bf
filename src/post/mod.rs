//! Proofs of spacetime: a WindowPoSt partition (`generate_single_window_post_with_vanilla`)
//! and a WinningPoSt (`generate_winning_post_with_vanilla`). The input is the randomness, the
//! miner and one vanilla proof per sector as filecoin-proofs-api's
//! `generate_single_vanilla_proof` makes them (what Curio sends its proving engine); the output
//! is one 192-byte proof. Circuits, padding and public inputs come from filecoin-proofs and
//! storage-proofs-post; proving is `groth16`'s, through the same pipeline as PoRep.

mod input;
mod job;
pub mod params;
pub mod shape;
pub mod testdata;
mod witness;

use filecoin_proofs::{PoStConfig, PoStType};
use filecoin_proofs_api::RegisteredPoStProof;

pub use input::{
    is_post_input, is_post_input_file, parse_post_input, read_post_input_file, PostInput,
    MAX_POST_INPUT_BYTES,
};
pub use job::{PostJob, SHAPE_ONLY_REFUSED};

/// Every registered PoSt proof, in the order of Go's `abi.RegisteredPoStProof` (and of
/// filecoin-proofs-api's enum): WinningPoSt 0–4, WindowPoSt V1 5–9, WindowPoSt V1_1 10–14
/// (filecoin-proofs-api's `StackedDrgWindow*V1_2`, what the chain takes today).
pub const REGISTERED_POST_PROOFS: [RegisteredPoStProof; 15] = {
    use RegisteredPoStProof::*;
    [
        StackedDrgWinning2KiBV1,
        StackedDrgWinning8MiBV1,
        StackedDrgWinning512MiBV1,
        StackedDrgWinning32GiBV1,
        StackedDrgWinning64GiBV1,
        StackedDrgWindow2KiBV1,
        StackedDrgWindow8MiBV1,
        StackedDrgWindow512MiBV1,
        StackedDrgWindow32GiBV1,
        StackedDrgWindow64GiBV1,
        StackedDrgWindow2KiBV1_2,
        StackedDrgWindow8MiBV1_2,
        StackedDrgWindow512MiBV1_2,
        StackedDrgWindow32GiBV1_2,
        StackedDrgWindow64GiBV1_2,
    ]
};

/// A PoSt proof's name as filecoin-proofs-api spells it (`StackedDrgWindow32GiBV1_2`): what a
/// `window-post` or `winning-post` job's `registered_proof` holds.
pub fn post_proof_name(proof: RegisteredPoStProof) -> String {
    format!("{proof:?}")
}

/// The PoSt proof of this name, or of this number (Go's `abi.RegisteredPoStProof`, as Curio
/// sends it).
pub fn post_proof_from_name(name: &str) -> anyhow::Result<RegisteredPoStProof> {
    let by_number = name
        .parse::<usize>()
        .ok()
        .and_then(|n| REGISTERED_POST_PROOFS.get(n).copied());
    by_number
        .or_else(|| {
            REGISTERED_POST_PROOFS
                .iter()
                .copied()
                .find(|p| post_proof_name(*p) == name)
        })
        .ok_or_else(|| {
            anyhow::anyhow!(
                "unknown registered PoSt proof {name:?} (a name such as \
                 StackedDrgWindow32GiBV1_2 or StackedDrgWinning32GiBV1, or a number 0 to 14)"
            )
        })
}

/// Whether a proof is a WindowPoSt (else a WinningPoSt).
pub fn is_window(proof: RegisteredPoStProof) -> bool {
    proof.typ() == PoStType::Window
}

/// The WindowPoSt proof the chain takes today for a sector size (Go's V1_1, filecoin-proofs'
/// V1_2), or the WinningPoSt proof.
pub fn post_proof_for_size(window: bool, sector_size: u64) -> Option<RegisteredPoStProof> {
    REGISTERED_POST_PROOFS
        .iter()
        .rev()
        .copied()
        .find(|p| is_window(*p) == window && u64::from(p.sector_size()) == sector_size)
}

/// filecoin-proofs' configuration of a PoSt proof: sector size, sectors per partition,
/// challenges per sector, API version.
pub(crate) fn config(proof: RegisteredPoStProof) -> PoStConfig {
    proof.as_v1_config()
}

/// How many sectors one partition (one circuit) of this proof holds: 2,349 for a 32 GiB
/// WindowPoSt, 2 for a 2 KiB one, 1 for every WinningPoSt.
pub fn sectors_per_partition(proof: RegisteredPoStProof) -> usize {
    config(proof).sector_count
}

/// The key of a PoSt circuit's parameters: one set per kind and sector size (WindowPoSt V1 and
/// V1_1 share their circuit).
pub fn srs_key(window: bool, sector_size: u64) -> crate::groth16::SrsKey {
    let kind = if window { "window" } else { "winning" };
    crate::groth16::SrsKey::new(format!("{kind}-post-{sector_size}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn post_proofs_are_named_as_filecoin_spells_them_or_numbered_as_go_does() {
        for (i, proof) in REGISTERED_POST_PROOFS.iter().enumerate() {
            let name = post_proof_name(*proof);
            assert_eq!(post_proof_from_name(&name).unwrap(), *proof);
            assert_eq!(post_proof_from_name(&i.to_string()).unwrap(), *proof);
        }
        use RegisteredPoStProof::*;
        // Curio's numbers: winning 0–4, window V1_1 10–14.
        assert_eq!(post_proof_from_name("3").unwrap(), StackedDrgWinning32GiBV1);
        assert_eq!(
            post_proof_from_name("13").unwrap(),
            StackedDrgWindow32GiBV1_2
        );
        assert!(post_proof_from_name("15").is_err());
        assert!(post_proof_from_name("StackedDrg32GiBV1_1").is_err());
        assert_eq!(
            post_proof_for_size(true, 2048),
            Some(StackedDrgWindow2KiBV1_2)
        );
        assert_eq!(
            post_proof_for_size(false, 32 << 30),
            Some(StackedDrgWinning32GiBV1)
        );
    }

    #[test]
    fn partitions_hold_the_sectors_filecoin_says() {
        use RegisteredPoStProof::*;
        assert_eq!(sectors_per_partition(StackedDrgWindow2KiBV1_2), 2);
        assert_eq!(sectors_per_partition(StackedDrgWindow32GiBV1_2), 2349);
        assert_eq!(sectors_per_partition(StackedDrgWindow64GiBV1_2), 2300);
        assert_eq!(sectors_per_partition(StackedDrgWinning32GiBV1), 1);
        assert!(is_window(StackedDrgWindow2KiBV1));
        assert!(!is_window(StackedDrgWinning2KiBV1));
    }
}
