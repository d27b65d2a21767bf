//! Radix-2 NTTs over Fr on the GPU (kernels/ntt.cu), and the quotient polynomial H of Groth16.
//!
//! Data lives in device buffers of Montgomery-form limbs (8 `u32` per element, blstrs' own
//! layout). All entry points take natural-order input; the H pipeline keeps intermediate
//! results in bit-reversed order where that saves a permutation.

use anyhow::{ensure, Result};
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};

use super::device::{Gpu, Lane};
use super::kernels::{self, blocks, POWER_LO_LOG};
use super::limbs::{scalars_as_limbs, FR_LIMBS};
use super::memory::{DevBuf, DevPtr};

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

/// Host tables for c·x^i, i < count, with L = 2^POWER_LO_LOG: lo[j] = x^j (j < L),
/// hi[j] = c·x^(L·j).
fn power_tables(x: Fr, c: Fr, count: u64) -> (Vec<Fr>, Vec<Fr>) {
    let lo_len = 1usize << POWER_LO_LOG;
    let mut lo = Vec::with_capacity(lo_len);
    let mut p = Fr::ONE;
    for _ in 0..lo_len {
        lo.push(p);
        p *= x;
    }
    let step = p; // x^L
    let n_hi = count.div_ceil(lo_len as u64).max(1) as usize;
    let mut hi = Vec::with_capacity(n_hi);
    let mut q = c;
    for _ in 0..n_hi {
        hi.push(q);
        q *= step;
    }
    (hi, lo)
}

/// Runs of 2^3 consecutive elements (256 bytes) per tile row. On an H200, runs of 1, 2 and 4
/// elements (fewer, longer passes) measured the same at 2^27.
const RUN_LOG: u32 = 3;

/// The passes of a transform of 2^log_n elements: (first stage, stages, log2 of the run of
/// low-index values a tile holds). Tiles hold 2^10 elements.
fn passes(log_n: u32, run_log: u32) -> Vec<(u32, u32, u32)> {
    let mut out = Vec::new();
    let mut s = 0;
    while s < log_n {
        // Runs of 2^run_log consecutive low-index values keep loads coalesced and leave room
        // for 10 − run_log stages per pass; the short last pass takes as many low bits as fit
        // instead, so that it still fills 1024-element tiles (a tile of a few elements per
        // block ran longer than a full pass).
        let k = (log_n - s).min(10 - s.min(run_log));
        let lo = s.min(10 - k);
        out.push((s, k, lo));
        s += k;
    }
    out
}

/// Entries of the stage-major twiddle table for transforms up to 2^log elements (see
/// kernels/ntt.cu): stage t < log holds `stage_len(t)` of them, so stage t starts at
/// `table_len(t)`.
fn table_len(log: u32) -> u64 {
    (1u64 << log) - 1 + u64::from(log)
}

/// Entries of stage t: w_t^e for e ≤ 2^t. The forward transform reads e < 2^t, the inverse
/// w_t^(2^t − e), e = 0 included (kernels/ntt.cu).
fn stage_len(t: u32) -> u64 {
    (1u64 << t) + 1
}

/// Device bytes of the twiddle table for transforms up to 2^log_n elements.
pub fn twiddle_bytes(log_n: u32) -> usize {
    table_len(log_n.max(1)) as usize * FR_LIMBS * 4
}

/// NTT state for one GPU: the twiddle table for the largest domain used so far, and the
/// power tables of the scalings used so far (a handful per domain size: n^-1, the coset
/// generator and its inverse). Keeping them resident means a scaling never waits for the host,
/// so the transforms of H can be queued while the host copies the next input.
///
/// A streamed start lets go of the twiddle table once H's transforms are done
/// (`release_twiddles`): at 2^27 it is 4.3 GB, which a small GPU needs for its MSMs' pieces
/// more than the start needs the table kept. It is made again on the device from its seeds
/// (5 MB, kept), in a few kernels and without the host.
#[derive(Default)]
pub struct Ntt {
    twiddles: Option<(u32, DevBuf<u32>)>,
    seeds: Option<TwiddleSeeds>,
    powers: Vec<PowerTable>,
}

