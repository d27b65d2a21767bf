//! `c2q gpu-check`: the GPU compared with the CPU backend, bit for bit, on fresh random inputs.
//! `gpu_check` runs the checks in turn (NTTs, H, the MSMs in G1, from host memory, in G1 and
//! G2, proving starts, the canary's proofs, and with `--large-log` the full-size checks); each
//! prints a line per comparison as it makes it and returns its `Tally`.

use std::time::Instant;

use anyhow::Result;
use blstrs::{G1Affine, G1Projective, G2Affine, Scalar as Fr};
use ff::{Field, PrimeField};
use group::prime::PrimeCurveAffine;
use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;

use super::inputs::{
    download_scalars, porep_scalars, random_g2_points, random_points, random_scalars,
};
use super::large_check;
use super::proofs::{cuda_proof, proof_bytes};
use super::report::{print_devices, seeded_rng, Tally};
use super::sectors_check::sectors_check;
use crate::gpu::backend::{
    device_start_peak_bytes, start_peak_bytes, streamed_start_peak_bytes, CudaBackend,
    StreamedAllowance,
};
use crate::gpu::device::Gpu;
use crate::gpu::limbs::{
    affine_as_limbs, points_as_limbs, scalars_as_limbs, AFFINE_LIMBS, G2_AFFINE_LIMBS,
};
use crate::gpu::memory::DevBuf;
use crate::gpu::msm::{
    msm, msm_shared, msm_streamed, msm_streamed_from_host, msm_streamed_together, HostPoints,
    ResidentPrefix, SharedSums, StreamedMsm,
};
use crate::gpu::ntt::{omega, twiddle_bytes, upload_scalars, Ntt};
use crate::gpu::products::DeviceR1cs;
use crate::gpu::witness::expand_scratch_bytes;
use crate::groth16::{
    self, ntt as cpu_ntt, Backend, CompactValues, CpuBackend, Density, Evaluations, Multiexps, Srs,
    SrsKey, Witness,
};

/// `c2q gpu-check`: compare the GPU with the CPU backend on fresh random inputs.
#[derive(clap::Args, Debug, Clone)]
pub struct GpuCheckArgs {
    /// The GPU to check (see the device list printed first).
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// log2 of the largest MSM and NTT checked.
    #[arg(long, default_value_t = 18)]
    pub max_log: u32,
    /// Seed of the random inputs (default: a fresh one, printed so that a failure can be
    /// replayed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Instead of the kernel checks: prove real 2 KiB sectors (PoRep interactive, then
    /// non-interactive with 13 partitions, then a SnapDeals update) with the CPU and the CUDA
    /// backend (each one's first partition also under a device memory cap that leaves its
    /// points streamed, then placed by value), compare the proofs byte for byte and verify
    /// them, filecoin-proofs' verifiers included. `--porep` is the old name.
    #[arg(long, alias = "porep")]
    pub sectors: bool,
    /// Also check the NTTs, H and the MSM at 2^L (10 to 28; 2^27 is a 32 GiB partition's
    /// domain) against exact answers the host computes in linear time.
    #[arg(long, value_name = "L")]
    pub large_log: Option<u32>,
    /// Where `--sectors` keeps its generated 2 KiB test parameters (never the official
    /// parameter directory: test parameters there would shadow the real ones).
    #[arg(long, default_value = "/var/tmp/c2q-test-params")]
    pub params_dir: std::path::PathBuf,
}

/// `c2q gpu-check`. Ok(true) when every comparison matched.
pub fn gpu_check(args: &GpuCheckArgs) -> Result<bool> {
    if args.sectors {
        return sectors_check(args);
    }
    print_devices()?;
    let started = Instant::now();
    let backend = CudaBackend::new(args.device)?;
    let gpu = backend.gpu();
    println!(
        "{}: kernels ready in {:.2} s",
        gpu.info,
        started.elapsed().as_secs_f64()
    );
    let h2d = gpu.measure_host_to_device(1 << 30)?;
    println!(
        "host to device: {:.1} GB/s {} (what points streamed from host memory travel at)",
        h2d.gb_per_s,
        h2d.how()
    );
    let mut rng = seeded_rng(args.seed);
    let max_log = args.max_log.clamp(4, 24);

    let mut ntt = Ntt::new();
    let mut t = ntt_transforms(gpu, &mut ntt, max_log, &mut rng)?;
    t += h_coefficients(gpu, &mut ntt, max_log, &mut rng)?;
    let points = MsmPoints::random(&mut rng, (1usize << max_log) + 1);
    t += msm_g1(gpu, &points, &mut rng)?;
    t += msm_from_host(gpu, &points, &mut rng)?;
    t += msm_g1_g2(gpu, &points.plain, max_log, &mut rng)?;
    t += proving_start(&backend, args.device, &mut rng)?;
    t += canary(&backend, args.device, &mut rng)?;
    if let Some(log_n) = args.large_log {
        t += large(gpu, log_n, &mut rng)?;
    }
    t.print_summary(started);
    Ok(t.passed())
}

