//! `c2q gpu-check --sectors`: real 2 KiB PoRep sectors (interactive, then non-interactive)
//! sealed with filecoin-proofs, and a 2 KiB SnapDeals update encoded into a sealed sector,
//! proved by both backends with the same r and s (the first partition of each also on a
//! capped GPU, its points streamed and then placed by value); the proofs compared byte for
//! byte and verified, filecoin-proofs' `verify_seal` and `verify_empty_sector_update_proof`
//! included.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use blstrs::Scalar as Fr;
use ff::Field;
use filecoin_proofs_api::RegisteredSealProof;
use rand::RngCore;
use rand_chacha::ChaCha8Rng;

use super::gpu_check::{points_streamed, GpuCheckArgs};
use super::proofs::{cuda_proof, proof_bytes};
use super::report::{print_devices, seeded_rng, Tally};
use crate::gpu::CudaBackend;
use crate::groth16::{self, setup::Quiet, Backend, CpuBackend, Srs};
use crate::job::ProofJob;
use crate::porep::{self, params, testdata, PorepJob};
use crate::snap::{self, SnapJob};

/// A 2 KiB test sector: its proof type, the name its lines carry, its miner and number.
struct TestSector {
    proof_type: RegisteredSealProof,
    name: &'static str,
    miner: u64,
    sector: u64,
}

/// The sectors checked, in order.
const SECTORS: [TestSector; 2] = [
    TestSector {
        proof_type: RegisteredSealProof::StackedDrg2KiBV1_1,
        name: "interactive",
        miner: 1000,
        sector: 3,
    },
    TestSector {
        proof_type: RegisteredSealProof::StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
        name: "non-interactive",
        miner: 77,
        sector: 5,
    },
];

/// Milliseconds since `t`.
fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// `c2q gpu-check --sectors`. Ok(true) when every proof matched and verified.
pub fn sectors_check(args: &GpuCheckArgs) -> Result<bool> {
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

    let t = Instant::now();
    let params_file = snap::params::ensure(
        filecoin_proofs_api::RegisteredUpdateProof::StackedDrg2KiBV1,
        dir,
        &Quiet,
    )
    .with_context(|| {
        format!(
            "cannot generate 2 KiB SnapDeals test parameters in {}",
            dir.display()
        )
    })?;
    println!(
        "2 KiB SnapDeals parameters {} ready in {:.2} s",
        params_file.display(),
        t.elapsed().as_secs_f64()
    );

    let mut rng = seeded_rng(args.seed);
    let mut t = Tally::default();
    for sector in &SECTORS {
        t += sector_check(&backend, sector, &mut rng)?;
    }
    t += snap_check(&backend, &mut rng)?;
    t.print_summary(started);
    Ok(t.passed())
}

/// One test sector: sealed, each partition proved by both backends (`partition_check`), the
/// CUDA proofs verified.
fn sector_check(backend: &CudaBackend, sector: &TestSector, rng: &mut ChaCha8Rng) -> Result<Tally> {
    let TestSector {
        proof_type,
        name,
        miner,
        sector: number,
    } = *sector;
    let mut t = Tally::default();
    let t0 = Instant::now();
    let sealed = testdata::seal_2kib(proof_type, miner, number, rng.next_u64())
        .with_context(|| format!("cannot seal a 2 KiB {name} test sector"))?;
    let c1 = porep::C1Input {
        output: sealed.c1.clone(),
        sector_number: None,
        shape_only: false,
    };
    let job = PorepJob::new(c1, miner, number)
        .with_context(|| format!("cannot build the {name} PoRep job"))?;
    let srs = job.srs()?;
    println!(
        "{name}: sealed, job of {} partitions ready in {:.0} ms",
        job.partitions(),
        ms(t0)
    );

    let mut gpu_proofs = Vec::with_capacity(job.partitions());
    for k in 0..job.partitions() {
        let (checks, gpu_proof) = partition_check(backend, &job, &srs, name, k, rng)?;
        t += checks;
        gpu_proofs.push(gpu_proof);
    }
    t += verify_check(&job, &sealed, sector, &gpu_proofs)?;
    Ok(t)
}

