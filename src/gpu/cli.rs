//! `c2q gpu-check` and `c2q bench gpu`: the GPU checked bit for bit against the CPU backend,
//! and timed. Both run from the release binary alone (kernels are embedded).

use std::time::Instant;

use anyhow::{bail, Context, Result};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar as Fr};
use ff::{Field, PrimeField};
use group::{prime::PrimeCurveAffine, Curve};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::backend::{start_peak_bytes, start_resident, CudaBackend, PointSets, StartPhases};
use super::device::{list_devices, DevBuf, Gpu};
use super::inputs::{download_scalars, gen_points, gen_scalars, ladder};
use super::limbs::{
    affine_as_limbs, affine_as_limbs_mut, points_as_limbs, scalars_as_limbs, AFFINE_LIMBS,
    FR_LIMBS, G2_AFFINE_LIMBS,
};
use super::msm::{msm, msm_shared, msm_streamed, SharedSums};
use super::ntt::{omega, twiddle_bytes, upload_scalars, Ntt};
use crate::groth16::{
    self, ntt as cpu_ntt, prover::check_shape, Assignment, Backend, CpuBackend, Density,
    Evaluations, Multiexps, Srs, Witness,
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
    /// Instead of the kernel checks: prove real 2 KiB PoRep sectors (interactive, then
    /// non-interactive with 13 partitions) with the CPU and the CUDA backend, compare the
    /// proofs byte for byte and verify them, filecoin-proofs' `verify_seal` included.
    #[arg(long)]
    pub porep: bool,
    /// Also check the NTTs, H and the MSM at 2^L (10 to 28; 2^27 is a 32 GiB partition's
    /// domain) against exact answers the host computes in linear time.
    #[arg(long, value_name = "L")]
    pub large_log: Option<u32>,
    /// Where `--porep` keeps its generated 2 KiB test parameters (never the official
    /// parameter directory: test parameters there would shadow the real ones).
    #[arg(long, default_value = "/var/tmp/c2q-test-params")]
    pub params_dir: std::path::PathBuf,
}

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
    /// Constraints of the partition-shaped run (default: a 32 GiB PoRep partition).
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

/// Prints the visible GPUs; used by both commands.
fn print_devices() -> Result<()> {
    let devices = list_devices()?;
    if devices.is_empty() {
        bail!("no CUDA GPU found (no driver, or no device visible to this process)");
    }
    for d in &devices {
        eprintln!("{d}");
    }
    Ok(())
}

/// The inputs' random generator: from `seed`, or a fresh seed; printed either way, so that a
/// failure can be replayed with `--seed`.
fn seeded_rng(seed: Option<u64>) -> ChaCha8Rng {
    let seed = seed.unwrap_or_else(|| rand::rngs::OsRng.next_u64());
    println!("seed {seed}");
    ChaCha8Rng::seed_from_u64(seed)
}

#[derive(Default)]
struct Tally {
    failures: usize,
    checks: usize,
}

impl Tally {
    fn check(&mut self, what: &str, ok: bool) {
        self.checks += 1;
        if ok {
            println!("ok    {what}");
        } else {
            self.failures += 1;
            println!("FAIL  {what}");
        }
    }
}

fn random_scalars(rng: &mut ChaCha8Rng, n: usize) -> Vec<Fr> {
    (0..n).map(|_| Fr::random(&mut *rng)).collect()
}

/// PoRep-like witness values: 51 % zero, 47 % one, 2 % anything.
fn porep_scalars(rng: &mut ChaCha8Rng, n: usize) -> Vec<Fr> {
    (0..n)
        .map(|_| match rng.gen_range(0..100) {
            0..=50 => Fr::ZERO,
            51..=97 => Fr::ONE,
            _ => Fr::random(&mut *rng),
        })
        .collect()
}

/// Random points (P_i = P_0 + i·Q for random P_0, Q), with a few at infinity when asked.
fn random_points(rng: &mut ChaCha8Rng, n: usize, with_infinity: bool) -> Vec<G1Affine> {
    let (mut out, _, _) = ladder::<G1Projective>(rng, n);
    if with_infinity {
        for _ in 0..n.div_ceil(50) {
            let i = rng.gen_range(0..n);
            out[i] = G1Affine::identity();
        }
    }
    out
}

