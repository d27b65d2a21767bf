//! The `c2q` command line. Each subcommand parses its arguments and calls into the library.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use c2q::groth16::setup::Progress;
use c2q::job::ProofJob;
use c2q::porep::{self, PorepJob};
use c2q::post::{self, PostJob};
use c2q::prove::{prove_job, Stage};
use c2q::snap::{self, SnapJob};

/// Exit codes, so scripts can tell bad input from missing parameters from a failed proof.
const EXIT_FAILED: u8 = 1;
const EXIT_BAD_INPUT: u8 = 2;
const EXIT_PARAMS: u8 = 3;

#[derive(Parser)]
#[command(
    name = "c2q",
    version,
    about = "Filecoin PoRep Commit2 prover and queue worker"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Prove one C1 output, or one SnapDeals update, locally (no broker, no database), verify
    /// it, and write the proof.
    Prove(ProveArgs),
    /// Check a proof (raw bytes or the worker's result message) against the C1 output it was
    /// made from, with filecoin-proofs' verifier; or a canary's proof against its seed. Prints
    /// `valid` (exit 0) or `invalid` (exit 1, the reason on stderr).
    Verify(c2q::verify::VerifyArgs),
    /// Groth16 parameter files.
    #[command(subcommand)]
    Params(ParamsCommand),
    /// Test inputs for trying c2q without a sealing pipeline.
    #[command(subcommand)]
    Testdata(TestdataCommand),
    /// Check the GPU backend against the CPU backend, bit for bit, on fresh random inputs.
    GpuCheck(c2q::diagnostics::GpuCheckArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Prove jobs from RabbitMQ until told to stop.
    Worker(c2q::worker::WorkerArgs),
    /// Enqueue a C2 job (raw C1 or Commit2In JSON) or a canary.
    Submit(c2q::cli_queue::SubmitArgs),
    /// Inspect, replay or purge dead-lettered jobs.
    Dlq(c2q::cli_queue::DlqArgs),
    /// Queue depths, jobs in flight, ledger counts.
    Status(c2q::cli_queue::StatusArgs),
    /// Take proving requests from lotus (remote C2) and put them on the queue as jobs.
    Gateway(c2q::gateway::GatewayArgs),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// GPU MSM and NTT timings, and a partition-shaped proving start.
    Gpu(c2q::diagnostics::BenchGpuArgs),
    /// Full-size jobs (shape-only inputs, a generated SRS of the right shape) through the
    /// worker's pipeline: seconds per proof, stage busy fractions, memory peaks.
    Pipeline(BenchPipelineArgs),
}