/// Partition `k` proved by the CPU backend and by the CUDA backend with the same r and s,
/// with A, B, C from the host and (the worker's path) made on the GPU, and the first partition
/// under a memory cap that leaves the points streamed or partly resident; the proofs compared
/// byte for byte. Returns the CUDA proof (A, B, C from the host) for verification.
fn partition_check(
    backend: &CudaBackend,
    job: &dyn ProofJob,
    srs: &Srs,
    name: &str,
    k: usize,
    rng: &mut ChaCha8Rng,
) -> Result<(Tally, groth16::Proof)> {
    let mut t = Tally::default();
    let t0 = Instant::now();
    let assignment = job
        .synthesize(k)
        .with_context(|| format!("cannot synthesize {name} partition {k}"))?;
    let synth_ms = ms(t0);
    let r = Fr::random(&mut *rng);
    let s = Fr::random(&mut *rng);
    let t0 = Instant::now();
    let cpu = groth16::prove(&CpuBackend, srs, assignment.clone(), r, s)
        .with_context(|| format!("CPU proof of {name} partition {k}"))?;
    let cpu_ms = ms(t0);
    let witness = assignment.witness.clone();
    let t0 = Instant::now();
    let (gpu, g2_on_gpu) = cuda_proof(backend, srs, assignment, r, s)
        .with_context(|| format!("CUDA proof of {name} partition {k}"))?;
    let gpu_ms = ms(t0);
    t.check(
        &format!("{name} partition {k}: B in G2 made on the GPU"),
        g2_on_gpu,
    );
    // The worker's path: the witness-only synthesis, packed, expanded on the GPU, and A, B, C
    // made there from the recorded constraints.
    let packed = job
        .witness(k)
        .with_context(|| format!("cannot compute {name} partition {k}'s witness"))?
        .packed();
    let on_device = backend
        .start_from_constraints(srs, &*job.r1cs()?, &packed)
        .with_context(|| format!("CUDA proof of {name} partition {k}, products on the GPU"))?;
    t.check(
        &format!("{name} partition {k}: recorded constraints resident on the GPU"),
        on_device.is_some(),
    );
    if let Some(sums) = on_device {
        t.check(
            &format!("{name} partition {k}: B in G2 made on the GPU with products on the GPU"),
            sums.b_g2.is_some(),
        );
        let proof = groth16::finish(srs, &sums, Some(&witness), r, s)?;
        t.check(
            &format!("{name} partition {k} proof bytes, cpu = cuda with products on the GPU"),
            proof_bytes(&cpu)? == proof_bytes(&proof)?,
        );
    }
    // The first partition again on a GPU capped between room for the constraints and room
    // for the points: the path of a card too small for the points (24 or 48 GB at 32 GiB).
    if k == 0 {
        t += points_streamed(
            backend.gpu().info.ordinal,
            srs,
            job,
            k,
            &format!("{name} partition {k}"),
            &cpu,
            (r, s),
        )?;
    }
    println!(
        "{name} partition {k}: synthesis {synth_ms:.1} ms, prove cpu {cpu_ms:.1} ms, \
         cuda {gpu_ms:.1} ms"
    );
    t.check(
        &format!("{name} partition {k} proof bytes, cpu = cuda"),
        proof_bytes(&cpu)? == proof_bytes(&gpu)?,
    );
    Ok((t, gpu))
}

/// A 2 KiB SnapDeals update: each partition proved by both backends (`partition_check`), the
/// CUDA proof verified per partition and by filecoin-proofs' `verify_empty_sector_update_proof`
/// (both in `job.verify`).
fn snap_check(backend: &CudaBackend, rng: &mut ChaCha8Rng) -> Result<Tally> {
    let name = "snap";
    let mut t = Tally::default();
    let t0 = Instant::now();
    let input = snap::testdata::update_2kib(1000, 9, rng.next_u64())
        .context("cannot make a 2 KiB SnapDeals test update")?;
    let job = SnapJob::new(input).context("cannot build the SnapDeals job")?;
    let srs = job.srs()?;
    println!(
        "{name}: sector updated, job of {} partitions ready in {:.0} ms",
        job.partitions(),
        ms(t0)
    );
    let mut gpu_proofs = Vec::with_capacity(job.partitions());
    for k in 0..job.partitions() {
        let (checks, gpu_proof) = partition_check(backend, &job, &srs, name, k, rng)?;
        t += checks;
        gpu_proofs.push(gpu_proof);
    }
    let verified = job.verify(&gpu_proofs);
    if let Err(e) = &verified {
        println!("      {e:#}");
    }
    t.check(
        &format!(
            "{name}: cuda proofs verify (bellperson, and filecoin-proofs' \
             verify_empty_sector_update_proof)"
        ),
        verified.is_ok(),
    );
    Ok(t)
}

/// The sector's CUDA proofs verified by the job (bellperson) and, for the interactive form,
/// by filecoin-proofs' `verify_seal`.
fn verify_check(
    job: &PorepJob,
    sealed: &testdata::Sealed,
    sector: &TestSector,
    gpu_proofs: &[groth16::Proof],
) -> Result<Tally> {
    let name = sector.name;
    let mut t = Tally::default();
    let verified = job.verify(gpu_proofs);
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
        let bytes = crate::job::proof_bytes(gpu_proofs)?;
        let ok = filecoin_proofs_api::seal::verify_seal(
            sealed.proof,
            sealed.comm_r,
            sealed.comm_d,
            porep::prover_id(sector.miner),
            sector.sector.into(),
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
    Ok(t)
}