/// NTTs against the CPU backend's own transforms: forward, inverse, coset forward and coset
/// inverse at a range of sizes up to 2^max_log.
fn ntt_transforms(gpu: &Gpu, ntt: &mut Ntt, max_log: u32, rng: &mut ChaCha8Rng) -> Result<Tally> {
    let mut t = Tally::default();
    let mut logs: Vec<u32> = vec![0, 1, 2, 3, 4, 7, 10, 11, 12, 13, 14, 17];
    logs.push(max_log);
    for log_n in logs {
        let n = 1usize << log_n;
        let domain = cpu_ntt::Domain::for_len(n)?;
        let values = random_scalars(rng, n);
        let buf = upload_scalars(gpu, &values)?;

        let mut want = values.clone();
        cpu_ntt::ntt(&mut want, omega(log_n));
        ntt.forward(gpu, &buf, log_n)?;
        t.check(
            &format!("ntt forward 2^{log_n}"),
            download_scalars(gpu, &buf, n)? == want,
        );

        gpu.upload(&buf, 0, scalars_as_limbs(&values))?;
        let mut want = values.clone();
        cpu_ntt::intt(&mut want, &domain);
        ntt.inverse(gpu, &buf, log_n)?;
        t.check(
            &format!("ntt inverse 2^{log_n}"),
            download_scalars(gpu, &buf, n)? == want,
        );

        gpu.upload(&buf, 0, scalars_as_limbs(&values))?;
        let mut want = values.clone();
        cpu_ntt::distribute_powers(&mut want, Fr::MULTIPLICATIVE_GENERATOR);
        cpu_ntt::ntt(&mut want, omega(log_n));
        ntt.coset_forward(gpu, &buf, log_n)?;
        t.check(
            &format!("ntt coset forward 2^{log_n}"),
            download_scalars(gpu, &buf, n)? == want,
        );

        gpu.upload(&buf, 0, scalars_as_limbs(&values))?;
        let mut want = values.clone();
        cpu_ntt::intt(&mut want, &domain);
        let ginv = Fr::MULTIPLICATIVE_GENERATOR.invert().unwrap_or(Fr::ZERO);
        cpu_ntt::distribute_powers(&mut want, ginv);
        ntt.coset_inverse(gpu, &buf, log_n)?;
        t.check(
            &format!("ntt coset inverse 2^{log_n}"),
            download_scalars(gpu, &buf, n)? == want,
        );
    }
    Ok(t)
}

/// H = (a·b − c)/Z against the CPU backend, odd sizes included.
fn h_coefficients(gpu: &Gpu, ntt: &mut Ntt, max_log: u32, rng: &mut ChaCha8Rng) -> Result<Tally> {
    let mut t = Tally::default();
    for n in [
        1usize,
        2,
        3,
        5,
        1000,
        4096,
        4097,
        65_537,
        (1 << max_log) - 3,
    ] {
        let evals = Evaluations {
            pins: Default::default(),
            a: porep_scalars(rng, n),
            b: porep_scalars(rng, n),
            c: random_scalars(rng, n),
        };
        let want = cpu_ntt::h_coefficients(evals.clone())?;
        let domain = n.next_power_of_two();
        let log_n = domain.trailing_zeros();
        let pad = |v: &[Fr]| -> Result<DevBuf<u32>> {
            let mut p = v.to_vec();
            p.resize(domain, Fr::ZERO);
            upload_scalars(gpu, &p)
        };
        let (da, db, dc) = (pad(&evals.a)?, pad(&evals.b)?, pad(&evals.c)?);
        ntt.h_quotient(gpu, &da, &db, &dc, log_n)?;
        let got = download_scalars(gpu, &da, domain - 1)?;
        t.check(&format!("H coefficients, {n} constraints"), got == want);
    }
    Ok(t)
}

/// The G1 points the MSM checks run over: `plain`, and the same with about one in fifty at
/// infinity.
struct MsmPoints {
    plain: Vec<G1Affine>,
    with_infinity: Vec<G1Affine>,
}

impl MsmPoints {
    fn random(rng: &mut ChaCha8Rng, n: usize) -> MsmPoints {
        let plain = random_points(rng, n, false);
        let mut with_infinity = plain.clone();
        for _ in 0..n.div_ceil(50) {
            let i = rng.gen_range(0..n);
            with_infinity[i] = G1Affine::identity();
        }
        MsmPoints {
            plain,
            with_infinity,
        }
    }
}

