//! G1 multi-scalar multiplication on the GPU (kernels/msm.cu): Σ s_i·P_i with scalars in
//! Montgomery form and affine points, both as blstrs lays them out.
//!
//! Zeros are skipped and ones are summed without any window work (PoRep witnesses are ~51 %
//! zeros and ~47 % ones); the remaining scalars go through Pippenger with signed windows and a
//! counting sort by bucket on the GPU; large windows first add points pairwise in affine
//! coordinates with batched inversions. The few window sums are combined on the host.

use anyhow::{ensure, Result};
use blstrs::{G1Affine, G1Projective, Scalar as Fr};
use group::Group;

use super::device::{blocks, DevBuf, Gpu};
use super::limbs::{
    affine_as_limbs, jacobian_from_limbs, scalars_as_limbs, AFFINE_LIMBS, FR_LIMBS, JACOBIAN_LIMBS,
};

/// Limbs of an XYZZ accumulator (4 coordinates of 12 limbs).
const XYZZ_LIMBS: usize = 48;
/// Limbs of one Fp element.
const FP_LIMBS: usize = 12;
/// Sorted entries per accumulation thread, for m entries per window: long enough that few
/// buckets straddle chunks at 2^27 (each straddle costs a general addition in
/// `msm_bucket_fix`), short enough to keep every SM busy at small sizes (measured on an H200:
/// 128 is best at 2^27, 32 at 2^20).
fn chunk_len(m: u32) -> u32 {
    (m >> 20).clamp(32, 128).next_power_of_two()
}
/// Buckets per running-sum segment in the window reduction.
const SEGMENT: u32 = 32;
/// Largest supported MSM: point indices keep one bit for the sign.
pub const MAX_POINTS: usize = 1 << 30;

/// Phase timings for `C2Q_MSM_TRACE=1` (diagnostics): each phase is synchronised and timed
/// on the host, and the totals are printed to stderr when the MSM ends.
struct Trace {
    on: bool,
    last: std::time::Instant,
    phases: Vec<(&'static str, f64)>,
}

impl Trace {
    fn new() -> Trace {
        Trace {
            on: std::env::var_os("C2Q_MSM_TRACE").is_some(),
            last: std::time::Instant::now(),
            phases: Vec::new(),
        }
    }

    fn mark(&mut self, gpu: &Gpu, phase: &'static str) -> Result<()> {
        if !self.on {
            return Ok(());
        }
        gpu.sync()?;
        let ms = self.last.elapsed().as_secs_f64() * 1e3;
        match self.phases.iter_mut().find(|(p, _)| *p == phase) {
            Some(e) => e.1 += ms,
            None => self.phases.push((phase, ms)),
        }
        self.last = std::time::Instant::now();
        Ok(())
    }

