//! `c2q bench pipeline`: full-size jobs through the worker's pipeline, without a sealing farm
//! or a 47 GB parameter download.
//!
//! Inputs are shape-only (the real structure, random values): C1 outputs for PoRep
//! (`porep::shape`), vanilla update proofs for SnapDeals (`snap::shape`), vanilla sector
//! proofs for PoSt (`post::shape`), so the circuits, constraints, witnesses and products are
//! exactly a real sector's. With `urgent`, one PoSt job is sent through the pipeline's urgent
//! lane once the first job's second partition is proved (the pipeline full), and how long it
//! waited for a GPU behind the others is reported. The SRS has
//! the shape the recorded constraints call for (every point count of the real `.params`
//! file) with random points made here. Nothing of that can verify, so verification is
//! skipped, and the report says so. Everything else is the path a worker's job takes:
//! `pipeline::Pipeline` with its synthesis, products, proving-start (one per GPU), G2
//! finalizer and assembly stages, each job admitted by the worker's memory gate with the
//! worker's estimates (reserved before it is submitted, shrunk as its partitions finish), so
//! a run shows whether the process stays within the budget a worker on the machine would
//! have.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar as Fr};
use ff::Field;
use group::{Curve, Group};
use rand::SeedableRng;
use rayon::prelude::*;
use serde::Serialize;
use tokio::sync::oneshot;

use crate::config::PipelineConfig;
use crate::gate::budget::Budget;
use crate::gate::Estimate;
use crate::gate::{partitions_of, Gate, PartitionPool};
use crate::groth16::curve::BatchAffine;
use crate::groth16::{Backend, CompactWitness, Proof, R1cs, Srs, SrsKey, VerifyingKey};
use crate::job::ProofJob;
use crate::kinds;
use crate::pipeline::{PartitionDone, Pipeline, Priority, Proved, Submission};
use crate::porep::{self, C1Input, PorepJob};
use crate::post::{self, PostJob};
use crate::snap::{self, SnapJob};
use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof};

/// The proof a benchmark's jobs are of.
#[derive(Clone, Copy, Debug)]
pub enum BenchProof {
    Porep(RegisteredSealProof),
    Update(RegisteredUpdateProof),
    Post(RegisteredPoStProof),
}

impl BenchProof {
    /// The proof of this name: a SnapDeals update proof where `update` (its names are the
    /// V1 PoRep proofs'), else a PoSt proof (`StackedDrgWindow…`, `StackedDrgWinning…`) or a
    /// PoRep proof.
    pub fn from_name(name: &str, update: bool) -> Result<BenchProof> {
        if update {
            return Ok(BenchProof::Update(snap::update_proof_from_name(name)?));
        }
        if name.starts_with("StackedDrgWindow") || name.starts_with("StackedDrgWinning") {
            return Ok(BenchProof::Post(post::post_proof_from_name(name)?));
        }
        Ok(BenchProof::Porep(porep::proof_from_name(name)?))
    }

    pub fn name(&self) -> String {
        match self {
            BenchProof::Porep(p) => porep::proof_name(*p).to_string(),
            BenchProof::Update(p) => format!("{} (update)", snap::update_proof_name(*p)),
            BenchProof::Post(p) => post::post_proof_name(*p),
        }
    }

    /// Shape-only job number `k` of this proof, and its sector size.
    pub(crate) fn shape_only_job(&self, k: u64) -> Result<(Arc<dyn ProofJob>, u64)> {
        Ok(match *self {
            BenchProof::Porep(proof) => {
                let shape = porep::shape::generate(proof, 1000, k, k, &|_, _| {})?;
                let job = PorepJob::for_benchmark(
                    C1Input {
                        output: shape.output,
                        sector_number: None,
                        shape_only: true,
                    },
                    1000,
                    k,
                )?;
                let size = job.sector_size();
                (Arc::new(job), size)
            }
            BenchProof::Update(proof) => {
                let job = SnapJob::for_benchmark(snap::shape::generate(proof, k)?)?;
                let size = job.sector_size();
                (Arc::new(job), size)
            }
            BenchProof::Post(proof) => {
                let job = PostJob::for_benchmark(post::shape::generate(proof, 1000, k)?)?;
                let size = job.sector_size();
                (Arc::new(job), size)
            }
        })
    }

    /// The lane a worker gives a job of this proof: PoSt is urgent.
    fn priority(&self) -> Priority {
        match self {
            BenchProof::Post(_) => Priority::Urgent,
            BenchProof::Porep(_) | BenchProof::Update(_) => Priority::Normal,
        }
    }

    /// What a worker's gate reserves for a job of this proof.
    fn estimate(&self, sector_size: u64, partitions: u64, in_flight: u64) -> Estimate {
        match *self {
            BenchProof::Porep(_) => kinds::porep_estimate(sector_size, partitions, in_flight),
            BenchProof::Update(_) => kinds::snap_estimate(sector_size, partitions, in_flight),
            BenchProof::Post(p) => kinds::post_estimate(post::is_window(p), sector_size, in_flight),
        }
    }
}

/// What to run.
pub struct PipelineBench {
    pub proof: BenchProof,
    pub jobs: usize,
    /// A PoSt proof: one job of it sent through the urgent lane while the others are proved.
    pub urgent: Option<RegisteredPoStProof>,
    /// One run per entry, in order, over the same inputs, constraints and SRS: the device
    /// memory c2q may use on each GPU (None: all of it, and the only entry on the CPU backend).
    pub gpu_memory_limits: Vec<Option<usize>>,
    /// Opens one run's backends under its device memory limit. They are dropped when the run
    /// ends, so that each run finds its GPUs empty.
    pub open_backends: OpenBackends,
    pub synthesis_threads: usize,
    pub finalizer_threads: usize,
    /// The memory budget jobs are admitted against.
    pub budget: Budget,
}