#[derive(clap::Args)]
struct BenchPipelineArgs {
    /// Registered proof: PoRep (StackedDrg32GiBV1_1), PoSt (StackedDrgWindow32GiBV1_2,
    /// StackedDrgWinning32GiBV1), or with --snap a SnapDeals update proof (StackedDrg32GiBV1).
    #[arg(long)]
    proof: String,
    /// --proof names a SnapDeals update proof.
    #[arg(long)]
    snap: bool,
    /// A PoSt proof (e.g. StackedDrgWinning32GiBV1): one job of it is sent through the urgent
    /// lane once the pipeline is full, and its wait behind the others is reported.
    #[arg(long, value_name = "POST_PROOF")]
    urgent: Option<String>,
    /// Jobs to prove one after another (at least 2 for a steady-state figure).
    #[arg(long, default_value_t = 3)]
    jobs: usize,
    /// Proving-start backend: cuda (default) or cpu.
    #[arg(long, value_enum, default_value_t = c2q::gpu::BackendChoice::Cuda)]
    backend: c2q::gpu::BackendChoice,
    /// GPUs to prove on, e.g. `--device 0,1`.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    device: Vec<usize>,
    /// Device memory c2q may use on each GPU, in GiB, or `all` (the default). Several, comma
    /// separated (e.g. `all,80,48,24,16`), make one run each over the same inputs,
    /// constraints and SRS, with a table side by side at the end; `--json` then prints an
    /// array of reports.
    #[arg(long, value_name = "GIB", value_delimiter = ',', default_value = "all")]
    gpu_memory_gib: Vec<String>,
    /// Partitions whose witnesses are computed at once (default: the worker's).
    #[arg(long)]
    synthesis_threads: Option<usize>,
    /// G2 finalizer threads (default: one per backend).
    #[arg(long)]
    finalizer_threads: Option<usize>,
    /// Memory budget jobs are admitted against, in GiB (default: a worker's on this machine,
    /// its memory or cgroup limit less 10 %).
    #[arg(long, value_name = "GIB")]
    budget_gib: Option<f64>,
    /// Print the report as JSON on stdout (the table still goes to stderr).
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum TestdataCommand {
    /// Seal a 2 KiB sector of random data with filecoin-proofs and write its C1 output; or, with
    /// --shape-only, write a C1 output of any sector size with the real shape and random values
    /// (for benchmarks: it cannot be proved).
    C1(TestC1Args),
    /// Seal a 2 KiB committed-capacity sector, encode random data into it with filecoin-proofs,
    /// and write the SnapDeals input (`c2q prove` takes it, `c2q submit --snap` queues it); or,
    /// with --shape-only, write a SnapDeals input of any sector size with the real shape and
    /// random values (for benchmarks: it cannot be proved).
    Snap(TestSnapArgs),
    /// Seal 2 KiB sectors with filecoin-proofs and write a PoSt input: a WindowPoSt partition
    /// of one or two sectors, or with --winning a WinningPoSt (`c2q prove` takes it, `c2q
    /// submit` queues it); or, with --shape-only, write a PoSt input of any registered PoSt
    /// proof with the real shape and random values (for benchmarks: it cannot be proved).
    Post(TestPostArgs),
}

#[derive(clap::Args)]
struct TestPostArgs {
    /// The miner the sectors are sealed for.
    #[arg(long, default_value_t = 1000)]
    miner: u64,
    /// Sectors in the WindowPoSt partition: 2 fills a 2 KiB partition, 1 is padded.
    #[arg(long, default_value_t = 2, conflicts_with = "winning")]
    sectors: u64,
    /// A WinningPoSt (one sector) instead of a WindowPoSt partition.
    #[arg(long)]
    winning: bool,
    /// Seed for the sectors' data and the randomness.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Do not seal: write an input with the exact shape of a real one for --proof (a full
    /// WindowPoSt partition, or a WinningPoSt's one sector: sectors, challenges, Merkle paths)
    /// and random values, in seconds even for 32 and 64 GiB. Marked `"c2q_shape_only": true`;
    /// `c2q prove` refuses it.
    #[arg(long, requires = "proof", conflicts_with_all = ["winning", "sectors"])]
    shape_only: bool,
    /// Registered PoSt proof of a --shape-only input: a name such as StackedDrgWindow32GiBV1_2
    /// or StackedDrgWinning32GiBV1, or Go's number.
    #[arg(long, requires = "shape_only")]
    proof: Option<String>,
    #[arg(long)]
    out: PathBuf,
}

#[derive(clap::Args)]
struct TestSnapArgs {
    /// Registered update proof (the 2 KiB one, or any with --shape-only).
    #[arg(long, default_value = "StackedDrg2KiBV1")]
    proof: String,
    /// The miner the sector key is sealed for.
    #[arg(long, default_value_t = 1000)]
    miner: u64,
    #[arg(long, default_value_t = 1)]
    sector: u64,
    /// Seed for the sector's random data.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Do not seal: write a SnapDeals input with the exact shape of a real update for this
    /// proof (partitions, challenges, Merkle paths, apex leaves) and random values, in seconds
    /// even for 32 and 64 GiB. Marked `"c2q_shape_only": true`; `c2q prove` refuses it.
    #[arg(long)]
    shape_only: bool,
    #[arg(long)]
    out: PathBuf,
}

#[derive(clap::Args)]
struct TestC1Args {
    /// Registered proof (a 2 KiB one, or any with --shape-only).
    #[arg(long, default_value = "StackedDrg2KiBV1_1")]
    proof: String,
    #[arg(long)]
    miner: u64,
    #[arg(long)]
    sector: u64,
    /// Seed for the sector's random data.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write lotus-bench's Commit2In envelope instead of the raw C1 JSON.
    #[arg(long)]
    commit2in: bool,
    /// Do not seal: write a C1 output with the exact shape of a real one for this proof type
    /// (partitions, challenges, Merkle paths, columns, parents) and random values, in seconds
    /// even for 32 and 64 GiB. Marked `"c2q_shape_only": true`; `c2q prove` refuses it.
    #[arg(long)]
    shape_only: bool,
    #[arg(long)]
    out: PathBuf,
}

#[derive(clap::Args)]
struct ProveArgs {
    /// The C1 output (filecoin-ffi's SealCommitPhase1Output JSON, or lotus-bench's Commit2In),
    /// or a SnapDeals input (`registered_proof`, `comm_r_old`, `comm_r_new`, `comm_d_new`,
    /// `vanilla_proofs`), or a PoSt input (`registered_proof`, `miner_id`, `randomness`,
    /// `vanilla_proofs`); recognised by their fields.
    file: PathBuf,
    /// The miner's actor id (the number in f0…/t0…). Required for PoRep.
    #[arg(long)]
    miner: Option<u64>,
    /// The sector number. Required for PoRep.
    #[arg(long)]
    sector: Option<u64>,
    /// The input is a SnapDeals update (`ProveReplicaUpdate2`), whatever it looks like.
    #[arg(long, conflicts_with = "post")]
    snap: bool,
    /// The input is a WindowPoSt partition or a WinningPoSt, whatever it looks like.
    #[arg(long)]
    post: bool,
    /// Where to write the proof (192 bytes per partition). Default: FILE.proof
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the result and stage timings as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Proving-start backend: auto (CUDA when a usable GPU is present), cpu, or cuda.
    #[arg(long, value_enum, default_value_t = c2q::gpu::BackendChoice::Auto)]
    backend: c2q::gpu::BackendChoice,
    /// Which GPUs the cuda backend proves on, e.g. `--device 0,1`: each proves partitions of
    /// its own.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    device: Vec<usize>,
    /// Device memory c2q may use on each GPU, in GiB (default: all of it).
    #[arg(long, value_name = "GIB")]
    gpu_memory_gib: Option<f64>,
    /// Partitions whose witnesses are computed at once (default: one more than the backends).
    /// Each partition's witness already uses every core (one challenge per thread) and waits
    /// compact (~90 MB for a 32 GiB sector).
    #[arg(long)]
    synthesis_threads: Option<usize>,
}

#[derive(Subcommand)]
enum ParamsCommand {
    /// Write random TEST parameters for a small sector. NOT a trusted setup: anyone who ran
    /// this could forge proofs against them. For tests and development only.
    Generate(GenerateArgs),
    /// Check that the files the named proofs need are present and are the official ones (their
    /// digests are the manifest's that filecoin-proofs publishes, carried in c2q). One line
    /// per file; exit 0 when all are, 3 when any is missing, bad or test parameters.
    Check(c2q::params::cli::CheckArgs),
    /// Download the official files the named proofs need that are missing or bad, from an IPFS
    /// gateway: resumable, several at once, each checked against the manifest before it is
    /// moved into place. Exit 0 when all are in place, 3 when any could not be fetched.
    Fetch(c2q::params::cli::FetchArgs),
}

#[derive(clap::Args)]
struct GenerateArgs {
    /// Registered proof, e.g. StackedDrg2KiBV1_1; with --snap a registered update proof, e.g.
    /// StackedDrg2KiBV1.
    #[arg(long)]
    proof: String,
    /// The SnapDeals (empty sector update) circuit of the proof's sector size.
    #[arg(long, conflicts_with = "post")]
    snap: bool,
    /// A PoSt circuit: --proof names a registered PoSt proof, e.g. StackedDrgWindow2KiBV1_2
    /// or StackedDrgWinning2KiBV1.
    #[arg(long)]
    post: bool,
    /// Directory to write into (created if missing).
    #[arg(long)]
    dir: PathBuf,
    /// Write into the official parameter directory, or replace existing files.
    #[arg(long)]
    force: bool,
    /// Do nothing (successfully) when the parameters are already there.
    #[arg(long, conflicts_with = "force")]
    if_missing: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Logs go to stderr; RUST_LOG selects them (default: warnings only). The worker sets up
    // its own (human or JSON, from its configuration; default level info).
    if !matches!(cli.command, Command::Worker(_) | Command::Gateway(_)) {
        tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
            )
            .with_writer(std::io::stderr)
            .init();
    }
    match cli.command {
        Command::Prove(args) => prove(args),
        Command::Verify(args) => verify(&args),
        Command::Params(ParamsCommand::Generate(args)) => match generate(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(EXIT_FAILED, &e),
        },
        Command::Params(ParamsCommand::Check(args)) => params_exit(c2q::params::cli::check(&args)),
        Command::Params(ParamsCommand::Fetch(args)) => {
            params_exit(c2q::params::cli::fetch_cmd(&args))
        }
        Command::Testdata(TestdataCommand::C1(args)) => match test_c1(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(EXIT_FAILED, &e),
        },
        Command::Testdata(TestdataCommand::Snap(args)) => match test_snap(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(EXIT_FAILED, &e),
        },
        Command::Testdata(TestdataCommand::Post(args)) => match test_post(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(EXIT_FAILED, &e),
        },
        Command::GpuCheck(args) => match c2q::diagnostics::gpu_check(&args) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(EXIT_FAILED),
            Err(e) => fail(EXIT_FAILED, &e),
        },
        Command::Bench(BenchCommand::Gpu(args)) => match c2q::diagnostics::bench_gpu(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(EXIT_FAILED, &e),
        },
        Command::Bench(BenchCommand::Pipeline(args)) => match bench_pipeline(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(EXIT_FAILED, &e),
        },
        Command::Worker(args) => queue_exit(c2q::worker::run(args)),
        Command::Submit(args) => queue_exit(c2q::cli_queue::submit(args)),
        Command::Dlq(args) => queue_exit(c2q::cli_queue::dlq(args)),
        Command::Status(args) => queue_exit(c2q::cli_queue::status(args)),
        Command::Gateway(args) => queue_exit(c2q::gateway::run(args)),
    }
}