/// The (hi, lo) power tables every stage of the twiddle table is made from (`power_tables`),
/// for transforms up to 2^log elements, in one device buffer: stage t's at `at[t]`.
struct TwiddleSeeds {
    log: u32,
    at: Vec<(usize, usize)>,
    buf: DevBuf<u32>,
}

impl TwiddleSeeds {
    fn upload(gpu: &Gpu, log: u32) -> Result<TwiddleSeeds> {
        let mut all = Vec::new();
        let mut at = Vec::with_capacity(log as usize);
        for t in 0..log {
            // Stage t: w_t^e for e ≤ 2^t, w_t = omega(t + 1).
            let (hi, lo) = power_tables(omega(t + 1), Fr::ONE, stage_len(t));
            at.push((all.len(), all.len() + hi.len()));
            all.extend(hi);
            all.extend(lo);
        }
        Ok(TwiddleSeeds {
            log,
            at,
            buf: upload_scalars(gpu, &all)?,
        })
    }
}

/// Device tables for c·x^i, i < 2^log_n (see `power_tables`).
struct PowerTable {
    key: (u32, [u8; 32], [u8; 32]),
    hi: DevBuf<u32>,
    lo: DevBuf<u32>,
}

impl Ntt {
    pub fn new() -> Ntt {
        Ntt::default()
    }

    /// Device addresses of the (hi, lo) tables for c·x^i, i < 2^log_n, made on first use.
    /// The upload goes over the copy lane and the main lane waits for it, so queued work on
    /// the main lane is not waited for.
    fn power_table(
        &mut self,
        gpu: &Gpu,
        log_n: u32,
        x: Fr,
        c: Fr,
    ) -> Result<(DevPtr<u32>, DevPtr<u32>)> {
        let key = (log_n, x.to_repr(), c.to_repr());
        if let Some(p) = self.powers.iter().find(|p| p.key == key) {
            return Ok((p.hi.ptr(), p.lo.ptr()));
        }
        let (hi, lo) = power_tables(x, c, 1u64 << log_n);
        let table = PowerTable {
            key,
            hi: upload_scalars_in(gpu, Lane::Copy, &hi)?,
            lo: upload_scalars_in(gpu, Lane::Copy, &lo)?,
        };
        gpu.wait_for(Lane::Main, Lane::Copy)?;
        let ptrs = (table.hi.ptr(), table.lo.ptr());
        self.powers.push(table);
        Ok(ptrs)
    }