/// Opens a run's backends for a device memory limit.
pub type OpenBackends = Box<dyn Fn(Option<usize>) -> Result<RunBackends>>;

/// The backends of one run, and how to read each GPU's device memory peak after it (empty on
/// the CPU backend).
pub struct RunBackends {
    pub backends: Vec<Arc<dyn Backend>>,
    pub device_peaks: Vec<Box<dyn Fn() -> u64 + Send + Sync>>,
}

/// A benchmark job: a shape-only job with a generated SRS, never verified.
struct BenchJob {
    job: Arc<dyn ProofJob>,
    srs: Arc<Srs>,
}

impl ProofJob for BenchJob {
    fn partitions(&self) -> usize {
        self.job.partitions()
    }

    fn srs(&self) -> Result<Arc<Srs>> {
        Ok(self.srs.clone())
    }

    fn r1cs(&self) -> Result<Arc<R1cs>> {
        self.job.r1cs()
    }

    fn witness(&self, partition: usize) -> Result<CompactWitness> {
        self.job.witness(partition)
    }

    /// Random values and a random SRS: there is nothing a verifier could accept. Skipped; the
    /// report says so.
    fn verify(&self, _: &[Proof]) -> Result<()> {
        Ok(())
    }
}

/// The report: a table on stderr, and this as JSON with `--json`.
#[derive(Clone, Debug, Serialize)]
pub struct PipelineReport {
    pub proof: String,
    /// The device memory c2q could use on each GPU in this run (None: all of it).
    pub gpu_memory_limit_bytes: Option<u64>,
    pub jobs: usize,
    pub partitions_per_job: usize,
    pub backends: Vec<String>,
    pub synthesis_threads: usize,
    pub constraints: usize,
    pub verification: &'static str,
    /// Recording (or loading) the constraints, and making the SRS: before the first run's
    /// first job (the runs after it share both).
    pub r1cs_s: f64,
    pub srs_gen_s: f64,
    /// One partition's witness computed alone (all threads on it), before the run.
    pub witness_alone_s: f64,
    /// One partition's proving start alone on the first backend, before the run, from its
    /// packed witness: the first call (which also makes the points and the recorded
    /// constraints resident on the GPU) and the second (what each partition costs). `None`
    /// where the backend does not start from the packed witness (the CPU backend, or no room).
    pub start_alone_s: Option<StartAlone>,
    /// Each job's end, seconds after the first job was submitted.
    pub job_done_s: Vec<f64>,
    /// Seconds per proof once the pipeline is full: between the first and the last job's end,
    /// divided by the jobs in between (the first job's fill time when there is one job).
    pub steady_s_per_proof: f64,
    /// Fraction of the run (first submit to last answer) each stage was busy, per thread of
    /// that stage (1.0: every thread of the stage always busy).
    pub busy: StageBusy,
    /// Fraction of the run each GPU (proving-start thread) had no partition.
    pub gpu_idle: f64,
    /// Mean seconds per partition in each stage.
    pub partition_s: StageBusy,
    pub witness_census: WitnessCensus,
    pub peak_rss_bytes: u64,
    pub device_peak_bytes: Vec<u64>,
    pub gate: GateReport,
    /// The urgent job sent among the others, where there was one.
    pub urgent: Option<UrgentReport>,
    /// A job of one partition (PoSt) sent alone to the idle pipeline before the run: what a
    /// warm idle worker takes from a job's arrival to its proof (its parameters and
    /// constraints loaded, verification skipped as for the others).
    pub idle: Option<Latency>,
}

/// One job's way through the pipeline, in seconds from its submission.
#[derive(Clone, Debug, Serialize)]
pub struct Latency {
    /// Its (first) partition's witness, then how long the partition waited for a GPU, its
    /// proving start and its G2 finish.
    pub witness_s: f64,
    pub waited_for_gpu_s: f64,
    pub start_s: f64,
    pub finish_s: f64,
    /// From submission to its partition's proving start.
    pub to_start_s: f64,
    /// From submission to its proof.
    pub total_s: f64,
}

/// The urgent job: when it came, how long it waited for a GPU, and when it was proved.
#[derive(Clone, Debug, Serialize)]
pub struct UrgentReport {
    pub proof: String,
    pub constraints: usize,
    /// Seconds after the first job was submitted.
    pub submitted_at_s: f64,
    /// Its way through the pipeline: the wait is for a GPU busy with another job's partition.
    #[serde(flatten)]
    pub latency: Latency,
}