/// A generator of n scalars of one kind.
type Gen = fn(&mut ChaCha8Rng, usize) -> Vec<Fr>;

/// The kinds of scalar the MSMs are checked on, each with its name.
const SCALAR_KINDS: [(&str, Gen); 8] = [
    ("full-width", random_scalars),
    ("all zero", |_, n| vec![Fr::ZERO; n]),
    ("all one", |_, n| vec![Fr::ONE; n]),
    ("porep-like 0/1", porep_scalars),
    ("small 2..40", |r, n| {
        (0..n).map(|_| Fr::from(r.gen_range(2..40u64))).collect()
    }),
    ("one repeated value", |r, n| vec![Fr::random(&mut *r); n]),
    ("r-1 and -2", |r, n| {
        (0..n)
            .map(|_| {
                if r.gen_bool(0.5) {
                    -Fr::ONE
                } else {
                    -Fr::from(2u64)
                }
            })
            .collect()
    }),
    ("low 64-bit", |r, n| {
        (0..n).map(|_| Fr::from(r.next_u64())).collect()
    }),
];

/// Whether the largest size is checked with scalars of this kind: only with the kinds that
/// stress the bucket paths most.
fn at_largest_size(kind: &str) -> bool {
    matches!(kind, "full-width" | "porep-like 0/1" | "one repeated value")
}

/// Whether points at infinity are checked at n points with scalars of this kind: above 4097
/// points, with PoRep-like scalars only.
fn with_infinity_at(n: usize, kind: &str) -> bool {
    n <= 4097 || kind == "porep-like 0/1"
}

/// The sizes an MSM is checked at: the fixed ones below `max_n` (below --max-log 17 the fixed
/// sizes past the largest are left out), then `max_n`.
fn msm_sizes(fixed: &[usize], max_n: usize) -> Vec<usize> {
    fixed
        .iter()
        .copied()
        .filter(|&n| n < max_n)
        .chain([max_n])
        .collect()
}

fn gpu_msm_host(gpu: &Gpu, points: &[G1Affine], scalars: &[Fr]) -> Result<G1Projective> {
    let dp = gpu.alloc::<u32>(points.len() * AFFINE_LIMBS)?;
    gpu.upload(&dp, 0, affine_as_limbs(points))?;
    let ds = upload_scalars(gpu, scalars)?;
    msm(gpu, &dp, &ds, points.len())
}

/// MSMs against the CPU backend's multiexp, on every kind of scalar, with and without points
/// at infinity; then points repeated within buckets (bucket sums meet P + P and P − P).
fn msm_g1(gpu: &Gpu, points: &MsmPoints, rng: &mut ChaCha8Rng) -> Result<Tally> {
    let mut t = Tally::default();
    let max_n = points.plain.len();
    let sizes = msm_sizes(&[1, 2, 3, 31, 100, 1000, 4097, 65_537], max_n);
    for &n in &sizes {
        for (name, gen) in &SCALAR_KINDS {
            if n == max_n && !at_largest_size(name) {
                continue;
            }
            let scalars = gen(rng, n);
            for (pts, inf) in [(&points.plain, false), (&points.with_infinity, true)] {
                if inf && !with_infinity_at(n, name) {
                    continue;
                }
                let want = groth16::msm::g1(&pts[..n], &scalars);
                let got = gpu_msm_host(gpu, &pts[..n], &scalars)?;
                let label = format!(
                    "msm {n} {name}{}",
                    if inf { " with points at infinity" } else { "" }
                );
                t.check(&label, got == want);
            }
        }
    }
    let n = 4097;
    let repeated: Vec<G1Affine> = (0..n).map(|i| points.with_infinity[i % 13]).collect();
    let scalars: Vec<Fr> = (0..n).map(|_| Fr::from(rng.gen_range(2..6u64))).collect();
    let want = groth16::msm::g1(&repeated, &scalars);
    let got = gpu_msm_host(gpu, &repeated, &scalars)?;
    t.check(&format!("msm {n} repeated points"), got == want);
    Ok(t)
}

