//! The size a parameter file must have, read from the file's own counts.
//!
//! The manifest carries no file sizes, but bellperson's layout is self-describing: a `.vk` is
//! six fixed points and a counted list of IC points; a `.params` is a verifying key followed by
//! five counted point sets (H, L, A and B in G1, B in G2). Reading the counts takes a handful of
//! small reads, even on a 47 GB file, and tells a truncated or over-long file (an interrupted
//! copy, a full disk) from a complete one without hashing it. Corruption inside a file of the
//! right length is the digest's job.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use anyhow::{bail, Context, Result};

const G1: u64 = 96;
const G2: u64 = 192;
/// α₁, β₁, δ₁ in G1 and β₂, γ₂, δ₂ in G2, uncompressed.
const VK_FIXED: u64 = 3 * G1 + 3 * G2;

/// Which layout a file has, from its extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `.params`: proving parameters.
    Params,
    /// `.vk`: a verifying key.
    Vk,
}

impl Kind {
    pub fn of(name: &str) -> Option<Kind> {
        match Path::new(name).extension().and_then(|e| e.to_str()) {
            Some("params") => Some(Kind::Params),
            Some("vk") => Some(Kind::Vk),
            _ => None,
        }
    }
}

/// The length the file's counts add up to. An error when the counts cannot be read (the file
/// ends inside its own headers).
pub fn declared_len(path: &Path, kind: Kind) -> Result<u64> {
    let mut file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let actual = file
        .metadata()
        .with_context(|| format!("cannot stat {}", path.display()))?
        .len();
    let mut at = VK_FIXED;
    let mut set = |what: &str, point: u64, file: &mut File| -> Result<()> {
        if at.saturating_add(4) > actual {
            bail!("the file ends at byte {actual}, before the {what} count at byte {at}");
        }
        file.seek(SeekFrom::Start(at))?;
        let mut raw = [0u8; 4];
        file.read_exact(&mut raw)
            .with_context(|| format!("cannot read the {what} count"))?;
        at += 4 + u64::from(u32::from_be_bytes(raw)) * point;
        Ok(())
    };
    set("IC", G1, &mut file)?;
    if kind == Kind::Params {
        for what in ["H", "L", "A", "B (G1)"] {
            set(what, G1, &mut file)?;
        }
        set("B (G2)", G2, &mut file)?;
    }
    Ok(at)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A file in bellperson's layout with the given counts and arbitrary point bytes: what the
    /// check and fetch tests serve in place of real parameters.
    pub(crate) fn fake(kind: Kind, counts: [u32; 6], fill: u8) -> Vec<u8> {
        let mut out = vec![fill; VK_FIXED as usize];
        let sets = match kind {
            Kind::Vk => 1,
            Kind::Params => 6,
        };
        for (i, &n) in counts.iter().take(sets).enumerate() {
            out.extend_from_slice(&n.to_be_bytes());
            let point = if i == 5 { G2 } else { G1 };
            out.extend(std::iter::repeat_n(fill, n as usize * point as usize));
        }
        out
    }

    #[test]
    fn counts_add_up_to_the_length_of_a_whole_file_only() {
        let dir = tempfile::tempdir().unwrap();
        for kind in [Kind::Vk, Kind::Params] {
            let bytes = fake(kind, [3, 7, 2, 5, 4, 4], 1);
            let path = dir.path().join("f");
            std::fs::write(&path, &bytes).unwrap();
            assert_eq!(declared_len(&path, kind).unwrap(), bytes.len() as u64);
            std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
            assert_eq!(declared_len(&path, kind).unwrap(), bytes.len() as u64);
            std::fs::write(&path, &bytes[..100]).unwrap();
            assert!(declared_len(&path, kind).is_err());
        }
    }

    #[test]
    fn parameters_c2q_writes_declare_their_own_length() {
        let srs = crate::canary::srs().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let params = dir.path().join("canary.params");
        srs.write(&params).unwrap();
        let len = std::fs::metadata(&params).unwrap().len();
        assert_eq!(declared_len(&params, Kind::Params).unwrap(), len);
        let vk = dir.path().join("canary.vk");
        let mut bytes = Vec::new();
        srs.vk.write(&mut bytes).unwrap();
        std::fs::write(&vk, &bytes).unwrap();
        assert_eq!(declared_len(&vk, Kind::Vk).unwrap(), bytes.len() as u64);
    }

    #[test]
    fn the_extension_names_the_layout() {
        assert_eq!(Kind::of("v28-x.params"), Some(Kind::Params));
        assert_eq!(Kind::of("v28-x.vk"), Some(Kind::Vk));
        assert_eq!(Kind::of("v28-x.meta"), None);
    }
}
