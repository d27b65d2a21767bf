//! Radix-2 NTTs over Fr on the GPU (kernels/ntt.cu), and the quotient polynomial H of Groth16.
//!
//! Data lives in device buffers of Montgomery-form limbs (8 `u32` per element, blstrs' own
//! layout). All entry points take natural-order input; the H pipeline keeps intermediate
//! results in bit-reversed order where that saves a permutation.

use anyhow::{ensure, Result};
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};

use super::device::{blocks, DevBuf, Gpu};
use super::limbs::{scalars_as_limbs, FR_LIMBS};

/// Largest supported domain: 2^28 elements (the 2^27 PoRep domain and one size above).
pub const MAX_LOG_N: u32 = 28;

/// ω for the domain of 2^log_n elements, as bellperson derives it.
pub fn omega(log_n: u32) -> Fr {
    let mut w = Fr::ROOT_OF_UNITY;
    for _ in log_n..Fr::S {
        w = w.square();
    }
    w
}

/// Host tables for c·x^i, i < count: lo[j] = x^j (j < 1024), hi[j] = c·x^(1024·j).
fn power_tables(x: Fr, c: Fr, count: u64) -> (Vec<Fr>, Vec<Fr>) {
    let mut lo = Vec::with_capacity(1024);
    let mut p = Fr::ONE;
    for _ in 0..1024 {
        lo.push(p);
        p *= x;
    }
    let step = p; // x^1024
    let n_hi = count.div_ceil(1024).max(1) as usize;
    let mut hi = Vec::with_capacity(n_hi);
    let mut q = c;
    for _ in 0..n_hi {
        hi.push(q);
        q *= step;
    }
    (hi, lo)
}

/// The passes of a transform of 2^log_n elements: (first stage, stages, log2 of the run of
/// low-index values a tile holds). Tiles hold 2^10 elements.
fn passes(log_n: u32) -> Vec<(u32, u32, u32)> {
    let mut out = Vec::new();
    let mut s = 0;
    while s < log_n {
        let lo = s.min(3);
        let k = (log_n - s).min(10 - lo);
        out.push((s, k, lo));
        s += k;
    }
    out
}

/// NTT state for one GPU: the twiddle table of the largest domain used so far.
#[derive(Default)]
pub struct Ntt {
    twiddles: Option<(u32, DevBuf<u32>)>,
}

impl Ntt {
    pub fn new() -> Ntt {
        Ntt::default()
    }

    /// Device bytes held by the twiddle table.
    pub fn resident_bytes(&self) -> usize {
        self.twiddles.as_ref().map_or(0, |(_, b)| b.bytes())
    }

    fn ensure_twiddles(&mut self, gpu: &Gpu, log_n: u32) -> Result<u32> {
        if let Some((log, _)) = &self.twiddles {
            if *log >= log_n {
                return Ok(*log);
            }
        }
        // Drop the smaller table first: its memory may be needed for the new one.
        self.twiddles = None;
        let log = log_n.max(1);
        let count = 1u64 << (log - 1);
        let (hi, lo) = power_tables(omega(log), Fr::ONE, count);
        let table = gpu.alloc::<u32>(count as usize * FR_LIMBS)?;
        let dhi = upload_scalars(gpu, &hi)?;
        let dlo = upload_scalars(gpu, &lo)?;
        gpu.launch(
            "gen_powers",
            blocks(count, 256)?,
            256,
            &[&table.ptr(), &count, &dhi.ptr(), &dlo.ptr()],
        )?;
        gpu.sync()?;
        self.twiddles = Some((log, table));
        Ok(log)
    }

