//! G1 multi-scalar multiplication on the GPU (kernels/msm.cu): Σ s_i·P_i with scalars in
//! Montgomery form and affine points, both as blstrs lays them out.
//!
//! Zeros are skipped and ones are summed without any window work (PoRep witnesses are ~51 %
//! zeros and ~47 % ones); the remaining scalars go through Pippenger with signed windows and a
//! counting sort by bucket on the GPU. The few window sums are combined on the host.

use anyhow::{ensure, Result};
use blstrs::{G1Affine, G1Projective, Scalar as Fr};
use group::Group;

use super::device::{blocks, DevBuf, Gpu, Lane};
use super::limbs::{
    affine_as_limbs, jacobian_from_limbs, scalars_as_limbs, AFFINE_LIMBS, FR_LIMBS, JACOBIAN_LIMBS,
};

/// Limbs of an XYZZ accumulator (4 coordinates of 12 limbs).
const XYZZ_LIMBS: usize = 48;
/// Sorted entries per accumulation thread, for m entries per window: long enough that few
/// buckets straddle chunks at 2^27 (each straddle costs a general addition in
/// `msm_bucket_fix`), short enough to keep every SM busy at small sizes (measured on an H200:
/// 128 is best at 2^27, 32 at 2^20).
fn chunk_len(m: u32) -> u32 {
    (m >> 20).clamp(32, 128).next_power_of_two()
}
/// Entries each thread of the sort kernels takes per round (`SORT_UNROLL` in kernels/msm.cu).
const SORT_UNROLL: u32 = 8;
/// Blocks of 256 threads per SM for the sort kernels when nothing else runs (8 fill an SM).
const SORT_BLOCKS_PER_SM: u32 = 8;
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
    // index, compacted scalar, digits of every window, two sort buffers, continuation slots.
    let per_scalar = 4 + 4 + FR_LIMBS * 4 + windows * 4 + 2 * 4 + (XYZZ_LIMBS * 4) / 32;
    // Every window's buckets and running-sum segments; counts, offsets and fill counters of
    // two sorts (24 bytes) and the scan's block sums.
    let per_bucket =
        windows * XYZZ_LIMBS * 4 + (windows * XYZZ_LIMBS * 4).div_ceil(SEGMENT as usize) + 32;
    n * per_scalar + buckets * per_bucket + (64 << 20)
}

/// Σ s_i·P_i for i < n over device-resident points and scalars (Montgomery form).
pub fn msm(
    gpu: &Gpu,
    points: &DevBuf<u32>,
    scalars: &DevBuf<u32>,
    n: usize,
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
        total += pippenger(gpu, points, &other_idx, &other_scalars, others)?;
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

    fn run(&self, gpu: &Gpu, lane: Lane, input: u64, output: u64, len: u32) -> Result<()> {
        self.level(gpu, lane, 0, input, output, len)
    }

    fn level(
        &self,
        gpu: &Gpu,
        lane: Lane,
        depth: usize,
        input: u64,
        output: u64,
        len: u32,
    ) -> Result<()> {
        let nb = len.div_ceil(1024);
        if nb <= 1 {
            let spare = self.spare.ptr();
            return gpu.launch_in(
                lane,
                "scan_blocks",
                1,
                256,
                &[&input, &output, &len, &spare],
            );
        }
        let (_, sums, scanned) = &self.levels[depth];
        gpu.launch_in(
            lane,
            "scan_blocks",
            nb,
            256,
            &[&input, &output, &len, &sums.ptr()],
        )?;
        self.level(gpu, lane, depth + 1, sums.ptr(), scanned.ptr(), nb)?;
        gpu.launch_in(
            lane,
            "scan_add",
            blocks(len as u64, 256)?,
            256,
            &[&output, &len, &scanned.ptr()],
        )
    }
}

/// One window's counting sort: bucket sizes, their prefix sums, fill counters, and the
/// (point, sign) entries ordered by bucket.
struct SortBuffers {
    counts: DevBuf<u32>,
    offsets: DevBuf<u32>,
    fill: DevBuf<u32>,
    sorted: DevBuf<u32>,
}