    fn print(&self, what: &str) {
        if self.on {
            let parts: Vec<String> = self
                .phases
                .iter()
                .map(|(p, ms)| format!("{p} {ms:.1}"))
                .collect();
            eprintln!("msm trace {what}: {} (ms)", parts.join(", "));
        }
    }
}

/// Window size for m scalars: minimises windows × (additions into buckets + bucket work).
pub fn window_bits(m: usize) -> u32 {
    // Diagnostic override, for tuning runs.
    if let Some(c) = std::env::var("C2Q_MSM_WINDOW")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    {
        return c.clamp(3, 22);
    }
    let mut best = (u64::MAX, 3);
    for c in 3..=22u32 {
        let windows = 256u64.div_ceil(c as u64);
        let cost = windows * (m as u64 + 3 * (1u64 << (c - 1)));
        if cost < best.0 {
            best = (cost, c);
        }
    }
    best.1
}

/// Device bytes an MSM of n scalars (all of them non-trivial, the worst case) needs besides the
/// points and scalars themselves.
pub fn scratch_bytes(n: usize) -> usize {
    let c = window_bits(n);
    let windows = 256usize.div_ceil(c as usize);
    let buckets = 1usize << (c - 1);
    let per_scalar = 4 + 4 + FR_LIMBS * 4 + windows * 4 + 4 + (XYZZ_LIMBS * 4) / 32;
    let rounds = if affine_rounds(n, buckets) > 0 {
        PairRounds::bytes(n, buckets)
    } else {
        0
    };
    n * per_scalar + buckets * (windows * XYZZ_LIMBS * 4 + 16) + rounds + (64 << 20)
}

/// Affine pairing rounds before accumulation (kernels/msm.cu, step 4) for m points over
/// `nbuckets` buckets per window: each round halves the points of every bucket, and is worth
/// it while buckets hold many points on average; a few points per bucket are left to the XYZZ
/// accumulation. `C2Q_MSM_AFFINE_ROUNDS` overrides the choice (diagnostics, tuning).
pub fn affine_rounds(m: usize, nbuckets: usize) -> u32 {
    if let Some(r) = std::env::var("C2Q_MSM_AFFINE_ROUNDS")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    {
        return r.min(8);
    }
    let avg = m / nbuckets.max(1);
    if avg < 16 {
        0
    } else {
        (avg.ilog2() - 2).min(4)
    }
}

/// Output slots per thread in a pairing round, and values per thread in each level of the
/// batch inversion.
const PAIR_RUN: usize = 16;
const INVERSE_RUN: usize = 32;

/// Device buffers of the pairing rounds, allocated once per MSM and reused by every window.
struct PairRounds {
    /// Round outputs, ping-ponged: affine points in bucket order.
    out: [DevBuf<u32>; 2],
    /// Bucket offsets of the round outputs.
    offsets: [DevBuf<u32>; 2],
    counts: DevBuf<u32>,
    /// Running products of the denominators, and one product per thread.
    pre: DevBuf<u32>,
    totals: DevBuf<u32>,
    inverse: BatchInverse,
    /// Largest possible number of slots in each round.
    caps: Vec<usize>,
}

impl PairRounds {
    /// Slots a round can produce from `input` points in `nbuckets` buckets: Σ ⌈k_b / 2⌉.
    fn next_cap(input: usize, nbuckets: usize) -> usize {
        (input + nbuckets.min(input)).div_ceil(2)
    }

    /// Threads of a round of `cap` slots: whole blocks of 128, every one of which writes its
    /// product (1 for threads past the end) into `totals`.
    fn threads(cap: usize) -> usize {
        cap.div_ceil(PAIR_RUN).next_multiple_of(128)
    }

    fn bytes(m: usize, nbuckets: usize) -> usize {
        let c1 = Self::next_cap(m, nbuckets);
        let c2 = Self::next_cap(c1, nbuckets);
        let fp = 12 * 4;
        c1 * 2 * fp + c2 * 2 * fp + c1 * fp + 2 * (nbuckets + 1) * 4 * 2
    }

    fn new(gpu: &Gpu, m: usize, nbuckets: usize, rounds: u32) -> Result<PairRounds> {
        let mut caps = Vec::new();
        let mut cap = m;
        for _ in 0..rounds {
            cap = Self::next_cap(cap, nbuckets);
            caps.push(cap);
        }
        let c1 = caps[0];
        let c2 = caps.get(1).copied().unwrap_or(1);
        let threads = Self::threads(c1);
        let counts = gpu.alloc_zeroed::<u32>(nbuckets + 1)?;
        Ok(PairRounds {
            out: [
                gpu.alloc::<u32>(c1 * AFFINE_LIMBS)?,
                gpu.alloc::<u32>(c2 * AFFINE_LIMBS)?,
            ],
            offsets: [
                gpu.alloc::<u32>(nbuckets + 1)?,
                gpu.alloc::<u32>(nbuckets + 1)?,
            ],
            counts,
            pre: gpu.alloc::<u32>(c1 * FP_LIMBS)?,
            totals: gpu.alloc::<u32>(threads * FP_LIMBS)?,
            inverse: BatchInverse::new(gpu, threads)?,
            caps,
        })
    }