/// The MSM streamed from host memory (points too many to stay on the device), against the
/// CPU backend's multiexp: as the proving start sizes its pieces, then in three pieces (the
/// last one shorter, each copy overlapping the sums before it), and the B query's shape, G1
/// and G2 points streamed together in pieces.
fn msm_from_host(gpu: &Gpu, points: &MsmPoints, rng: &mut ChaCha8Rng) -> Result<Tally> {
    let mut t = Tally::default();
    let n = points.with_infinity.len().min(70_001);
    let g1 = &points.with_infinity[..n];
    let scalars = porep_scalars(rng, n);
    let want = groth16::msm::g1(g1, &scalars);
    let got = msm_streamed_from_host(gpu, g1, &scalars)?;
    t.check("msm streamed from host", got == want);

    let ds = upload_scalars(gpu, &scalars)?;
    let piece = n.div_ceil(3) + 7;
    let host = HostPoints { g1, g2: None };
    let (sums, streaming) = msm_streamed(gpu, host, None, &ds, n, piece)?;
    let bytes = (n * AFFINE_LIMBS * 4) as u64;
    t.check(
        &format!("msm streamed from host in pieces of {piece}: {streaming:?}"),
        sums.g1 == want && sums.g2.is_none() && streaming.bytes == bytes,
    );
    // A set partly resident: its first terms' points on the device, the rest streamed.
    let terms = n / 3 + 5;
    let prefix = gpu.alloc::<u32>(terms * AFFINE_LIMBS)?;
    gpu.upload(&prefix, 0, affine_as_limbs(&g1[..terms]))?;
    let resident = ResidentPrefix {
        terms,
        g1: &prefix,
        g2: None,
    };
    let piece = (n - terms).div_ceil(2);
    let (sums, streaming) = msm_streamed(gpu, host, Some(resident), &ds, n, piece)?;
    t.check(
        &format!("msm with {terms} of {n} points resident, the rest streamed in pieces of {piece}"),
        sums.g1 == want && streaming.bytes == ((n - terms) * AFFINE_LIMBS * 4) as u64,
    );
    drop(prefix);

    // Two MSMs summed together, their pieces in turns through shared buffers, as a small GPU
    // sums H's and L's: one partly resident with full-width scalars, one streamed whole with
    // PoRep-like scalars and fewer terms (its pieces run out first).
    let wide: Vec<Fr> = (0..n).map(|_| Fr::random(&mut *rng)).collect();
    let d_wide = upload_scalars(gpu, &wide)?;
    let terms = n / 4 + 1;
    let prefix = gpu.alloc::<u32>(terms * AFFINE_LIMBS)?;
    gpu.upload(&prefix, 0, affine_as_limbs(&g1[..terms]))?;
    let first = StreamedMsm {
        points: host,
        resident: Some(ResidentPrefix {
            terms,
            g1: &prefix,
            g2: None,
        }),
        scalars: &d_wide,
        n,
    };
    let short = n / 2 + 3;
    let second = StreamedMsm {
        points: HostPoints {
            g1: &g1[..short],
            g2: None,
        },
        resident: None,
        scalars: &ds,
        n: short,
    };
    let piece = n.div_ceil(5);
    let (sums, streaming) = msm_streamed_together(gpu, &[first, second], piece)?;
    let want_first = groth16::msm::g1(g1, &wide);
    let want_second = groth16::msm::g1(&g1[..short], &scalars[..short]);
    let bytes = ((n - terms + short) * AFFINE_LIMBS * 4) as u64;
    t.check(
        &format!("two msms streamed together in pieces of {piece}: {streaming:?}"),
        sums.len() == 2
            && sums[0].g1 == want_first
            && sums[1].g1 == want_second
            && streaming.bytes == bytes,
    );
    drop(prefix);

    let n2 = n.min(20_011);
    let g2 = random_g2_points(rng, n2, &[n2 / 2]);
    let want = cpu_shared_sums(&g1[..n2], &g2, &scalars[..n2]);
    let host = HostPoints {
        g1: &g1[..n2],
        g2: Some(&g2),
    };
    let piece = n2.div_ceil(4);
    let (got, _) = msm_streamed(gpu, host, None, &ds, n2, piece)?;
    t.check(
        &format!("msm g1+g2 {n2} streamed from host in pieces of {piece}"),
        got == want,
    );
    // The B query partly resident: G1 and G2 points of its first terms on the device.
    let terms = n2 / 2 + 3;
    let p1 = gpu.alloc::<u32>(terms * AFFINE_LIMBS)?;
    gpu.upload(&p1, 0, affine_as_limbs(&g1[..terms]))?;
    let p2 = gpu.alloc::<u32>(terms * G2_AFFINE_LIMBS)?;
    gpu.upload(&p2, 0, points_as_limbs(&g2[..terms]))?;
    let resident = ResidentPrefix {
        terms,
        g1: &p1,
        g2: Some(&p2),
    };
    let piece = (n2 - terms).div_ceil(3);
    let (got, _) = msm_streamed(gpu, host, Some(resident), &ds, n2, piece)?;
    t.check(
        &format!("msm g1+g2 {n2}, {terms} resident, the rest streamed in pieces of {piece}"),
        got == want,
    );
    Ok(t)
}