/// Pippenger over the `m` compacted non-trivial scalars (canonical form) and their point
/// indices.
fn pippenger(
    gpu: &Gpu,
    points: &DevBuf<u32>,
    idx: &DevBuf<u32>,
    scalars: &DevBuf<u32>,
    m: u32,
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

    // Sorting window w + 1 (memory-bound: atomics and scattered writes) runs on the side lane
    // while window w's buckets accumulate (arithmetic-bound) on the main lane, with two sets of
    // sort buffers. With C2Q_MSM_TRACE the phases run one after another instead, so that each
    // can be timed.
    let overlap = !trace.on;
    let sort_lane = if overlap { Lane::Side } else { Lane::Main };
    let mut sorts = Vec::new();
    for _ in 0..if overlap { 2 } else { 1 } {
        sorts.push(SortBuffers {
            counts: gpu.alloc::<u32>(nbuckets as usize + 1)?,
            offsets: gpu.alloc::<u32>(nbuckets as usize + 1)?,
            fill: gpu.alloc::<u32>(nbuckets as usize)?,
            sorted: gpu.alloc::<u32>(mu)?,
        });
    }
    // Every window keeps its buckets, so that the window reductions run in one launch.
    let buckets = gpu.alloc::<u32>(windows as usize * nbuckets as usize * XYZZ_LIMBS)?;
    let chunk = chunk_len(m);
    let chunks = m.div_ceil(chunk);
    let cont = gpu.alloc::<u32>(chunks as usize * XYZZ_LIMBS)?;
    let nseg = nbuckets.div_ceil(SEGMENT);
    let segs = gpu.alloc::<u32>(windows as usize * nseg as usize * XYZZ_LIMBS)?;
    let sums = gpu.alloc::<u32>(windows as usize * XYZZ_LIMBS)?;
    let scan = Scan::new(gpu, nbuckets + 1)?;

    // The sort kernels loop over their entries, SORT_UNROLL per thread per round: enough blocks
    // to fill every SM when they run alone, no more.
    let sort_grid = blocks(m.div_ceil(SORT_UNROLL) as u64, 256)?
        .min(gpu.info.multiprocessors.max(1) as u32 * SORT_BLOCKS_PER_SM);
    trace.mark(gpu, "digits+alloc")?;
    // The sorts need the digits.
    gpu.wait_for(sort_lane, Lane::Main)?;
    // accumulated[w]: window w is done with its sort buffers (marked on the main lane).
    let mut accumulated = Vec::with_capacity(windows as usize);
    for w in 0..windows as usize {
        let sb = &sorts[w % sorts.len()];
        if w >= sorts.len() {
            gpu.wait_event(sort_lane, &accumulated[w - sorts.len()])?;
        }
        let dw = digits.at(w * mu);
        let wb = buckets.at(w * nbuckets as usize * XYZZ_LIMBS);
        gpu.memset_zero_in(sort_lane, &sb.counts)?;
        gpu.memset_zero_in(sort_lane, &sb.fill)?;
        gpu.launch_in(
            sort_lane,
            "msm_histogram",
            sort_grid,
            256,
            &[&dw, &m, &sb.counts.ptr()],
        )?;
        scan.run(
            gpu,
            sort_lane,
            sb.counts.ptr(),
            sb.offsets.ptr(),
            nbuckets + 1,
        )?;
        gpu.launch_in(
            sort_lane,
            "msm_scatter",
            sort_grid,
            256,
            &[
                &dw,
                &idx.ptr(),
                &m,
                &sb.offsets.ptr(),
                &sb.fill.ptr(),
                &sb.sorted.ptr(),
            ],
        )?;
        trace.mark(gpu, "sort")?;
        let sorted = gpu.record(sort_lane)?;
        gpu.wait_event(Lane::Main, &sorted)?;
        gpu.launch(
            "msm_accumulate",
            blocks(chunks as u64, 128)?,
            128,
            &[
                &sb.sorted.ptr(),
                &sb.offsets.ptr(),
                &nbuckets,
                &chunk,
                &points.ptr(),
                &wb,
                &cont.ptr(),
            ],
        )?;
        trace.mark(gpu, "accumulate")?;
        gpu.launch(
            "msm_bucket_fix",
            blocks(nbuckets as u64, 128)?,
            128,
            &[&wb, &cont.ptr(), &sb.offsets.ptr(), &nbuckets, &chunk],
        )?;
        accumulated.push(gpu.record(Lane::Main)?);
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