    /// Runs the rounds over one window whose points are `sorted` (entries into `points`) with
    /// bucket `offsets`; returns the final points and their offsets.
    fn run(
        &self,
        gpu: &Gpu,
        points: &DevBuf<u32>,
        sorted: &DevBuf<u32>,
        offsets: &DevBuf<u32>,
        nbuckets: u32,
        scan: &Scan,
    ) -> Result<(u64, u64)> {
        let mut src_points = points.ptr();
        let mut src_sorted = sorted.ptr();
        let mut in_off = offsets.ptr();
        for (r, cap) in self.caps.iter().enumerate() {
            let out = &self.out[r % 2];
            let out_off = self.offsets[r % 2].ptr();
            gpu.launch(
                "msm_halve_counts",
                blocks(nbuckets as u64, 256)?,
                256,
                &[&in_off, &nbuckets, &self.counts.ptr()],
            )?;
            // counts[nbuckets] stays 0, so the scan's last entry is the number of slots.
            scan.run(gpu, self.counts.ptr(), out_off, nbuckets + 1)?;
            let threads = Self::threads(*cap) as u64;
            let per = PAIR_RUN as u32;
            gpu.launch(
                "msm_pair_prefix",
                blocks(threads, 128)?,
                128,
                &[
                    &src_points,
                    &src_sorted,
                    &in_off,
                    &out_off,
                    &nbuckets,
                    &per,
                    &self.pre.ptr(),
                    &self.totals.ptr(),
                ],
            )?;
            self.inverse.run(gpu, self.totals.ptr(), threads as usize)?;
            gpu.launch(
                "msm_pair_finish",
                blocks(threads, 128)?,
                128,
                &[
                    &src_points,
                    &src_sorted,
                    &in_off,
                    &out_off,
                    &nbuckets,
                    &per,
                    &self.pre.ptr(),
                    &self.totals.ptr(),
                    &out.ptr(),
                ],
            )?;
            src_points = out.ptr();
            src_sorted = 0;
            in_off = out_off;
        }
        Ok((src_points, in_off))
    }
}

/// In-place batch inversion of up to `n` non-zero Fp values on the device (kernels/msm.cu):
/// runs of INVERSE_RUN values are multiplied level by level down to one value, which is
/// inverted, and the levels are unwound.
struct BatchInverse {
    /// Per level: the number of values, their running products, the run totals.
    levels: Vec<(usize, DevBuf<u32>, DevBuf<u32>)>,
}

impl BatchInverse {
    fn new(gpu: &Gpu, n: usize) -> Result<BatchInverse> {
        let mut levels = Vec::new();
        let mut len = n;
        while len > 1 {
            let runs = len.div_ceil(INVERSE_RUN);
            levels.push((
                len,
                gpu.alloc::<u32>(len * FP_LIMBS)?,
                gpu.alloc::<u32>(runs * FP_LIMBS)?,
            ));
            len = runs;
        }
        Ok(BatchInverse { levels })
    }

