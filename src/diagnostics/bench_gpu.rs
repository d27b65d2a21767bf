//! `c2q bench gpu`: NTT and MSM timings against sppark's published figures, and
//! partition-shaped proving starts (points resident, or streamed from host memory within a
//! memory limit), on inputs made on the GPU.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use blstrs::{G1Projective, G2Projective};
use group::{prime::PrimeCurveAffine, Curve};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::inputs::{gen_points, gen_scalars, porep_host, GenGroup};
use super::report::print_devices;
use crate::gpu::backend::{
    device_start_peak_bytes, start_peak_bytes, start_resident, CudaBackend, PointSets, Points,
    StartInput, StartPhases, StreamedPhases,
};
use crate::gpu::device::Gpu;
use crate::gpu::limbs::{points_as_limbs_mut, FR_LIMBS};
use crate::gpu::memory::DevBuf;
use crate::gpu::memory::HostToDevice;
use crate::gpu::msm::{msm, msm_shared};
use crate::gpu::ntt::Ntt;
use crate::gpu::products::DeviceR1cs;
use crate::gpu::witness::expand_scratch_bytes;
use crate::groth16::{Backend, CompactValues, Density, Evaluations, Multiexps, Srs, Witness};

/// `c2q bench gpu`: MSM and NTT timings, and partition-shaped proving starts.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchGpuArgs {
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// log2 of the smallest size timed.
    #[arg(long, default_value_t = 20)]
    pub min_log: u32,
    /// log2 of the largest size timed.
    #[arg(long, default_value_t = 27)]
    pub max_log: u32,
    /// Timed repetitions per measurement (after one warm-up); the median is reported.
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Skip the MSM timings.
    #[arg(long)]
    pub no_msm: bool,
    /// Skip the NTT timings.
    #[arg(long)]
    pub no_ntt: bool,
    /// Skip the partition-shaped run.
    #[arg(long)]
    pub no_partition: bool,
    /// Time the partition-shaped start without the B query's G2 points on the device, its G2
    /// multiexp left to the CPU finalizer (as on a GPU without room for them).
    #[arg(long)]
    pub no_g2: bool,
    /// The proof whose partition the partition-shaped run proves, as the worker does: its real
    /// recorded constraints (loaded from the parameter cache, or recorded there: minutes at
    /// 32 GiB) and a shape-only partition's witness, A, B, C made on the GPU.
    #[arg(long, default_value = "StackedDrg32GiBV1_1")]
    pub partition_proof: String,
    /// Time the partition-shaped start from host-made A, B, C instead (a synthetic PoRep-like
    /// partition of `--partition-constraints`): the path of GPUs without room for the
    /// constraints.
    #[arg(long)]
    pub host_products: bool,
    /// Constraints of the synthetic partition (`--host-products`, `--streamed-gib`; default: a
    /// 32 GiB PoRep partition).
    #[arg(long, default_value_t = 130_278_869)]
    pub partition_constraints: usize,
    /// Also time the partition-shaped start with its points in host memory, through a backend
    /// allowed this much device memory (GiB): the streaming path of GPUs too small for them.
    #[arg(long, value_name = "GIB")]
    pub streamed_gib: Option<f64>,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `c2q bench gpu`.
