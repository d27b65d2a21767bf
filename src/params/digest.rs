//! The digest Filecoin's tools publish for a parameter file: BLAKE2b-512 (unkeyed, 64-byte
//! output) of the whole file, of which the first 16 bytes are kept, written as 32 lowercase hex
//! digits.
//!
//! That is what storage-proofs-core's `verify_production_entry` compares (`to_hex()[..32]` of a
//! default `blake2b_simd` state), what filecoin-proofs' `get_digest_for_file_within_cache`
//! returns, and what go-paramfetch's `checkFile` computes (`hex(blake2b.New512().Sum()[:16])`).
//! It is not BLAKE2b with a 16-byte output, whose parameter block differs.

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Deserializer};

/// Bytes of the BLAKE2b-512 hash that the manifest keeps.
const KEPT: usize = 16;

/// A manifest digest: the first 16 bytes of a file's BLAKE2b-512.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest([u8; KEPT]);

impl Digest {
    /// Parse the manifest's form (32 hex digits).
    pub fn from_hex(text: &str) -> Result<Digest> {
        let bytes = hex::decode(text).with_context(|| format!("digest {text:?} is not hex"))?;
        let kept: [u8; KEPT] = bytes.try_into().map_err(|b: Vec<u8>| {
            anyhow::anyhow!(
                "digest {text:?} has {} bytes, a manifest digest has {KEPT}",
                b.len()
            )
        })?;
        Ok(Digest(kept))
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({self})")
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Digest::from_hex(&text).map_err(|e| serde::de::Error::custom(format!("{e:#}")))
    }
}

/// A digest computed as bytes go by (a download, or a file read in pieces).
#[derive(Clone)]
pub struct Hasher(blake2b_simd::State);

impl Default for Hasher {
    fn default() -> Self {
        // `blake2b_simd::State::new()`: unkeyed, 64-byte output, exactly the tools' hash.
        Hasher(blake2b_simd::State::new())
    }
}

impl Hasher {
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub fn finish(&self) -> Digest {
        let hash = self.0.finalize();
        let mut kept = [0u8; KEPT];
        kept.copy_from_slice(&hash.as_bytes()[..KEPT]);
        Digest(kept)
    }
}

/// Read block size: large enough that hashing, not system calls, sets the pace.
const BLOCK: usize = 4 << 20;

/// Hash a file's first `len` bytes (all of it when `None`) into `hasher`, calling `progress`
/// with the bytes read so far after each block.
pub fn hash_file(
    path: &Path,
    len: Option<u64>,
    hasher: &mut Hasher,
    progress: &mut dyn FnMut(u64),
) -> Result<u64> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut reader = file.take(len.unwrap_or(u64::MAX));
    let mut buf = vec![0u8; BLOCK];
    let mut done = 0u64;
    loop {
        let n = reader
            .read(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        done += n as u64;
        progress(done);
    }
    Ok(done)
}

/// The manifest digest of a whole file.
pub fn digest_file(path: &Path, progress: &mut dyn FnMut(u64)) -> Result<Digest> {
    let mut hasher = Hasher::default();
    hash_file(path, None, &mut hasher, progress)?;
    Ok(hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_blake2b_512_truncated_to_16_bytes() {
        // RFC 7693, appendix A: BLAKE2b-512("abc") = ba80a53f981c4d0d6a2797b69f12f6e9 4c212f14…
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("abc");
        std::fs::write(&path, b"abc").unwrap();
        let digest = digest_file(&path, &mut |_| {}).unwrap();
        assert_eq!(digest.to_string(), "ba80a53f981c4d0d6a2797b69f12f6e9");
        // A 16-byte BLAKE2b output would be another value altogether.
        let short = blake2b_simd::Params::new().hash_length(16).hash(b"abc");
        assert_ne!(short.to_hex().as_str(), digest.to_string());
    }

    #[test]
    fn hashing_in_pieces_equals_hashing_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let mut h = Hasher::default();
        assert_eq!(
            hash_file(&path, Some(4_000), &mut h, &mut |_| {}).unwrap(),
            4_000
        );
        h.update(&bytes[4_000..]);
        assert_eq!(h.finish(), digest_file(&path, &mut |_| {}).unwrap());
    }

    #[test]
    fn manifest_digests_parse_and_print_back() {
        let d = Digest::from_hex("434fb1338ecfaf0f59256f30dde4968f").unwrap();
        assert_eq!(d.to_string(), "434fb1338ecfaf0f59256f30dde4968f");
        assert!(Digest::from_hex("434fb133").is_err());
        assert!(Digest::from_hex("zz4fb1338ecfaf0f59256f30dde4968f").is_err());
    }
}