/// Random G2 points (Q_i = Q_0 + i·R), at infinity where `infinity` says.
fn random_g2_points(rng: &mut ChaCha8Rng, n: usize, infinity: &[usize]) -> Vec<G2Affine> {
    let (mut out, _, _) = ladder::<G2Projective>(rng, n);
    for &i in infinity.iter().filter(|&&i| i < n) {
        out[i] = G2Affine::identity();
    }
    out
}

fn gpu_msm_host(gpu: &Gpu, points: &[G1Affine], scalars: &[Fr]) -> Result<G1Projective> {
    let dp = gpu.alloc::<u32>(points.len() * AFFINE_LIMBS)?;
    gpu.upload(&dp, 0, affine_as_limbs(points))?;
    let ds = upload_scalars(gpu, scalars)?;
    msm(gpu, &dp, &ds, points.len())
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

/// A proof through the CUDA backend with the same r, s as `groth16::prove`, and whether the
/// backend made the B multiexp in G2 (the finalizer then used it, not the witness).
fn cuda_proof(
    backend: &CudaBackend,
    srs: &Srs,
    assignment: Assignment,
    r: Fr,
    s: Fr,
) -> Result<(groth16::Proof, bool)> {
    let Assignment { witness, evals } = assignment;
    check_shape(srs, &evals, &witness)?;
    let sums = backend.start(srs, evals, &witness)?;
    let proof = groth16::finish(srs, &sums, Some(&witness), r, s)?;
    Ok((proof, sums.b_g2.is_some()))
}

/// `c2q gpu-check`. Ok(true) when every comparison matched.
pub fn gpu_check(args: &GpuCheckArgs) -> Result<bool> {
    if args.porep {
        return porep_check(args);
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
    let mut rng = seeded_rng(args.seed);
    let mut t = Tally::default();
    let max_log = args.max_log.clamp(4, 24);

    // NTTs against the CPU backend's own transforms.
    let mut ntt = Ntt::new();
    let mut logs: Vec<u32> = vec![0, 1, 2, 3, 4, 7, 10, 11, 12, 13, 14, 17];
    logs.push(max_log);
    for log_n in logs {
        let n = 1usize << log_n;
        let domain = cpu_ntt::Domain::for_len(n)?;
        let values = random_scalars(&mut rng, n);
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

    // H = (a·b − c)/Z against the CPU backend, odd sizes included.
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
            a: porep_scalars(&mut rng, n),
            b: porep_scalars(&mut rng, n),
            c: random_scalars(&mut rng, n),
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

    // MSMs against the CPU backend's multiexp, on every kind of scalar.
    let max_n = (1usize << max_log) + 1;
    let points = random_points(&mut rng, max_n, false);
    let mut points_inf = points.clone();
    for _ in 0..max_n.div_ceil(50) {
        let i = rng.gen_range(0..max_n);
        points_inf[i] = G1Affine::identity();
    }
    // Below --max-log 17 the fixed sizes past the largest are left out.
    let sizes: Vec<usize> = [1usize, 2, 3, 31, 100, 1000, 4097, 65_537]
        .into_iter()
        .filter(|&n| n < max_n)
        .chain([max_n])
        .collect();
    type Gen = fn(&mut ChaCha8Rng, usize) -> Vec<Fr>;
    let kinds: [(&str, Gen); 8] = [
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
    for &n in &sizes {
        for (name, gen) in &kinds {
            // The largest size only with the kinds that stress the bucket paths most.
            if n == max_n
                && !matches!(
                    *name,
                    "full-width" | "porep-like 0/1" | "one repeated value"
                )
            {
                continue;
            }
            let scalars = gen(&mut rng, n);
            for (pts, inf) in [(&points, false), (&points_inf, true)] {
                if inf && n > 4097 && *name != "porep-like 0/1" {
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
    // Points repeated within buckets: bucket sums meet P + P and P − P.
    {
        let n = 4097;
        let repeated: Vec<G1Affine> = (0..n).map(|i| points_inf[i % 13]).collect();
        let scalars: Vec<Fr> = (0..n).map(|_| Fr::from(rng.gen_range(2..6u64))).collect();
        let want = groth16::msm::g1(&repeated, &scalars);
        let got = gpu_msm_host(gpu, &repeated, &scalars)?;
        t.check(&format!("msm {n} repeated points"), got == want);
    }
    {
        let n = max_n.min(70_001);
        let scalars = porep_scalars(&mut rng, n);
        let want = groth16::msm::g1(&points_inf[..n], &scalars);
        let got = msm_streamed(gpu, &points_inf[..n], &scalars)?;
        t.check("msm streamed from host", got == want);
    }

    // The B query's MSM: G1 and G2 points under the same scalars, classified and sorted once
    // (`msm_shared`), each sum against blst's multiexp. G2 sizes stop at 2^20 + 1: the host's
    // references cost several times G1's.
    let max_n2 = (1usize << max_log.min(20)) + 1;
    let infinity: Vec<usize> = (0..max_n2.div_ceil(50))
        .map(|_| rng.gen_range(0..max_n2))
        .collect();
    let g2_points = random_g2_points(&mut rng, max_n2, &[]);
    let g2_points_inf = random_g2_points(&mut rng, max_n2, &infinity);
    // The G1 points at infinity where the G2 ones are, as in parameters (both are b_i(τ) times
    // a generator).
    let mut g1_points_inf = points[..max_n2].to_vec();
    for &i in &infinity {
        g1_points_inf[i] = G1Affine::identity();
    }
    let g2_sizes: Vec<usize> = [1usize, 2, 3, 31, 1000, 4097, 65_537]
        .into_iter()
        .filter(|&n| n < max_n2)
        .chain([max_n2])
        .collect();
    for &n in &g2_sizes {
        for (name, gen) in &kinds {
            if n == max_n2
                && !matches!(
                    *name,
                    "full-width" | "porep-like 0/1" | "one repeated value"
                )
            {
                continue;
            }
            let scalars = gen(&mut rng, n);
            for (g1, g2, inf) in [
                (&points[..n], &g2_points[..n], false),
                (&g1_points_inf[..n], &g2_points_inf[..n], true),
            ] {
                if inf && n > 4097 && *name != "porep-like 0/1" {
                    continue;
                }
                let want = SharedSums {
                    g1: groth16::msm::g1(g1, &scalars),
                    g2: Some(groth16::msm::g2(g2, &scalars)),
                };
                let got = gpu_shared_msm_host(gpu, g1, g2, &scalars)?;
                let label = format!(
                    "msm g1+g2 {n} {name}{}",
                    if inf { " with points at infinity" } else { "" }
                );
                t.check(&label, got == want);
            }
        }
    }
    {
        let n = 4097;
        let g1: Vec<G1Affine> = (0..n).map(|i| g1_points_inf[i % 13]).collect();
        let g2: Vec<G2Affine> = (0..n).map(|i| g2_points_inf[i % 13]).collect();
        let scalars: Vec<Fr> = (0..n).map(|_| Fr::from(rng.gen_range(2..6u64))).collect();
        let want = SharedSums {
            g1: groth16::msm::g1(&g1, &scalars),
            g2: Some(groth16::msm::g2(&g2, &scalars)),
        };
        let got = gpu_shared_msm_host(gpu, &g1, &g2, &scalars)?;
        t.check(&format!("msm g1+g2 {n} repeated points"), got == want);
    }

    // Proving start through the Backend trait: synthetic parameters, full densities.
    let canary = crate::canary::srs()?;
    for (inputs, aux, constraints) in [(3usize, 1000usize, 1500usize), (5, 40_000, 70_000)] {
        let domain = constraints.next_power_of_two();
        let srs = Srs {
            id: format!("gpu-check synthetic {constraints}"),
            vk: canary.vk.clone(),
            h: random_points(&mut rng, domain - 1, true),
            l: random_points(&mut rng, aux, true),
            a: random_points(&mut rng, inputs + aux, true),
            b_g1: random_points(&mut rng, inputs + aux, true),
            b_g2: random_g2_points(&mut rng, inputs + aux, &[1, aux / 2]),
        };
        let witness = Witness {
            input: random_scalars(&mut rng, inputs),
            aux: porep_scalars(&mut rng, aux),
            a_aux_density: Density::full(aux),
            b_input_density: Density::full(inputs),
            b_aux_density: Density::full(aux),
        };
        let evals = Evaluations {
            a: porep_scalars(&mut rng, constraints),
            b: porep_scalars(&mut rng, constraints),
            c: random_scalars(&mut rng, constraints),
        };
        let want = CpuBackend.start(&srs, evals.clone(), &witness)?;
        let got = backend.start(&srs, evals.clone(), &witness)?;
        t.check(
            &format!("proving start, {constraints} constraints, B in G2 on the GPU"),
            same_start(&want, &got, true, &srs, &witness)?,
        );
        // Second call: the parameters are resident now.
        let again = backend.start(&srs, evals.clone(), &witness)?;
        t.check(
            &format!("proving start again (resident), {constraints} constraints"),
            same_start(&want, &again, true, &srs, &witness)?,
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
        let limited = CudaBackend::with_memory_limit(args.device, Some(limit))?;
        let streamed = limited.start(&srs, evals.clone(), &witness)?;
        t.check(
            &format!(
                "proving start streamed within a {limit}-byte limit, {constraints} constraints, \
                 B in G2 left to the CPU"
            ),
            same_start(&want, &streamed, false, &srs, &witness)? && limited.resident_bytes() == 0,
        );
        // Room for the G1 points and a start, not for the G2 points as well: the G1 sets stay
        // resident and the B multiexp in G2 is left to the CPU finalizer.
        let limit = g1_resident + srs.b_g2.len() * G2_AFFINE_LIMBS * 4 / 2;
        let limited = CudaBackend::with_memory_limit(args.device, Some(limit))?;
        let g1_only = limited.start(&srs, evals, &witness)?;
        t.check(
            &format!(
                "proving start with no room for the B query in G2 within a {limit}-byte \
                 limit, {constraints} constraints: G1 resident, B in G2 left to the CPU"
            ),
            same_start(&want, &g1_only, false, &srs, &witness)?
                && limited.resident_bytes() == points * AFFINE_LIMBS * 4,
        );
    }

    // A real circuit (the canary) with real densities: proofs byte-identical with the same r, s.
    {
        use crate::job::ProofJob;
        let job = crate::canary::CanaryJob::new(1, rng.next_u64())?;
        let r = Fr::random(&mut rng);
        let s = Fr::random(&mut rng);
        let cpu = groth16::prove(&CpuBackend, &canary, job.synthesize(0)?, r, s)?;
        let (gpu_proof, g2_on_gpu) = cuda_proof(&backend, &canary, job.synthesize(0)?, r, s)?;
        t.check("canary: B in G2 made on the GPU", g2_on_gpu);
        let bytes = |p: &groth16::Proof| -> Result<Vec<u8>> {
            let mut v = Vec::new();
            p.write(&mut v).context("cannot serialise a proof")?;
            Ok(v)
        };
        t.check(
            "canary proof bytes, cpu = cuda",
            bytes(&cpu)? == bytes(&gpu_proof)?,
        );
        // The worker's path: the witness-only synthesis, packed, expanded on the GPU, and A, B,
        // C made there from the recorded constraints.
        let witness = job.synthesize(0)?.witness;
        let packed = job.witness(0)?.packed();
        match backend.start_from_constraints(&canary, &*job.r1cs()?, &packed)? {
            Some(sums) => {
                t.check(
                    "canary: B in G2 made on the GPU with products on the GPU",
                    sums.b_g2.is_some(),
                );
                let on_device = groth16::finish(&canary, &sums, Some(&witness), r, s)?;
                t.check(
                    "canary proof bytes, cpu = cuda with products on the GPU",
                    bytes(&cpu)? == bytes(&on_device)?,
                );
            }
            None => t.check("canary: recorded constraints resident on the GPU", false),
        }
        t.check("canary proof verifies", job.verify(&[gpu_proof]).is_ok());
    }

    if let Some(log_n) = args.large_log {
        let large = Instant::now();
        for (what, ok) in super::large_check::run(gpu, log_n, &mut rng)? {
            t.check(&what, ok);
        }
        println!(
            "full-size checks at 2^{log_n}: {:.1} s",
            large.elapsed().as_secs_f64()
        );
    }

    println!(
        "{} checks, {} failed ({:.1} s)",
        t.checks,
        t.failures,
        started.elapsed().as_secs_f64()
    );
    Ok(t.failures == 0)
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

fn sppark_ms(work: &str, log_n: u32) -> Option<f64> {
    match (work, log_n) {
        ("msm full-width", 20) => Some(26.0),
        ("msm full-width", 24) => Some(187.0),
        ("msm full-width", 26) => Some(645.0),
        ("msm full-width", 27) => Some(1183.0),
        ("ntt forward", 27) => Some(42.4),
        _ => None,
    }
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

/// PoRep-like host values, generated in parallel.
fn porep_host(n: usize, seed: u64, other_pct: u32) -> Vec<Fr> {
    let mut v = vec![Fr::ZERO; n];
    v.par_chunks_mut(1 << 16)
        .enumerate()
        .for_each(|(k, chunk)| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (k as u64).wrapping_mul(0x9e37_79b9));
            for x in chunk {
                let pick = rng.gen_range(0..100u32);
                *x = if pick < 51 {
                    Fr::ZERO
                } else if pick < 100 - other_pct {
                    Fr::ONE
                } else {
                    Fr::random(&mut rng)
                };
            }
        });
    v
}

/// `c2q bench gpu`.
pub fn bench_gpu(args: &BenchGpuArgs) -> Result<()> {
    print_devices()?;
    let backend = CudaBackend::new(args.device)?;
    let gpu = backend.gpu();
    let mut rng = ChaCha8Rng::seed_from_u64(0xbe4c);
    let mut rows: Vec<BenchRow> = Vec::new();
    let min_log = args.min_log.min(args.max_log);
    let max_log = args.max_log.min(28);
    let push = |rows: &mut Vec<BenchRow>, work: &str, log_n: u32, (med, min): (f64, f64)| {
        eprintln!("{work:<28} 2^{log_n:<3} {med:>10.2} ms");
        rows.push(BenchRow {
            work: work.to_string(),
            log_n,
            median_ms: med,
            min_ms: min,
            sppark_ms: sppark_ms(work, log_n),
        });
    };

    if !args.no_ntt {
        let mut ntt = Ntt::new();
        for log_n in min_log..=max_log {
            let n = 1usize << log_n;
            let buf = gpu.alloc::<u32>(n * FR_LIMBS)?;
            gen_scalars(gpu, &buf, n, 7, 0)?;
            let r = time_events(gpu, args.reps, || ntt.forward(gpu, &buf, log_n))?;
            push(&mut rows, "ntt forward", log_n, r);
        }
    }

    if !args.no_msm {
        let n_max = 1usize << max_log;
        let (points, _) = gen_points::<G1Projective>(gpu, n_max, &mut rng)?;
        let scalars = gpu.alloc::<u32>(n_max * FR_LIMBS)?;
        for (work, mode) in [("msm full-width", 0u32), ("msm porep-like", 1)] {
            for log_n in min_log..=max_log {
                let n = 1usize << log_n;
                gen_scalars(gpu, &scalars, n, 11 + log_n as u64, mode)?;
                let r = time_events(gpu, args.reps, || {
                    msm(gpu, &points, &scalars, n).map(|_| ())
                })?;
                push(&mut rows, work, log_n, r);
            }
        }
        // The B query's MSM, G1 and G2 over one sort, up to 2^26 (a 32 GiB partition's B query
        // is 2^25): the G2 points of 2^26 take 12.9 GB.
        let max_g2 = max_log.min(26);
        if min_log <= max_g2 {
            let (points2, _) = gen_points::<G2Projective>(gpu, 1 << max_g2, &mut rng)?;
            for log_n in min_log..=max_g2 {
                let n = 1usize << log_n;
                gen_scalars(gpu, &scalars, n, 13 + log_n as u64, 1)?;
                let r = time_events(gpu, args.reps, || {
                    msm_shared(gpu, &points, Some(&points2), &scalars, n).map(|_| ())
                })?;
                push(&mut rows, "msm g1+g2 porep-like", log_n, r);
            }
        }
    }

    let mut partition = None;
    if !args.no_partition {
        partition = Some(bench_partition(
            gpu,
            args.partition_constraints,
            !args.no_g2,
            &mut rng,
        )?);
    }
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
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("{}", gpu.info);
        println!(
            "{:<28} {:>6} {:>11} {:>11} {:>10} {:>8}",
            "work", "size", "median ms", "min ms", "sppark ms", "ratio"
        );
        for r in &rows {
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
        if let Some(p) = &partition {
            println!("{}", serde_json::to_string(p)?);
        }
        if let Some(s) = &streamed {
            println!("{}", serde_json::to_string(s)?);
        }
    }
    Ok(())
}

/// Timings of one partition-shaped proving start.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PartitionTiming {
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

/// Proving start for one partition of `constraints` constraints, PoRep-shaped (aux variables
/// ≈ constraints, A density 99.6 %, B density 25.5 %, witness 51 % zeros and 47 % ones), with a
/// random SRS made on the GPU. Timed end to end from host-resident a, b, c and witness, through
/// the backend's own proving start, twice with fresh inputs: the process's first proving start
/// (`first`: pinned staging buffers and host threads still cold) and the one after it, which
/// is what a worker proving partition after partition pays (`phases`). With `b_g2`, the B
/// query's G2 points are on the device too, and its B MSM sums them beside the G1 ones.
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
    };
    eprintln!("partition: {constraints} constraints, domain 2^{log_n}: generating inputs …");
    let t = Instant::now();
    let (h_set, _) = gen_points::<G1Projective>(gpu, domain - 1, rng)?;
    let (l_set, _) = gen_points::<G1Projective>(gpu, aux, rng)?;
    let (a_set, _) = gen_points::<G1Projective>(gpu, a_points, rng)?;
    let (b_set, _) = gen_points::<G1Projective>(gpu, b_points, rng)?;
    let b2_set = match b_g2 {
        true => Some(gen_points::<G2Projective>(gpu, b_points, rng)?.0),
        false => None,
    };
    let srs_gen_ms = t.elapsed().as_secs_f64() * 1e3;

    let mut ntt = Ntt::new();
    // Warm the twiddle table: it is built once per process, not per partition.
    {
        let tiny = gpu.alloc_zeroed::<u32>(domain * FR_LIMBS)?;
        ntt.forward(gpu, &tiny, log_n)?;
    }
    let mut runs = Vec::with_capacity(2);
    let mut device_peak_bytes = 0;
    for run in 0..2u64 {
        let seed = 16 * run;
        let evals = Evaluations {
            a: porep_host(constraints, seed + 1, 3),
            b: porep_host(constraints, seed + 2, 3),
            c: porep_host(constraints, seed + 3, 3),
        };
        let witness = porep_witness(seed + 4);
        let sets = PointSets {
            h: &h_set,
            l: &l_set,
            a: &a_set,
            b_g1: &b_set,
            b_g2: b2_set.as_ref(),
        };
        // Device memory beyond the point sets and the NTT's tables, which are allocated by now.
        let held = gpu.allocated();
        gpu.reset_peak();
        let (sums, phases) = start_resident(
            gpu,
            &mut ntt,
            sets,
            super::backend::StartInput::Host {
                evals,
                witness: &witness,
            },
        )?;
        device_peak_bytes = gpu.peak_allocated().saturating_sub(held);
        // Keep the results observable so that nothing is optimised away, and sanity-check
        // them.
        let g2_ok = sums.b_g2.is_some() == b_g2
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
    let device_estimate_bytes = start_peak_bytes(domain, [aux, a_points, b_points], b_g2);
    eprintln!(
        "partition: device memory at the peak besides points and NTT tables: {:.2} GB, \
         estimated {:.2} GB",
        device_peak_bytes as f64 / 1e9,
        device_estimate_bytes as f64 / 1e9
    );
    Ok(PartitionTiming {
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
}

/// As `bench_partition`, but with the points in host memory (made on the GPU and brought
/// back) and a backend allowed `limit` bytes of device memory, so that they do not fit and
/// every MSM streams them: what a GPU too small for a circuit's points pays per partition.
fn bench_partition_streamed(
    gpu: &Gpu,
    device: usize,
    constraints: usize,
    limit: usize,
    rng: &mut ChaCha8Rng,
) -> Result<StreamedTiming> {
    let domain = constraints.next_power_of_two();
    let aux = constraints;
    let witness = Witness {
        input: Vec::new(),
        aux: porep_host(aux, 24, 2),
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
    let mut host_points = |n: usize| -> Result<Vec<G1Affine>> {
        let (d, _) = gen_points::<G1Projective>(gpu, n, rng)?;
        let mut v = vec![G1Affine::identity(); n];
        gpu.download(&d, 0, affine_as_limbs_mut(&mut v))?;
        Ok(v)
    };
    let srs = Srs {
        id: "bench streamed partition".into(),
        vk: crate::canary::srs()?.vk.clone(),
        h: host_points(lens[0])?,
        l: host_points(lens[1])?,
        a: host_points(lens[2])?,
        b_g1: host_points(lens[3])?,
        b_g2: Vec::new(),
    };
    let evals = Evaluations {
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
    eprintln!(
        "streamed partition: {total_ms:.0} ms within {:.2} GB (peak {:.2} GB)",
        limit as f64 / 1e9,
        device_peak_bytes as f64 / 1e9
    );
    Ok(StreamedTiming {
        constraints,
        memory_limit_bytes: limit,
        total_ms,
        device_peak_bytes,
    })
}

fn proof_bytes(p: &groth16::Proof) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    p.write(&mut v).context("cannot serialise a proof")?;
    Ok(v)
}

/// `c2q gpu-check --porep`: real 2 KiB PoRep sectors proved by both backends with the same r
/// and s. Ok(true) when every proof matched and verified.
fn porep_check(args: &GpuCheckArgs) -> Result<bool> {
    use crate::groth16::setup::Quiet;
    use crate::job::ProofJob;
    use crate::porep::{self, params, testdata, PorepJob};
    use filecoin_proofs_api::RegisteredSealProof;

    let dir = &args.params_dir;
    if dir.as_path() == std::path::Path::new(params::OFFICIAL_DIR) {
        bail!(
            "--params-dir {} is the official parameter directory; generated test parameters \
             must live elsewhere",
            dir.display()
        );
    }
    // filecoin-proofs reads its settings once, on first use: point it at the test parameters
    // before anything (sealing, verify_seal, our own params_path) can read them.
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", dir);

    print_devices()?;
    let started = Instant::now();
    let backend = CudaBackend::new(args.device)?;
    println!(
        "{}: kernels ready in {:.2} s",
        backend.gpu().info,
        started.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let params_file = params::ensure(RegisteredSealProof::StackedDrg2KiBV1_1, dir, &Quiet)
        .with_context(|| format!("cannot generate 2 KiB test parameters in {}", dir.display()))?;
    println!(
        "2 KiB parameters {} ready in {:.2} s",
        params_file.display(),
        t.elapsed().as_secs_f64()
    );

    let mut rng = seeded_rng(args.seed);
    let mut t = Tally::default();
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;

    for (proof_type, name, miner, sector) in [
        (
            RegisteredSealProof::StackedDrg2KiBV1_1,
            "interactive",
            1000u64,
            3u64,
        ),
        (
            RegisteredSealProof::StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
            "non-interactive",
            77,
            5,
        ),
    ] {
        let t0 = Instant::now();
        let sealed = testdata::seal_2kib(proof_type, miner, sector, rng.next_u64())
            .with_context(|| format!("cannot seal a 2 KiB {name} test sector"))?;
        let c1 = porep::C1Input {
            output: sealed.c1.clone(),
            sector_number: None,
            shape_only: false,
        };
        let job = PorepJob::new(c1, miner, sector)
            .with_context(|| format!("cannot build the {name} PoRep job"))?;
        let srs = job.srs()?;
        println!(
            "{name}: sealed, job of {} partitions ready in {:.0} ms",
            job.partitions(),
            ms(t0)
        );

        let mut cpu_proofs = Vec::with_capacity(job.partitions());
        let mut gpu_proofs = Vec::with_capacity(job.partitions());
        for k in 0..job.partitions() {
            let t0 = Instant::now();
            let assignment = job
                .synthesize(k)
                .with_context(|| format!("cannot synthesize {name} partition {k}"))?;
            let synth_ms = ms(t0);
            let r = Fr::random(&mut rng);
            let s = Fr::random(&mut rng);
            let t0 = Instant::now();
            let cpu = groth16::prove(&CpuBackend, &srs, assignment.clone(), r, s)
                .with_context(|| format!("CPU proof of {name} partition {k}"))?;
            let cpu_ms = ms(t0);
            let witness = assignment.witness.clone();
            let t0 = Instant::now();
            let (gpu, g2_on_gpu) = cuda_proof(&backend, &srs, assignment, r, s)
                .with_context(|| format!("CUDA proof of {name} partition {k}"))?;
            let gpu_ms = ms(t0);
            t.check(
                &format!("{name} partition {k}: B in G2 made on the GPU"),
                g2_on_gpu,
            );
            // The worker's path: the witness-only synthesis, packed, expanded on the GPU, and
            // A, B, C made there from the recorded constraints.
            let packed = job
                .witness(k)
                .with_context(|| format!("cannot compute {name} partition {k}'s witness"))?
                .packed();
            let on_device = backend
                .start_from_constraints(&srs, &*job.r1cs()?, &packed)
                .with_context(|| {
                    format!("CUDA proof of {name} partition {k}, products on the GPU")
                })?;
            t.check(
                &format!("{name} partition {k}: recorded constraints resident on the GPU"),
                on_device.is_some(),
            );
            if let Some(sums) = on_device {
                t.check(
                    &format!(
                        "{name} partition {k}: B in G2 made on the GPU with products on the GPU"
                    ),
                    sums.b_g2.is_some(),
                );
                let proof = groth16::finish(&srs, &sums, Some(&witness), r, s)?;
                t.check(
                    &format!(
                        "{name} partition {k} proof bytes, cpu = cuda with products on the GPU"
                    ),
                    proof_bytes(&cpu)? == proof_bytes(&proof)?,
                );
            }
            println!(
                "{name} partition {k}: synthesis {synth_ms:.1} ms, prove cpu {cpu_ms:.1} ms, \
                 cuda {gpu_ms:.1} ms"
            );
            t.check(
                &format!("{name} partition {k} proof bytes, cpu = cuda"),
                proof_bytes(&cpu)? == proof_bytes(&gpu)?,
            );
            cpu_proofs.push(cpu);
            gpu_proofs.push(gpu);
        }
        let verified = job.verify(&gpu_proofs);
        if let Err(e) = &verified {
            println!("      {e:#}");
        }
        t.check(
            &format!("{name}: cuda proofs verify (bellperson, job.verify)"),
            verified.is_ok(),
        );

        // filecoin-proofs' verify_seal takes the interactive form only: the non-interactive
        // type is verified by it solely in aggregated form (see tests/porep_noninteractive.rs).
        if !job.is_non_interactive() {
            let bytes = crate::job::proof_bytes(&gpu_proofs)?;
            let ok = filecoin_proofs_api::seal::verify_seal(
                sealed.proof,
                sealed.comm_r,
                sealed.comm_d,
                porep::prover_id(miner),
                sector.into(),
                sealed.ticket,
                sealed.seed,
                &bytes,
            );
            if let Err(e) = &ok {
                println!("      verify_seal: {e:#}");
            }
            t.check(
                &format!("{name}: cuda proof accepted by filecoin-proofs verify_seal"),
                matches!(ok, Ok(true)),
            );
        }
    }

    println!(
        "{} checks, {} failed ({:.1} s)",
        t.checks,
        t.failures,
        started.elapsed().as_secs_f64()
    );
    Ok(t.failures == 0)
}