pub fn bench_gpu(args: &BenchGpuArgs) -> Result<()> {
    print_devices()?;
    let backend = CudaBackend::new(args.device)?;
    let gpu = backend.gpu();
    let mut rng = ChaCha8Rng::seed_from_u64(0xbe4c);
    let min_log = args.min_log.min(args.max_log);
    let max_log = args.max_log.min(28);

    let mut rows: Vec<BenchRow> = Vec::new();
    if !args.no_ntt {
        rows.extend(ntt_timings(gpu, min_log, max_log, args.reps)?);
    }
    if !args.no_msm {
        rows.extend(msm_timings(gpu, min_log, max_log, args.reps, &mut rng)?);
    }
    for r in &mut rows {
        r.sppark_ms = sppark_ms(&gpu.info.name, &r.work, r.log_n);
    }
    let mut partition = None;
    if !args.no_partition {
        partition = Some(match args.host_products {
            true => bench_partition(gpu, args.partition_constraints, !args.no_g2, &mut rng)?,
            false => {
                bench_partition_from_constraints(gpu, &args.partition_proof, !args.no_g2, &mut rng)?
            }
        });
    }
    let transfer = host_to_device(gpu)?;
    let mut streamed = None;
    if let Some(gib) = args.streamed_gib {
        let limit = crate::config::gib_to_bytes(gib)?;
        streamed = Some(bench_partition_streamed(
            gpu,
            args.device,
            args.partition_constraints,
            limit,
            &mut rng,
        )?);
    }

    if args.json {
        let out = serde_json::json!({
            "device": gpu.info.to_string(),
            "rows": rows,
            "partition": partition,
            "streamed": streamed,
            "host_to_device": transfer,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_table(gpu, &rows, partition.as_ref(), streamed.as_ref())?;
        println!("{}", serde_json::to_string(&transfer)?);
    }
    Ok(())
}

/// Points of a 32 GiB PoRep partition a streamed start copies: H, L, A, B in G1 and B in G2.
const POINTS_32G_BYTES: u64 = 47_400_000_000;

/// The host-to-device bandwidth streamed points travel at, and what it means for a 32 GiB
/// partition whose points do not fit on the GPU.
#[derive(Clone, Copy, Debug, serde::Serialize)]
struct Transfer {
    host_to_device: HostToDevice,
    /// Seconds to copy a 32 GiB partition's points (47.4 GB) at that bandwidth.
    points_32g_s: f64,
}

fn host_to_device(gpu: &Gpu) -> Result<Transfer> {
    let host_to_device = gpu.measure_host_to_device(1 << 30)?;
    let points_32g_s = host_to_device.seconds_for(POINTS_32G_BYTES);
    eprintln!(
        "host to device: {:.1} GB/s {}; a 32 GiB partition's points (47.4 GB) take {points_32g_s:.2} s",
        host_to_device.gb_per_s,
        host_to_device.how()
    );
    Ok(Transfer {
        host_to_device,
        points_32g_s,
    })
}

/// One timing line, printed (to stderr) as it is measured.
fn row(work: &str, log_n: u32, (med, min): (f64, f64)) -> BenchRow {
    eprintln!("{work:<28} 2^{log_n:<3} {med:>10.2} ms");
    BenchRow {
        work: work.to_string(),
        log_n,
        median_ms: med,
        min_ms: min,
        sppark_ms: None,
    }
}

/// Forward NTTs of 2^min_log to 2^max_log random scalars.
fn ntt_timings(gpu: &Gpu, min_log: u32, max_log: u32, reps: usize) -> Result<Vec<BenchRow>> {
    let mut rows = Vec::new();
    let mut ntt = Ntt::new();
    for log_n in min_log..=max_log {
        let n = 1usize << log_n;
        let buf = gpu.alloc::<u32>(n * FR_LIMBS)?;
        gen_scalars(gpu, &buf, n, 7, 0)?;
        let r = time_events(gpu, reps, || ntt.forward(gpu, &buf, log_n))?;
        rows.push(row("ntt forward", log_n, r));
        // The butterflies alone, as sppark's bit-reversed-out figure counts them.
        let r = time_events(gpu, reps, || ntt.forward_bit_reversed(gpu, &buf, log_n))?;
        rows.push(row("ntt forward, bit-reversed out", log_n, r));
        // Most of H's transforms are inverse ones (src/gpu/ntt.rs); timed here with the bit
        // reversal and the 1/n scaling.
        let r = time_events(gpu, reps, || ntt.inverse(gpu, &buf, log_n))?;
        rows.push(row("ntt inverse", log_n, r));
        // On the coset g·⟨ω⟩, natural order in and out, as sppark's coset type: the forward
        // one scales by g^i in a pass of its own before the transform; the inverse one folds
        // g^-i into its 1/n scaling.
        let r = time_events(gpu, reps, || ntt.coset_forward(gpu, &buf, log_n))?;
        rows.push(row("ntt coset forward", log_n, r));
        let r = time_events(gpu, reps, || ntt.coset_inverse(gpu, &buf, log_n))?;
        rows.push(row("ntt coset inverse", log_n, r));
    }
    Ok(rows)
}

/// MSMs in G1 of 2^min_log to 2^max_log points, with full-width and PoRep-like scalars; then
/// the B query's MSM, G1 and G2 over one sort, up to 2^26 (a 32 GiB partition's B query is
/// 2^25): the G2 points of 2^26 take 12.9 GB.
fn msm_timings(
    gpu: &Gpu,
    min_log: u32,
    max_log: u32,
    reps: usize,
    rng: &mut ChaCha8Rng,
) -> Result<Vec<BenchRow>> {
    let mut rows = Vec::new();
    let n_max = 1usize << max_log;
    let (points, _) = gen_points::<G1Projective>(gpu, n_max, rng)?;
    let scalars = gpu.alloc::<u32>(n_max * FR_LIMBS)?;
    for (work, mode) in [("msm full-width", 0u32), ("msm porep-like", 1)] {
        for log_n in min_log..=max_log {
            let n = 1usize << log_n;
            gen_scalars(gpu, &scalars, n, 11 + log_n as u64, mode)?;
            let r = time_events(gpu, reps, || msm(gpu, &points, &scalars, n).map(|_| ()))?;
            rows.push(row(work, log_n, r));
        }
    }
    let max_g2 = max_log.min(26);
    if min_log <= max_g2 {
        let (points2, _) = gen_points::<G2Projective>(gpu, 1 << max_g2, rng)?;
        for log_n in min_log..=max_g2 {
            let n = 1usize << log_n;
            gen_scalars(gpu, &scalars, n, 13 + log_n as u64, 1)?;
            let r = time_events(gpu, reps, || {
                msm_shared(gpu, &points, Some(&points2), &scalars, n).map(|_| ())
            })?;
            rows.push(row("msm g1+g2 porep-like", log_n, r));
        }
    }
    Ok(rows)
}

/// The results as a table, the partition-shaped runs as one JSON line each.
fn print_table(
    gpu: &Gpu,
    rows: &[BenchRow],
    partition: Option<&PartitionTiming>,
    streamed: Option<&StreamedTiming>,
) -> Result<()> {
    println!("{}", gpu.info);
    println!(
        "{:<28} {:>6} {:>11} {:>11} {:>10} {:>8}",
        "work", "size", "median ms", "min ms", "sppark ms", "ratio"
    );
    for r in rows {
        let (sp, ratio) = match r.sppark_ms {
            Some(s) => (format!("{s:.1}"), format!("{:.2}", r.median_ms / s)),
            None => ("-".into(), "-".into()),
        };
        println!(
            "{:<28} {:>6} {:>11.2} {:>11.2} {:>10} {:>8}",
            r.work,
            format!("2^{}", r.log_n),
            r.median_ms,
            r.min_ms,
            sp,
            ratio
        );
    }
    if let Some(p) = partition {
        println!("{}", serde_json::to_string(p)?);
    }
    if let Some(s) = streamed {
        println!("{}", serde_json::to_string(s)?);
    }
    Ok(())
}

/// One timing line.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchRow {
    pub work: String,
    pub log_n: u32,
    pub median_ms: f64,
    pub min_ms: f64,
    pub sppark_ms: Option<f64>,
}

/// sppark v0.1.15's figures (ms) measured beside c2q in one session, by card: an H200
/// (2026-12-03) and an H100 80 GB (2026-12-06, `ops/bench/gpu-2026-12-06-ac.md`; its coset
/// transforms in `-ae.md`). The forward NTT is natural in and out; "bit-reversed out" leaves
/// the output bit-reversed; the coset ones are natural in and out, on the coset of 7 (the
/// generator both use). Other cards get none: `ops/bench/sppark` times sppark on the GPU at
/// hand.
const SPPARK_MS: &[(&str, &str, u32, f64)] = &[
    ("H200", "msm full-width", 20, 20.9),
    ("H200", "msm full-width", 24, 156.0),
    ("H200", "msm full-width", 26, 555.8),
    ("H200", "msm full-width", 27, 1093.0),
    ("H200", "ntt forward", 27, 44.4),
    ("H200", "ntt forward, bit-reversed out", 27, 42.4),
    ("H100", "msm full-width", 20, 20.69),
    ("H100", "msm full-width", 24, 156.89),
    ("H100", "msm full-width", 26, 558.55),
    ("H100", "msm full-width", 27, 1097.22),
    ("H100", "ntt forward", 27, 45.03),
    ("H100", "ntt forward, bit-reversed out", 27, 42.32),
    ("H100", "ntt inverse", 27, 47.61),
    ("H100", "ntt coset forward", 27, 49.82),
    ("H100", "ntt coset inverse", 27, 52.35),
];

/// sppark's figure for the same work on the same kind of card, if one was measured.
fn sppark_ms(device: &str, work: &str, log_n: u32) -> Option<f64> {
    SPPARK_MS
        .iter()
        .find(|(card, w, l, _)| device.contains(card) && *w == work && *l == log_n)
        .map(|&(_, _, _, ms)| ms)
}

fn median(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    let min = v.first().copied().unwrap_or(0.0);
    (v[v.len() / 2], min)
}

/// Times `f` with device events around it: one warm-up, then `reps` runs.
fn time_events(gpu: &Gpu, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<(f64, f64)> {
    f()?;
    gpu.sync()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let start = gpu.event()?;
        f()?;
        let end = gpu.event()?;
        times.push(start.elapsed_ms(&end).context("cannot read event timing")? as f64);
    }
    Ok(median(times))
}

/// Timings of one partition-shaped proving start.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PartitionTiming {
    /// Where A, B, C were made: "device" (from the recorded constraints, as the worker does)
    /// or "host" (a synthetic partition's, copied over).
    pub products: &'static str,
    pub constraints: usize,
    pub log_domain: u32,
    pub aux: usize,
    pub a_points: usize,
    pub b_points: usize,
    pub srs_gen_ms: f64,
    /// The second proving start of the process: what each partition costs a running worker.
    #[serde(flatten)]
    pub phases: StartPhases,
    /// The process's first proving start.
    pub first: StartPhases,
    /// Device memory the steady-state start held at its peak besides the point sets and the
    /// NTT's tables, and what c2q budgets for it (`backend::start_peak_bytes`) when deciding
    /// whether a circuit's points can stay resident.
    pub device_peak_bytes: u64,
    pub device_estimate_bytes: usize,
}

