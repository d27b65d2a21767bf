//! Multi-scalar multiplication on the GPU (kernels/msm.cu): Σ s_i·P_i with scalars in
//! Montgomery form and affine points, both as blstrs lays them out, in G1, and in G2 beside a
//! G1 multiexp that has the same scalars.
//!
//! Zeros are skipped and ones are summed without any window work (PoRep witnesses are ~51 %
//! zeros and ~47 % ones); the remaining scalars go through Pippenger with signed windows and a
//! counting sort by bucket on the GPU. The few window sums are combined on the host.
//!
//! Groth16's B query is summed twice, over its points in G1 and in G2, with the same scalars.
//! Classifying the scalars, cutting them into window digits and sorting each window by bucket
//! depend on the scalars alone, so `msm_shared` does that once: each window's sorted list feeds
//! the G1 bucket accumulation and then the G2 one, and the list of ones both sums of ones.

use anyhow::{ensure, Result};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar as Fr};
use group::Group;

use super::device::{Gpu, Lane};
use super::kernels::{self, blocks, Kernel, SORT_UNROLL};
use super::limbs::{
    g2_jacobian_from_limbs, jacobian_from_limbs, points_as_limbs, scalars_as_limbs, AFFINE_LIMBS,
    FR_LIMBS, G2_AFFINE_LIMBS, G2_JACOBIAN_LIMBS, JACOBIAN_LIMBS,
};
use super::memory::{DevBuf, DevPtr};

/// Sorted entries per accumulation thread, for m entries per window: long enough that few
/// buckets straddle chunks at 2^27 (each straddle costs a general addition in
/// `msm_bucket_fix`), short enough to keep every SM busy at small sizes (measured on an H200:
/// 128 is best at 2^27, 32 at 2^20).
fn chunk_len(m: u32) -> u32 {
    (m >> 20).clamp(32, 128).next_power_of_two()
}
/// Chunks whose continuation slots `msm_cont_fold` sums in one thread where they all continue
/// one bucket. A bucket holding a repeated scalar's points spans s = entries/chunk slots: s
/// general additions in a row unfolded, about 3g + s/g folded in groups of g (16: s = 1,450
/// gives ~140). On an H200, a 32 GiB B query's pieces of 8.3M terms hold a bucket of 46,000
/// entries (a repeated value) in chunks of 32: their G2 bucket fix took 98 ms a piece unfolded,
/// 23–25 ms with the partial groups folded too in groups of 8 (ops/bench/gpu-2026-12-04-v.md);
/// in groups of 16, as here, the whole B multiexp with its G2 half streamed took 339 ms a start
/// at 48 GiB against 727 unfolded (ops/bench/gpu-2026-12-05-w.md).
fn cont_group() -> u32 {
    // Diagnostic override, for tuning runs (1: no fold).
    std::env::var("C2Q_MSM_CONT_GROUP")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map_or(16, |g| g.clamp(1, 1024))
}
/// Threads per block of the sort kernels (`msm_histogram`, `msm_scatter`). Window w + 1's sort
/// runs beside window w's accumulation, whose three blocks per SM leave 4,096 registers free on
/// sm_90: a block of 128 threads at 32 registers fits there, one of 256 does not, and waits
/// for an SM to drain. Measured on an H100, full-width MSMs up to 2^26 took 0.5 – 2.9 % less
/// time so, 2^27 the same (ops/bench/gpu-2026-12-06-ae.md). C2Q_MSM_SORT_BLOCK overrides it,
/// for tuning runs.
fn sort_block() -> u32 {
    std::env::var("C2Q_MSM_SORT_BLOCK")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map_or(128, |b| (b / 32).clamp(1, 8) * 32)
}
/// Sort blocks per SM while an accumulation runs beside them (every window's sort but the
/// first, which runs alone on a grid that fills the GPU). The sort lane has the higher
/// priority, so a grid that could fill the GPU takes every SM slot an accumulation block leaves
/// and keeps it until the whole window is sorted: the two then ran one after the other, the
/// overlap hiding ~22 ms of a 2^27 MSM's 130 ms of sorting. Two blocks per SM leave the
/// accumulation most of its blocks while the sort goes on beside it. Measured on an H100
/// (ops/bench/gpu-2026-12-06-af.md), full-width MSMs: 2^27 779 ms with the GPU-filling grid,
/// 717 / 707 / 722 – 728 / 754 ms with 1 / 2 / 4 / 8 blocks per SM; 2^25 210 → 195 ms.
/// C2Q_MSM_SORT_BESIDE overrides it, for tuning runs (0: the GPU-filling grid).
fn sort_blocks_beside() -> u32 {
    std::env::var("C2Q_MSM_SORT_BESIDE")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map_or(2, |b| b.min(64))
}
/// Buckets per running-sum segment in the window reduction.
const SEGMENT: u32 = 32;
/// Largest supported MSM: point indices keep one bit for the sign.
pub const MAX_POINTS: usize = 1 << 30;

/// Arguments of the point-dependent kernels, the same in both groups (see `kernels`).
type Accumulate = Kernel<(
    DevPtr<u32>,
    DevPtr<u32>,
    u32,
    u32,
    DevPtr<u32>,
    DevPtr<u32>,
    DevPtr<u32>,
)>;
type ContFold = Kernel<(DevPtr<u32>, DevPtr<u32>, u32, u32, u32)>;
type BucketFix = Kernel<(DevPtr<u32>, DevPtr<u32>, DevPtr<u32>, u32, u32, u32)>;
type BucketReduce = Kernel<(DevPtr<u32>, u32, u32, u32, u32, DevPtr<u32>)>;
type SumIndexed = Kernel<(DevPtr<u32>, DevPtr<u32>, u32, DevPtr<u32>)>;
type Reduce = Kernel<(DevPtr<u32>, u32, u32, u32, DevPtr<u32>)>;
type ToJacobian = Kernel<(DevPtr<u32>, u32, DevPtr<u32>)>;

/// What the host needs to know of a group to run its kernels: sizes in limbs, its kernels, and
/// how it reads the results back. The kernels are templates over the coordinate field,
/// instantiated for G1 (no suffix) and G2 (`_g2`).
trait DeviceGroup {
    type Point: Group + Copy;
    /// An affine input point (x, y).
    const AFFINE_LIMBS: usize;
    /// An XYZZ accumulator (x, y, zz, zzz).
    const XYZZ_LIMBS: usize;
    /// A Jacobian result (x, y, z) as blst lays it out.
    const JACOBIAN_LIMBS: usize;
    const ACCUMULATE: Accumulate;
    const CONT_FOLD: ContFold;
    const BUCKET_FIX: BucketFix;
    const BUCKET_REDUCE: BucketReduce;
    const SUM_INDEXED: SumIndexed;
    const REDUCE: Reduce;
    /// Threads per block of `REDUCE` (its partial sums fill 24 KiB of shared memory).
    const REDUCE_THREADS: u32;
    const TO_JACOBIAN: ToJacobian;
    fn from_jacobian(limbs: &[u32]) -> Self::Point;
}

/// G1: coordinates in Fp (12 limbs).
enum G1 {}

impl DeviceGroup for G1 {
    type Point = G1Projective;
    const AFFINE_LIMBS: usize = AFFINE_LIMBS;
    const XYZZ_LIMBS: usize = 48;
    const JACOBIAN_LIMBS: usize = JACOBIAN_LIMBS;
    const ACCUMULATE: Accumulate = kernels::MSM_ACCUMULATE;
    const CONT_FOLD: ContFold = kernels::MSM_CONT_FOLD;
    const BUCKET_FIX: BucketFix = kernels::MSM_BUCKET_FIX;
    const BUCKET_REDUCE: BucketReduce = kernels::MSM_BUCKET_REDUCE;
    const SUM_INDEXED: SumIndexed = kernels::MSM_SUM_INDEXED;
    const REDUCE: Reduce = kernels::XYZZ_REDUCE;
    const REDUCE_THREADS: u32 = 128;
    const TO_JACOBIAN: ToJacobian = kernels::XYZZ_TO_JACOBIAN;
    fn from_jacobian(limbs: &[u32]) -> G1Projective {
        jacobian_from_limbs(limbs)
    }
}