/// The memory gate's view of the run, against what the process really held.
#[derive(Clone, Debug, Serialize)]
pub struct GateReport {
    /// What the whole process may use, and the part of it the gate hands to jobs.
    pub budget_bytes: u64,
    pub job_budget_bytes: u64,
    /// The most the gate had reserved at once (SRS included).
    pub peak_reserved_bytes: u64,
    /// Whether the process's peak RSS stayed within `budget_bytes`.
    pub within_budget: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct StartAlone {
    pub first_s: f64,
    pub next_s: f64,
    /// Whether the start made the B multiexp in G2 too (its points resident on the GPU).
    pub b_g2_on_device: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct StageBusy {
    pub synthesis: f64,
    pub products: f64,
    pub start: f64,
    pub finish: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct WitnessCensus {
    pub zeros: f64,
    pub ones: f64,
    pub others: f64,
    pub compact_bytes: usize,
}

/// The urgent job, ready before the first run.
struct UrgentJob {
    proof: RegisteredPoStProof,
    job: Arc<dyn ProofJob>,
    constraints: usize,
    sector_size: u64,
}

/// What every run shares, made once before the first: the circuit's constraints, an SRS of
/// their shape, one partition's packed witness for the starts timed alone, and the urgent job.
struct Prepared {
    name: String,
    sector_size: u64,
    partitions: usize,
    r1cs: Arc<R1cs>,
    srs: Arc<Srs>,
    packed: crate::groth16::PackedWitness,
    witness_alone_s: f64,
    witness_census: WitnessCensus,
    r1cs_s: f64,
    srs_gen_s: f64,
    urgent: Option<UrgentJob>,
}

/// Run the benchmark: one report per device memory limit. Progress and each run's table go to
/// stderr.
pub fn run(bench: PipelineBench) -> Result<Vec<PipelineReport>> {
    ensure!(bench.jobs >= 1, "--jobs must be at least 1");
    ensure!(
        !bench.gpu_memory_limits.is_empty(),
        "no run to make: no device memory limit given"
    );
    let t = Instant::now();
    let prepared = prepare(&bench, &t)?;
    let runs = bench.gpu_memory_limits.len();
    let mut reports = Vec::with_capacity(runs);
    for (k, &limit) in bench.gpu_memory_limits.iter().enumerate() {
        let cap = limit_name(limit.map(|b| b as u64));
        if runs > 1 {
            eprintln!(
                "[{:6.1} s] run {} of {runs}: device memory {cap}",
                t.elapsed().as_secs_f64(),
                k + 1
            );
        }
        let backends = (bench.open_backends)(limit)
            .with_context(|| format!("opening the backends with device memory {cap}"))?;
        // Each run's host peak is its own: the high-water mark restarts from what is held now
        // (the SRS and the constraints, which every run holds).
        reset_peak_rss();
        let report = run_once(&bench, &prepared, backends, limit, &t)
            .with_context(|| format!("the run with device memory {cap}"))?;
        // Each run's table as soon as it is done: a long series stopped early keeps its runs.
        print_table(&report);
        reports.push(report);
    }
    Ok(reports)
}

/// "all" for no limit, else the limit in GiB.
fn limit_name(limit: Option<u64>) -> String {
    match limit {
        None => "all".to_string(),
        Some(b) => format!("{:.0} GiB", b as f64 / (1u64 << 30) as f64),
    }
}

/// Restarts the process's peak resident memory (VmHWM) from what it holds now, where Linux
/// allows it (`/proc/self/clear_refs`, since 4.0); elsewhere the peaks are the process's.
fn reset_peak_rss() {
    if let Err(e) = std::fs::write("/proc/self/clear_refs", "5") {
        tracing::debug!(error = %e, "peak RSS not reset: later runs report the process's peak");
    }
}

/// The inputs, constraints and SRS every run shares.
fn prepare(bench: &PipelineBench, t: &Instant) -> Result<Prepared> {
    let name = bench.proof.name();
    eprintln!("making a shape-only {name} input (random values, the real structure) …");
    let (first, sector_size) = bench.proof.shape_only_job(1)?;
    let t_alone = Instant::now();
    eprintln!(
        "[{:6.1} s] one partition's witness, alone …",
        t.elapsed().as_secs_f64()
    );
    let sample = first.witness(0)?;
    let witness_alone_s = t_alone.elapsed().as_secs_f64();
    let census = sample.census();
    let total = (census.zeros + census.ones + census.others).max(1) as f64;
    let witness_census = WitnessCensus {
        zeros: census.zeros as f64 / total,
        ones: census.ones as f64 / total,
        others: census.others as f64 / total,
        compact_bytes: sample.bytes(),
    };
    eprintln!(
        "[{:6.1} s] recording (or loading) the circuit's constraints …",
        t.elapsed().as_secs_f64()
    );
    let t_r1cs = Instant::now();
    let r1cs = first.r1cs()?;
    let r1cs_s = t_r1cs.elapsed().as_secs_f64();
    eprintln!(
        "[{:6.1} s] {} constraints, {} inputs, {} aux variables; generating an SRS of that shape …",
        t.elapsed().as_secs_f64(),
        r1cs.constraints(),
        r1cs.inputs,
        r1cs.aux
    );
    let t_srs = Instant::now();
    let srs = Arc::new(shaped_srs(&r1cs, &format!("bench-shape-{name}"))?);
    let srs_gen_s = t_srs.elapsed().as_secs_f64();
    eprintln!(
        "[{:6.1} s] SRS ready ({:.1} GB)",
        t.elapsed().as_secs_f64(),
        srs.resident_bytes() as f64 / 1e9,
    );
    let urgent = match bench.urgent {
        None => None,
        Some(proof) => Some(urgent_job(proof, t)?),
    };
    Ok(Prepared {
        name,
        sector_size,
        partitions: first.partitions(),
        r1cs,
        srs,
        packed: sample.packed(),
        witness_alone_s,
        witness_census,
        r1cs_s,
        srs_gen_s,
        urgent,
    })
}

/// One run at one device memory limit.
fn run_once(
    bench: &PipelineBench,
    prepared: &Prepared,
    backends: RunBackends,
    limit: Option<usize>,
    t: &Instant,
) -> Result<PipelineReport> {
    let Prepared {
        name,
        sector_size,
        partitions,
        r1cs,
        srs,
        ..
    } = prepared;
    let (sector_size, partitions) = (*sector_size, *partitions);
    let RunBackends {
        backends,
        device_peaks,
    } = backends;
    ensure!(!backends.is_empty(), "no backend to prove on");
    eprintln!(
        "[{:6.1} s] proving {} job(s) of {partitions} partitions, verification SKIPPED \
         (random values cannot verify) …",
        t.elapsed().as_secs_f64(),
        bench.jobs,
    );
    let start_alone_s = start_alone(&*backends[0], srs, r1cs, &prepared.packed, t)?;
    let mut jobs: Vec<Arc<dyn ProofJob>> = Vec::with_capacity(bench.jobs);
    for k in 0..bench.jobs {
        jobs.push(Arc::new(BenchJob {
            job: bench.proof.shape_only_job(1 + k as u64)?.0,
            srs: srs.clone(),
        }));
    }
    let backend_names: Vec<String> = backends.iter().map(|b| b.name()).collect();
    let gpus = backends.len();
    // The worker's gate and estimates: the SRS reserved once for the run (it stays loaded),
    // each job's working set before it is submitted.
    let gate = Gate::new(bench.budget.jobs);
    let in_flight = PipelineConfig {
        devices: (0..gpus).collect(),
        ..PipelineConfig::default()
    }
    .partitions_in_flight();
    let est = bench
        .proof
        .estimate(sector_size, partitions as u64, in_flight);
    let Some(_srs_reservation) = gate.try_reserve(est.srs_bytes) else {
        bail!(
            "the memory budget for jobs ({:.1} GB) cannot hold the parameters' estimate ({:.1} GB)",
            gb(bench.budget.jobs),
            gb(est.srs_bytes)
        );
    };
    let urgent = prepared.urgent.as_ref();
    // The urgent job's parameters and working set stay reserved for it, as a worker keeps
    // room for urgent jobs beside its others.
    let _urgent_reservation = match urgent {
        None => None,
        Some(u) => {
            let estimate = BenchProof::Post(u.proof).estimate(u.sector_size, 1, in_flight);
            let bytes = estimate.srs_bytes + estimate.work(1);
            let Some(r) = gate.try_reserve(bytes) else {
                bail!(
                    "the memory budget for jobs ({:.1} GB) cannot hold the urgent job ({:.1} GB) \
                     beside the parameters",
                    gb(bench.budget.jobs),
                    gb(bytes)
                );
            };
            Some(r)
        }
    };
    ensure!(
        est.work(est.partitions) <= gate.free(),
        "the memory budget for jobs ({:.1} GB) cannot admit one {name} job ({:.1} GB)",
        gb(bench.budget.jobs),
        gb(gate.used() + est.work(est.partitions))
    );
    let admit = tokio::runtime::Builder::new_current_thread()
        .build()
        .context("making the runtime the gate waits on")?;
    let pipeline = Pipeline::start(
        backends.clone(),
        bench.synthesis_threads,
        bench.finalizer_threads,
        u32::MAX,
    )?;

    // A job of one partition is also timed alone, at the idle pipeline, before the others.
    let idle = match partitions {
        1 => {
            let job: Arc<dyn ProofJob> = Arc::new(BenchJob {
                job: bench.proof.shape_only_job(1000)?.0,
                srs: srs.clone(),
            });
            eprintln!(
                "[{:6.1} s] one {name} job alone at the idle pipeline …",
                t.elapsed().as_secs_f64()
            );
            let latency = prove_timed(&pipeline, job, bench.proof.priority(), "bench-idle")?;
            eprintln!(
                "[{:6.1} s] proved {:.2} s after it came",
                t.elapsed().as_secs_f64(),
                latency.total_s
            );
            Some(latency)
        }
        _ => None,
    };

    let run_start = Instant::now();
    let answers = Mutex::new(Vec::new());
    let done_at: Mutex<Vec<f64>> = Mutex::new(Vec::new());
    // The urgent job goes in once the first job's second partition is proved (its first, for
    // a job of one or two partitions): the pipeline is full by then.
    let (pipeline_full, when_full) = std::sync::mpsc::channel::<()>();
    let urgent_trigger = partitions.saturating_sub(1).clamp(1, 2);
    let urgent_report: Mutex<Option<Result<UrgentReport>>> = Mutex::new(None);
    std::thread::scope(|scope| -> Result<()> {
        if let Some(u) = urgent {
            let (pipeline, urgent_report) = (&pipeline, &urgent_report);
            scope.spawn(move || {
                if when_full.recv().is_err() {
                    return;
                }
                let report = prove_urgent(pipeline, u, run_start, t);
                *urgent_report.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
            });
        } else {
            drop(when_full);
        }
        let mut waiters = Vec::new();
        // The jobs' partitions in flight are reserved together, as the worker's normal jobs
        // are: the pipeline keeps that many alive whichever jobs they belong to.
        let pool = PartitionPool::new(&gate);
        for (k, job) in jobs.into_iter().enumerate() {
            let (done, answer) = oneshot::channel();
            let share = Arc::new(admit.block_on(pool.join(partitions_of(&est))));
            let held = share.clone();
            let est = est.clone();
            let full = (k == 0).then(|| Mutex::new(Some(pipeline_full.clone())));
            let t = *t;
            let progress: crate::pipeline::Progress = Box::new(move |d: PartitionDone| {
                let remaining = d.remaining as u64;
                held.update(
                    match d.products_on_gpu {
                        true => est.per_partition_on_gpu,
                        false => est.per_partition,
                    },
                    remaining,
                );
                eprintln!(
                    "[{:6.1} s] job {k}: {} of {partitions} partitions proved",
                    t.elapsed().as_secs_f64(),
                    partitions - d.remaining
                );
                if partitions - d.remaining >= urgent_trigger {
                    if let Some(full) = &full {
                        if let Some(tx) = full.lock().unwrap_or_else(|e| e.into_inner()).take() {
                            let _ = tx.send(());
                        }
                    }
                }
            });
            pipeline.submit(Submission {
                id: format!("bench-{k}"),
                job,
                priority: Priority::Normal,
                progress,
                done,
            })?;
            let (answers, done_at) = (&answers, &done_at);
            waiters.push(scope.spawn(move || {
                let result = answer.blocking_recv();
                drop(share);
                done_at
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(run_start.elapsed().as_secs_f64());
                answers
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(result);
            }));
        }
        drop(pipeline_full);
        for w in waiters {
            let _ = w.join();
        }
        Ok(())
    })?;
    let wall_s = run_start.elapsed().as_secs_f64();
    pipeline.shutdown();

    let mut proved: Vec<Proved> = Vec::new();
    for answer in answers.into_inner().unwrap_or_else(|e| e.into_inner()) {
        match answer {
            Ok(Ok(p)) => proved.push(p),
            Ok(Err(e)) => bail!("a benchmark job failed: {e}"),
            Err(_) => bail!("the pipeline stopped without answering a job"),
        }
    }
    let mut job_done_s = done_at.into_inner().unwrap_or_else(|e| e.into_inner());
    job_done_s.sort_by(f64::total_cmp);
    let steady_s_per_proof = match job_done_s.len() {
        0 => 0.0,
        1 => job_done_s[0],
        n => (job_done_s[n - 1] - job_done_s[0]) / (n - 1) as f64,
    };

    let mut sums = StageBusy::default();
    let mut count = 0usize;
    for p in &proved {
        for t in &p.timings {
            count += 1;
            sums.synthesis += t.synth_end_ms.saturating_sub(t.synth_start_ms) as f64 / 1e3;
            sums.products += t.products_end_ms.saturating_sub(t.products_start_ms) as f64 / 1e3;
            sums.start += t.start_end_ms.saturating_sub(t.start_start_ms) as f64 / 1e3;
            sums.finish += t.finish_end_ms.saturating_sub(t.finish_start_ms) as f64 / 1e3;
        }
    }
    let per = |x: f64, threads: usize| x / (wall_s * threads.max(1) as f64);
    let busy = StageBusy {
        synthesis: per(sums.synthesis, bench.synthesis_threads),
        products: per(sums.products, gpus),
        start: per(sums.start, gpus),
        finish: per(sums.finish, bench.finalizer_threads),
    };
    let n = count.max(1) as f64;
    let partition_s = StageBusy {
        synthesis: sums.synthesis / n,
        products: sums.products / n,
        start: sums.start / n,
        finish: sums.finish / n,
    };
    let gpu_idle = 1.0 - (sums.start / (wall_s * gpus.max(1) as f64)).min(1.0);

    let peak_rss_bytes = peak_rss_bytes();
    let report = PipelineReport {
        proof: name.to_string(),
        gpu_memory_limit_bytes: limit.map(|b| b as u64),
        jobs: bench.jobs,
        partitions_per_job: partitions,
        backends: backend_names,
        synthesis_threads: bench.synthesis_threads,
        constraints: r1cs.constraints(),
        verification: "skipped: shape-only inputs and a generated SRS cannot verify",
        r1cs_s: prepared.r1cs_s,
        srs_gen_s: prepared.srs_gen_s,
        witness_alone_s: prepared.witness_alone_s,
        start_alone_s,
        job_done_s,
        steady_s_per_proof,
        busy,
        gpu_idle,
        partition_s,
        witness_census: prepared.witness_census.clone(),
        peak_rss_bytes,
        device_peak_bytes: device_peaks.iter().map(|f| f()).collect(),
        gate: GateReport {
            budget_bytes: bench.budget.total,
            job_budget_bytes: bench.budget.jobs,
            peak_reserved_bytes: gate.peak_used(),
            within_budget: peak_rss_bytes <= bench.budget.total,
        },
        urgent: urgent_report
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .transpose()?,
        idle,
    };
    Ok(report)
}

/// The urgent job of `proof`: a shape-only input, its constraints and an SRS of their shape.
fn urgent_job(proof: RegisteredPoStProof, t: &Instant) -> Result<UrgentJob> {
    let shape = BenchProof::Post(proof);
    eprintln!(
        "[{:6.1} s] the urgent job: a shape-only {} input, its constraints and SRS …",
        t.elapsed().as_secs_f64(),
        shape.name()
    );
    let (job, sector_size) = shape.shape_only_job(1)?;
    let r1cs = job.r1cs()?;
    let srs = Arc::new(shaped_srs(&r1cs, &format!("bench-shape-{}", shape.name()))?);
    Ok(UrgentJob {
        proof,
        constraints: r1cs.constraints(),
        sector_size,
        job: Arc::new(BenchJob { job, srs }),
    })
}

/// Sends the urgent job through the urgent lane and times it.
fn prove_urgent(
    pipeline: &Pipeline,
    urgent: &UrgentJob,
    run_start: Instant,
    t: &Instant,
) -> Result<UrgentReport> {
    let submitted_at_s = run_start.elapsed().as_secs_f64();
    eprintln!(
        "[{:6.1} s] the urgent {} job comes in",
        t.elapsed().as_secs_f64(),
        post::post_proof_name(urgent.proof)
    );
    let latency = prove_timed(
        pipeline,
        urgent.job.clone(),
        Priority::Urgent,
        "bench-urgent",
    )?;
    eprintln!(
        "[{:6.1} s] the urgent job is proved, {:.2} s after it came",
        t.elapsed().as_secs_f64(),
        latency.total_s
    );
    Ok(UrgentReport {
        proof: post::post_proof_name(urgent.proof),
        constraints: urgent.constraints,
        submitted_at_s,
        latency,
    })
}

/// Submits one job, waits for its proof, and times its first partition's stages.
fn prove_timed(
    pipeline: &Pipeline,
    job: Arc<dyn ProofJob>,
    priority: Priority,
    id: &str,
) -> Result<Latency> {
    let submitted = Instant::now();
    let (done, answer) = oneshot::channel();
    pipeline.submit(Submission {
        id: id.into(),
        job,
        priority,
        progress: Box::new(|_| {}),
        done,
    })?;
    let proved = answer
        .blocking_recv()
        .with_context(|| format!("the pipeline stopped without answering {id}"))?
        .map_err(|e| anyhow::anyhow!("{id} failed: {e}"))?;
    let total_s = submitted.elapsed().as_secs_f64();
    let timing = proved
        .timings
        .first()
        .with_context(|| format!("{id} has no partition"))?;
    let s = |ms: u64| ms as f64 / 1e3;
    Ok(Latency {
        witness_s: s(timing.synth_end_ms.saturating_sub(timing.synth_start_ms)),
        waited_for_gpu_s: s(timing.start_start_ms.saturating_sub(timing.products_end_ms)),
        start_s: s(timing.start_end_ms.saturating_sub(timing.start_start_ms)),
        finish_s: s(timing.finish_end_ms.saturating_sub(timing.finish_start_ms)),
        to_start_s: s(timing.start_start_ms),
        total_s,
    })
}

/// Two proving starts of one partition from its packed witness, timed: the first makes the
/// points and the recorded constraints resident, the second is what a partition costs.
fn start_alone(
    backend: &dyn Backend,
    srs: &Srs,
    r1cs: &R1cs,
    packed: &crate::groth16::PackedWitness,
    t: &Instant,
) -> Result<Option<StartAlone>> {
    if !backend.products_on_device() {
        return Ok(None);
    }
    let mut seconds = [0.0; 2];
    let mut b_g2_on_device = false;
    for (k, slot) in seconds.iter_mut().enumerate() {
        eprintln!(
            "[{:6.1} s] one partition's proving start alone ({} of 2{}) …",
            t.elapsed().as_secs_f64(),
            k + 1,
            if k == 0 {
                ": the points and constraints go to the GPU first"
            } else {
                ""
            }
        );
        let t_start = Instant::now();
        let Some(sums) = backend.start_from_constraints(srs, r1cs, packed)? else {
            eprintln!("  the recorded constraints do not fit beside the points: not timed");
            return Ok(None);
        };
        *slot = t_start.elapsed().as_secs_f64();
        b_g2_on_device = sums.b_g2.is_some();
    }
    Ok(Some(StartAlone {
        first_s: seconds[0],
        next_s: seconds[1],
        b_g2_on_device,
    }))
}

/// Print the report as a table.
pub fn print_table(r: &PipelineReport) {
    eprintln!();
    eprintln!(
        "{} × {} ({} partitions of {} constraints) on {}, device memory {}; synthesis threads {}; \
         verification {}",
        r.jobs,
        r.proof,
        r.partitions_per_job,
        r.constraints,
        r.backends.join(", "),
        limit_name(r.gpu_memory_limit_bytes),
        r.synthesis_threads,
        r.verification
    );
    eprintln!("| what | value |");
    eprintln!("| --- | --- |");
    eprintln!(
        "| steady state, seconds per proof | {:.1} |",
        r.steady_s_per_proof
    );
    eprintln!(
        "| jobs done at (s) | {} |",
        r.job_done_s
            .iter()
            .map(|s| format!("{s:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    eprintln!(
        "| one partition's witness alone (s) | {:.2} |",
        r.witness_alone_s
    );
    if let Some(a) = &r.start_alone_s {
        eprintln!(
            "| one partition's proving start alone: first / next (s) | {:.2} / {:.2} |",
            a.first_s, a.next_s
        );
        eprintln!(
            "| B multiexp in G2 | {} |",
            if a.b_g2_on_device {
                "on the GPU, in proving start"
            } else {
                "on the CPU, in the finalizer"
            }
        );
    }
    eprintln!("| per partition: witness / products / start / G2 finish (s) | {:.2} / {:.2} / {:.2} / {:.2} |",
        r.partition_s.synthesis, r.partition_s.products, r.partition_s.start, r.partition_s.finish);
    eprintln!("| busy: synthesis / products / start / G2 finish | {:.0} % / {:.0} % / {:.0} % / {:.0} % |",
        100.0 * r.busy.synthesis, 100.0 * r.busy.products, 100.0 * r.busy.start, 100.0 * r.busy.finish);
    eprintln!("| GPU idle | {:.0} % |", 100.0 * r.gpu_idle);
    eprintln!(
        "| witness: zeros / ones / others | {:.1} % / {:.1} % / {:.2} % ({:.0} MB compact) |",
        100.0 * r.witness_census.zeros,
        100.0 * r.witness_census.ones,
        100.0 * r.witness_census.others,
        r.witness_census.compact_bytes as f64 / 1e6
    );
    eprintln!("| peak host RSS | {:.1} GB |", gb(r.peak_rss_bytes));
    eprintln!(
        "| memory budget (process / jobs) | {:.1} / {:.1} GB; peak RSS {} |",
        gb(r.gate.budget_bytes),
        gb(r.gate.job_budget_bytes),
        if r.gate.within_budget {
            "within"
        } else {
            "OVER BUDGET"
        }
    );
    eprintln!(
        "| gate: most reserved at once | {:.1} GB |",
        gb(r.gate.peak_reserved_bytes)
    );
    eprintln!(
        "| peak device memory | {} |",
        if r.device_peak_bytes.is_empty() {
            "–".to_string()
        } else {
            r.device_peak_bytes
                .iter()
                .map(|b| format!("{:.1} GB", gb(*b)))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    eprintln!(
        "| before the run: constraints / SRS generation (s) | {:.1} / {:.1} |",
        r.r1cs_s, r.srs_gen_s
    );
    if let Some(i) = &r.idle {
        eprintln!(
            "| one job alone at the idle pipeline: arrival to proof (s) | {:.2} |",
            i.total_s
        );
        eprintln!(
            "| alone: witness / proving start / G2 finish (s) | {:.2} / {:.2} / {:.2} |",
            i.witness_s, i.start_s, i.finish_s
        );
    }
    if let Some(u) = &r.urgent {
        let l = &u.latency;
        eprintln!(
            "| urgent {} ({} constraints), came at {:.1} s: to its proving start / total (s) | {:.2} / {:.2} |",
            u.proof, u.constraints, u.submitted_at_s, l.to_start_s, l.total_s
        );
        eprintln!(
            "| urgent: witness / waited for a GPU / proving start (s) | {:.2} / {:.2} / {:.2} |",
            l.witness_s, l.waited_for_gpu_s, l.start_s
        );
    }
}

/// One line per run, side by side: what each device memory limit gave.
pub fn print_summary(reports: &[PipelineReport]) {
    eprintln!();
    eprintln!("| device memory | start alone: first / next (s) | seconds per proof | GPU idle | per partition: products / start (s) | peak host RSS | peak device memory |");
    eprintln!("| --- | --- | --- | --- | --- | --- | --- |");
    for r in reports {
        let alone = r.start_alone_s.as_ref().map_or("–".to_string(), |a| {
            format!("{:.2} / {:.2}", a.first_s, a.next_s)
        });
        let device = r
            .device_peak_bytes
            .iter()
            .map(|b| format!("{:.1} GB", gb(*b)))
            .collect::<Vec<_>>()
            .join(", ");
        eprintln!(
            "| {} | {alone} | {:.1} | {:.0} % | {:.2} / {:.2} | {:.1} GB | {} |",
            limit_name(r.gpu_memory_limit_bytes),
            r.steady_s_per_proof,
            100.0 * r.gpu_idle,
            r.partition_s.products,
            r.partition_s.start,
            gb(r.peak_rss_bytes),
            if device.is_empty() {
                "–".to_string()
            } else {
                device
            },
        );
    }
}

/// CPU seconds this process has spent, user and system (the witness timing tests).
#[cfg(test)]
pub(crate) fn cpu_seconds() -> (f64, f64) {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (s(usage.ru_utime), s(usage.ru_stime))
}

/// The process's peak resident memory (VmHWM), in bytes; 0 where /proc does not tell.
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// An SRS with exactly the point counts a real `.params` file of this circuit has, and random
/// points: each set is made in blocks of `T[j] + U[block]` from two small tables of random
/// points (an addition and a share of a batch inversion per point, not a scalar
/// multiplication), so a 32 GiB shape's ~47 GB take seconds on many cores.
pub fn shaped_srs(r1cs: &R1cs, id: &str) -> Result<Srs> {
    let domain = r1cs.constraints().next_power_of_two();
    let a_len = r1cs.inputs + r1cs.a_aux_density.count();
    let b_len = r1cs.b_input_density.count() + r1cs.b_aux_density.count();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x5ba9e);
    let g1 = |rng: &mut rand_chacha::ChaCha8Rng| {
        (G1Projective::generator() * Fr::random(rng)).to_affine()
    };
    let g2 = |rng: &mut rand_chacha::ChaCha8Rng| {
        (G2Projective::generator() * Fr::random(rng)).to_affine()
    };
    let vk = VerifyingKey {
        alpha_g1: g1(&mut rng),
        beta_g1: g1(&mut rng),
        beta_g2: g2(&mut rng),
        gamma_g2: g2(&mut rng),
        delta_g1: g1(&mut rng),
        delta_g2: g2(&mut rng),
        ic: (0..r1cs.inputs).map(|_| g1(&mut rng)).collect(),
    };
    let g1_table = RandomPoints::<G1Projective>::new(&mut rng);
    let g2_table = RandomPoints::<G2Projective>::new(&mut rng);
    Ok(Srs {
        pins: Default::default(),
        key: SrsKey::new(id),
        vk,
        h: g1_table.points::<G1Affine>(domain - 1, 1),
        l: g1_table.points::<G1Affine>(r1cs.aux, 2),
        a: g1_table.points::<G1Affine>(a_len, 3),
        b_g1: g1_table.points::<G1Affine>(b_len, 4),
        b_g2: g2_table.points::<G2Affine>(b_len, 5),
    })
}

/// Two tables of random points; point `i` of set `salt` is `T[i mod B] + U[(i / B + salt) mod B]`.
struct RandomPoints<G> {
    t: Vec<G>,
    u: Vec<G>,
}

const TABLE: usize = 1 << 12;

impl<G: Group<Scalar = Fr> + BatchAffine + Send + Sync> RandomPoints<G> {
    fn new(rng: &mut rand_chacha::ChaCha8Rng) -> Self {
        let base = G::random(&mut *rng);
        let (s, v) = (Fr::random(&mut *rng), Fr::random(&mut *rng));
        // Two ladders from random points: `t[j] = base + j·s·G`, cheap to build (one addition each).
        let (step_t, step_u) = (G::generator() * s, G::generator() * v);
        let ladder = |start: G, step: G| {
            let mut out = Vec::with_capacity(TABLE);
            let mut p = start;
            for _ in 0..TABLE {
                out.push(p);
                p += step;
            }
            out
        };
        RandomPoints {
            t: ladder(base, step_t),
            u: ladder(G::random(&mut *rng), step_u),
        }
    }

    fn points<A: Copy + Default + Send>(&self, n: usize, salt: usize) -> Vec<A>
    where
        G: BatchAffine<AffineRepr = A>,
    {
        let mut out = vec![A::default(); n];
        out.par_chunks_mut(TABLE)
            .enumerate()
            .for_each(|(block, chunk)| {
                let offset = self.u[(block + salt) % TABLE];
                let sums: Vec<G> = self.t[..chunk.len()].iter().map(|p| *p + offset).collect();
                G::batch_affine(&sums, chunk);
            });
        out
    }
}

fn gb(bytes: u64) -> f64 {
    bytes as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The benchmark runs a 2 KiB shape through the pipeline on the CPU backend and reports
    /// every stage; the SRS it makes has exactly the point counts of the real parameters.
    #[test]
    fn a_small_shape_runs_through_the_pipeline() {
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", "/var/tmp/c2q-test-params");
        // A budget that holds the parameters and one job's partitions in flight: the second
        // job shares those places (the partition pool), and the gate never holds more.
        let one_job = kinds::porep_estimate(2048, 1, 3);
        let jobs_budget = one_job.srs_bytes + one_job.work(1);
        let bench = |jobs_budget: u64| PipelineBench {
            proof: BenchProof::Porep(RegisteredSealProof::StackedDrg2KiBV1_1),
            jobs: 2,
            urgent: None,
            // Two runs over one preparation: each opens its own backends.
            gpu_memory_limits: vec![None, None],
            open_backends: Box::new(|_| {
                Ok(RunBackends {
                    backends: vec![Arc::new(crate::groth16::CpuBackend)],
                    device_peaks: vec![],
                })
            }),
            synthesis_threads: 1,
            finalizer_threads: 1,
            budget: Budget {
                total: jobs_budget + 1,
                jobs: jobs_budget,
            },
        };
        let too_small = run(bench(jobs_budget - 1)).expect_err("a budget below one job");
        assert!(
            format!("{too_small:#}").contains("cannot admit one"),
            "{too_small:#}"
        );
        let reports = run(bench(jobs_budget)).expect("benchmark runs");
        assert_eq!(reports.len(), 2);
        let report = &reports[1];
        assert_eq!(report.gpu_memory_limit_bytes, None);
        assert_eq!(report.r1cs_s, reports[0].r1cs_s, "one preparation");
        assert_eq!(report.gate.peak_reserved_bytes, jobs_budget);
        assert_eq!(report.jobs, 2);
        assert_eq!(report.job_done_s.len(), 2);
        assert!(report.steady_s_per_proof > 0.0);
        assert!(report.partition_s.synthesis > 0.0 && report.partition_s.start > 0.0);
        assert!(report.busy.start > 0.0 && report.busy.start <= 1.0);
        assert!(report.peak_rss_bytes > 0);
        let c = &report.witness_census;
        assert!((c.zeros + c.ones + c.others - 1.0).abs() < 1e-9);
        assert!(report.verification.starts_with("skipped"));

        // The generated SRS has the shape a real parameter file of this circuit has (made here
        // when missing; other tests may be making them at the same time: `ensure` locks).
        let dir = std::path::Path::new("/var/tmp/c2q-test-params");
        crate::porep::params::ensure(
            RegisteredSealProof::StackedDrg2KiBV1_1,
            dir,
            &crate::groth16::setup::Quiet,
        )
        .expect("2 KiB test parameters");
        let sealed =
            crate::porep::testdata::seal_2kib(RegisteredSealProof::StackedDrg2KiBV1_1, 1000, 3, 4)
                .expect("sealed");
        let job = PorepJob::new(
            C1Input {
                output: sealed.c1,
                sector_number: None,
                shape_only: false,
            },
            1000,
            3,
        )
        .expect("job");
        let r1cs = job.r1cs().expect("constraints");
        let shaped = shaped_srs(&r1cs, "shape").expect("srs");
        let real = job.srs().expect("test parameters");
        assert_eq!(
            (
                shaped.vk.ic.len(),
                shaped.h.len(),
                shaped.l.len(),
                shaped.a.len(),
                shaped.b_g1.len(),
                shaped.b_g2.len()
            ),
            (
                real.vk.ic.len(),
                real.h.len(),
                real.l.len(),
                real.a.len(),
                real.b_g1.len(),
                real.b_g2.len()
            )
        );
        assert_ne!(shaped.l[0], shaped.l[1]);
    }
}