    /// Butterfly passes in place: DIF (natural → bit-reversed) or DIT (bit-reversed →
    /// natural), with ω or ω^-1.
    fn transform(
        &mut self,
        gpu: &Gpu,
        data: &DevBuf<u32>,
        log_n: u32,
        dif: bool,
        inverse: bool,
    ) -> Result<()> {
        check_len(data, log_n)?;
        if log_n == 0 {
            return Ok(());
        }
        let tlog = self.ensure_twiddles(gpu, log_n)?;
        let tw = self
            .twiddles
            .as_ref()
            .map(|(_, b)| b.ptr())
            .unwrap_or_default();
        let mut list = passes(log_n);
        if dif {
            list.reverse();
        }
        let tw_shift = tlog - log_n;
        for (s, k, lo) in list {
            let grid = 1u32 << (log_n - k - lo);
            let block = (1u32 << (k + lo - 1)).min(512);
            gpu.launch(
                "ntt_pass",
                grid,
                block,
                &[
                    &data.ptr(),
                    &log_n,
                    &s,
                    &k,
                    &lo,
                    &tw,
                    &tw_shift,
                    &(dif as u32),
                    &(inverse as u32),
                ],
            )?;
        }
        Ok(())
    }

    fn bit_reverse(&self, gpu: &Gpu, data: &DevBuf<u32>, log_n: u32) -> Result<()> {
        let n = 1u64 << log_n;
        gpu.launch(
            "bit_reverse_permute",
            blocks(n, 256)?,
            256,
            &[&data.ptr(), &log_n],
        )
    }

    /// data[p] *= c·x^i, i = p (natural order) or bitrev(p).
    fn scale(
        &self,
        gpu: &Gpu,
        data: &DevBuf<u32>,
        log_n: u32,
        x: Fr,
        c: Fr,
        bitrev: bool,
    ) -> Result<()> {
        let n = 1u64 << log_n;
        let (hi, lo) = power_tables(x, c, n);
        let dhi = upload_scalars(gpu, &hi)?;
        let dlo = upload_scalars(gpu, &lo)?;
        gpu.launch(
            "scale_powers",
            blocks(n, 256)?,
            256,
            &[
                &data.ptr(),
                &log_n,
                &dhi.ptr(),
                &dlo.ptr(),
                &(bitrev as u32),
            ],
        )?;
        // The tables are freed on return: wait for the kernel that reads them first.
        gpu.sync()
    }

    /// Coefficients → evaluations on the domain.
    pub fn forward(&mut self, gpu: &Gpu, data: &DevBuf<u32>, log_n: u32) -> Result<()> {
        self.transform(gpu, data, log_n, true, false)?;
        self.bit_reverse(gpu, data, log_n)?;
        gpu.sync()
    }

    /// Evaluations on the domain → coefficients (includes the 1/n).
    pub fn inverse(&mut self, gpu: &Gpu, data: &DevBuf<u32>, log_n: u32) -> Result<()> {
        self.transform(gpu, data, log_n, true, true)?;
        self.bit_reverse(gpu, data, log_n)?;
        let ninv = n_inv(log_n);
        self.scale(gpu, data, log_n, Fr::ONE, ninv, false)?;
        gpu.sync()
    }

    /// Coefficients → evaluations on the coset g·⟨ω⟩ (g = Fr::MULTIPLICATIVE_GENERATOR).
    pub fn coset_forward(&mut self, gpu: &Gpu, data: &DevBuf<u32>, log_n: u32) -> Result<()> {
        check_len(data, log_n)?;
        self.scale(
            gpu,
            data,
            log_n,
            Fr::MULTIPLICATIVE_GENERATOR,
            Fr::ONE,
            false,
        )?;
        self.forward(gpu, data, log_n)
    }

    /// Evaluations on the coset → coefficients.
    pub fn coset_inverse(&mut self, gpu: &Gpu, data: &DevBuf<u32>, log_n: u32) -> Result<()> {
        self.transform(gpu, data, log_n, true, true)?;
        self.bit_reverse(gpu, data, log_n)?;
        self.scale(gpu, data, log_n, gen_inv(), n_inv(log_n), false)?;
        gpu.sync()
    }