/// G2: coordinates in Fp2 (24 limbs).
enum G2 {}

impl DeviceGroup for G2 {
    type Point = G2Projective;
    const AFFINE_LIMBS: usize = G2_AFFINE_LIMBS;
    const XYZZ_LIMBS: usize = 96;
    const JACOBIAN_LIMBS: usize = G2_JACOBIAN_LIMBS;
    const ACCUMULATE: Accumulate = kernels::MSM_ACCUMULATE_G2;
    const CONT_FOLD: ContFold = kernels::MSM_CONT_FOLD_G2;
    const BUCKET_FIX: BucketFix = kernels::MSM_BUCKET_FIX_G2;
    const BUCKET_REDUCE: BucketReduce = kernels::MSM_BUCKET_REDUCE_G2;
    const SUM_INDEXED: SumIndexed = kernels::MSM_SUM_INDEXED_G2;
    const REDUCE: Reduce = kernels::XYZZ_REDUCE_G2;
    const REDUCE_THREADS: u32 = 64;
    const TO_JACOBIAN: ToJacobian = kernels::XYZZ_TO_JACOBIAN_G2;
    fn from_jacobian(limbs: &[u32]) -> G2Projective {
        g2_jacobian_from_limbs(limbs)
    }
}

/// Phase timings for `C2Q_MSM_TRACE=1` (diagnostics): each phase is synchronised and timed
/// on the host, and the totals are printed to stderr when the MSM ends.
struct Trace {
    on: bool,
    longest: u32,
    last: std::time::Instant,
    phases: Vec<(&'static str, f64)>,
}

impl Trace {
    fn new() -> Trace {
        Trace {
            on: std::env::var_os("C2Q_MSM_TRACE").is_some(),
            longest: 0,
            last: std::time::Instant::now(),
            phases: Vec::new(),
        }
    }

    fn mark(&mut self, gpu: &Gpu, phase: &'static str) -> Result<()> {
        if !self.on {
            return Ok(());
        }
        // The main lane alone: a streamed MSM's next piece may be copying on the copy lane.
        gpu.sync_lane(Lane::Main)?;
        let ms = self.last.elapsed().as_secs_f64() * 1e3;
        match self.phases.iter_mut().find(|(p, _)| *p == phase) {
            Some(e) => e.1 += ms,
            None => self.phases.push((phase, ms)),
        }
        self.last = std::time::Instant::now();
        Ok(())
    }

    /// Remembers the most entries any bucket of a window holds (for the printed line): a bucket
    /// spanning many chunks is a long chain of additions in the bucket fix.
    fn longest_bucket(&mut self, gpu: &Gpu, offsets: &DevBuf<u32>, nbuckets: usize) -> Result<()> {
        let mut host = vec![0u32; nbuckets + 1];
        gpu.download(offsets, 0, &mut host)?;
        let longest = host.windows(2).map(|o| o[1] - o[0]).max().unwrap_or(0);
        self.longest = self.longest.max(longest);
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
            let longest = match self.longest {
                0 => String::new(),
                n => format!("; longest bucket {n} entries"),
            };
            eprintln!("msm trace {what}: {} (ms){longest}", parts.join(", "));
        }
    }
}

/// The cost model of the window choice, in units of one addition into a bucket, fitted to
/// full-width MSMs of 2^12 to 2^27 scalars timed in two or three window sizes each on an H100
/// (record `gpu-2026-12-06-ad`). Bucket work per bucket and window: the running sums, the fix,
/// the sort's counters. The reduction's additions alone (3) had put 2^27 in 22-bit windows
/// (809 ms) instead of 20-bit ones (783 ms).
const BUCKET_COST: u64 = 8;
/// Work per window whatever its size: its sort's passes and launches, one after another. Below
/// 2^20 scalars it decides: 2^16 took 8.0 ms in 16-bit windows, 9.0 in 13-bit and 12.5 in
/// 10-bit ones.
const WINDOW_COST: u64 = 1 << 20;
/// Buckets per scalar at most: beyond, most buckets stay empty and their reduction is latency
/// alone. A 2^12 PoRep-like MSM (a few dozen scalars other than 0 and 1) took 22.7 ms in
/// 16-bit windows and 5.9 in 9-bit ones.
const MAX_BUCKETS_PER_SCALAR: u64 = 16;

/// Window size for m scalars: minimises windows × (additions into buckets + bucket work +
/// the window's own work), the larger window on a tie.
///
/// Only sizes with at most 16 buckets per scalar, and whose top window has at least half the
/// bits of the others, take part. The top window holds what the others leave of the 256 bits
/// (255 and a signed digit's carry): with few bits it costs a whole window's additions for a
/// fraction of the bits, and its few buckets take every entry, which the fix then adds one
/// chunk after another. Such sizes were the slow ones in every measurement: 19-bit windows (a
/// 9-bit top window) at 2^23, 2^24 and 2^27, 18 (4 bits: 152 ms in the fix against 15) and 21
/// at 2^27.
pub fn window_bits(m: usize) -> u32 {
    // Diagnostic override, for tuning runs.
    if let Some(c) = std::env::var("C2Q_MSM_WINDOW")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    {
        return c.clamp(3, 22);
    }
    modelled_window_bits(m)
}

/// The window the cost model picks for `m` scalars, whatever the environment says.
fn modelled_window_bits(m: usize) -> u32 {
    let mut best = (u64::MAX, 16);
    for c in 3..=22u32 {
        let buckets = 1u64 << (c - 1);
        let top_too_narrow = 2 * top_window_bits(c) < c;
        if top_too_narrow || buckets > MAX_BUCKETS_PER_SCALAR * m.max(1) as u64 {
            continue;
        }
        let windows = 256u64.div_ceil(c as u64);
        let cost = windows * (m as u64 + BUCKET_COST * buckets + WINDOW_COST);
        if cost <= best.0 {
            best = (cost, c);
        }
    }
    best.1
}

/// The bits of the top window of c-bit windows over 256 bits.
fn top_window_bits(c: u32) -> u32 {
    256 - c * (256u32.div_ceil(c) - 1)
}

/// Device bytes an MSM of n scalars (all of them non-trivial, the worst case) needs besides the
/// points and scalars themselves, at the larger of its two phases: while the digits are cut
/// (point indices, compacted scalars, every window's digits; the classification before it
/// holds less), and while the buckets are summed (the compacted scalars freed: indices,
/// digits, two sort buffers, continuation slots, every window's buckets). 14 GB at 2^27.
pub fn scratch_bytes(n: usize) -> usize {
    let c = window_bits(n);
    let windows = 256usize.div_ceil(c as usize);
    let buckets = 1usize << (c - 1);
    let xyzz = G1::XYZZ_LIMBS * 4;
    let digits_phase = n * (4 + FR_LIMBS * 4 + windows * 4);
    // Every window's buckets and running-sum segments; counts, offsets and fill counters of
    // two sorts (24 bytes) and the scan's block sums.
    let per_bucket = windows * xyzz + (windows * xyzz).div_ceil(SEGMENT as usize) + 32;
    let bucket_phase = n * (4 + windows * 4 + 2 * 4 + xyzz / 32) + buckets * per_bucket;
    digits_phase.max(bucket_phase) + (64 << 20)
}

/// Device bytes the G2 half of `msm_shared` over n scalars needs on top of `scratch_bytes(n)`:
/// G2 buckets for every window, their running-sum segments, continuation slots, and the sum of
/// the ones' partial sums (one per thread, up to 1024 threads per SM: 52 MB on 132 SMs).
pub fn g2_scratch_bytes(n: usize) -> usize {
    let c = window_bits(n);
    let windows = 256usize.div_ceil(c as usize);
    let buckets = 1usize << (c - 1);
    let xyzz = G2::XYZZ_LIMBS * 4;
    let per_bucket = windows * xyzz + (windows * xyzz).div_ceil(SEGMENT as usize);
    n * (xyzz / 32) + buckets * per_bucket + (128 << 20)
}