/// The B query's MSM on the GPU from host points and scalars: G1 and G2 over one sort.
fn gpu_shared_msm_host(
    gpu: &Gpu,
    g1: &[G1Affine],
    g2: &[G2Affine],
    scalars: &[Fr],
) -> Result<SharedSums> {
    let d1 = gpu.alloc::<u32>(g1.len() * AFFINE_LIMBS)?;
    gpu.upload(&d1, 0, affine_as_limbs(g1))?;
    let d2 = gpu.alloc::<u32>(g2.len() * G2_AFFINE_LIMBS)?;
    gpu.upload(&d2, 0, points_as_limbs(g2))?;
    let ds = upload_scalars(gpu, scalars)?;
    msm_shared(gpu, &d1, Some(&d2), &ds, scalars.len())
}

/// Both sums of the B query's MSM, by the CPU backend's multiexps.
fn cpu_shared_sums(g1: &[G1Affine], g2: &[G2Affine], scalars: &[Fr]) -> SharedSums {
    SharedSums {
        g1: groth16::msm::g1(g1, scalars),
        g2: Some(groth16::msm::g2(g2, scalars)),
    }
}

/// The B query's MSM: G1 and G2 points under the same scalars, classified and sorted once
/// (`msm_shared`), each sum against blst's multiexp; then points repeated within buckets.
/// G2 sizes stop at 2^20 + 1: the host's references cost several times G1's. `g1_points`
/// holds the G1 points of `msm_g1`, at least 2^min(max_log, 20) + 1 of them.
fn msm_g1_g2(
    gpu: &Gpu,
    g1_points: &[G1Affine],
    max_log: u32,
    rng: &mut ChaCha8Rng,
) -> Result<Tally> {
    let mut t = Tally::default();
    let max_n2 = (1usize << max_log.min(20)) + 1;
    let infinity: Vec<usize> = (0..max_n2.div_ceil(50))
        .map(|_| rng.gen_range(0..max_n2))
        .collect();
    let g2_points = random_g2_points(rng, max_n2, &[]);
    let g2_points_inf = random_g2_points(rng, max_n2, &infinity);
    // The G1 points at infinity where the G2 ones are, as in parameters (both are b_i(τ) times
    // a generator).
    let mut g1_points_inf = g1_points[..max_n2].to_vec();
    for &i in &infinity {
        g1_points_inf[i] = G1Affine::identity();
    }
    let sizes = msm_sizes(&[1, 2, 3, 31, 1000, 4097, 65_537], max_n2);
    for &n in &sizes {
        for (name, gen) in &SCALAR_KINDS {
            if n == max_n2 && !at_largest_size(name) {
                continue;
            }
            let scalars = gen(rng, n);
            for (g1, g2, inf) in [
                (&g1_points[..n], &g2_points[..n], false),
                (&g1_points_inf[..n], &g2_points_inf[..n], true),
            ] {
                if inf && !with_infinity_at(n, name) {
                    continue;
                }
                let want = cpu_shared_sums(g1, g2, &scalars);
                let got = gpu_shared_msm_host(gpu, g1, g2, &scalars)?;
                let label = format!(
                    "msm g1+g2 {n} {name}{}",
                    if inf { " with points at infinity" } else { "" }
                );
                t.check(&label, got == want);
            }
        }
    }
    let n = 4097;
    let g1: Vec<G1Affine> = (0..n).map(|i| g1_points_inf[i % 13]).collect();
    let g2: Vec<G2Affine> = (0..n).map(|i| g2_points_inf[i % 13]).collect();
    let scalars: Vec<Fr> = (0..n).map(|_| Fr::from(rng.gen_range(2..6u64))).collect();
    let want = cpu_shared_sums(&g1, &g2, &scalars);
    let got = gpu_shared_msm_host(gpu, &g1, &g2, &scalars)?;
    t.check(&format!("msm g1+g2 {n} repeated points"), got == want);
    Ok(t)
}

/// A CUDA proving start against the CPU backend's: the G1 multiexps equal, and the B
/// multiexp in G2 made on the GPU (and equal to the finalizer's, `groth16::msm::b_g2`) exactly
/// when `g2_on_gpu`.
fn same_start(
    cpu: &Multiexps,
    gpu: &Multiexps,
    g2_on_gpu: bool,
    srs: &Srs,
    witness: &Witness,
) -> Result<bool> {
    let g1 = (gpu.h, gpu.l, gpu.a, gpu.b_g1) == (cpu.h, cpu.l, cpu.a, cpu.b_g1);
    let g2 = match (gpu.b_g2, g2_on_gpu) {
        (Some(b_g2), true) => b_g2 == groth16::msm::b_g2(srs, witness)?,
        (None, false) => true,
        _ => false,
    };
    Ok(g1 && g2 && cpu.b_g2.is_none())
}