fn queue_exit(result: Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(EXIT_FAILED, &e),
    }
}

/// Exit codes as for `c2q prove`: 3 when a parameter file is missing or bad.
fn params_exit(
    result: std::result::Result<c2q::params::cli::Verdict, c2q::params::cli::ParamsError>,
) -> ExitCode {
    use c2q::params::cli::{ParamsError, Verdict};
    match result {
        Ok(Verdict::AllGood) => ExitCode::SUCCESS,
        Ok(Verdict::SomeBad) => ExitCode::from(EXIT_PARAMS),
        Err(ParamsError::BadInput(e)) => fail(EXIT_BAD_INPUT, &e),
        Err(ParamsError::Failed(e)) => fail(EXIT_FAILED, &e),
    }
}

/// One line on stderr, then the exit code.
fn fail(code: u8, e: &anyhow::Error) -> ExitCode {
    let msg = format!("{e:#}").replace('\n', " ");
    eprintln!("c2q: error: {msg}");
    ExitCode::from(code)
}

fn bench_pipeline(args: BenchPipelineArgs) -> Result<()> {
    use std::sync::Arc;
    let proof = c2q::bench::BenchProof::from_name(&args.proof, args.snap)?;
    let urgent = args
        .urgent
        .as_deref()
        .map(c2q::post::post_proof_from_name)
        .transpose()?;
    let limits = args
        .gpu_memory_gib
        .iter()
        .map(|g| match g.trim() {
            "all" => Ok(None),
            g => {
                let gib: f64 = g
                    .parse()
                    .with_context(|| format!("--gpu-memory-gib takes GiB or `all`, not {g:?}"))?;
                c2q::config::gib_to_bytes(gib).map(Some)
            }
        })
        .collect::<Result<Vec<Option<usize>>>>()?;
    let cpu = args.backend == c2q::gpu::BackendChoice::Cpu;
    anyhow::ensure!(
        !cpu || limits == [None],
        "--gpu-memory-gib applies to GPUs: not with --backend cpu"
    );
    let gpus = if cpu { 1 } else { args.device.len() };
    let devices = args.device.clone();
    let open_backends: c2q::bench::OpenBackends = Box::new(move |limit| {
        let mut run = c2q::bench::RunBackends {
            backends: Vec::new(),
            device_peaks: Vec::new(),
        };
        if cpu {
            run.backends.push(Arc::new(c2q::groth16::CpuBackend));
            return Ok(run);
        }
        for &d in &devices {
            let b = Arc::new(
                c2q::gpu::CudaBackend::with_memory_limit(d, limit)
                    .with_context(|| format!("GPU {d}"))?,
            );
            let peak = b.clone();
            run.device_peaks
                .push(Box::new(move || peak.gpu().peak_allocated()));
            run.backends.push(b);
        }
        Ok(run)
    });
    let defaults = c2q::config::PipelineConfig::default();
    let finalizer_threads = args.finalizer_threads.unwrap_or(gpus).max(1);
    let budget_bytes = match args.budget_gib {
        None => None,
        Some(gib) if gib.is_finite() && gib > 0.0 => Some((gib * (1u64 << 30) as f64) as u64),
        Some(gib) => anyhow::bail!("--budget-gib must be a positive number of GiB, not {gib}"),
    };
    let budget = c2q::gate::detect_budget(
        &c2q::config::GateConfig {
            budget_bytes,
            ..c2q::config::GateConfig::default()
        },
        // What each CUDA backend reports (`Backend::pinned_host_bytes`), before they are opened
        // (once per cap).
        if cpu {
            0
        } else {
            gpus as u64 * c2q::gpu::memory::PINNED_STAGING_BYTES as u64
        },
    )?;
    let reports = c2q::bench::run(c2q::bench::PipelineBench {
        proof,
        jobs: args.jobs,
        urgent,
        gpu_memory_limits: limits,
        open_backends,
        synthesis_threads: args
            .synthesis_threads
            .unwrap_or(defaults.synthesis_threads)
            .max(1),
        finalizer_threads,
        budget,
    })?;
    if reports.len() > 1 {
        c2q::bench::print_summary(&reports);
    }
    if args.json {
        let json = match reports.as_slice() {
            [one] => serde_json::to_string_pretty(one)?,
            all => serde_json::to_string_pretty(all)?,
        };
        println!("{json}");
    }
    Ok(())
}