/// Σ s_i·P_i for i < n over device-resident points and scalars (Montgomery form).
pub fn msm(
    gpu: &Gpu,
    points: &DevBuf<u32>,
    scalars: &DevBuf<u32>,
    n: usize,
) -> Result<G1Projective> {
    Ok(msm_shared(gpu, points, None, scalars, n)?.g1)
}

/// What `msm_shared` returns: the G1 sum, and the G2 sum when it was given G2 points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedSums {
    pub g1: G1Projective,
    pub g2: Option<G2Projective>,
}

/// Σ s_i·P_i over the G1 points `g1` and, when `g2` is given, Σ s_i·Q_i over those G2 points
/// with the same scalars, for i < n (device-resident; scalars in Montgomery form). The scalars
/// are classified, cut into digits and sorted once; each group then sums its own points over
/// the same lists.
pub fn msm_shared(
    gpu: &Gpu,
    g1: &DevBuf<u32>,
    g2: Option<&DevBuf<u32>>,
    scalars: &DevBuf<u32>,
    n: usize,
) -> Result<SharedSums> {
    ensure!(
        n <= MAX_POINTS,
        "MSM of {n} points exceeds the {MAX_POINTS} limit"
    );
    ensure!(
        g1.len() >= n * G1::AFFINE_LIMBS && scalars.len() >= n * FR_LIMBS,
        "MSM of {n} terms over buffers of {} points and {} scalars",
        g1.len() / G1::AFFINE_LIMBS,
        scalars.len() / FR_LIMBS
    );
    if let Some(g2) = g2 {
        ensure!(
            g2.len() >= n * G2::AFFINE_LIMBS,
            "MSM of {n} terms over a buffer of {} G2 points",
            g2.len() / G2::AFFINE_LIMBS
        );
    }
    let operands = Operands {
        g1: g1.ptr(),
        g2: g2.map(DevBuf::ptr),
        scalars: scalars.ptr(),
    };
    shared_sums(gpu, operands, n)
}

/// The device addresses of one MSM's operands, each from the first term summed: G1 points,
/// the same terms' G2 points when their sum is wanted too, and the scalars (Montgomery form).
#[derive(Clone, Copy)]
struct Operands {
    g1: DevPtr<u32>,
    g2: Option<DevPtr<u32>>,
    scalars: DevPtr<u32>,
}

/// `msm_shared` over operands whose buffers the caller checked hold n terms.
fn shared_sums(gpu: &Gpu, operands: Operands, n: usize) -> Result<SharedSums> {
    let Operands { g1, g2, scalars } = operands;
    let mut sums = SharedSums {
        g1: G1Projective::identity(),
        g2: g2.map(|_| G2Projective::identity()),
    };
    if n == 0 {
        return Ok(sums);
    }
    gpu.bind()?;
    let mut trace = Trace::new();
    let n32 = n as u32;
    let counters = gpu.alloc_zeroed::<u32>(2)?;
    let one_idx = gpu.alloc::<u32>(n)?;
    let other_idx = gpu.alloc::<u32>(n)?;
    let other_scalars = gpu.alloc::<u32>(n * FR_LIMBS)?;
    kernels::MSM_CLASSIFY.launch(
        gpu,
        blocks(n as u64, 256)?,
        256,
        (
            scalars,
            n32,
            one_idx.ptr(),
            other_idx.ptr(),
            other_scalars.ptr(),
            counters.ptr(),
        ),
    )?;
    let mut counts = [0u32; 2];
    gpu.download(&counters, 0, &mut counts)?;
    let (ones, others) = (counts[0], counts[1]);
    trace.mark(gpu, "classify")?;

    if ones > 0 {
        sums.g1 += sum_indexed::<G1>(gpu, g1, &one_idx, ones)?;
        trace.mark(gpu, "ones g1")?;
        if let (Some(points), Some(sum)) = (g2, sums.g2.as_mut()) {
            *sum += sum_indexed::<G2>(gpu, points, &one_idx, ones)?;
            trace.mark(gpu, "ones g2")?;
        }
    }
    drop(one_idx);
    if others > 0 {
        let rest = pippenger(gpu, g1, g2, &other_idx, other_scalars, others)?;
        sums.g1 += rest.g1;
        if let (Some(sum), Some(rest)) = (sums.g2.as_mut(), rest.g2) {
            *sum += rest;
        }
        trace.mark(gpu, "pippenger")?;
    }
    trace.print(&format!(
        "terms={n} ones={ones} others={others}{}",
        if g2.is_some() { " g1+g2" } else { "" }
    ));
    Ok(sums)
}

/// Σ P_idx[k] for k < count.
fn sum_indexed<G: DeviceGroup>(
    gpu: &Gpu,
    points: DevPtr<u32>,
    idx: &DevBuf<u32>,
    count: u32,
) -> Result<G::Point> {
    let threads = (count as u64).min(gpu.info.multiprocessors.max(1) as u64 * 1024);
    let grid = blocks(threads, 128)?;
    let threads = grid as usize * 128;
    let partials = gpu.alloc::<u32>(threads * G::XYZZ_LIMBS)?;
    G::SUM_INDEXED.launch(gpu, grid, 128, (points, idx.ptr(), count, partials.ptr()))?;
    let out = gpu.alloc::<u32>(G::XYZZ_LIMBS)?;
    reduce_groups::<G>(gpu, &partials, 1, threads, &out)?;
    Ok(to_host::<G>(gpu, &out, 1)?[0])
}

/// Tree-sums each of `groups` consecutive runs of `group_len` XYZZ points of `input` into
/// `out[g]`.
fn reduce_groups<G: DeviceGroup>(
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
            temps.push(gpu.alloc::<u32>(groups * per_group * G::XYZZ_LIMBS)?);
            temps[temps.len() - 1].ptr()
        };
        G::REDUCE.launch(
            gpu,
            (groups * per_group) as u32,
            G::REDUCE_THREADS,
            (src, len as u32, per_group as u32, PER_BLOCK as u32, dst),
        )?;
        if per_group == 1 {
            break;
        }
        src = dst;
        len = per_group;
    }
    // The temporaries are freed on return: wait for the kernels that use them, on the main
    // lane alone (a wait for every lane would wait for a streamed MSM's next piece copying).
    gpu.sync_lane(Lane::Main)
}