/// Proving start through the Backend trait: synthetic parameters at two sizes, the smaller
/// with full densities and its aux values in full only, the larger with PoRep-like sparse
/// ones (A nearly all the aux variables, B a quarter and all inputs but one) and its aux
/// values in compact form too, as the worker's products stage hands them on.
fn proving_start(backend: &CudaBackend, device: usize, rng: &mut ChaCha8Rng) -> Result<Tally> {
    let canary = crate::canary::srs()?;
    let mut t = Tally::default();
    for (inputs, aux, constraints) in [(3usize, 1000usize, 1500usize), (5, 40_000, 70_000)] {
        let domain = constraints.next_power_of_two();
        let sparse = aux > 1000;
        let (a_aux_density, b_input_density, b_aux_density) = match sparse {
            true => (
                Density::from_fn(aux, |i| i % 250 != 7),
                Density::from_fn(inputs, |i| i != 1),
                Density::from_fn(aux, |i| i % 4 == 1),
            ),
            false => (
                Density::full(aux),
                Density::full(inputs),
                Density::full(aux),
            ),
        };
        let a_points = inputs + a_aux_density.count();
        let b_points = b_input_density.count() + b_aux_density.count();
        let srs = Srs {
            pins: Default::default(),
            key: SrsKey::new(format!("gpu-check synthetic {constraints}")),
            vk: canary.vk.clone(),
            h: random_points(rng, domain - 1, true),
            l: random_points(rng, aux, true),
            a: random_points(rng, a_points, true),
            b_g1: random_points(rng, b_points, true),
            b_g2: random_g2_points(rng, b_points, &[1, b_points / 2]),
        };
        let aux_values = porep_scalars(rng, aux);
        let witness = Witness {
            input: random_scalars(rng, inputs),
            compact_aux: sparse.then(|| CompactValues::new(&aux_values)),
            aux: aux_values,
            a_aux_density,
            b_input_density,
            b_aux_density,
        };
        let evals = Evaluations {
            pins: Default::default(),
            a: porep_scalars(rng, constraints),
            b: porep_scalars(rng, constraints),
            c: random_scalars(rng, constraints),
        };
        t += starts_within_limits(backend, device, &srs, &witness, evals)?;
    }
    Ok(t)
}