fn prove(args: ProveArgs) -> ExitCode {
    let job = match read_job(&args) {
        Ok(job) => job,
        Err(e) => return fail(EXIT_BAD_INPUT, &e),
    };
    let limit = match args
        .gpu_memory_gib
        .map(c2q::config::gib_to_bytes)
        .transpose()
    {
        Ok(l) => l,
        Err(e) => return fail(EXIT_BAD_INPUT, &e),
    };
    let backends = match c2q::gpu::select_backends(args.backend, &args.device, limit) {
        Ok(b) => b,
        Err(e) => return fail(EXIT_FAILED, &e),
    };
    let backend_names: Vec<String> = backends.iter().map(|b| b.name()).collect();
    let (proof, timings) = match prove_job(job.proof_job(), backends, args.synthesis_threads) {
        Ok(done) => done,
        Err(e) => {
            let code = match e.stage {
                Stage::Params => EXIT_PARAMS,
                Stage::Synthesis => EXIT_BAD_INPUT,
                Stage::Proving | Stage::Verification => EXIT_FAILED,
            };
            return fail(code, &e.source);
        }
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| with_suffix(&args.file, "proof"));
    let written = std::fs::write(&out, &proof)
        .with_context(|| format!("cannot write {}", out.display()))
        .map(|()| proof.len());
    let bytes = match written {
        Ok(n) => n,
        Err(e) => return fail(EXIT_FAILED, &e),
    };
    let partitions = job.proof_job().partitions();
    if args.json {
        let mut report = serde_json::json!({
            "registered_proof": job.proof_name(),
            "partitions": partitions,
            "proof_bytes": bytes,
            "out": out,
            "verified": true,
            "backend": backend_names.join(", "),
            "timings": timings,
        });
        if let ProveInput::Porep(porep) = &job {
            report["miner"] = porep.miner_id.into();
            report["sector"] = porep.sector_number.into();
        }
        if let ProveInput::Post(post) = &job {
            report["miner"] = post.input.miner_id.into();
            report["sectors"] = post.sector_numbers().into();
        }
        println!("{report}");
    } else {
        let what = match &job {
            ProveInput::Porep(porep) => format!(
                "proof for {} sector {} of miner {}",
                job.proof_name(),
                porep.sector_number,
                porep.miner_id
            ),
            ProveInput::Snap(_) => format!("SnapDeals update proof for {}", job.proof_name()),
            ProveInput::Post(post) => format!(
                "{} of miner {} over sectors {:?}",
                job.proof_name(),
                post.input.miner_id,
                post.sector_numbers()
            ),
        };
        println!(
            "{what}: {partitions} partitions, {bytes} bytes, verified, written to {}",
            out.display()
        );
        println!(
            "timings: parameters {:.1} s, synthesis {:.1} s, proving start {:.1} s, finish {:.1} s, verification {:.2} s, total {:.1} s",
            timings.params_s,
            timings.synthesis_s,
            timings.start_s,
            timings.finish_s,
            timings.verify_s,
            timings.total_s
        );
    }
    ExitCode::SUCCESS
}

