//! The manifest of official parameter files: for each file name, its IPFS cid, its digest and
//! the sector size it serves.
//!
//! `parameters.json` beside this file is a verbatim copy of the `parameters.json` that the
//! filecoin-proofs crate 19.1.0 (the version in Cargo.lock) ships and checks its own parameters
//! against (`storage_proofs_core::parameter_cache::PARAMETERS`, the same file in
//! storage-proofs-core 19.1.0). It lists `.params` and `.vk` files only: no `.meta`, and no file
//! sizes. When filecoin-proofs is upgraded, copy the new release's file over it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Deserialize;

use super::digest::Digest;

/// The release the embedded manifest comes from.
pub const OFFICIAL_RELEASE: &str = "filecoin-proofs 19.1.0";

const OFFICIAL_JSON: &str = include_str!("parameters.json");

/// One published file.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Entry {
    /// The IPFS content id the file is published under.
    pub cid: String,
    /// BLAKE2b digest of the file's bytes, as Filecoin's tools write it (`Digest`).
    pub digest: Digest,
    /// The sector size the circuit serves, in bytes (not the file's size).
    pub sector_size: u64,
}

/// File name → entry, and where the list came from (for messages).
#[derive(Clone, Debug)]
pub struct Manifest {
    entries: BTreeMap<String, Entry>,
    source: String,
}

impl Manifest {
    /// The manifest carried in the binary.
    pub fn official() -> Result<Manifest> {
        Manifest::parse(OFFICIAL_JSON, OFFICIAL_RELEASE)
            .context("the manifest built into c2q is malformed")
    }

    /// A manifest from a file in the same format (tests, or a newer release's list).
    pub fn from_file(path: &Path) -> Result<Manifest> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read manifest {}", path.display()))?;
        Manifest::parse(&text, &path.display().to_string())
            .with_context(|| format!("manifest {}", path.display()))
    }

    /// Parse `parameters.json`'s format; `source` names it in messages.
    pub fn parse(text: &str, source: &str) -> Result<Manifest> {
        let entries: BTreeMap<String, Entry> =
            serde_json::from_str(text).context("not a parameters.json manifest")?;
        Ok(Manifest {
            entries,
            source: source.to_string(),
        })
    }

    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.get(name)
    }

    /// Where the list came from: the release, or the file it was read from.
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn entries(&self) -> impl Iterator<Item = (&str, &Entry)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_official_manifest_parses_and_lists_porep_files_for_every_sector_size() {
        let m = Manifest::official().unwrap();
        let porep: Vec<_> = m
            .entries()
            .filter(|(name, _)| name.starts_with("v28-stacked-proof-of-replication-"))
            .collect();
        // A .params and a .vk for each of 2 KiB, 8 MiB, 512 MiB, 32 GiB and 64 GiB.
        assert_eq!(porep.len(), 10);
        for size in [2048u64, 8 << 20, 512 << 20, 32 << 30, 64 << 30] {
            assert_eq!(
                porep.iter().filter(|(_, e)| e.sector_size == size).count(),
                2
            );
        }
        assert!(m.entries().all(|(name, _)| !name.ends_with(".meta")));
    }

    #[test]
    fn a_malformed_digest_is_refused() {
        let text = r#"{"a.vk": {"cid": "Qm", "digest": "xyz", "sector_size": 2048}}"#;
        let err = Manifest::parse(text, "test").unwrap_err();
        assert!(format!("{err:#}").contains("digest"), "{err:#}");
    }
}