/// A partition-shaped start's point sets, made on the GPU: H, L, A and B in G1 and, with
/// `b_g2`, B in G2.
struct PartitionPoints {
    h: DevBuf<u32>,
    l: DevBuf<u32>,
    a: DevBuf<u32>,
    b: DevBuf<u32>,
    b2: Option<DevBuf<u32>>,
}

impl PartitionPoints {
    /// `lens`: H, L, A and B points.
    fn generate(gpu: &Gpu, lens: [usize; 4], b_g2: bool, rng: &mut ChaCha8Rng) -> Result<Self> {
        Ok(PartitionPoints {
            h: gen_points::<G1Projective>(gpu, lens[0], rng)?.0,
            l: gen_points::<G1Projective>(gpu, lens[1], rng)?.0,
            a: gen_points::<G1Projective>(gpu, lens[2], rng)?.0,
            b: gen_points::<G1Projective>(gpu, lens[3], rng)?.0,
            b2: match b_g2 {
                true => Some(gen_points::<G2Projective>(gpu, lens[3], rng)?.0),
                false => None,
            },
        })
    }

    fn sets(&self) -> PointSets<'_> {
        PointSets {
            h: Points::Device(&self.h),
            l: Points::Device(&self.l),
            a: Points::Device(&self.a),
            b_g1: Points::Device(&self.b),
            b_g2: self.b2.as_ref().map(Points::Device),
        }
    }
}

