//! Official parameters: the manifest filecoin-proofs publishes (carried in the binary), checking
//! the files a proof needs against it, and fetching missing or bad ones from an IPFS gateway.
//!
//! File names and the parameter directory are `porep::params`'s (the names filecoin-proofs
//! gives its cache entries); this module decides whether the files under those names are the
//! published ones.

pub mod check;
pub mod cli;
pub mod digest;
pub mod fetch;
pub mod layout;
pub mod manifest;
pub mod progress;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use filecoin_proofs_api::{RegisteredSealProof, RegisteredUpdateProof};

use crate::porep::{self, params::file_name};
use crate::post;
use crate::snap;
pub use check::{check_file, Depth, FileReport, Status};
pub use manifest::{Entry, Manifest};

/// A file some proof needs, with its manifest entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    pub name: String,
    pub entry: Entry,
}

/// One registered proof per sector size. Every PoRep version of a size (V1, V1_1, synthetic,
/// non-interactive) proves with the same circuit and so the same files (tested below), so
/// these stand for all of them.
pub const SECTOR_SIZES: [(&str, RegisteredSealProof); 5] = [
    ("2KiB", RegisteredSealProof::StackedDrg2KiBV1_1),
    ("8MiB", RegisteredSealProof::StackedDrg8MiBV1_1),
    ("512MiB", RegisteredSealProof::StackedDrg512MiBV1_1),
    ("32GiB", RegisteredSealProof::StackedDrg32GiBV1_1),
    ("64GiB", RegisteredSealProof::StackedDrg64GiBV1_1),
];

/// A circuit whose parameter files an operator names: a PoRep proof's, a SnapDeals
/// update's of one sector size, or a PoSt proof's (WindowPoSt or WinningPoSt).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Circuit {
    Porep(RegisteredSealProof),
    Snap(RegisteredUpdateProof),
    Post(filecoin_proofs_api::RegisteredPoStProof),
}

impl Circuit {
    fn cache_id(self) -> Result<String> {
        match self {
            Circuit::Porep(proof) => porep::params::cache_id(proof),
            Circuit::Snap(proof) => snap::params::cache_id(proof),
            Circuit::Post(proof) => post::params::cache_id(proof),
        }
    }

    /// How messages name it: the registered proof, or `snap-<size>`, `window-post-<size>`,
    /// `winning-post-<size>`.
    pub fn name(self) -> String {
        match self {
            Circuit::Porep(proof) => porep::proof_name(proof),
            Circuit::Snap(proof) => match SECTOR_SIZES
                .iter()
                .find(|(_, p)| p.sector_size() == proof.sector_size())
            {
                Some((size, _)) => format!("snap-{size}"),
                None => snap::update_proof_name(proof),
            },
            Circuit::Post(proof) => {
                let kind = if post::is_window(proof) {
                    "window-post"
                } else {
                    "winning-post"
                };
                match SECTOR_SIZES
                    .iter()
                    .find(|(_, p)| p.sector_size() == proof.sector_size())
                {
                    Some((size, _)) => format!("{kind}-{size}"),
                    None => post::post_proof_name(proof),
                }
            }
        }
    }
}

/// A `--proof` value: a registered PoRep proof name (`StackedDrg32GiBV1_1`), a sector size
/// (`32GiB`, PoRep), `snap-` and a sector size (`snap-32GiB`: the SnapDeals update circuit),
/// `window-post-` or `winning-post-` and a sector size (`window-post-32GiB`), or a registered
/// PoSt proof's name (`StackedDrgWinning32GiBV1`).
pub fn parse_proof(text: &str) -> Result<Circuit> {
    let size_named = |size: &str| {
        SECTOR_SIZES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(size))
            .map(|(_, proof)| *proof)
    };
    let lower = text.to_ascii_lowercase();
    if let Some(size) = lower.strip_prefix("snap-") {
        let update = size_named(size)
            .and_then(|proof| snap::update_proof_for_size(u64::from(proof.sector_size())));
        return update.map(Circuit::Snap).with_context(|| {
            format!("{text:?}: expected snap- and a sector size (2KiB, 8MiB, 512MiB, 32GiB, 64GiB)")
        });
    }
    for (prefix, window) in [("window-post-", true), ("winning-post-", false)] {
        if let Some(size) = lower.strip_prefix(prefix) {
            let proof = size_named(size).and_then(|proof| {
                post::post_proof_for_size(window, u64::from(proof.sector_size()))
            });
            return proof.map(Circuit::Post).with_context(|| {
                format!(
                    "{text:?}: expected {prefix} and a sector size (2KiB, 8MiB, 512MiB, 32GiB, \
                     64GiB)"
                )
            });
        }
    }
    if let Some(proof) = size_named(text) {
        return Ok(Circuit::Porep(proof));
    }
    if text.starts_with("StackedDrgWin") {
        return post::post_proof_from_name(text).map(Circuit::Post);
    }
    porep::proof_from_name(text).map(Circuit::Porep).context(
        "expected a registered proof, a sector size (2KiB, 8MiB, 512MiB, 32GiB, 64GiB), or \
         snap-, window-post- or winning-post- and a sector size",
    )
}

