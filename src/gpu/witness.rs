//! A partition's witness on the device, from its packed form (`groth16::PackedWitness`,
//! `kernels/witness.cu`): the aux variables cross PCIe as two bitmaps and the values other
//! than zero and one (~90 MB for a 32 GiB partition instead of 4.2 GB of scalars), are expanded
//! by the GPU, and the A and B queries' scalars are selected there by the circuit's densities,
//! which stay resident with its recorded constraints. No host thread copies or selects
//! gigabytes of scalars.

use anyhow::{ensure, Context, Result};

use super::device::{Gpu, Lane};
use super::kernels::{self, blocks};
use super::limbs::{scalars_as_limbs, FR_LIMBS};
use super::memory::DevBuf;
use crate::groth16::{CompactValues, Density};

const BLOCK: u32 = 256;

/// Exclusive prefix counts of set bits, one per word: where each word's marked variables
/// start among all marked variables.
fn counts_before(words: &[u64]) -> Result<Vec<u32>> {
    let mut run = 0u64;
    let out: Vec<u32> = words
        .iter()
        .map(|w| {
            let here = run;
            run += w.count_ones() as u64;
            here
        })
        .map(|c| c as u32)
        .collect();
    ensure!(
        run <= u32::MAX as u64,
        "{run} marked variables: more than a device selection indexes"
    );
    Ok(out)
}

fn len32(n: usize) -> Result<u32> {
    u32::try_from(n).with_context(|| format!("{n} variables: more than a device witness holds"))
}

/// A density (which variables a query takes) on the device.
pub struct DeviceDensity {
    words: DevBuf<u64>,
    before: DevBuf<u32>,
    len: usize,
    count: usize,
}

impl DeviceDensity {
    pub fn bytes_for(density: &Density) -> usize {
        density.words().len() * (8 + 4)
    }

    pub fn upload(gpu: &Gpu, density: &Density) -> Result<DeviceDensity> {
        let words = gpu.alloc::<u64>(density.words().len())?;
        gpu.upload(&words, 0, density.words())?;
        let before = gpu.alloc::<u32>(density.words().len())?;
        gpu.upload(&before, 0, &counts_before(density.words())?)?;
        Ok(DeviceDensity {
            words,
            before,
            len: density.len(),
            count: density.count(),
        })
    }

    pub fn bytes(&self) -> usize {
        self.words.bytes() + self.before.bytes()
    }

    /// Variables marked.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Queue the selection of the marked scalars of `src` (one per variable of the density)
    /// into `out`, in order, from scalar `offset` on. On the main lane.
    pub fn select(
        &self,
        gpu: &Gpu,
        src: &DevBuf<u32>,
        out: &DevBuf<u32>,
        offset: usize,
    ) -> Result<()> {
        ensure!(
            src.len() >= self.len * FR_LIMBS && out.len() >= (offset + self.count) * FR_LIMBS,
            "device selection: {} variables from a buffer of {} scalars into {} at {offset}",
            self.len,
            src.len() / FR_LIMBS,
            out.len() / FR_LIMBS
        );
        if self.len == 0 {
            return Ok(());
        }
        let (n, offset) = (len32(self.len)?, len32(offset)?);
        kernels::WITNESS_SELECT.launch(
            gpu,
            blocks(n as u64, BLOCK)?,
            BLOCK,
            (
                src.ptr(),
                self.words.ptr(),
                self.before.ptr(),
                n,
                out.ptr(),
                offset,
            ),
        )
    }
}

/// `values` expanded on the device into a new buffer of `len` scalars (zero past the values).
/// The copies and the expansion are queued on the main lane; the host buffers may go when this
/// returns.
pub fn expand(gpu: &Gpu, values: &CompactValues, len: usize) -> Result<DevBuf<u32>> {
    ensure!(
        len >= values.len(),
        "device witness of {len} scalars for {} values",
        values.len()
    );
    let n = len32(values.len())?;
    let out = gpu.alloc::<u32>(len.max(1) * FR_LIMBS)?;
    if len > values.len() {
        gpu.memset_zero(&out)?;
    }
    if values.is_empty() {
        return Ok(out);
    }
    let upload_words = |words: &[u64]| -> Result<DevBuf<u64>> {
        let buf = gpu.alloc::<u64>(words.len())?;
        gpu.upload(&buf, 0, words)?;
        Ok(buf)
    };
    let ones = upload_words(values.ones_words())?;
    let others = upload_words(values.others_words())?;
    let before = gpu.alloc::<u32>(values.others_words().len())?;
    gpu.upload(&before, 0, &counts_before(values.others_words())?)?;
    let kept = gpu.alloc::<u32>(values.values().len().max(1) * FR_LIMBS)?;
    gpu.upload(&kept, 0, scalars_as_limbs(values.values()))?;
    kernels::WITNESS_EXPAND.launch(
        gpu,
        blocks(n as u64, BLOCK)?,
        BLOCK,
        (
            ones.ptr(),
            others.ptr(),
            before.ptr(),
            kept.ptr(),
            n,
            out.ptr(),
        ),
    )?;
    // The inputs of the launch are freed only once it has run.
    gpu.sync_lane(Lane::Main)?;
    Ok(out)
}

/// Device bytes `expand` holds for a while besides its output.
pub fn expand_scratch_bytes(values: &CompactValues) -> usize {
    values.ones_words().len() * (8 + 8 + 4) + values.values().len() * FR_LIMBS * 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_before_each_word_are_exclusive() {
        assert_eq!(
            counts_before(&[0b101, 0, u64::MAX, 1]).unwrap(),
            vec![0, 2, 2, 66]
        );
        assert!(counts_before(&[]).unwrap().is_empty());
    }
}