fn verify(args: &c2q::verify::VerifyArgs) -> ExitCode {
    use c2q::verify::{Verdict, VerifyError};
    match c2q::verify::run(args) {
        Ok(Verdict::Valid) => {
            println!("valid");
            ExitCode::SUCCESS
        }
        Ok(Verdict::Invalid(reason)) => {
            println!("invalid");
            eprintln!("c2q: invalid: {}", reason.replace('\n', " "));
            ExitCode::from(EXIT_FAILED)
        }
        Err(VerifyError::BadInput(e)) => fail(EXIT_BAD_INPUT, &e),
        Err(VerifyError::Params(e)) => fail(EXIT_PARAMS, &e),
        Err(VerifyError::Failed(e)) => fail(EXIT_FAILED, &e),
    }
}

/// What `c2q prove` was given.
enum ProveInput {
    Porep(std::sync::Arc<PorepJob>),
    Snap(std::sync::Arc<SnapJob>),
    Post(std::sync::Arc<PostJob>),
}

impl ProveInput {
    fn proof_job(&self) -> std::sync::Arc<dyn ProofJob> {
        match self {
            ProveInput::Porep(job) => job.clone(),
            ProveInput::Snap(job) => job.clone(),
            ProveInput::Post(job) => job.clone(),
        }
    }