    /// Inverts the first `n` values at `vals` (n no larger than at construction).
    fn run(&self, gpu: &Gpu, vals: u64, n: usize) -> Result<()> {
        let per = INVERSE_RUN as u32;
        let mut inputs = Vec::new();
        let mut cur = vals;
        let mut len = n;
        for (_, pre, totals) in &self.levels {
            if len <= 1 {
                break;
            }
            let runs = len.div_ceil(INVERSE_RUN);
            gpu.launch(
                "fp_batch_prefix",
                blocks(runs as u64, 128)?,
                128,
                &[&cur, &(len as u32), &per, &pre.ptr(), &totals.ptr()],
            )?;
            inputs.push((cur, len, pre.ptr(), totals.ptr()));
            cur = totals.ptr();
            len = runs;
        }
        gpu.launch("fp_invert_one", 1, 32, &[&cur])?;
        for (input, len, pre, totals) in inputs.into_iter().rev() {
            let runs = len.div_ceil(INVERSE_RUN);
            gpu.launch(
                "fp_batch_unwind",
                blocks(runs as u64, 128)?,
                128,
                &[&input, &(len as u32), &per, &pre, &totals],
            )?;
        }
        Ok(())
    }
}

/// Σ s_i·P_i for i < n over device-resident points and scalars (Montgomery form).
pub fn msm(
    gpu: &Gpu,
    points: &DevBuf<u32>,
    scalars: &DevBuf<u32>,
    n: usize,
) -> Result<G1Projective> {
    msm_with_rounds(gpu, points, scalars, n, None)
}

/// `msm` with the number of affine pairing rounds chosen by the caller instead of by
/// `affine_rounds`: `c2q gpu-check` runs the rounds on sizes where they would not be chosen.
pub fn msm_with_rounds(
    gpu: &Gpu,
    points: &DevBuf<u32>,
    scalars: &DevBuf<u32>,
    n: usize,
    rounds: Option<u32>,
) -> Result<G1Projective> {
    ensure!(
        n <= MAX_POINTS,
        "MSM of {n} points exceeds the {MAX_POINTS} limit"
    );
    ensure!(
        points.len() >= n * AFFINE_LIMBS && scalars.len() >= n * FR_LIMBS,
        "MSM of {n} terms over buffers of {} points and {} scalars",
        points.len() / AFFINE_LIMBS,
        scalars.len() / FR_LIMBS
    );
    if n == 0 {
        return Ok(G1Projective::identity());
    }
    gpu.bind()?;
    let n32 = n as u32;
    let counters = gpu.alloc_zeroed::<u32>(2)?;
    let one_idx = gpu.alloc::<u32>(n)?;
    let other_idx = gpu.alloc::<u32>(n)?;
    let other_scalars = gpu.alloc::<u32>(n * FR_LIMBS)?;
    gpu.launch(
        "msm_classify",
        blocks(n as u64, 256)?,
        256,
        &[
            &scalars.ptr(),
            &n32,
            &one_idx.ptr(),
            &other_idx.ptr(),
            &other_scalars.ptr(),
            &counters.ptr(),
        ],
    )?;
    let mut counts = [0u32; 2];
    gpu.download(&counters, 0, &mut counts)?;
    let (ones, others) = (counts[0], counts[1]);

    let mut total = G1Projective::identity();
    if ones > 0 {
        total += sum_indexed(gpu, points, &one_idx, ones)?;
    }
    drop(one_idx);
    if others > 0 {
        total += pippenger(gpu, points, &other_idx, &other_scalars, others, rounds)?;
    }
    Ok(total)
}

/// Σ P_idx[k] for k < count.
fn sum_indexed(
    gpu: &Gpu,
    points: &DevBuf<u32>,
    idx: &DevBuf<u32>,
    count: u32,
) -> Result<G1Projective> {
    let threads = (count as u64).min(gpu.info.multiprocessors.max(1) as u64 * 1024);
    let grid = blocks(threads, 128)?;
    let threads = grid as usize * 128;
    let partials = gpu.alloc::<u32>(threads * XYZZ_LIMBS)?;
    gpu.launch(
        "msm_sum_indexed",
        grid,
        128,
        &[&points.ptr(), &idx.ptr(), &count, &partials.ptr()],
    )?;
    let out = gpu.alloc::<u32>(XYZZ_LIMBS)?;
    reduce_groups(gpu, &partials, 1, threads, &out)?;
    Ok(to_host(gpu, &out, 1)?[0])
}

/// Tree-sums each of `groups` consecutive runs of `group_len` XYZZ points of `input` into
/// `out[g]`.
fn reduce_groups(
    gpu: &Gpu,
    input: &DevBuf<u32>,
    groups: usize,
    group_len: usize,
    out: &DevBuf<u32>,
) -> Result<()> {
    const PER_BLOCK: usize = 1024;
    let mut temps: Vec<DevBuf<u32>> = Vec::new();
    let mut src = input.ptr();
    let mut len = group_len.max(1);
    loop {
        let per_group = len.div_ceil(PER_BLOCK);
        let dst = if per_group == 1 {
            out.ptr()
        } else {
            temps.push(gpu.alloc::<u32>(groups * per_group * XYZZ_LIMBS)?);
            temps[temps.len() - 1].ptr()
        };
        gpu.launch(
            "xyzz_reduce",
            (groups * per_group) as u32,
            128,
            &[
                &src,
                &(len as u32),
                &(per_group as u32),
                &(PER_BLOCK as u32),
                &dst,
            ],
        )?;
        if per_group == 1 {
            break;
        }
        src = dst;
        len = per_group;
    }
    // The temporaries are freed on return: wait for the kernels that use them.
    gpu.sync()
}

/// Downloads `n` XYZZ points as blstrs points.
fn to_host(gpu: &Gpu, xyzz: &DevBuf<u32>, n: usize) -> Result<Vec<G1Projective>> {
    let jac = gpu.alloc::<u32>(n * JACOBIAN_LIMBS)?;
    gpu.launch(
        "xyzz_to_jacobian_kernel",
        blocks(n as u64, 64)?,
        64,
        &[&xyzz.ptr(), &(n as u32), &jac.ptr()],
    )?;
    let mut host = vec![0u32; n * JACOBIAN_LIMBS];
    gpu.download(&jac, 0, &mut host)?;
    Ok(host
        .chunks(JACOBIAN_LIMBS)
        .map(jacobian_from_limbs)
        .collect())
}

/// Exclusive prefix sums over u32, with preallocated per-level block totals.
struct Scan {
    levels: Vec<(u32, DevBuf<u32>, DevBuf<u32>)>,
    /// Receives the unused total of a single-block scan.
    spare: DevBuf<u32>,
}

impl Scan {
    fn new(gpu: &Gpu, len: u32) -> Result<Scan> {
        let mut levels = Vec::new();
        let mut l = len;
        while l > 1024 {
            let nb = l.div_ceil(1024);
            levels.push((
                nb,
                gpu.alloc::<u32>(nb as usize)?,
                gpu.alloc::<u32>(nb as usize)?,
            ));
            l = nb;
        }
        Ok(Scan {
            levels,
            spare: gpu.alloc::<u32>(1)?,
        })
    }