    /// From evaluations → coset evaluations of one of a, b, c: iNTT, times g^i/n, NTT. The
    /// DIF inverse leaves bit-reversed coefficients, which is what the DIT forward wants.
    fn coset_evaluations(&mut self, gpu: &Gpu, data: &DevBuf<u32>, log_n: u32) -> Result<()> {
        self.transform(gpu, data, log_n, true, true)?;
        self.scale(
            gpu,
            data,
            log_n,
            Fr::MULTIPLICATIVE_GENERATOR,
            n_inv(log_n),
            true,
        )?;
        self.transform(gpu, data, log_n, false, false)
    }

    /// The coefficients of H = (a·b − c)/Z, as bellperson computes them: a, b, c hold the
    /// evaluations at the 2^log_n domain points (zero-padded); on return `a` holds H's
    /// coefficients in natural order (bellperson keeps the first n − 1), `b` and `c` are
    /// clobbered.
    pub fn h_quotient(
        &mut self,
        gpu: &Gpu,
        a: &DevBuf<u32>,
        b: &DevBuf<u32>,
        c: &DevBuf<u32>,
        log_n: u32,
    ) -> Result<()> {
        for d in [a, b, c] {
            self.coset_evaluations(gpu, d, log_n)?;
        }
        let n = 1u64 << log_n;
        // Z(x) = x^n − 1 takes the value g^n − 1 at every point of the coset.
        let z = Fr::MULTIPLICATIVE_GENERATOR.pow_vartime([n]) - Fr::ONE;
        let zinv = Option::<Fr>::from(z.invert())
            .ok_or_else(|| anyhow::anyhow!("Z vanishes on the coset"))?;
        let dz = upload_scalars(gpu, &[zinv])?;
        gpu.launch(
            "h_combine",
            blocks(n, 256)?,
            256,
            &[&a.ptr(), &b.ptr(), &c.ptr(), &dz.ptr(), &n],
        )?;
        self.transform(gpu, a, log_n, true, true)?;
        self.scale(gpu, a, log_n, gen_inv(), n_inv(log_n), true)?;
        self.bit_reverse(gpu, a, log_n)?;
        gpu.sync()
    }
}

fn n_inv(log_n: u32) -> Fr {
    // 2^log_n is a non-zero field element for log_n ≤ 28, so the inverse exists.
    Fr::from(1u64 << log_n).invert().unwrap_or(Fr::ZERO)
}

fn gen_inv() -> Fr {
    // The multiplicative generator is non-zero.
    Fr::MULTIPLICATIVE_GENERATOR.invert().unwrap_or(Fr::ZERO)
}

fn check_len(data: &DevBuf<u32>, log_n: u32) -> Result<()> {
    ensure!(
        log_n <= MAX_LOG_N,
        "NTT of 2^{log_n} exceeds the 2^{MAX_LOG_N} limit"
    );
    ensure!(
        data.len() >= (FR_LIMBS << log_n),
        "NTT buffer holds {} limbs, 2^{log_n} elements need {}",
        data.len(),
        FR_LIMBS << log_n
    );
    Ok(())
}

/// Copy scalars to a new device buffer.
pub fn upload_scalars(gpu: &Gpu, s: &[Fr]) -> Result<DevBuf<u32>> {
    let buf = gpu.alloc::<u32>(s.len() * FR_LIMBS)?;
    gpu.upload(&buf, 0, scalars_as_limbs(s))?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_cover_every_stage() {
        for log_n in 1..=28 {
            let p = passes(log_n);
            let mut next = 0;
            for (s, k, lo) in p {
                assert_eq!(s, next);
                assert!(lo <= s && k + lo <= 10 && k >= 1);
                next += k;
            }
            assert_eq!(next, log_n);
        }
    }

    #[test]
    fn omega_has_the_right_order() {
        let w = omega(10);
        assert_eq!(w.pow_vartime([1u64 << 10]), Fr::ONE);
        assert_ne!(w.pow_vartime([1u64 << 9]), Fr::ONE);
    }
}