/// Downloads `n` XYZZ points as blstrs points.
fn to_host<G: DeviceGroup>(gpu: &Gpu, xyzz: &DevBuf<u32>, n: usize) -> Result<Vec<G::Point>> {
    let jac = gpu.alloc::<u32>(n * G::JACOBIAN_LIMBS)?;
    G::TO_JACOBIAN.launch(
        gpu,
        blocks(n as u64, 64)?,
        64,
        (xyzz.ptr(), n as u32, jac.ptr()),
    )?;
    let mut host = vec![0u32; n * G::JACOBIAN_LIMBS];
    gpu.download(&jac, 0, &mut host)?;
    Ok(host
        .chunks(G::JACOBIAN_LIMBS)
        .map(G::from_jacobian)
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

    fn run(
        &self,
        gpu: &Gpu,
        lane: Lane,
        input: DevPtr<u32>,
        output: DevPtr<u32>,
        len: u32,
    ) -> Result<()> {
        self.level(gpu, lane, 0, input, output, len)
    }

    fn level(
        &self,
        gpu: &Gpu,
        lane: Lane,
        depth: usize,
        input: DevPtr<u32>,
        output: DevPtr<u32>,
        len: u32,
    ) -> Result<()> {
        let nb = len.div_ceil(1024);
        if nb <= 1 {
            return kernels::SCAN_BLOCKS.launch_in(
                gpu,
                lane,
                1,
                256,
                (input, output, len, self.spare.ptr()),
            );
        }
        let (_, sums, scanned) = &self.levels[depth];
        kernels::SCAN_BLOCKS.launch_in(gpu, lane, nb, 256, (input, output, len, sums.ptr()))?;
        self.level(gpu, lane, depth + 1, sums.ptr(), scanned.ptr(), nb)?;
        kernels::SCAN_ADD.launch_in(
            gpu,
            lane,
            blocks(len as u64, 256)?,
            256,
            (output, len, scanned.ptr()),
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

/// The shape of one Pippenger run over m non-trivial scalars: c-bit windows, and the sorted
/// entries of a window cut into chunks of `chunk`, one accumulation thread each.
#[derive(Clone, Copy)]
struct Windows {
    c: u32,
    windows: u32,
    nbuckets: u32,
    chunk: u32,
    chunks: u32,
    /// Chunks whose continuation slots are folded at once (`cont_group`; 1: none).
    group: u32,
    /// Running-sum segments per window in the reduction.
    nseg: u32,
}

impl Windows {
    fn for_scalars(m: u32) -> Windows {
        let c = window_bits(m as usize);
        let nbuckets = 1u32 << (c - 1);
        let chunk = chunk_len(m);
        Windows {
            c,
            windows: 256u32.div_ceil(c),
            nbuckets,
            chunk,
            chunks: m.div_ceil(chunk),
            group: cont_group(),
            nseg: nbuckets.div_ceil(SEGMENT),
        }
    }
}

/// One group's bucket work over the shared sorted lists: every window's buckets (kept, so that
/// the window reductions run in one launch), the chunks' continuation slots, the reduction's
/// segments and the window sums.
struct Buckets<G: DeviceGroup> {
    points: DevPtr<u32>,
    buckets: DevBuf<u32>,
    cont: DevBuf<u32>,
    segs: DevBuf<u32>,
    sums: DevBuf<u32>,
    _group: std::marker::PhantomData<G>,
}

impl<G: DeviceGroup> Buckets<G> {
    fn new(gpu: &Gpu, points: DevPtr<u32>, w: Windows) -> Result<Self> {
        let (windows, xyzz) = (w.windows as usize, G::XYZZ_LIMBS);
        Ok(Buckets {
            points,
            buckets: gpu.alloc::<u32>(windows * w.nbuckets as usize * xyzz)?,
            cont: gpu.alloc::<u32>(w.chunks as usize * xyzz)?,
            segs: gpu.alloc::<u32>(windows * w.nseg as usize * xyzz)?,
            sums: gpu.alloc::<u32>(windows * xyzz)?,
            _group: std::marker::PhantomData,
        })
    }

    /// Window `window`'s buckets from its sorted entries, on the main lane.
    fn accumulate(
        &self,
        gpu: &Gpu,
        trace: &mut Trace,
        w: Windows,
        window: usize,
        sort: &SortBuffers,
    ) -> Result<()> {
        let wb = self
            .buckets
            .at(window * w.nbuckets as usize * G::XYZZ_LIMBS);
        G::ACCUMULATE.launch(
            gpu,
            blocks(w.chunks as u64, 128)?,
            128,
            (
                sort.sorted.ptr(),
                sort.offsets.ptr(),
                w.nbuckets,
                w.chunk,
                self.points,
                wb,
                self.cont.ptr(),
            ),
        )?;
        trace.mark(gpu, G::ACCUMULATE.name())?;
        if w.group > 1 {
            G::CONT_FOLD.launch(
                gpu,
                blocks(w.chunks.div_ceil(w.group) as u64, 128)?,
                128,
                (
                    self.cont.ptr(),
                    sort.offsets.ptr(),
                    w.nbuckets,
                    w.chunk,
                    w.group,
                ),
            )?;
            trace.mark(gpu, G::CONT_FOLD.name())?;
        }
        G::BUCKET_FIX.launch(
            gpu,
            blocks(w.nbuckets as u64, 128)?,
            128,
            (
                wb,
                self.cont.ptr(),
                sort.offsets.ptr(),
                w.nbuckets,
                w.chunk,
                w.group,
            ),
        )?;
        trace.mark(gpu, G::BUCKET_FIX.name())
    }

    /// Σ 2^(c·w)·W_w over the windows' sums W_w = Σ (b+1)·B_b.
    fn total(&self, gpu: &Gpu, trace: &mut Trace, w: Windows) -> Result<G::Point> {
        G::BUCKET_REDUCE.launch(
            gpu,
            blocks(w.nseg as u64 * w.windows as u64, 64)?,
            64,
            (
                self.buckets.ptr(),
                w.nbuckets,
                SEGMENT,
                w.nseg,
                w.windows,
                self.segs.ptr(),
            ),
        )?;
        trace.mark(gpu, G::BUCKET_REDUCE.name())?;
        reduce_groups::<G>(
            gpu,
            &self.segs,
            w.windows as usize,
            w.nseg as usize,
            &self.sums,
        )?;
        let window_sums = to_host::<G>(gpu, &self.sums, w.windows as usize)?;
        trace.mark(gpu, G::REDUCE.name())?;
        // Horner's rule from the top window.
        let mut acc = G::Point::identity();
        for ws in window_sums.iter().rev() {
            for _ in 0..w.c {
                acc = acc.double();
            }
            acc += ws;
        }
        Ok(acc)
    }
}

/// Pippenger over the `m` compacted non-trivial scalars (canonical form) and their point
/// indices, for the G1 points and, when given, the G2 points. The scalars are freed once cut
/// into digits, before the sort buffers and buckets are made (`scratch_bytes`).
fn pippenger(
    gpu: &Gpu,
    g1: DevPtr<u32>,
    g2: Option<DevPtr<u32>>,
    idx: &DevBuf<u32>,
    scalars: DevBuf<u32>,
    m: u32,
) -> Result<SharedSums> {
    let mut trace = Trace::new();
    let w = Windows::for_scalars(m);
    let mu = m as usize;

    let digits = gpu.alloc::<u32>(w.windows as usize * mu)?;
    kernels::MSM_DIGITS.launch(
        gpu,
        blocks(m as u64, 256)?,
        256,
        (scalars.ptr(), m, w.c, w.windows, digits.ptr()),
    )?;
    // Freeing waits for the digits kernel (cuMemFree synchronises with work using it).
    drop(scalars);

    // Sorting window w + 1 (memory-bound: atomics and scattered writes) runs on the side lane
    // while window w's buckets accumulate (arithmetic-bound) on the main lane, with two sets of
    // sort buffers. With C2Q_MSM_TRACE the phases run one after another instead, so that each
    // can be timed.
    let overlap = !trace.on;
    let sort_lane = if overlap { Lane::Side } else { Lane::Main };
    let mut sorts = Vec::new();
    for _ in 0..if overlap { 2 } else { 1 } {
        sorts.push(SortBuffers {
            counts: gpu.alloc::<u32>(w.nbuckets as usize + 1)?,
            offsets: gpu.alloc::<u32>(w.nbuckets as usize + 1)?,
            fill: gpu.alloc::<u32>(w.nbuckets as usize)?,
            sorted: gpu.alloc::<u32>(mu)?,
        });
    }
    let in_g1 = Buckets::<G1>::new(gpu, g1, w)?;
    let in_g2 = g2.map(|p| Buckets::<G2>::new(gpu, p, w)).transpose()?;
    let scan = Scan::new(gpu, w.nbuckets + 1)?;

    // The sort kernels loop over their entries, SORT_UNROLL per thread per round: enough blocks
    // to fill every SM when they run alone (the first window, or traced), no more; beside an
    // accumulation, `sort_blocks_beside` per SM.
    let sort_block = sort_block();
    let sms = gpu.info.multiprocessors.max(1) as u32;
    let blocks_per_sm = (gpu.info.threads_per_sm.max(1) as u32 / sort_block).max(1);
    let alone_grid = blocks(m.div_ceil(SORT_UNROLL) as u64, sort_block)?.min(sms * blocks_per_sm);
    let beside_grid = match sort_blocks_beside() {
        0 => alone_grid,
        k => alone_grid.min(sms * k.min(blocks_per_sm)),
    };
    trace.mark(gpu, "digits+alloc")?;
    // The sorts need the digits.
    gpu.wait_for(sort_lane, Lane::Main)?;
    // accumulated[w]: window w is done with its sort buffers, in both groups (marked on the
    // main lane).
    let mut accumulated = Vec::with_capacity(w.windows as usize);
    for window in 0..w.windows as usize {
        let sb = &sorts[window % sorts.len()];
        if window >= sorts.len() {
            gpu.wait_event(sort_lane, &accumulated[window - sorts.len()])?;
        }
        let dw = digits.at(window * mu);
        // The first window's sort has nothing beside it.
        let sort_grid = if window == 0 || !overlap {
            alone_grid
        } else {
            beside_grid
        };
        gpu.memset_zero_in(sort_lane, &sb.counts)?;
        gpu.memset_zero_in(sort_lane, &sb.fill)?;
        kernels::MSM_HISTOGRAM.launch_in(
            gpu,
            sort_lane,
            sort_grid,
            sort_block,
            (dw, m, sb.counts.ptr()),
        )?;
        scan.run(
            gpu,
            sort_lane,
            sb.counts.ptr(),
            sb.offsets.ptr(),
            w.nbuckets + 1,
        )?;
        kernels::MSM_SCATTER.launch_in(
            gpu,
            sort_lane,
            sort_grid,
            sort_block,
            (
                dw,
                idx.ptr(),
                m,
                sb.offsets.ptr(),
                sb.fill.ptr(),
                sb.sorted.ptr(),
            ),
        )?;
        trace.mark(gpu, "sort")?;
        if trace.on {
            trace.longest_bucket(gpu, &sb.offsets, w.nbuckets as usize)?;
        }
        let sorted = gpu.record(sort_lane)?;
        gpu.wait_event(Lane::Main, &sorted)?;
        in_g1.accumulate(gpu, &mut trace, w, window, sb)?;
        if let Some(in_g2) = &in_g2 {
            in_g2.accumulate(gpu, &mut trace, w, window, sb)?;
        }
        accumulated.push(gpu.record(Lane::Main)?);
    }
    let sums = SharedSums {
        g1: in_g1.total(gpu, &mut trace, w)?,
        g2: in_g2.map(|b| b.total(gpu, &mut trace, w)).transpose()?,
    };
    trace.print(&format!(
        "pippenger m={m} c={} chunk={} group={}{}",
        w.c,
        w.chunk,
        w.group,
        if g2.is_some() { " g1+g2" } else { "" }
    ));
    Ok(sums)
}

/// The host points of one streamed MSM: G1, and the same terms' G2 points when their sum is
/// wanted too.
#[derive(Clone, Copy)]
pub struct HostPoints<'a> {
    pub g1: &'a [G1Affine],
    pub g2: Option<&'a [G2Affine]>,
}

/// What copying the points of a streamed MSM cost, on the host clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Streaming {
    /// Point bytes copied to the device.
    pub bytes: u64,
    /// Time the copies took, all pieces together.
    pub copy_ms: f64,
    /// Time the arithmetic waited for them: the first piece, and any piece whose copy took
    /// longer than the sums of the piece before. `copy_ms − waited_ms` was hidden.
    pub waited_ms: f64,
}

impl Streaming {
    /// Host-to-device bandwidth of the copies, GB/s.
    pub fn gb_per_s(&self) -> f64 {
        if self.copy_ms > 0.0 {
            self.bytes as f64 / self.copy_ms / 1e6
        } else {
            0.0
        }
    }
}

impl std::ops::AddAssign for Streaming {
    fn add_assign(&mut self, other: Streaming) {
        self.bytes += other.bytes;
        self.copy_ms += other.copy_ms;
        self.waited_ms += other.waited_ms;
    }
}

/// Piece buffers of one streamed MSM: the piece being summed and the one being filled.
pub const STREAMED_BUFFERS: usize = 2;
/// Piece buffers of MSMs streamed together (`msm_streamed_together`): the copy thread can then
/// fill two buffers while one long piece (H's) is summed, the next piece of the other MSM and
/// the one after it, so that a short piece (L's) between two long ones does not leave the
/// second long piece's copy exposed.
pub const TOGETHER_BUFFERS: usize = 3;

/// Device bytes per term of a streamed MSM's pieces: `buffers` piece buffers of points (the one
/// being summed, those being filled), besides each piece's MSM scratch.
fn streamed_bytes_per_term(g2: bool, buffers: usize) -> usize {
    buffers * (AFFINE_LIMBS * 4 + if g2 { G2_AFFINE_LIMBS * 4 } else { 0 })
}

/// Device bytes a streamed MSM with pieces of `piece` terms needs besides its scalars. Its
/// scratch is kept from piece to piece (`Gpu::keep_freed`), so the compacted scalars and the
/// ones' indices, freed before the buckets are made, still count while they are.
pub fn streamed_bytes(piece: usize, g2: bool) -> usize {
    streamed_bytes_with(piece, g2, STREAMED_BUFFERS)
}

/// As `streamed_bytes`, with `buffers` piece buffers.
pub fn streamed_bytes_with(piece: usize, g2: bool, buffers: usize) -> usize {
    piece * streamed_bytes_per_term(g2, buffers)
        + scratch_bytes(piece)
        + piece * (4 + FR_LIMBS * 4)
        + if g2 { g2_scratch_bytes(piece) } else { 0 }
}

/// Smallest piece a streamed MSM uses: below it the per-piece bucket work outweighs the sums.
pub const MIN_STREAMED_PIECE: usize = 1 << 16;

/// Terms per piece of a streamed MSM of n terms with `free` device bytes besides its scalars:
/// the fewest pieces that fit, of equal size. None when not even the smallest piece fits.
/// Every count is tried, not only powers of two: each piece costs its own bucket work (~18 ms
/// at 2^25 in G1, ~60 ms with the G2 half), so five pieces where five fit beat eight.
pub fn streamed_piece_len(n: usize, free: usize, g2: bool) -> Option<usize> {
    streamed_piece_len_with(n, free, g2, STREAMED_BUFFERS)
}

/// As `streamed_piece_len`, with `buffers` piece buffers.
pub fn streamed_piece_len_with(n: usize, free: usize, g2: bool, buffers: usize) -> Option<usize> {
    let n = n.max(1);
    let mut pieces = 1usize;
    loop {
        let piece = n.div_ceil(pieces);
        if streamed_bytes_with(piece, g2, buffers) <= free {
            return Some(piece);
        }
        if piece <= MIN_STREAMED_PIECE {
            return None;
        }
        pieces += 1;
    }
}

/// Terms per piece for a streamed MSM of n terms on `gpu` now (its scalars already there):
/// the fewest pieces that fit in the free device memory by `streamed_bytes`, or None.
pub fn streamed_piece_for(gpu: &Gpu, n: usize, g2: bool) -> Result<Option<usize>> {
    streamed_piece_with(gpu, n, g2, STREAMED_BUFFERS)
}

/// As `streamed_piece_for`, with `buffers` piece buffers.
fn streamed_piece_with(gpu: &Gpu, n: usize, g2: bool, buffers: usize) -> Result<Option<usize>> {
    let (free, _) = gpu.mem_info()?;
    Ok(streamed_piece_len_with(n, piece_room(free), g2, buffers))
}

/// What of `free` device bytes a streamed MSM's pieces may take: all but a margin for the
/// allocator's granularity and the reductions' temporaries.
pub fn piece_room(free: usize) -> usize {
    free - (free / 8).min(256 << 20)
}

/// As `streamed_piece_for` for a G1 MSM, which streams whatever the room: when no piece fits
/// by the estimate, whose fixed allowance for the reductions (64 MB) is far more than a small
/// MSM uses, the smallest piece is tried, and an allocation that fails says so.
pub fn g1_streamed_piece(gpu: &Gpu, n: usize) -> Result<usize> {
    Ok(streamed_piece_for(gpu, n, false)?.unwrap_or(n.clamp(1, MIN_STREAMED_PIECE)))
}

/// Terms per piece for G1 MSMs streamed together (`msm_streamed_together`), the longest of
/// `n` terms, their scalars on the device already: as `g1_streamed_piece`, with the three
/// piece buffers they share.
pub fn together_piece_for(gpu: &Gpu, n: usize) -> Result<usize> {
    Ok(streamed_piece_with(gpu, n, false, TOGETHER_BUFFERS)?
        .unwrap_or(n.clamp(1, MIN_STREAMED_PIECE)))
}

/// The first terms of a streamed MSM whose points are on the device already (a set partly
/// resident): their G1 points, and their G2 points where the MSM sums G2 too.
#[derive(Clone, Copy)]
pub struct ResidentPrefix<'a> {
    pub terms: usize,
    pub g1: &'a DevBuf<u32>,
    pub g2: Option<&'a DevBuf<u32>>,
}

/// One MSM streamed from host memory: Σ s_i·P_i (and Σ s_i·Q_i over the G2 points when given)
/// for i < n, the scalars on the device, the points in host memory but for a resident prefix.
#[derive(Clone, Copy)]
pub struct StreamedMsm<'a> {
    pub points: HostPoints<'a>,
    pub resident: Option<ResidentPrefix<'a>>,
    pub scalars: &'a DevBuf<u32>,
    pub n: usize,
}