/// Two proving starts timed, `start(run, sets)` making each: the process's first (pinned
/// staging buffers and host threads still cold) and the one after it, which is what a worker
/// proving partition after partition pays. Returns both, and the device memory the second
/// held at its peak besides what was allocated before it (the point sets, the NTT's tables,
/// resident constraints). The sums are checked to be on the curve, so that nothing is
/// optimised away unseen.
fn two_starts(
    gpu: &Gpu,
    points: &PartitionPoints,
    mut start: impl FnMut(u64, PointSets) -> Result<(Multiexps, StartPhases)>,
) -> Result<(StartPhases, StartPhases, u64)> {
    let mut runs = Vec::with_capacity(2);
    let mut device_peak_bytes = 0;
    for run in 0..2u64 {
        let held = gpu.allocated();
        gpu.reset_peak();
        let (sums, phases) = start(run, points.sets())?;
        device_peak_bytes = gpu.peak_allocated().saturating_sub(held);
        let g2_ok = sums.b_g2.is_some() == points.b2.is_some()
            && sums
                .b_g2
                .is_none_or(|p| bool::from(p.to_affine().is_on_curve()));
        if !bool::from(
            (sums.h + sums.l + sums.a + sums.b_g1)
                .to_affine()
                .is_on_curve(),
        ) || !g2_ok
        {
            bail!("partition run produced a point off the curve");
        }
        eprintln!(
            "partition: proving start {} of 2: {:.0} ms",
            run + 1,
            phases.total_ms
        );
        runs.push(phases);
    }
    let phases = runs.pop().context("no partition run")?;
    let first = runs.pop().context("no first partition run")?;
    Ok((first, phases, device_peak_bytes))
}