    fn proof_name(&self) -> String {
        match self {
            ProveInput::Porep(job) => porep::proof_name(job.registered_proof),
            ProveInput::Snap(job) => snap::update_proof_name(job.registered_proof()),
            ProveInput::Post(job) => post::post_proof_name(job.registered_proof()),
        }
    }
}

fn read_job(args: &ProveArgs) -> Result<ProveInput> {
    let context = || format!("{}", args.file.display());
    if args.post || (!args.snap && post::is_post_input_file(&args.file)?) {
        let input = post::read_post_input_file(&args.file)?;
        let job = PostJob::new(input).with_context(context)?;
        return Ok(ProveInput::Post(std::sync::Arc::new(job)));
    }
    if args.snap || snap::is_snap_input_file(&args.file)? {
        let input = snap::read_snap_input_file(&args.file)?;
        let job = SnapJob::new(input).with_context(context)?;
        return Ok(ProveInput::Snap(std::sync::Arc::new(job)));
    }
    let (Some(miner), Some(sector)) = (args.miner, args.sector) else {
        anyhow::bail!(
            "a PoRep C1 output is proved for a miner and sector: give --miner and --sector"
        );
    };
    let c1 = porep::read_c1_file(&args.file)?;
    let job = PorepJob::new(c1, miner, sector).with_context(context)?;
    Ok(ProveInput::Porep(std::sync::Arc::new(job)))
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".");
    s.push(suffix);
    PathBuf::from(s)
}

/// Stage lines and a percentage every 10 %, on stderr.
struct StderrProgress {
    started: Instant,
    last_tenth: AtomicUsize,
}

impl Progress for StderrProgress {
    fn stage(&self, name: &str) {
        self.last_tenth.store(0, Ordering::Relaxed);
        eprintln!("[{:6.1} s] {name}", self.started.elapsed().as_secs_f64());
    }

    fn advance(&self, done: usize, total: usize) {
        let tenth = (done * 10).checked_div(total).unwrap_or(0);
        if self.last_tenth.fetch_max(tenth, Ordering::Relaxed) < tenth {
            eprint!("\r           {:3} %", tenth * 10);
            if tenth >= 10 {
                eprintln!();
            }
            let _ = std::io::stderr().flush();
        }
    }
}