impl<'a> StreamedMsm<'a> {
    fn check(&self) -> Result<()> {
        let (n, points) = (self.n, self.points);
        ensure!(
            points.g1.len() >= n && self.scalars.len() >= n * FR_LIMBS,
            "streamed MSM of {n} terms over {} points and {} scalars",
            points.g1.len(),
            self.scalars.len() / FR_LIMBS
        );
        if let Some(g2) = points.g2 {
            ensure!(
                g2.len() >= n,
                "streamed MSM of {n} terms over {} G2 points",
                g2.len()
            );
        }
        if let Some(r) = self.resident {
            let start = self.resident_terms();
            ensure!(
                r.g1.len() >= start * AFFINE_LIMBS
                    && (points.g2.is_none()
                        || r.g2.is_some_and(|b| b.len() >= start * G2_AFFINE_LIMBS)),
                "{start} resident terms of a streamed MSM over buffers of {} G1 points{}",
                r.g1.len() / AFFINE_LIMBS,
                if points.g2.is_some() {
                    " and fewer G2 points"
                } else {
                    ""
                }
            );
        }
        Ok(())
    }

    fn resident_terms(&self) -> usize {
        self.resident.map_or(0, |r| r.terms.min(self.n))
    }

    /// The sums of no terms, in the groups this MSM sums.
    fn zero(&self) -> SharedSums {
        SharedSums {
            g1: G1Projective::identity(),
            g2: self.points.g2.map(|_| G2Projective::identity()),
        }
    }