/// An NTT engine with its twiddle table for 2^log_n made: built once per process, not per
/// partition.
fn warm_ntt(gpu: &Gpu, log_n: u32) -> Result<Ntt> {
    let mut ntt = Ntt::new();
    let tiny = gpu.alloc_zeroed::<u32>((1usize << log_n) * FR_LIMBS)?;
    ntt.forward(gpu, &tiny, log_n)?;
    Ok(ntt)
}

/// Proving start for one partition of `proof` as the worker makes it: the circuit's recorded
/// constraints (from the parameter cache, or recorded there) resident on the GPU, a shape-only
/// partition's packed witness (the real structure, random values) expanded there, A, B, C
/// made there, with a random SRS of the circuit's shape made on the GPU. Timed twice (see
/// `two_starts`).
fn bench_partition_from_constraints(
    gpu: &Gpu,
    proof: &str,
    b_g2: bool,
    rng: &mut ChaCha8Rng,
) -> Result<PartitionTiming> {
    let bench_proof = crate::bench::BenchProof::from_name(proof, false)?;
    eprintln!("partition: a shape-only {proof} partition's witness and the circuit's constraints (recorded once into the parameter cache: minutes at 32 GiB) …");
    let (job, _) = bench_proof.shape_only_job(1)?;
    let packed = job.witness(0)?.packed();
    let r1cs = job.r1cs()?;
    let constraints = r1cs.constraints();
    let domain = constraints.max(1).next_power_of_two();
    let log_n = domain.trailing_zeros();
    let lens = [
        r1cs.aux,
        r1cs.inputs + r1cs.a_aux_density.count(),
        r1cs.b_input_density.count() + r1cs.b_aux_density.count(),
    ];
    eprintln!(
        "partition: {constraints} constraints, domain 2^{log_n}, {} inputs, {} aux variables: generating points …",
        r1cs.inputs, r1cs.aux
    );
    let t = Instant::now();
    let points =
        PartitionPoints::generate(gpu, [domain - 1, lens[0], lens[1], lens[2]], b_g2, rng)?;
    let srs_gen_ms = t.elapsed().as_secs_f64() * 1e3;
    let device_r1cs = DeviceR1cs::upload(gpu, &r1cs)?;
    let mut ntt = warm_ntt(gpu, log_n)?;
    let (first, phases, device_peak_bytes) = two_starts(gpu, &points, |_, sets| {
        let input = StartInput::Device {
            constraints: &device_r1cs,
            witness: &packed,
        };
        start_resident(gpu, &mut ntt, sets, input)
    })?;
    let expand = expand_scratch_bytes(&packed.aux);
    let device_estimate_bytes = device_start_peak_bytes(domain, r1cs.inputs, lens, expand, b_g2);
    eprintln!(
        "partition: device memory at the peak besides points, constraints and NTT tables: \
         {:.2} GB, estimated {:.2} GB",
        device_peak_bytes as f64 / 1e9,
        device_estimate_bytes as f64 / 1e9
    );
    Ok(PartitionTiming {
        products: "device",
        constraints,
        log_domain: log_n,
        aux: r1cs.aux,
        a_points: lens[1],
        b_points: lens[2],
        srs_gen_ms,
        phases,
        first,
        device_peak_bytes,
        device_estimate_bytes,
    })
}