    fn ensure_twiddles(&mut self, gpu: &Gpu, log_n: u32) -> Result<()> {
        if let Some((log, _)) = &self.twiddles {
            if *log >= log_n {
                return Ok(());
            }
        }
        // Drop the smaller table first: its memory may be needed for the new one.
        self.twiddles = None;
        let log = log_n.max(1);
        if self.seeds.as_ref().is_none_or(|s| s.log < log) {
            self.seeds = None;
            self.seeds = Some(TwiddleSeeds::upload(gpu, log)?);
        }
        let seeds = self
            .seeds
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("no twiddle seeds after making them"))?;
        let table = gpu.alloc::<u32>(table_len(log) as usize * FR_LIMBS)?;
        for (t, &(hi, lo)) in seeds.at.iter().enumerate().take(log as usize) {
            // Stage t: w_t^e for e ≤ 2^t at offset table_len(t).
            let count = stage_len(t as u32);
            let out = table.at(table_len(t as u32) as usize * FR_LIMBS);
            kernels::GEN_POWERS.launch(
                gpu,
                blocks(count, 256)?,
                256,
                (
                    out,
                    count,
                    seeds.buf.at(hi * FR_LIMBS),
                    seeds.buf.at(lo * FR_LIMBS),
                ),
            )?;
        }
        // Queued on the main lane like every transform after it: nothing to wait for here.
        self.twiddles = Some((log, table));
        Ok(())
    }

    /// Lets go of the twiddle table, which the next transform makes again from the kept seeds.
    /// Waits for the main lane first: a transform queued there may still read the table.
    pub fn release_twiddles(&mut self, gpu: &Gpu) -> Result<()> {
        if self.twiddles.is_some() {
            gpu.sync_lane(super::device::Lane::Main)?;
            self.twiddles = None;
        }
        Ok(())
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
        self.ensure_twiddles(gpu, log_n)?;
        let tw = self
            .twiddles
            .as_ref()
            .map(|(_, b)| b.ptr())
            .ok_or_else(|| anyhow::anyhow!("no twiddle table after ensure_twiddles"))?;
        let mut list = passes(log_n, RUN_LOG);
        if dif {
            list.reverse();
        }
        for (s, k, lo) in list {
            let grid = 1u32 << (log_n - k - lo);
            // One thread per four elements (a radix-4 step), at least a warp.
            let block = (1u32 << (k + lo)).div_ceil(4).clamp(32, 256);
            kernels::NTT_PASS.launch(
                gpu,
                grid,
                block,
                (data.ptr(), s, k, lo, tw, dif as u32, inverse as u32),
            )?;
        }
        Ok(())
    }

    fn bit_reverse(&self, gpu: &Gpu, data: &DevBuf<u32>, log_n: u32) -> Result<()> {
        if log_n >= 8 {
            // One block per value of the middle index bits (kernels/ntt.cu).
            return kernels::BIT_REVERSE_TILES.launch(
                gpu,
                1u32 << (log_n - 8),
                256,
                (data.ptr(), log_n),
            );
        }
        let n = 1u64 << log_n;
        kernels::BIT_REVERSE_PERMUTE.launch(gpu, blocks(n, 256)?, 256, (data.ptr(), log_n))
    }

    /// data[p] *= c·x^i, i = p (natural order) or bitrev(p). Queued on the main lane.
    fn scale(
        &mut self,
        gpu: &Gpu,
        data: &DevBuf<u32>,
        log_n: u32,
        x: Fr,
        c: Fr,
        bitrev: bool,
    ) -> Result<()> {
        let n = 1u64 << log_n;
        let (hi, lo) = self.power_table(gpu, log_n, x, c)?;
        kernels::SCALE_POWERS.launch(
            gpu,
            blocks(n, 256)?,
            256,
            (data.ptr(), log_n, hi, lo, bitrev as u32),
        )
    }

    /// Coefficients → evaluations on the domain.
    pub fn forward(&mut self, gpu: &Gpu, data: &DevBuf<u32>, log_n: u32) -> Result<()> {
        self.transform(gpu, data, log_n, true, false)?;
        self.bit_reverse(gpu, data, log_n)?;
        gpu.sync()
    }

    /// Coefficients → evaluations on the domain, left in bit-reversed order (the butterflies
    /// alone: what `c2q bench gpu` compares with sppark's bit-reversed-out transform).
    pub fn forward_bit_reversed(
        &mut self,
        gpu: &Gpu,
        data: &DevBuf<u32>,
        log_n: u32,
    ) -> Result<()> {
        self.transform(gpu, data, log_n, true, false)?;
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

    /// From evaluations → coset evaluations of a or b: iNTT, times g^i/n, NTT. The DIF inverse
    /// leaves bit-reversed coefficients, which is what the DIT forward wants. Queued on the
    /// main lane, not waited for: the first step of H (c takes `c_coefficients` instead).
    pub fn coset_evaluations(&mut self, gpu: &Gpu, data: &DevBuf<u32>, log_n: u32) -> Result<()> {
        check_len(data, log_n)?;
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

    /// C's part of H, from its evaluations: its coefficients, bit-reversed and not yet divided
    /// by n (`h_from_coset_product` does both). One inverse transform: bellperson takes C to
    /// the coset and back with A·B, but the way back is linear and undoes C's way there
    /// (`groth16::ntt::h_coefficients` has the identity). Queued on the main lane, not waited
    /// for.
    pub fn c_coefficients(&mut self, gpu: &Gpu, c: &DevBuf<u32>, log_n: u32) -> Result<()> {
        self.transform(gpu, c, log_n, true, true)
    }

    /// The last step of H, after `coset_evaluations` of a and b and `c_coefficients` of c:
    /// H's coefficients in a, in natural order. Queued on the main lane, not waited for.
    pub fn h_from_coset_evaluations(
        &mut self,
        gpu: &Gpu,
        a: &DevBuf<u32>,
        b: &DevBuf<u32>,
        c: &DevBuf<u32>,
        log_n: u32,
    ) -> Result<()> {
        self.coset_multiply(gpu, a, b, log_n)?;
        self.h_from_coset_product(gpu, a, c, log_n)
    }

    /// a = a·b, elementwise: the coset evaluations of A·B, so that b can be freed before c is
    /// on the device (H in two domains of memory instead of three). Queued, not waited for.
    pub fn coset_multiply(
        &mut self,
        gpu: &Gpu,
        a: &DevBuf<u32>,
        b: &DevBuf<u32>,
        log_n: u32,
    ) -> Result<()> {
        for d in [a, b] {
            check_len(d, log_n)?;
        }
        let n = 1u64 << log_n;
        kernels::H_MUL.launch(gpu, blocks(n, 256)?, 256, (a.ptr(), b.ptr(), n))
    }

    /// The last step of H after `coset_multiply` and `c_coefficients`: A·B's coefficients
    /// from its coset evaluations (inverse transform, times g^-i, both bit-reversed), minus
    /// C's, times 1/(n·Z) on the coset, then into natural order. Queued, not waited for.
    pub fn h_from_coset_product(
        &mut self,
        gpu: &Gpu,
        ab: &DevBuf<u32>,
        c: &DevBuf<u32>,
        log_n: u32,
    ) -> Result<()> {
        for d in [ab, c] {
            check_len(d, log_n)?;
        }
        let n = 1u64 << log_n;
        self.transform(gpu, ab, log_n, true, true)?;
        self.scale(gpu, ab, log_n, gen_inv(), Fr::ONE, true)?;
        let dz = self.quotient_factor(gpu, log_n)?;
        kernels::H_SUB_DIV.launch(gpu, blocks(n, 256)?, 256, (ab.ptr(), c.ptr(), dz, n))?;
        self.bit_reverse(gpu, ab, log_n)
    }

    /// Device address of 1/(n·Z) on the coset, kept as a one-entry power table: Z(x) = x^n − 1
    /// takes the value g^n − 1 at every point of it, and both transforms' 1/n is applied here.
    fn quotient_factor(&mut self, gpu: &Gpu, log_n: u32) -> Result<DevPtr<u32>> {
        let z = Fr::MULTIPLICATIVE_GENERATOR.pow_vartime([1u64 << log_n]) - Fr::ONE;
        let zinv = Option::<Fr>::from(z.invert())
            .ok_or_else(|| anyhow::anyhow!("Z vanishes on the coset"))?;
        Ok(self.power_table(gpu, 0, Fr::ONE, zinv * n_inv(log_n))?.0)
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
        for d in [a, b] {
            self.coset_evaluations(gpu, d, log_n)?;
        }
        self.c_coefficients(gpu, c, log_n)?;
        self.h_from_coset_evaluations(gpu, a, b, c, log_n)?;
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
    upload_scalars_in(gpu, Lane::Main, s)
}

/// Copy scalars to a new device buffer over `lane`.
pub fn upload_scalars_in(gpu: &Gpu, lane: Lane, s: &[Fr]) -> Result<DevBuf<u32>> {
    let buf = gpu.alloc::<u32>(s.len() * FR_LIMBS)?;
    gpu.upload_in(lane, &buf, 0, scalars_as_limbs(s))?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_cover_every_stage() {
        for (log_n, run) in (1..=28).flat_map(|l| (0..=3).map(move |r| (l, r))) {
            let p = passes(log_n, run);
            let mut next = 0;
            for (s, k, lo) in p {
                assert_eq!(s, next);
                assert!(lo <= s && k + lo <= 10 && k >= 1);
                next += k;
            }
            assert_eq!(next, log_n);
        }
    }

    /// Runs the pass plan through a host model of `ntt_pass` (same tile, butterfly and
    /// twiddle index arithmetic as kernels/ntt.cu) and compares with the CPU transform, so
    /// that every (s, k, lo) the plan produces is exercised without a GPU.
    #[test]
    fn pass_plan_matches_the_cpu_transform() {
        use crate::groth16::ntt as cpu_ntt;
        use rand::SeedableRng;

        fn model_pass(data: &mut [Fr], tw: &[Vec<Fr>], plan: (u32, u32, u32), dif: bool) {
            let (s, k, lo_log) = plan;
            let elems = 1usize << (k + lo_log);
            let lo_mask = (1usize << lo_log) - 1;
            let lo_groups = (1usize << s) >> lo_log;
            let grid = data.len() / elems;
            for blk in 0..grid {
                let hi = blk / lo_groups;
                let lo_base = (blk % lo_groups) << lo_log;
                let gi =
                    |f: usize| lo_base + (f & lo_mask) + ((f >> lo_log) << s) + (hi << (s + k));
                let mut tile: Vec<Fr> = (0..elems).map(|f| data[gi(f)]).collect();
                for step in 0..k {
                    let u = if dif { k - 1 - step } else { step };
                    let t = s + u;
                    let low = (1usize << u) - 1;
                    for q in 0..elems / 2 {
                        let lo_off = q & lo_mask;
                        let p = q >> lo_log;
                        let j0 = ((p >> u) << (u + 1)) | (p & low);
                        let f0 = (j0 << lo_log) | lo_off;
                        let f1 = f0 + (1 << (u + lo_log));
                        let imod = lo_base + lo_off + ((j0 & low) << s);
                        let w = tw[t as usize][imod];
                        let (x, y) = (tile[f0], tile[f1]);
                        if dif {
                            tile[f0] = x + y;
                            tile[f1] = (x - y) * w;
                        } else {
                            let y = y * w;
                            tile[f0] = x + y;
                            tile[f1] = x - y;
                        }
                    }
                }
                for (f, v) in tile.into_iter().enumerate() {
                    data[gi(f)] = v;
                }
            }
        }
        fn bitrev(v: &mut [Fr], log_n: u32) {
            for i in 0..v.len() {
                let j = if log_n == 0 {
                    0
                } else {
                    (i as u32).reverse_bits() >> (32 - log_n)
                } as usize;
                if i < j {
                    v.swap(i, j);
                }
            }
        }

        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        for log_n in [1u32, 3, 10, 11, 12, 13, 14, 17] {
            let n = 1usize << log_n;
            // Stage t: w_t^e, e < 2^t, with w_t = omega(t + 1): the device table's contents.
            let tw: Vec<Vec<Fr>> = (0..log_n)
                .map(|t| {
                    let w = omega(t + 1);
                    let mut p = Fr::ONE;
                    (0..1usize << t)
                        .map(|_| {
                            let v = p;
                            p *= w;
                            v
                        })
                        .collect()
                })
                .collect();
            let values: Vec<Fr> = (0..n).map(|_| Fr::random(&mut rng)).collect();
            let mut want = values.clone();
            cpu_ntt::ntt(&mut want, omega(log_n));

            for run in 0..=3 {
                // Forward as the GPU does it: DIF passes (last stage first), then bit reversal.
                let mut got = values.clone();
                for plan in passes(log_n, run).into_iter().rev() {
                    model_pass(&mut got, &tw, plan, true);
                }
                bitrev(&mut got, log_n);
                assert!(
                    got == want,
                    "DIF plan of 2^{log_n}, run {run}: {:?}",
                    passes(log_n, run)
                );

                // DIT: bit-reversed input to natural output.
                let mut got = values.clone();
                bitrev(&mut got, log_n);
                for plan in passes(log_n, run) {
                    model_pass(&mut got, &tw, plan, false);
                }
                assert!(
                    got == want,
                    "DIT plan of 2^{log_n}, run {run}: {:?}",
                    passes(log_n, run)
                );
            }
        }
    }

    #[test]
    fn omega_has_the_right_order() {
        let w = omega(10);
        assert_eq!(w.pow_vartime([1u64 << 10]), Fr::ONE);
        assert_ne!(w.pow_vartime([1u64 << 9]), Fr::ONE);
    }
}