    /// The MSM's pieces of up to `piece` terms, in order: the resident terms' (summed in
    /// pieces too, since the scratch of one piece is what the free memory was sized for), then
    /// the streamed ones'.
    fn pieces(&self, msm: usize, piece: usize) -> Vec<Piece<'a>> {
        let start = self.resident_terms();
        let with_g2 = self.points.g2.is_some();
        let mut pieces = Vec::new();
        if let Some(r) = self.resident {
            for at in (0..start).step_by(piece) {
                pieces.push(Piece {
                    msm,
                    scalars: self.scalars.at(at * FR_LIMBS),
                    len: piece.min(start - at),
                    points: PiecePoints::Device {
                        g1: r.g1.at(at * AFFINE_LIMBS),
                        g2: r.g2.filter(|_| with_g2).map(|b| b.at(at * G2_AFFINE_LIMBS)),
                    },
                });
            }
        }
        for at in (start..self.n).step_by(piece) {
            let r = at..(at + piece).min(self.n);
            pieces.push(Piece {
                msm,
                scalars: self.scalars.at(at * FR_LIMBS),
                len: r.len(),
                points: PiecePoints::Host(HostPoints {
                    g1: &self.points.g1[r.clone()],
                    g2: self.points.g2.map(|g2| &g2[r]),
                }),
            });
        }
        pieces
    }
}

/// Where one piece's points are.
#[derive(Clone, Copy)]
enum PiecePoints<'a> {
    /// On the device already (a resident prefix): summed where they are.
    Device {
        g1: DevPtr<u32>,
        g2: Option<DevPtr<u32>>,
    },
    /// In host memory: copied into a piece buffer before the piece is summed.
    Host(HostPoints<'a>),
}

/// One piece of streamed work: the MSM whose sums it adds to, its scalars and its points.
#[derive(Clone, Copy)]
struct Piece<'a> {
    msm: usize,
    scalars: DevPtr<u32>,
    len: usize,
    points: PiecePoints<'a>,
}

/// Σ s_i·P_i (and Σ s_i·Q_i over the G2 points when given) for i < n, the scalars resident on
/// the device and the points in host memory, or, for the first terms, on the device already
/// (`resident`), all in pieces of `piece` terms: the streamed points go over piece by piece,
/// each copied over the copy lane by another host thread while the piece before (or the
/// resident terms) is summed, into two piece buffers made once. What the copies cost, and how
/// much of it the sums hid, comes back beside the sums.
pub fn msm_streamed(
    gpu: &Gpu,
    points: HostPoints,
    resident: Option<ResidentPrefix>,
    scalars: &DevBuf<u32>,
    n: usize,
    piece: usize,
) -> Result<(SharedSums, Streaming)> {
    let msm = StreamedMsm {
        points,
        resident,
        scalars,
        n,
    };
    msm.check()?;
    ensure!(piece > 0, "streamed MSM in pieces of no points");
    let (sums, streaming) = sum_pieces(
        gpu,
        &msm.pieces(0, piece),
        vec![msm.zero()],
        STREAMED_BUFFERS,
    )?;
    Ok((sums[0], streaming))
}

/// Several streamed MSMs summed together, their pieces in turns (one of each, then the next of
/// each), in pieces of up to `piece` terms through three shared piece buffers. One MSM's copies
/// then go behind the other's sums: H's sums (2^27 full-width scalars) outlast its copies more
/// than four times on a 24 GB card, while L's (aux values, nearly all zeros and ones) are over
/// long before their points are; one after the other, L's copies waited ~0.2 s a start
/// (`ops/bench/gpu-2026-12-05-z.md`). Returns each MSM's sums in the order given.
pub fn msm_streamed_together(
    gpu: &Gpu,
    msms: &[StreamedMsm],
    piece: usize,
) -> Result<(Vec<SharedSums>, Streaming)> {
    ensure!(piece > 0, "streamed MSMs in pieces of no points");
    let mut lists = Vec::with_capacity(msms.len());
    for (i, msm) in msms.iter().enumerate() {
        msm.check()?;
        lists.push(msm.pieces(i, piece));
    }
    let schedule = in_turns(lists);
    let zeros = msms.iter().map(StreamedMsm::zero).collect();
    sum_pieces(gpu, &schedule, zeros, TOGETHER_BUFFERS)
}

/// The items of `lists` in turns: the first of each list, then the second of each, and so on;
/// a list that runs out is passed over.
fn in_turns<T>(lists: Vec<Vec<T>>) -> Vec<T> {
    let mut lists: Vec<_> = lists.into_iter().map(Vec::into_iter).collect();
    let mut all = Vec::new();
    loop {
        let before = all.len();
        all.extend(lists.iter_mut().filter_map(Iterator::next));
        if all.len() == before {
            return all;
        }
    }
}