/// Proving start for one synthetic partition of `constraints` constraints, PoRep-shaped (aux
/// variables ≈ constraints, A density 99.6 %, B density 25.5 %, witness 51 % zeros and 47 %
/// ones), from host-made a, b, c and witness (`--host-products`: the path of a GPU without
/// room for the recorded constraints), with a random SRS made on the GPU. Timed twice with
/// fresh inputs (see `two_starts`). With `b_g2`, the B query's G2 points are on the device
/// too, and its B MSM sums them beside the G1 ones.
fn bench_partition(
    gpu: &Gpu,
    constraints: usize,
    b_g2: bool,
    rng: &mut ChaCha8Rng,
) -> Result<PartitionTiming> {
    let domain = constraints.next_power_of_two();
    let log_n = domain.trailing_zeros();
    let aux = constraints;
    let a_density = Density::from_fn(aux, |i| i % 1000 < 996);
    let b_density = Density::from_fn(aux, |i| i % 1000 < 255);
    let (a_points, b_points) = (a_density.count(), b_density.count());
    let porep_witness = |seed: u64| Witness {
        input: Vec::new(),
        aux: porep_host(aux, seed, 2),
        a_aux_density: a_density.clone(),
        b_input_density: Density::full(0),
        b_aux_density: b_density.clone(),
        compact_aux: None,
    };
    eprintln!("partition: {constraints} constraints, domain 2^{log_n}: generating inputs …");
    let t = Instant::now();
    let points = PartitionPoints::generate(gpu, [domain - 1, aux, a_points, b_points], b_g2, rng)?;
    let srs_gen_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut ntt = warm_ntt(gpu, log_n)?;
    let (first, phases, device_peak_bytes) = two_starts(gpu, &points, |run, sets| {
        let seed = 16 * run;
        let evals = Evaluations {
            pins: Default::default(),
            a: porep_host(constraints, seed + 1, 3),
            b: porep_host(constraints, seed + 2, 3),
            c: porep_host(constraints, seed + 3, 3),
        };
        let witness = porep_witness(seed + 4);
        let input = StartInput::Host {
            evals,
            witness: &witness,
        };
        start_resident(gpu, &mut ntt, sets, input)
    })?;
    let device_estimate_bytes = start_peak_bytes(domain, [aux, a_points, b_points], b_g2);
    eprintln!(
        "partition: device memory at the peak besides points and NTT tables: {:.2} GB, \
         estimated {:.2} GB",
        device_peak_bytes as f64 / 1e9,
        device_estimate_bytes as f64 / 1e9
    );
    Ok(PartitionTiming {
        products: "host",
        constraints,
        log_domain: log_n,
        aux,
        a_points,
        b_points,
        srs_gen_ms,
        phases,
        first,
        device_peak_bytes,
        device_estimate_bytes,
    })
}

/// The partition-shaped start proved from host memory by a backend limited to `limit` bytes
/// of the GPU.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StreamedTiming {
    pub constraints: usize,
    pub memory_limit_bytes: usize,
    pub total_ms: f64,
    pub device_peak_bytes: u64,
    /// Where the start's time went, the points' copies included.
    pub phases: Option<StreamedPhases>,
}