fn generate(args: GenerateArgs) -> Result<()> {
    let progress = StderrProgress {
        started: Instant::now(),
        last_tenth: AtomicUsize::new(0),
    };
    if args.post {
        let proof = post::post_proof_from_name(&args.proof)?;
        if args.if_missing {
            let path = post::params::ensure(proof, &args.dir, &progress)?;
            println!("{}", path.display());
            return Ok(());
        }
        warn_test_parameters(&args.proof);
        let out = post::params::generate(proof, &args.dir, args.force, &progress)?;
        return report_generated(&out, &progress);
    }
    if args.snap {
        let proof = snap::update_proof_from_name(&args.proof)?;
        if args.if_missing {
            let path = snap::params::ensure(proof, &args.dir, &progress)?;
            println!("{}", path.display());
            return Ok(());
        }
        warn_test_parameters(&args.proof);
        let out = snap::params::generate(proof, &args.dir, args.force, &progress)?;
        return report_generated(&out, &progress);
    }
    let proof = porep::proof_from_name(&args.proof)?;
    if args.if_missing {
        let path = porep::params::ensure(proof, &args.dir, &progress)?;
        println!("{}", path.display());
        return Ok(());
    }
    warn_test_parameters(&args.proof);
    let out = porep::params::generate(proof, &args.dir, args.force, &progress)?;
    report_generated(&out, &progress)
}

fn warn_test_parameters(proof: &str) {
    eprintln!(
        "WARNING: generating random TEST parameters for {}. They are not a trusted setup: \
         whoever ran this could forge proofs. Never use them for real sectors.",
        proof
    );
}

fn report_generated(out: &porep::params::Generated, progress: &StderrProgress) -> Result<()> {
    eprintln!("[{:6.1} s] done", progress.started.elapsed().as_secs_f64());
    println!("{} ({} bytes)", out.params.display(), out.bytes);
    println!("{}", out.vk.display());
    println!("{}", out.meta.display());
    println!("{}", out.marker.display());
    Ok(())
}

fn test_snap(args: &TestSnapArgs) -> Result<()> {
    let proof = snap::update_proof_from_name(&args.proof)?;
    if args.shape_only {
        return shape_snap(args, proof);
    }
    anyhow::ensure!(
        proof == filecoin_proofs_api::RegisteredUpdateProof::StackedDrg2KiBV1,
        "only 2 KiB test updates are sealed and encoded ({} needs --shape-only)",
        args.proof
    );
    let input = snap::testdata::update_2kib(args.miner, args.sector, args.seed)?;
    std::fs::write(&args.out, input.to_json()?)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!(
        "{}: SnapDeals input of a {} test update (sector key sealed for miner {} sector {})",
        args.out.display(),
        snap::update_proof_name(input.registered_proof),
        args.miner,
        args.sector
    );
    Ok(())
}

fn shape_snap(
    args: &TestSnapArgs,
    proof: filecoin_proofs_api::RegisteredUpdateProof,
) -> Result<()> {
    let started = Instant::now();
    let input = snap::shape::generate(proof, args.seed)?;
    let json = input.to_json()?;
    write_shape_only(
        &args.out,
        &json,
        started,
        snap::MAX_SNAP_INPUT_BYTES,
        "a SnapDeals",
    )?;
    println!(
        "{}: SHAPE-ONLY SnapDeals input (random values, not provable) of a {} update: {} \
         partitions of {} challenges, {} bytes",
        args.out.display(),
        snap::update_proof_name(proof),
        input.vanilla_proofs.len(),
        snap::shape::challenges_per_partition(proof),
        json.len()
    );
    Ok(())
}

/// Writes a shape-only input made since `started`, saying how long a slow one took and
/// warning when it is larger than c2q reads as `what` input (`limit` bytes).
fn write_shape_only(
    out: &Path,
    json: &[u8],
    started: Instant,
    limit: usize,
    what: &str,
) -> Result<()> {
    std::fs::write(out, json).with_context(|| format!("cannot write {}", out.display()))?;
    let total = started.elapsed().as_secs_f64();
    if total > 1.0 {
        eprintln!("[{total:6.1} s] generated and written");
    }
    if json.len() > limit {
        eprintln!(
            "warning: {} is {} bytes, more than the {limit} bytes c2q reads as {what} input",
            out.display(),
            json.len()
        );
    }
    Ok(())
}