/// How far the copy thread and the sums have got through the streamed pieces of a schedule.
#[derive(Default)]
struct Progress {
    /// Streamed pieces copied, and summed (in schedule order, counting streamed pieces only).
    copied: usize,
    summed: usize,
    /// The sums failed or are done: the copy thread stops.
    stop: bool,
    /// The copy thread has ended (its work done, stopped, failed, or panicked).
    ended: bool,
    /// The copy thread's error, for the sums to return.
    failed: Option<anyhow::Error>,
    bytes: u64,
    copy_ms: f64,
}

/// What the copy thread and the sums of `sum_pieces` share: their progress under one lock,
/// and a signal at every change of it.
#[derive(Default)]
struct Handoff {
    progress: std::sync::Mutex<Progress>,
    changed: std::sync::Condvar,
}

impl Handoff {
    fn lock(&self) -> std::sync::MutexGuard<'_, Progress> {
        // Every change is a plain assignment: what a panicking holder left is still usable.
        self.progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The progress, once `ready` holds of it.
    fn wait_until(&self, ready: impl Fn(&Progress) -> bool) -> std::sync::MutexGuard<'_, Progress> {
        let mut p = self.lock();
        while !ready(&p) {
            p = self
                .changed
                .wait(p)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        p
    }

    /// Changes the progress and tells the other side.
    fn update(&self, change: impl FnOnce(&mut Progress)) {
        change(&mut self.lock());
        self.changed.notify_all();
    }
}

/// Changes a handoff's progress when dropped, on a panic too: one side leaving, however it
/// leaves, says so, so that the other never waits for it in vain.
struct OnLeave<'a, F: FnMut(&mut Progress)> {
    handoff: &'a Handoff,
    change: F,
}

impl<F: FnMut(&mut Progress)> Drop for OnLeave<'_, F> {
    fn drop(&mut self) {
        self.handoff.update(&mut self.change);
    }
}

/// Adds `schedule`'s pieces in order to `sums` (one per MSM), each streamed piece copied first
/// into one of `buffers` piece buffers (the k-th streamed piece into buffer k mod `buffers`).
/// One host thread copies the streamed pieces in turn over the copy lane (`copy_pieces`), each
/// as soon as its buffer's last piece is summed, while the main lane sums (`add_pieces`): the
/// sums wait only for a copy not done yet, and that wait is `Streaming::waited_ms`.
fn sum_pieces(
    gpu: &Gpu,
    schedule: &[Piece],
    mut sums: Vec<SharedSums>,
    buffers: usize,
) -> Result<(Vec<SharedSums>, Streaming)> {
    ensure!(
        schedule.iter().all(|p| p.msm < sums.len()),
        "a streamed piece of none of the {} MSMs",
        sums.len()
    );
    if schedule.is_empty() {
        return Ok((sums, Streaming::default()));
    }
    let streamed: Vec<HostPoints> = schedule
        .iter()
        .filter_map(|p| match p.points {
            PiecePoints::Host(h) => Some(h),
            PiecePoints::Device { .. } => None,
        })
        .collect();
    let with_g2 = streamed.iter().any(|h| h.g2.is_some());
    gpu.bind()?;
    // Each piece's scratch is made of the blocks the piece before gave back: a free would wait
    // for the next piece's copy, and the sums would not overlap the copies at all.
    let _kept = gpu.keep_freed();
    let longest = streamed.iter().map(|h| h.g1.len()).max().unwrap_or(0);
    let buffers = (0..buffers.min(streamed.len()))
        .map(|_| PieceBuffers::new(gpu, longest, with_g2))
        .collect::<Result<Vec<_>>>()?;
    let handoff = Handoff::default();
    let began = std::time::Instant::now();
    let mut times = SumTimes::default();
    std::thread::scope(|scope| {
        scope.spawn(|| copy_pieces(gpu, &streamed, &buffers, &handoff));
        // Done or failed, the sums stop the copies (the scope then waits for the thread).
        let _stop = OnLeave {
            handoff: &handoff,
            change: |p: &mut Progress| p.stop = true,
        };
        add_pieces(gpu, schedule, &buffers, &handoff, &mut sums, &mut times)
    })?;
    let p = handoff.lock();
    let streaming = Streaming {
        bytes: p.bytes,
        copy_ms: p.copy_ms,
        waited_ms: times.waited_ms,
    };
    tracing::debug!(
        msms = sums.len(),
        pieces = schedule.len(),
        streamed_pieces = streamed.len(),
        longest,
        buffers = buffers.len(),
        g2 = with_g2,
        ms = began.elapsed().as_secs_f64() * 1e3,
        sums_ms = times.sums_ms,
        copy_ms = streaming.copy_ms,
        waited_ms = times.waited_ms,
        "streamed MSM"
    );
    Ok((sums, streaming))
}

/// The copy thread of `sum_pieces`: the streamed pieces in order, the k-th into buffer
/// k mod `buffers.len()` once the piece that used that buffer before is summed. It stops at the
/// end, when the sums stop, or at its first error, which it hands over.
fn copy_pieces(gpu: &Gpu, streamed: &[HostPoints], buffers: &[PieceBuffers], handoff: &Handoff) {
    let _ended = OnLeave {
        handoff,
        change: |p: &mut Progress| p.ended = true,
    };
    if let Err(e) = gpu.bind() {
        handoff.update(|p| p.failed = Some(e));
        return;
    }
    for (k, host) in streamed.iter().enumerate() {
        if handoff
            .wait_until(|p| p.stop || k < p.summed + buffers.len())
            .stop
        {
            return;
        }
        let t = std::time::Instant::now();
        match copy_piece(gpu, *host, &buffers[k % buffers.len()]) {
            Ok(bytes) => handoff.update(|p| {
                p.copied = k + 1;
                p.bytes += bytes;
                p.copy_ms += t.elapsed().as_secs_f64() * 1e3;
            }),
            Err(e) => {
                handoff.update(|p| p.failed = Some(e));
                return;
            }
        }
    }
}

/// One piece's points into `buf` over the copy lane; returns the bytes copied.
fn copy_piece(gpu: &Gpu, host: HostPoints, buf: &PieceBuffers) -> Result<u64> {
    let g1 = points_as_limbs(host.g1);
    gpu.upload_in(Lane::Copy, &buf.g1, 0, g1)?;
    let mut bytes = std::mem::size_of_val(g1) as u64;
    if let (Some(g2), Some(dst)) = (host.g2, buf.g2.as_ref()) {
        let g2 = points_as_limbs(g2);
        gpu.upload_in(Lane::Copy, dst, 0, g2)?;
        bytes += std::mem::size_of_val(g2) as u64;
    }
    Ok(bytes)
}

/// Where `add_pieces` spent its time, on the host clock.
#[derive(Default)]
struct SumTimes {
    /// Waiting for copies not done yet.
    waited_ms: f64,
    /// In the sums.
    sums_ms: f64,
}

/// The sums of `sum_pieces`: each piece in turn, a streamed one once the copy thread has
/// copied it, into the sums of its MSM.
fn add_pieces(
    gpu: &Gpu,
    schedule: &[Piece],
    buffers: &[PieceBuffers],
    handoff: &Handoff,
    sums: &mut [SharedSums],
    times: &mut SumTimes,
) -> Result<()> {
    // Streamed pieces summed so far.
    let mut k = 0;
    for piece in schedule {
        let operands = match piece.points {
            PiecePoints::Device { g1, g2 } => Operands {
                g1,
                g2,
                scalars: piece.scalars,
            },
            PiecePoints::Host(host) => {
                let t = std::time::Instant::now();
                let mut p = handoff.wait_until(|p| p.copied > k || p.ended);
                if p.copied <= k {
                    let e = p.failed.take().unwrap_or_else(|| {
                        anyhow::anyhow!("the point copy thread ended early (it panicked)")
                    });
                    return Err(e.context("copying a streamed MSM's points"));
                }
                drop(p);
                times.waited_ms += t.elapsed().as_secs_f64() * 1e3;
                let buf = &buffers[k % buffers.len()];
                Operands {
                    g1: buf.g1.ptr(),
                    g2: host.g2.and(buf.g2.as_ref().map(DevBuf::ptr)),
                    scalars: piece.scalars,
                }
            }
        };
        let t = std::time::Instant::now();
        let part = shared_sums(gpu, operands, piece.len)?;
        times.sums_ms += t.elapsed().as_secs_f64() * 1e3;
        let sum = &mut sums[piece.msm];
        sum.g1 += part.g1;
        if let (Some(sum), Some(part)) = (sum.g2.as_mut(), part.g2) {
            *sum += part;
        }
        if matches!(piece.points, PiecePoints::Host(_)) {
            // `shared_sums` returns once its results are on the host: the piece's buffer is
            // free for the copy thread.
            k += 1;
            handoff.update(|p| p.summed = k);
        }
    }
    Ok(())
}

