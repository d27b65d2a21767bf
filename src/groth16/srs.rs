//! The structured reference string: Filecoin `.params` files, read and written.
//!
//! Layout (bellperson's, all integers big-endian u32, points uncompressed):
//! verifying key (α₁, β₁, β₂, γ₂, δ₁, δ₂, IC count, IC points), then the H, L, A, B₁ (G1) and
//! B₂ (G2) point sets, each preceded by its count.

use super::pins::Pins;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{bail, ensure, Context, Result};
use blstrs::{G1Affine, G2Affine};
use rayon::prelude::*;

use super::VerifyingKey;

const G1_BYTES: usize = 96;
const G2_BYTES: usize = 192;

/// The name of one SRS, the same wherever c2q keeps track of it: the memory gate's reservation
/// for parameters it holds, the process's cache of decoded parameters, and the copies resident
/// on a GPU. A job kind makes the keys of its parameters (`porep::srs_key`, `canary::srs_key`);
/// parameters made for one purpose (a check, a benchmark) name themselves.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SrsKey(Arc<str>);

impl SrsKey {
    pub fn new(name: impl AsRef<str>) -> SrsKey {
        SrsKey(Arc::from(name.as_ref()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for SrsKey {
    fn from(name: &str) -> SrsKey {
        SrsKey::new(name)
    }
}

impl std::fmt::Display for SrsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One circuit's proving parameters, decoded into memory.
pub struct Srs {
    /// Page-locking of the points for GPU copies: dropped first (fields drop in order), before
    /// the points it refers to.
    pub pins: Pins,
    /// Which parameters these are.
    pub key: SrsKey,
    pub vk: VerifyingKey,
    pub h: Vec<G1Affine>,
    pub l: Vec<G1Affine>,
    pub a: Vec<G1Affine>,
    pub b_g1: Vec<G1Affine>,
    pub b_g2: Vec<G2Affine>,
}

impl std::fmt::Debug for Srs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Srs")
            .field("key", &self.key)
            .field("ic", &self.vk.ic.len())
            .field("h", &self.h.len())
            .field("l", &self.l.len())
            .field("a", &self.a.len())
            .field("b_g1", &self.b_g1.len())
            .field("b_g2", &self.b_g2.len())
            .finish()
    }
}

impl Srs {
    /// The same parameters as bellperson's type, for reference proofs with its `create_proof`
    /// (the identity tests, in the crate and in `tests/`).
    pub fn to_bellperson(&self) -> bellperson::groth16::Parameters<blstrs::Bls12> {
        bellperson::groth16::Parameters {
            vk: self.vk.clone(),
            h: Arc::new(self.h.clone()),
            l: Arc::new(self.l.clone()),
            a: Arc::new(self.a.clone()),
            b_g1: Arc::new(self.b_g1.clone()),
            b_g2: Arc::new(self.b_g2.clone()),
        }
    }

    /// Bytes this SRS takes in memory once decoded.
    pub fn resident_bytes(&self) -> u64 {
        let g1 = self.h.len() + self.l.len() + self.a.len() + self.b_g1.len();
        (g1 * std::mem::size_of::<G1Affine>() + self.b_g2.len() * std::mem::size_of::<G2Affine>())
            as u64
    }

    /// Read a `.params` file, the parameters named `key`: memory-mapped, point sets decoded in
    /// parallel. Every length is checked against the file's size before anything is allocated.
    pub fn read(path: &Path, key: SrsKey) -> Result<Srs> {
        let file = File::open(path)
            .with_context(|| format!("cannot open parameter file {}", path.display()))?;
        // SAFETY: the map is read-only and dropped before this function returns; parameter
        // files are not modified while in use.
        let map = unsafe { memmap2::Mmap::map(&file) }
            .with_context(|| format!("cannot map parameter file {}", path.display()))?;
        let _ = map.advise(memmap2::Advice::Sequential);
        // The file's pages count in this process's memory while they are mapped in: without
        // this a 47 GB file would briefly hold twice its size (pages and decoded points).
        let release = |offset: usize, len: usize| {
            // SAFETY: a read-only shared mapping of a file nobody modifies while it is in use:
            // dropping its pages only means a later read faults them in again from the file,
            // and the decoder never reads a released range again.
            let _ = unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len)
            };
        };
        Self::decode_releasing(&map, key, &release)
            .with_context(|| format!("parameter file {} is truncated or corrupt", path.display()))
    }