fn test_post(args: &TestPostArgs) -> Result<()> {
    if let (true, Some(proof)) = (args.shape_only, &args.proof) {
        return shape_post(args, post::post_proof_from_name(proof)?);
    }
    let input = if args.winning {
        post::testdata::winning_2kib(args.miner, args.seed)?
    } else {
        post::testdata::window_2kib(args.miner, args.sectors as usize, args.seed)?
    };
    std::fs::write(&args.out, input.to_json()?)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!(
        "{}: PoSt input of a {} test proof (miner {}, {} sector(s))",
        args.out.display(),
        post::post_proof_name(input.registered_proof),
        args.miner,
        input.vanilla_proofs.len()
    );
    Ok(())
}

fn shape_post(args: &TestPostArgs, proof: filecoin_proofs_api::RegisteredPoStProof) -> Result<()> {
    let started = Instant::now();
    let input = post::shape::generate(proof, args.miner, args.seed)?;
    let json = input.to_json()?;
    write_shape_only(
        &args.out,
        &json,
        started,
        post::MAX_POST_INPUT_BYTES,
        "a PoSt",
    )?;
    println!(
        "{}: SHAPE-ONLY PoSt input (random values, not provable) of a {} for miner {}: {} \
         sector(s) of {} challenges, {} bytes",
        args.out.display(),
        post::post_proof_name(proof),
        args.miner,
        input.vanilla_proofs.len(),
        proof.as_v1_config().challenge_count,
        json.len()
    );
    Ok(())
}

fn test_c1(args: TestC1Args) -> Result<()> {
    let proof = porep::proof_from_name(&args.proof)?;
    if args.shape_only {
        return shape_c1(&args, proof);
    }
    let sealed = porep::testdata::seal_2kib(proof, args.miner, args.sector, args.seed)?;
    let bytes = if args.commit2in {
        sealed.commit2in_json()?
    } else {
        sealed.c1_json()?
    };
    std::fs::write(&args.out, bytes)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!(
        "{}: C1 output of a {} test sector for miner {} sector {}",
        args.out.display(),
        args.proof,
        args.miner,
        args.sector
    );
    Ok(())
}

fn shape_c1(args: &TestC1Args, proof: filecoin_proofs_api::RegisteredSealProof) -> Result<()> {
    let started = Instant::now();
    // Quiet for small sectors; a line on stderr per tenth of the partitions once it takes time.
    let last_tenth = AtomicUsize::new(0);
    let progress = |done: usize, total: usize| {
        let tenth = (done * 10).checked_div(total).unwrap_or(0);
        if started.elapsed().as_secs_f64() > 1.0
            && last_tenth.fetch_max(tenth, Ordering::Relaxed) < tenth
        {
            eprintln!(
                "[{:6.1} s] {done}/{total} partitions",
                started.elapsed().as_secs_f64()
            );
        }
    };
    let shape = porep::shape::generate(proof, args.miner, args.sector, args.seed, &progress)?;
    let generated = started.elapsed().as_secs_f64();
    let file = std::fs::File::create(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    if args.commit2in {
        out.write_all(&shape.commit2in_json()?)
            .map_err(anyhow::Error::from)
    } else {
        shape.write_c1_json(&mut out)
    }
    .and_then(|()| out.flush().map_err(anyhow::Error::from))
    .with_context(|| format!("cannot write {}", args.out.display()))?;
    let bytes = std::fs::metadata(&args.out)
        .with_context(|| format!("cannot read {}", args.out.display()))?
        .len();
    let total = started.elapsed().as_secs_f64();
    if total > 1.0 {
        eprintln!(
            "[{total:6.1} s] generated in {generated:.1} s, written in {:.1} s",
            total - generated
        );
    }
    if bytes > porep::MAX_C1_BYTES as u64 {
        eprintln!(
            "warning: {} is {bytes} bytes, more than the {} bytes c2q reads as a C1 output",
            args.out.display(),
            porep::MAX_C1_BYTES
        );
    }
    println!(
        "{}: SHAPE-ONLY C1 output (random values, not provable) of a {} sector for miner {} \
         sector {}: {} partitions of {} challenges, {bytes} bytes",
        args.out.display(),
        porep::proof_name(proof),
        args.miner,
        args.sector,
        shape.partitions(),
        shape.challenges_per_partition()
    );
    Ok(())
}