/// As `bench_partition`, but with the points in host memory (made on the GPU and brought
/// back) and a backend allowed `limit` bytes of device memory, so that they do not fit and
/// every MSM streams them: what a GPU too small for a circuit's points pays per partition.
/// n distinct points made on the GPU (`gen_points`), brought to host memory.
fn host_points<G: GenGroup>(gpu: &Gpu, n: usize, rng: &mut ChaCha8Rng) -> Result<Vec<G::Affine>> {
    let (d, _) = gen_points::<G>(gpu, n, rng)?;
    let mut v = vec![G::Affine::identity(); n];
    gpu.download(&d, 0, points_as_limbs_mut(&mut v))?;
    Ok(v)
}

fn bench_partition_streamed(
    gpu: &Gpu,
    device: usize,
    constraints: usize,
    limit: usize,
    rng: &mut ChaCha8Rng,
) -> Result<StreamedTiming> {
    let domain = constraints.next_power_of_two();
    let aux = constraints;
    let aux_values = porep_host(aux, 24, 2);
    // As the worker's products stage hands a witness on: its aux values in compact form too.
    let witness = Witness {
        input: Vec::new(),
        compact_aux: Some(CompactValues::new(&aux_values)),
        aux: aux_values,
        a_aux_density: Density::from_fn(aux, |i| i % 1000 < 996),
        b_input_density: Density::full(0),
        b_aux_density: Density::from_fn(aux, |i| i % 1000 < 255),
    };
    let lens = [
        domain - 1,
        aux,
        witness.a_query_len(),
        witness.b_query_len(),
    ];
    eprintln!("streamed partition: {constraints} constraints, points to host memory …");
    // The B query's G2 points too, as a worker's parameters have them: the start streams them
    // beside its G1 points.
    let srs = Srs {
        pins: Default::default(),
        key: "bench streamed partition".into(),
        vk: crate::canary::srs()?.vk.clone(),
        h: host_points::<G1Projective>(gpu, lens[0], rng)?,
        l: host_points::<G1Projective>(gpu, lens[1], rng)?,
        a: host_points::<G1Projective>(gpu, lens[2], rng)?,
        b_g1: host_points::<G1Projective>(gpu, lens[3], rng)?,
        b_g2: host_points::<G2Projective>(gpu, lens[3], rng)?,
    };
    let evals = Evaluations {
        pins: Default::default(),
        a: porep_host(constraints, 25, 3),
        b: porep_host(constraints, 26, 3),
        c: porep_host(constraints, 27, 3),
    };
    let backend = CudaBackend::with_memory_limit(device, Some(limit))?;
    let t = Instant::now();
    let sums = backend.start(&srs, evals, &witness)?;
    let total_ms = t.elapsed().as_secs_f64() * 1e3;
    if backend.resident_bytes() != 0 {
        bail!("the points stayed resident within {limit} bytes: nothing was streamed");
    }
    if !bool::from(
        (sums.h + sums.l + sums.a + sums.b_g1)
            .to_affine()
            .is_on_curve(),
    ) {
        bail!("streamed partition run produced a point off the curve");
    }
    let device_peak_bytes = backend.gpu().peak_allocated();
    let phases = backend.last_streamed();
    let streaming = phases.as_ref().map(|p| p.streaming).unwrap_or_default();
    eprintln!(
        "streamed partition: {total_ms:.0} ms within {:.2} GB (peak {:.2} GB); points copied \
         {:.1} GB in {:.0} ms ({:.1} GB/s), {:.0} ms of it not hidden behind the sums",
        limit as f64 / 1e9,
        device_peak_bytes as f64 / 1e9,
        streaming.bytes as f64 / 1e9,
        streaming.copy_ms,
        streaming.gb_per_s(),
        streaming.waited_ms,
    );
    Ok(StreamedTiming {
        constraints,
        memory_limit_bytes: limit,
        total_ms,
        device_peak_bytes,
        phases,
    })
}