    /// Decode parameters from bytes in bellperson's layout.
    pub fn decode(bytes: &[u8], key: impl Into<SrsKey>) -> Result<Srs> {
        Self::decode_releasing(bytes, key.into(), &|_, _| {})
    }

    /// Decode, telling `release` each byte range (offset, length) of point data once it is
    /// decoded and no longer read.
    fn decode_releasing(bytes: &[u8], key: SrsKey, release: &dyn Fn(usize, usize)) -> Result<Srs> {
        let mut cursor = Cursor {
            bytes,
            pos: 0,
            release,
        };
        let vk_start = cursor.pos;
        cursor.take(G1_BYTES * 2 + G2_BYTES * 2 + G1_BYTES + G2_BYTES)?;
        let ic_len = cursor.len("IC", G1_BYTES)?;
        cursor.take(ic_len * G1_BYTES)?;
        let vk = VerifyingKey::read(&bytes[vk_start..cursor.pos])
            .context("verifying key does not decode")?;

        let h = cursor.points("H", G1_BYTES, decode_g1)?;
        let l = cursor.points("L", G1_BYTES, decode_g1)?;
        let a = cursor.points("A", G1_BYTES, decode_g1)?;
        let b_g1 = cursor.points("B in G1", G1_BYTES, decode_g1)?;
        let b_g2 = cursor.points("B in G2", G2_BYTES, decode_g2)?;
        ensure!(
            cursor.pos == bytes.len(),
            "{} unexpected bytes after the last point set",
            bytes.len() - cursor.pos
        );
        Ok(Srs {
            pins: Default::default(),
            key,
            vk,
            h,
            l,
            a,
            b_g1,
            b_g2,
        })
    }

    /// Write in bellperson's layout, so that filecoin-proofs and bellperson read it.
    pub fn write(&self, path: &Path) -> Result<()> {
        let file =
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        let mut w = BufWriter::with_capacity(1 << 22, file);
        self.vk.write(&mut w)?;
        write_g1s(&mut w, &self.h)?;
        write_g1s(&mut w, &self.l)?;
        write_g1s(&mut w, &self.a)?;
        write_g1s(&mut w, &self.b_g1)?;
        w.write_all(&(self.b_g2.len() as u32).to_be_bytes())?;
        for chunk in self.b_g2.chunks(1 << 16) {
            let bytes: Vec<u8> = chunk
                .par_iter()
                .flat_map_iter(|p| p.to_uncompressed().as_ref().to_vec())
                .collect();
            w.write_all(&bytes)?;
        }
        w.flush()
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }
}

fn write_g1s(w: &mut impl Write, points: &[G1Affine]) -> Result<()> {
    w.write_all(&(points.len() as u32).to_be_bytes())?;
    for chunk in points.chunks(1 << 16) {
        let bytes: Vec<u8> = chunk
            .par_iter()
            .flat_map_iter(|p| p.to_uncompressed().as_ref().to_vec())
            .collect();
        w.write_all(&bytes)?;
    }
    Ok(())
}

/// Points are decoded without the subgroup check (as bellperson does for mapped parameters:
/// it would cost minutes on a large file), but each must be on the curve, which catches
/// corruption. A point that is off the subgroup can only produce a proof that fails the
/// verification every proof goes through before it leaves.
fn decode_g1(bytes: &[u8]) -> Option<G1Affine> {
    let raw: &[u8; G1_BYTES] = bytes.try_into().ok()?;
    Option::from(G1Affine::from_uncompressed_unchecked(raw))
}