/// One synthetic circuit's proving start against the CPU backend's: resident (first and
/// second call), streamed from host memory one byte short of residency, and with room for
/// the G1 points only.
fn starts_within_limits(
    backend: &CudaBackend,
    device: usize,
    srs: &Srs,
    witness: &Witness,
    evals: Evaluations,
) -> Result<Tally> {
    let mut t = Tally::default();
    let constraints = evals.a.len();
    let domain = constraints.next_power_of_two();
    let want = CpuBackend.start(srs, evals.clone(), witness)?;
    let got = backend.start(srs, evals.clone(), witness)?;
    t.check(
        &format!("proving start, {constraints} constraints, B in G2 on the GPU"),
        same_start(&want, &got, true, srs, witness)?,
    );
    // Second call: the parameters are resident now.
    let again = backend.start(srs, evals.clone(), witness)?;
    t.check(
        &format!("proving start again (resident), {constraints} constraints"),
        same_start(&want, &again, true, srs, witness)?,
    );
    // A memory limit one byte short of what residency needs: the same start proves from
    // host memory (H two domains at a time, the MSMs in pieces), within the limit.
    let points = srs.h.len() + srs.l.len() + srs.a.len() + srs.b_g1.len();
    let lens = [
        witness.aux.len(),
        witness.a_query_len(),
        witness.b_query_len(),
    ];
    let g1_resident = points * AFFINE_LIMBS * 4
        + start_peak_bytes(domain, lens, false)
        + twiddle_bytes(domain.trailing_zeros());
    let limit = g1_resident - 1;
    let limited = CudaBackend::with_memory_limit(device, Some(limit))?;
    limited.place_whole_sets_only();
    let streamed = limited.start(srs, evals.clone(), witness)?;
    t.check(
        &format!(
            "proving start streamed within a {limit}-byte limit, {constraints} constraints, \
             B in G2 {}",
            if streamed.b_g2.is_some() {
                "streamed too"
            } else {
                "left to the CPU (no room for pieces with the G2 points)"
            }
        ),
        same_start(&want, &streamed, streamed.b_g2.is_some(), srs, witness)?
            && limited.resident_bytes() == 0,
    );
    // The points placed by value: the sets that save the most per byte resident, whole or
    // their first terms, the rest streamed; twice (placed, then reused). The limit leaves a
    // streamed start's working memory and room for about half the G1 points (a streamed start
    // needs less than a resident one, so one byte short of residency can hold them all where
    // the queries are sparse). Points of a few MB fit in no room beside a start's fixed
    // allowances (the MSM scratch's 64 MB, the margin): nothing is placed for those.
    let g1_bytes = points * AFFINE_LIMBS * 4;
    let all_points = g1_bytes + srs.b_g2.len() * G2_AFFINE_LIMBS * 4;
    let placeable = g1_bytes > 16 << 20;
    let streamed_working =
        streamed_start_peak_bytes(domain, lens, StreamedAllowance::for_domain(domain));
    // The placement keeps a sixteenth of what is free as its margin.
    let limit = ((streamed_working + g1_bytes / 2) * 16 / 15).min(g1_resident - 1);
    let limited = CudaBackend::with_memory_limit(device, Some(limit))?;
    for call in ["placed", "again"] {
        let partly = limited.start(srs, evals.clone(), witness)?;
        let resident = limited.resident_bytes();
        let what = format!(
            "proving start with the points placed by value ({call}) within a {limit}-byte \
             limit, {constraints} constraints"
        );
        t.check(
            &format!("{what}: sums"),
            same_start(&want, &partly, partly.b_g2.is_some(), srs, witness)?,
        );
        t.check(
            &format!(
                "{what}: {resident} of {all_points} bytes resident{}",
                if placeable {
                    ", some but not all"
                } else {
                    " (too few to place)"
                }
            ),
            (resident > 0 || !placeable) && resident < all_points,
        );
    }
    // Room for the G1 points and a start, not for the G2 points as well: the G1 sets stay
    // resident and the B multiexp in G2 is left to the CPU finalizer.
    let limit = g1_resident + srs.b_g2.len() * G2_AFFINE_LIMBS * 4 / 2;
    let limited = CudaBackend::with_memory_limit(device, Some(limit))?;
    let g1_only = limited.start(srs, evals, witness)?;
    t.check(
        &format!(
            "proving start with no room for the B query in G2 within a {limit}-byte \
             limit, {constraints} constraints: G1 resident, B in G2 left to the CPU"
        ),
        same_start(&want, &g1_only, false, srs, witness)?
            && limited.resident_bytes() == points * AFFINE_LIMBS * 4,
    );
    Ok(t)
}

/// A real circuit (the canary) with real densities: proofs byte-identical with the same r, s,
/// through the CUDA backend with A, B, C from the host and made on the GPU.
fn canary(backend: &CudaBackend, device: usize, rng: &mut ChaCha8Rng) -> Result<Tally> {
    use crate::job::ProofJob;
    let srs = crate::canary::srs()?;
    let mut t = Tally::default();
    let job = crate::canary::CanaryJob::new(1, rng.next_u64())?;
    let r = Fr::random(&mut *rng);
    let s = Fr::random(&mut *rng);
    let cpu = groth16::prove(&CpuBackend, &srs, job.synthesize(0)?, r, s)?;
    let (gpu_proof, g2_on_gpu) = cuda_proof(backend, &srs, job.synthesize(0)?, r, s)?;
    t.check("canary: B in G2 made on the GPU", g2_on_gpu);
    t.check(
        "canary proof bytes, cpu = cuda",
        proof_bytes(&cpu)? == proof_bytes(&gpu_proof)?,
    );
    t += canary_products_on_gpu(backend, &srs, &job, &cpu, r, s)?;
    t += points_streamed(device, &srs, &job, 0, "canary", &cpu, (r, s))?;
    t.check("canary proof verifies", job.verify(&[gpu_proof]).is_ok());
    Ok(t)
}