/// The circuits named, or every PoRep sector size when none is.
pub fn select(names: &[String]) -> Result<Vec<Circuit>> {
    if names.is_empty() {
        return Ok(SECTOR_SIZES
            .iter()
            .map(|(_, p)| Circuit::Porep(*p))
            .collect());
    }
    names.iter().map(|n| parse_proof(n)).collect()
}

/// The `.params` and `.vk` files the proofs need, each once, in name order. `.meta` files are
/// not published (filecoin-proofs writes them itself when missing, and c2q never reads them),
/// so they are not among them.
pub fn wanted(circuits: &[Circuit], manifest: &Manifest) -> Result<Vec<Wanted>> {
    let mut out = BTreeMap::new();
    for &circuit in circuits {
        let id = circuit.cache_id()?;
        for ext in ["params", "vk"] {
            let name = file_name(&id, ext);
            let Some(entry) = manifest.get(&name) else {
                bail!(
                    "{} publishes no {name} (needed by {})",
                    manifest.source(),
                    circuit.name()
                );
            };
            out.insert(
                name.clone(),
                Wanted {
                    name,
                    entry: entry.clone(),
                },
            );
        }
    }
    Ok(out.into_values().collect())
}

/// The worker's check at start: every file the configured proofs need is in `dir` with the
/// length its counts declare. Cheap (a few reads per file); the digest is `c2q params check`'s
/// job. Test parameters are allowed, with a warning, so that test deployments keep working.
pub fn startup_check(proof_names: &[String], dir: &Path) -> Result<()> {
    if proof_names.is_empty() {
        tracing::info!(
            dir = %dir.display(),
            "params.proofs is empty: parameter files are checked when a job first needs them"
        );
        return Ok(());
    }
    let proofs = select(proof_names).context("params.proofs")?;
    let manifest = Manifest::official()?;
    let board = progress::Board::new(progress::Style::Quiet);
    let mut bad = Vec::new();
    for w in wanted(&proofs, &manifest)? {
        let report = check_file(dir, &w, Depth::SizeOnly, &board);
        match report.status {
            Status::SizeOk => {}
            Status::TestParameters => tracing::warn!(
                file = %report.path.display(),
                "TEST parameters (made by `c2q params generate`, not a trusted setup): \
                 proofs made with them are worthless on chain"
            ),
            status => bad.push(format!("{}: {status}", report.path.display())),
        }
    }
    if !bad.is_empty() {
        bail!(
            "parameter files for params.proofs are missing or bad: {} (run `c2q params fetch \
             --dir {}` for the proofs you serve, then `c2q params check`)",
            bad.join("; "),
            dir.display()
        );
    }
    tracing::info!(dir = %dir.display(), proofs = ?proof_names, "parameter files present");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [RegisteredSealProof; 20] = crate::porep::REGISTERED_PROOFS;

    #[test]
    fn every_porep_proof_names_two_files_of_the_official_manifest() {
        let manifest = Manifest::official().unwrap();
        for proof in ALL {
            let files = wanted(&[Circuit::Porep(proof)], &manifest).unwrap();
            assert_eq!(files.len(), 2, "{proof:?}");
            for f in &files {
                assert_eq!(f.entry.sector_size, u64::from(proof.sector_size()), "{f:?}");
            }
            // One file set per sector size: what `SECTOR_SIZES` relies on.
            let size = SECTOR_SIZES
                .iter()
                .find(|(_, p)| p.sector_size() == proof.sector_size())
                .unwrap();
            let by_size = wanted(&[Circuit::Porep(size.1)], &manifest).unwrap();
            assert_eq!(files, by_size, "{proof:?}");
        }
        let all: Vec<Circuit> = ALL.into_iter().map(Circuit::Porep).collect();
        assert_eq!(wanted(&all, &manifest).unwrap().len(), 10);
    }

    /// Each SnapDeals update circuit needs two files of the manifest, of its sector size and
    /// other than PoRep's; `snap-<size>` names them.
    #[test]
    fn every_update_proof_names_two_files_of_the_official_manifest() {
        let manifest = Manifest::official().unwrap();
        let porep: Vec<Circuit> = select(&[]).unwrap();
        let porep_files = wanted(&porep, &manifest).unwrap();
        for proof in snap::REGISTERED_UPDATE_PROOFS {
            let files = wanted(&[Circuit::Snap(proof)], &manifest).unwrap();
            assert_eq!(files.len(), 2, "{proof:?}");
            for f in &files {
                assert_eq!(f.entry.sector_size, u64::from(proof.sector_size()), "{f:?}");
                assert!(f.name.contains("empty-sector-update"), "{f:?}");
                assert!(!porep_files.contains(f), "{f:?}");
            }
            let name = Circuit::Snap(proof).name();
            assert_eq!(parse_proof(&name).unwrap(), Circuit::Snap(proof), "{name}");
        }
        assert_eq!(
            parse_proof("snap-32GiB").unwrap(),
            Circuit::Snap(RegisteredUpdateProof::StackedDrg32GiBV1)
        );
        assert!(parse_proof("snap-16GiB").is_err());
    }

    /// Each PoSt circuit (WindowPoSt, WinningPoSt, per sector size) needs two files of the
    /// manifest, named `window-post-<size>` and `winning-post-<size>`.
    #[test]
    fn post_circuits_are_in_the_manifest() {
        use filecoin_proofs_api::RegisteredPoStProof;
        let manifest = Manifest::official().unwrap();
        for window in [true, false] {
            for (size, seal) in SECTOR_SIZES {
                let proof =
                    post::post_proof_for_size(window, u64::from(seal.sector_size())).unwrap();
                let files = wanted(&[Circuit::Post(proof)], &manifest).unwrap();
                assert_eq!(files.len(), 2, "{size}");
                let name = Circuit::Post(proof).name();
                assert_eq!(parse_proof(&name).unwrap(), Circuit::Post(proof), "{name}");
            }
        }
        assert_eq!(
            parse_proof("StackedDrgWinning2KiBV1").unwrap(),
            Circuit::Post(RegisteredPoStProof::StackedDrgWinning2KiBV1)
        );
        assert!(parse_proof("window-post-16GiB").is_err());
    }

    #[test]
    fn proofs_are_named_by_registered_proof_or_sector_size() {
        assert_eq!(
            parse_proof("32gib").unwrap(),
            Circuit::Porep(RegisteredSealProof::StackedDrg32GiBV1_1)
        );
        assert_eq!(
            parse_proof("StackedDrg2KiBV1_2_Feat_NonInteractivePoRep").unwrap(),
            Circuit::Porep(RegisteredSealProof::StackedDrg2KiBV1_2_Feat_NonInteractivePoRep)
        );
        assert!(parse_proof("16GiB").is_err());
        assert_eq!(select(&[]).unwrap().len(), 5);
    }

    #[test]
    fn the_worker_start_check_names_a_missing_or_truncated_file_and_allows_test_parameters() {
        use layout::{tests::fake, Kind};
        let dir = tempfile::tempdir().unwrap();
        let files = wanted(
            &[Circuit::Porep(RegisteredSealProof::StackedDrg2KiBV1_1)],
            &Manifest::official().unwrap(),
        )
        .unwrap();
        let proofs = ["2KiB".to_string()];
        let err = format!("{:#}", startup_check(&proofs, dir.path()).unwrap_err());
        assert!(
            err.contains(&files[0].name) && err.contains("missing"),
            "{err}"
        );

        let params = fake(Kind::Params, [2, 3, 3, 2, 2, 2], 7);
        let vk = fake(Kind::Vk, [2, 0, 0, 0, 0, 0], 8);
        std::fs::write(dir.path().join(&files[0].name), &params[..params.len() - 1]).unwrap();
        std::fs::write(dir.path().join(&files[1].name), &vk).unwrap();
        let err = format!("{:#}", startup_check(&proofs, dir.path()).unwrap_err());
        assert!(
            err.contains(&files[0].name) && err.contains("truncated"),
            "{err}"
        );
        assert!(!err.contains(&files[1].name), "{err}");

        // Whole files in the right layout pass the start-up check (it does not hash them);
        // marked test parameters pass too, with a warning.
        std::fs::write(dir.path().join(&files[0].name), &params).unwrap();
        startup_check(&proofs, dir.path()).unwrap();
        let marker = crate::porep::params::test_marker_for(&dir.path().join(&files[0].name));
        std::fs::write(marker, "{}").unwrap();
        startup_check(&proofs, dir.path()).unwrap();
        // Nothing configured, nothing checked.
        startup_check(&[], &dir.path().join("absent")).unwrap();
    }

    #[test]
    fn the_2kib_files_are_the_ones_filecoin_proofs_publishes() {
        let files = wanted(
            &[Circuit::Porep(RegisteredSealProof::StackedDrg2KiBV1_1)],
            &Manifest::official().unwrap(),
        )
        .unwrap();
        let names: Vec<_> = files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-0-0-sha256_hasher-032d3138d22506ec0082ed72b2dcba18df18477904e35bafee82b3793b06832f.params",
                "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-0-0-sha256_hasher-032d3138d22506ec0082ed72b2dcba18df18477904e35bafee82b3793b06832f.vk",
            ]
        );
        assert_eq!(
            files[0].entry.cid,
            "QmWceMgnWYLopMuM4AoGMvGEau7tNe5UK83XFjH5V9B17h"
        );
    }
}