    fn run(&self, gpu: &Gpu, input: u64, output: u64, len: u32) -> Result<()> {
        self.level(gpu, 0, input, output, len)
    }

    fn level(&self, gpu: &Gpu, depth: usize, input: u64, output: u64, len: u32) -> Result<()> {
        let nb = len.div_ceil(1024);
        if nb <= 1 {
            let spare = self.spare.ptr();
            return gpu.launch("scan_blocks", 1, 256, &[&input, &output, &len, &spare]);
        }
        let (_, sums, scanned) = &self.levels[depth];
        gpu.launch(
            "scan_blocks",
            nb,
            256,
            &[&input, &output, &len, &sums.ptr()],
        )?;
        self.level(gpu, depth + 1, sums.ptr(), scanned.ptr(), nb)?;
        gpu.launch(
            "scan_add",
            blocks(len as u64, 256)?,
            256,
            &[&output, &len, &scanned.ptr()],
        )
    }
}

/// Pippenger over the `m` compacted non-trivial scalars (canonical form) and their point
/// indices.
fn pippenger(
    gpu: &Gpu,
    points: &DevBuf<u32>,
    idx: &DevBuf<u32>,
    scalars: &DevBuf<u32>,
    m: u32,
    rounds: Option<u32>,
) -> Result<G1Projective> {
    let mut trace = Trace::new();
    let c = window_bits(m as usize);
    let windows = 256u32.div_ceil(c);
    let nbuckets = 1u32 << (c - 1);
    let mu = m as usize;

    let digits = gpu.alloc::<u32>(windows as usize * mu)?;
    gpu.launch(
        "msm_digits",
        blocks(m as u64, 256)?,
        256,
        &[&scalars.ptr(), &m, &c, &windows, &digits.ptr()],
    )?;

    let counts = gpu.alloc::<u32>(nbuckets as usize + 1)?;
    let offsets = gpu.alloc::<u32>(nbuckets as usize + 1)?;
    let fill = gpu.alloc::<u32>(nbuckets as usize)?;
    let sorted = gpu.alloc::<u32>(mu)?;
    // Every window keeps its buckets, so that the window reductions run in one launch.
    let buckets = gpu.alloc::<u32>(windows as usize * nbuckets as usize * XYZZ_LIMBS)?;

    let nseg = nbuckets.div_ceil(SEGMENT);
    let segs = gpu.alloc::<u32>(windows as usize * nseg as usize * XYZZ_LIMBS)?;
    let sums = gpu.alloc::<u32>(windows as usize * XYZZ_LIMBS)?;
    let scan = Scan::new(gpu, nbuckets + 1)?;
    let rounds = rounds.unwrap_or_else(|| affine_rounds(mu, nbuckets as usize));
    let pairing = if rounds > 0 {
        Some(PairRounds::new(gpu, mu, nbuckets as usize, rounds)?)
    } else {
        None
    };
    // Entries left for the XYZZ accumulation: all of them, or what the last round leaves.
    let acc_cap = pairing
        .as_ref()
        .and_then(|p| p.caps.last().copied())
        .unwrap_or(mu) as u32;
    let chunk = chunk_len(acc_cap);
    let chunks = acc_cap.div_ceil(chunk);
    let cont = gpu.alloc::<u32>(chunks as usize * XYZZ_LIMBS)?;

    trace.mark(gpu, "digits+alloc")?;
    for w in 0..windows {
        let dw = digits.at(w as usize * mu);
        let wb = buckets.at(w as usize * nbuckets as usize * XYZZ_LIMBS);
        gpu.memset_zero(&counts)?;
        gpu.memset_zero(&fill)?;
        gpu.launch(
            "msm_histogram",
            blocks(m as u64, 256)?,
            256,
            &[&dw, &m, &counts.ptr()],
        )?;
        scan.run(gpu, counts.ptr(), offsets.ptr(), nbuckets + 1)?;
        gpu.launch(
            "msm_scatter",
            blocks(m as u64, 256)?,
            256,
            &[
                &dw,
                &idx.ptr(),
                &m,
                &offsets.ptr(),
                &fill.ptr(),
                &sorted.ptr(),
            ],
        )?;
        trace.mark(gpu, "sort")?;
        // After the pairing rounds the points are the rounds' output, already in bucket
        // order (a null entry list); without them, the sorted entries into `points`.
        let (acc_points, acc_sorted, acc_offsets) = match &pairing {
            Some(p) => {
                let (pts, off) = p.run(gpu, points, &sorted, &offsets, nbuckets, &scan)?;
                (pts, 0u64, off)
            }
            None => (points.ptr(), sorted.ptr(), offsets.ptr()),
        };
        trace.mark(gpu, "pairing")?;
        gpu.launch(
            "msm_accumulate",
            blocks(chunks as u64, 128)?,
            128,
            &[
                &acc_sorted,
                &acc_offsets,
                &nbuckets,
                &chunk,
                &acc_points,
                &wb,
                &cont.ptr(),
            ],
        )?;
        trace.mark(gpu, "accumulate")?;
        gpu.launch(
            "msm_bucket_fix",
            blocks(nbuckets as u64, 128)?,
            128,
            &[&wb, &cont.ptr(), &acc_offsets, &nbuckets, &chunk],
        )?;
        trace.mark(gpu, "fix")?;
    }
    gpu.launch(
        "msm_bucket_reduce",
        blocks(nseg as u64 * windows as u64, 64)?,
        64,
        &[
            &buckets.ptr(),
            &nbuckets,
            &SEGMENT,
            &nseg,
            &windows,
            &segs.ptr(),
        ],
    )?;
    trace.mark(gpu, "bucket_reduce")?;
    reduce_groups(gpu, &segs, windows as usize, nseg as usize, &sums)?;
    let window_sums = to_host(gpu, &sums, windows as usize)?;
    trace.mark(gpu, "final")?;
    trace.print(&format!("pippenger m={m} c={c}"));
    // Σ 2^(c·w)·W_w by Horner's rule from the top window.
    let mut acc = G1Projective::identity();
    for ws in window_sums.iter().rev() {
        for _ in 0..c {
            acc = acc.double();
        }
        acc += ws;
    }
    Ok(acc)
}

/// Σ s_i·P_i with points and scalars on the host, uploaded in pieces that fit in device
/// memory: the streaming path for parameters that cannot stay resident.
pub fn msm_streamed(gpu: &Gpu, points: &[G1Affine], scalars: &[Fr]) -> Result<G1Projective> {
    ensure!(
        points.len() == scalars.len(),
        "MSM of {} points with {} scalars",
        points.len(),
        scalars.len()
    );
    let (free, _) = gpu.mem_info()?;
    let per_term = AFFINE_LIMBS * 4 + FR_LIMBS * 4 + scratch_bytes(1 << 20) / (1 << 20);
    let piece = ((free / 10 * 7) / per_term).clamp(1 << 16, MAX_POINTS);
    let mut total = G1Projective::identity();
    for (p, s) in points.chunks(piece).zip(scalars.chunks(piece)) {
        let dp = gpu.alloc::<u32>(p.len() * AFFINE_LIMBS)?;
        gpu.upload(&dp, 0, affine_as_limbs(p))?;
        let ds = gpu.alloc::<u32>(s.len() * FR_LIMBS)?;
        gpu.upload(&ds, 0, scalars_as_limbs(s))?;
        total += msm(gpu, &dp, &ds, p.len())?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_sizes_are_sane() {
        assert!(window_bits(1) >= 3);
        for m in [1usize, 1000, 1 << 20, 1 << 27] {
            let c = window_bits(m);
            assert!((3..=22).contains(&c));
        }
        assert!(window_bits(1 << 27) >= 16);
    }
}