/// The worker's path for partition `k` of `job` (`name` in the lines printed) on a GPU with
/// room for the recorded constraints and a start but not for the points: A, B, C made on the
/// GPU, the points all streamed from host memory, then placed by value (some resident, the
/// rest streamed); each proof against the CPU's `cpu`, made with the same r and s.
pub(super) fn points_streamed(
    device: usize,
    srs: &Srs,
    job: &dyn crate::job::ProofJob,
    k: usize,
    name: &str,
    cpu: &groth16::Proof,
    (r, s): (Fr, Fr),
) -> Result<Tally> {
    let mut t = Tally::default();
    let r1cs = job.r1cs()?;
    let witness = job.synthesize(k)?.witness;
    let packed = job.witness(k)?.packed();
    let domain = r1cs.constraints().max(1).next_power_of_two();
    let lens = [
        r1cs.aux,
        r1cs.inputs + r1cs.a_aux_density.count(),
        r1cs.b_input_density.count() + r1cs.b_aux_density.count(),
    ];
    let working = device_start_peak_bytes(
        domain,
        r1cs.inputs,
        lens,
        expand_scratch_bytes(&packed.aux),
        false,
    ) + twiddle_bytes(domain.trailing_zeros());
    let constraints = DeviceR1cs::bytes_for(&r1cs);
    let points = (srs.h.len() + srs.l.len() + srs.a.len() + srs.b_g1.len()) * AFFINE_LIMBS * 4;
    // Halfway between room for the constraints and room for the points, beside a start.
    let limit = working + constraints + points.saturating_sub(constraints) / 2;
    let label = format!(
        "{name}: products on the GPU, points streamed within a {limit}-byte limit \
         (constraints {constraints} bytes, points {points})"
    );
    if points <= constraints {
        t.check(
            &format!("{label}: the points outweigh the constraints"),
            false,
        );
        return Ok(t);
    }
    // All streamed, then placed by value (some points resident, the rest streamed).
    for whole_only in [true, false] {
        let limited = CudaBackend::with_memory_limit(device, Some(limit))?;
        if whole_only {
            limited.place_whole_sets_only();
        }
        match limited.start_from_constraints(srs, &r1cs, &packed)? {
            Some(sums) => {
                let streamed = groth16::finish(srs, &sums, Some(&witness), r, s)?;
                let resident = limited.resident_bytes();
                t.check(
                    &format!(
                        "{label}, {}, B in G2 {}: proof bytes, cpu = cuda",
                        if whole_only {
                            "all streamed".to_string()
                        } else {
                            format!("{resident} bytes of points resident")
                        },
                        if sums.b_g2.is_some() {
                            "on the GPU"
                        } else {
                            "left to the CPU"
                        }
                    ),
                    // Placed by value, whatever was placed must prove the same (the canary's
                    // points, under a MB, are too few to place beside a start's allowances).
                    proof_bytes(cpu)? == proof_bytes(&streamed)? && (resident == 0 || !whole_only),
                );
            }
            None => t.check(&format!("{label}: the constraints stayed resident"), false),
        }
    }
    Ok(t)
}

/// The worker's path for the canary: the witness-only synthesis, packed, expanded on the GPU,
/// and A, B, C made there from the recorded constraints; the proof against the CPU's `cpu`.
fn canary_products_on_gpu(
    backend: &CudaBackend,
    srs: &Srs,
    job: &crate::canary::CanaryJob,
    cpu: &groth16::Proof,
    r: Fr,
    s: Fr,
) -> Result<Tally> {
    use crate::job::ProofJob;
    let mut t = Tally::default();
    let witness = job.synthesize(0)?.witness;
    let packed = job.witness(0)?.packed();
    match backend.start_from_constraints(srs, &*job.r1cs()?, &packed)? {
        Some(sums) => {
            t.check(
                "canary: B in G2 made on the GPU with products on the GPU",
                sums.b_g2.is_some(),
            );
            let on_device = groth16::finish(srs, &sums, Some(&witness), r, s)?;
            t.check(
                "canary proof bytes, cpu = cuda with products on the GPU",
                proof_bytes(cpu)? == proof_bytes(&on_device)?,
            );
        }
        None => t.check("canary: recorded constraints resident on the GPU", false),
    }
    Ok(t)
}

/// `--large-log`: the full-size checks (`large_check`), and the time they took.
fn large(gpu: &Gpu, log_n: u32, rng: &mut ChaCha8Rng) -> Result<Tally> {
    let mut t = Tally::default();
    let started = Instant::now();
    for (what, ok) in large_check::run(gpu, log_n, rng)? {
        t.check(&what, ok);
    }
    println!(
        "full-size checks at 2^{log_n}: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msm_sizes_end_at_the_largest() {
        assert_eq!(
            msm_sizes(&[1, 2, 3, 31, 65_537], 65_537),
            vec![1, 2, 3, 31, 65_537]
        );
        assert_eq!(msm_sizes(&[1, 2, 3, 31, 65_537], 17), vec![1, 2, 3, 17]);
    }

    #[test]
    fn points_at_infinity_are_checked_where_they_were() {
        assert!(with_infinity_at(4097, "full-width"));
        assert!(!with_infinity_at(4098, "full-width"));
        assert!(with_infinity_at(65_537, "porep-like 0/1"));
        assert!(at_largest_size("one repeated value") && !at_largest_size("all one"));
    }
}