/// One piece's points on the device, in G1 and (for a shared MSM) in G2.
struct PieceBuffers {
    g1: DevBuf<u32>,
    g2: Option<DevBuf<u32>>,
}

impl PieceBuffers {
    fn new(gpu: &Gpu, piece: usize, g2: bool) -> Result<PieceBuffers> {
        Ok(PieceBuffers {
            g1: gpu.alloc::<u32>(piece * AFFINE_LIMBS)?,
            g2: if g2 {
                Some(gpu.alloc::<u32>(piece * G2_AFFINE_LIMBS)?)
            } else {
                None
            },
        })
    }
}

/// Σ s_i·P_i with points and scalars on the host: the scalars copied over, the points
/// streamed (`msm_streamed`).
pub fn msm_streamed_from_host(
    gpu: &Gpu,
    points: &[G1Affine],
    scalars: &[Fr],
) -> Result<G1Projective> {
    ensure!(
        points.len() == scalars.len(),
        "MSM of {} points with {} scalars",
        points.len(),
        scalars.len()
    );
    let ds = gpu.alloc::<u32>(scalars.len() * FR_LIMBS)?;
    gpu.upload(&ds, 0, scalars_as_limbs(scalars))?;
    let host = HostPoints {
        g1: points,
        g2: None,
    };
    let piece = g1_streamed_piece(gpu, scalars.len())?;
    Ok(msm_streamed(gpu, host, None, &ds, scalars.len(), piece)?
        .0
        .g1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A side of a streamed MSM's handoff that panics still says it has ended, so that the
    /// other side's wait returns (and the sums report the copy thread's failure).
    #[test]
    fn a_panicking_side_still_ends() {
        let handoff = Handoff::default();
        std::thread::scope(|scope| {
            let copier = scope.spawn(|| {
                let _ended = OnLeave {
                    handoff: &handoff,
                    change: |p: &mut Progress| p.ended = true,
                };
                panic!("a copy thread that fails hard");
            });
            let p = handoff.wait_until(|p| p.ended || p.copied > 0);
            assert!(p.ended && p.copied == 0 && p.failed.is_none());
            drop(p);
            assert!(copier.join().is_err());
        });
    }

    /// MSMs streamed together go piece for piece in turns, the longer one's last pieces alone.
    #[test]
    fn pieces_go_in_turns() {
        let turns = in_turns(vec![vec!["h0", "h1", "h2"], vec!["l0"], vec![]]);
        assert_eq!(turns, ["h0", "l0", "h1", "h2"]);
        assert!(in_turns::<u8>(vec![]).is_empty());
    }

    /// Tiny MSMs take small windows: never more buckets than the bound per scalar allows.
    #[test]
    fn small_msms_take_few_buckets() {
        for m in [1usize, 2, 7, 50, 1000] {
            let c = modelled_window_bits(m);
            assert!(
                1u64 << (c - 1) <= MAX_BUCKETS_PER_SCALAR * m as u64,
                "{m} scalars: {c}-bit windows"
            );
        }
    }

    /// The measured best at each size timed (H100): 16-bit windows from 2^19 to 2^23 and for a
    /// 2^24 PoRep-like MSM's ~218,000 scalars other than 0 and 1, 20-bit ones at 2^24, 2^26 and
    /// 2^27 (a 32 GiB partition's H); no top window of fewer than half the bits. The cost
    /// model's choice, not `C2Q_MSM_WINDOW`'s.
    #[test]
    fn window_choice_follows_the_measurements() {
        for (log, c) in [(19, 16), (20, 16), (23, 16), (24, 20), (26, 20), (27, 20)] {
            assert_eq!(modelled_window_bits(1 << log), c, "2^{log}");
        }
        for log in 0..=30 {
            let c = modelled_window_bits(1 << log);
            assert!(2 * top_window_bits(c) >= c, "2^{log}: {c}");
        }
        assert_eq!(modelled_window_bits(218_000), 16);
        assert!(modelled_window_bits(50) <= 10);
        assert_eq!(top_window_bits(20), 16);
        assert_eq!(top_window_bits(19), 9);
    }

    /// The chunks cover every sorted entry of a window, the windows every bit of a scalar
    /// (signed digits carry into one more bit), the segments every bucket.
    #[test]
    fn windows_cover_the_scalars() {
        for m in [1u32, 31, 32, 33, 1000, 1 << 20, 33_221_111] {
            let w = Windows::for_scalars(m);
            assert!(
                w.chunks * w.chunk >= m && (w.chunks - 1) * w.chunk < m,
                "m = {m}"
            );
            assert!(w.windows * w.c >= 256, "m = {m}");
            assert!(w.nseg * SEGMENT >= w.nbuckets, "m = {m}");
        }
    }

    /// The G2 half's scratch is mostly its buckets (an XYZZ point twice G1's), less than the
    /// G1 half's: 3 GiB for a 32 GiB partition's B query in the worst case (every scalar other
    /// than 0 and 1, so the widest windows).
    #[test]
    fn g2_scratch_is_the_g2_buckets() {
        let n = 33_221_111;
        let c = window_bits(n);
        let buckets = (256usize.div_ceil(c as usize)) << (c - 1);
        assert!(g2_scratch_bytes(n) >= buckets * G2::XYZZ_LIMBS * 4);
        assert!(g2_scratch_bytes(n) < scratch_bytes(n));
        assert!(g2_scratch_bytes(n) < 4 << 30);
    }

    /// Streamed pieces: the fewest equal ones that fit, so that a 32 GiB partition's H (2^27
    /// points) goes in 4 pieces beside its scalars and the twiddles on a 24 GiB card, and the
    /// B query with its G2 points in a few; none when not even the smallest piece fits.
    #[test]
    fn streamed_pieces_fit_and_are_few() {
        let gib = |g: usize| g << 30;
        for (n, free, g2) in [
            (1usize << 27, gib(16), false),
            (1 << 27, gib(8), false),
            (33_221_111, gib(8), true),
            (1000, gib(1), true),
        ] {
            let piece = streamed_piece_len(n, free, g2).expect("a piece fits");
            assert!(streamed_bytes(piece, g2) <= free, "n = {n}");
            let pieces = n.div_ceil(piece);
            if pieces > 1 {
                // One piece fewer would not have fitted.
                let fewer = n.div_ceil(pieces - 1);
                assert!(streamed_bytes(fewer, g2) > free, "n = {n}");
            }
        }
        // A third buffer costs pieces only where memory is short.
        let two = streamed_piece_len_with(1 << 27, gib(10), false, STREAMED_BUFFERS);
        let three = streamed_piece_len_with(1 << 27, gib(10), false, TOGETHER_BUFFERS);
        assert!(three.zip(two).is_some_and(|(t, w)| t <= w));
        assert!(streamed_bytes_with(1 << 20, false, 3) > streamed_bytes(1 << 20, false));
        let h_24 = streamed_piece_len(1 << 27, gib(24) - gib(8) - (256 << 20), false);
        // Three pieces, where powers of two alone made it four.
        assert_eq!(h_24.map(|p| (1usize << 27).div_ceil(p)), Some(3));
        assert_eq!(streamed_piece_len(1 << 27, 64 << 20, false), None);
    }
}