fn decode_g2(bytes: &[u8]) -> Option<G2Affine> {
    let raw: &[u8; G2_BYTES] = bytes.try_into().ok()?;
    Option::from(G2Affine::from_uncompressed_unchecked(raw))
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    release: &'a dyn Fn(usize, usize),
}

/// Point data decoded between two releases of the bytes read (64 MiB).
const DECODE_PIECE_BYTES: usize = 64 << 20;

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            bail!(
                "needs {} bytes at offset {}, the file has {}",
                n,
                self.pos,
                self.bytes.len()
            );
        };
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// A count, checked against what is left of the file.
    fn len(&mut self, what: &str, item: usize) -> Result<usize> {
        let raw = self
            .take(4)
            .with_context(|| format!("missing the {what} count"))?;
        let n = u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize;
        let left = self.bytes.len() - self.pos;
        ensure!(
            n.saturating_mul(item) <= left,
            "{what} count {n} needs {} bytes, only {left} are left",
            n.saturating_mul(item)
        );
        Ok(n)
    }

    fn points<T: Send>(
        &mut self,
        what: &str,
        item: usize,
        decode: fn(&[u8]) -> Option<T>,
    ) -> Result<Vec<T>> {
        let n = self.len(what, item)?;
        let start = self.pos;
        let raw = self.take(n * item)?;
        let per_piece = (DECODE_PIECE_BYTES / item).max(1);
        let mut points = Vec::with_capacity(n);
        for (k, piece) in raw.chunks(per_piece * item).enumerate() {
            let first = k * per_piece;
            let decoded: Vec<T> = piece
                .par_chunks_exact(item)
                .enumerate()
                .map(|(i, b)| {
                    decode(b).with_context(|| {
                        format!(
                            "{what} point {} (offset {}) is not a valid curve point",
                            first + i,
                            start + (first + i) * item
                        )
                    })
                })
                .collect::<Result<_>>()?;
            points.extend(decoded);
            (self.release)(start + first * item, piece.len());
        }
        Ok(points)
    }
}

/// Parameters are large and slow to decode: each is loaded once per process and shared.
#[derive(Default)]
pub struct SrsCache {
    entries: Mutex<HashMap<SrsKey, Arc<OnceLock<Arc<Srs>>>>>,
}

impl SrsCache {
    pub fn global() -> &'static SrsCache {
        static CACHE: OnceLock<SrsCache> = OnceLock::new();
        CACHE.get_or_init(SrsCache::default)
    }

    /// The SRS named `key`, loaded from `path` on first use. Concurrent callers for the same
    /// key wait for one load; a failed load is not cached, so a fixed file is picked up next
    /// time.
    pub fn get(&self, key: &SrsKey, path: &Path) -> Result<Arc<Srs>> {
        self.get_or_make(key, || Srs::read(path, key.clone()))
    }

    /// The SRS named `key`, made by `make` on first use (parameters generated in-process).
    pub fn get_or_make(
        &self,
        key: &SrsKey,
        make: impl FnOnce() -> Result<Srs>,
    ) -> Result<Arc<Srs>> {
        let slot = {
            let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            entries.entry(key.clone()).or_default().clone()
        };
        if let Some(srs) = slot.get() {
            return Ok(srs.clone());
        }
        // Holding the slot's lock while loading would need a OnceLock::get_or_try_init; a
        // duplicate load on a race costs time, never correctness.
        let srs = Arc::new(make()?);
        Ok(slot.get_or_init(|| srs).clone())
    }

    /// Forget the SRS named `key` (its memory is freed once no job holds it); the next use
    /// loads it again.
    pub fn unload(&self, key: &SrsKey) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.remove(key);
    }
}

/// Release a circuit's parameters from the process: its SRS and its recorded constraints.
pub fn unload_params(key: &SrsKey) {
    SrsCache::global().unload(key);
    super::R1csCache::global().unload(key);
}
