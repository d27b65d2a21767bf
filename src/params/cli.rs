//! `c2q params check` and `c2q params fetch`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};

use super::check::{check_file, summary, Depth};
use super::fetch::{fetch, FetchOptions, Outcome, DEFAULT_GATEWAY};
use super::progress::{Board, Style};
use super::{select, wanted, Manifest, Wanted};
use crate::porep::params::params_dir;

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Parameter directory (default: $FIL_PROOFS_PARAMETER_CACHE, else
    /// /var/tmp/filecoin-proof-parameters).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Registered proof (StackedDrg32GiBV1_1), sector size (32GiB), or SnapDeals update
    /// circuit (snap-32GiB) whose files to check; repeat or separate with commas. Default:
    /// every PoRep sector size, 2KiB to 64GiB.
    #[arg(long, value_delimiter = ',')]
    pub proof: Vec<String>,
    /// Check presence and length only (a few reads per file), not the digest (minutes for a
    /// 32 GiB sector's 47 GB file).
    #[arg(long)]
    pub size_only: bool,
    /// A manifest in parameters.json's format to check against instead of the built-in one.
    #[arg(long, hide = true)]
    pub manifest: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct FetchArgs {
    /// Parameter directory (default: $FIL_PROOFS_PARAMETER_CACHE, else
    /// /var/tmp/filecoin-proof-parameters); created if missing.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Registered proof (StackedDrg32GiBV1_1), sector size (32GiB), or SnapDeals update
    /// circuit (snap-32GiB) whose files to fetch; repeat or separate with commas. Default:
    /// every PoRep sector size, 2KiB to 64GiB.
    #[arg(long, value_delimiter = ',')]
    pub proof: Vec<String>,
    /// IPFS gateway: a file is fetched from this URL followed by its cid.
    #[arg(long, env = "IPFS_GATEWAY", default_value = DEFAULT_GATEWAY)]
    pub from: String,
    /// Files downloaded at once.
    #[arg(long, default_value_t = 3)]
    pub jobs: usize,
    /// Tries per file; each resumes where the last one stopped.
    #[arg(long, default_value_t = 5)]
    pub attempts: u32,
    /// A manifest in parameters.json's format to fetch from instead of the built-in one.
    #[arg(long, hide = true)]
    pub manifest: Option<PathBuf>,
    /// Seconds without data after which a connection is dropped and the file resumed.
    #[arg(long, hide = true, default_value_t = 60.0)]
    pub stall_timeout_s: f64,
    /// Seconds before the second try (doubled for each further one).
    #[arg(long, hide = true, default_value_t = 2.0)]
    pub retry_delay_s: f64,
}

/// How a params command went, for the exit code.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every file is the official one.
    AllGood,
    /// Some file is missing, bad, or test parameters (the lines say which).
    SomeBad,
}

/// Why a params command could not run.
#[derive(Debug)]
pub enum ParamsError {
    /// Unknown proof, unreadable manifest, malformed gateway URL.
    BadInput(anyhow::Error),
    /// Anything else (the directory cannot be created, the runtime cannot start).
    Failed(anyhow::Error),
}

fn plan(
    proofs: &[String],
    manifest: Option<&Path>,
) -> std::result::Result<Vec<Wanted>, ParamsError> {
    let manifest = match manifest {
        Some(path) => Manifest::from_file(path),
        None => Manifest::official(),
    }
    .map_err(ParamsError::BadInput)?;
    let proofs = select(proofs).map_err(ParamsError::BadInput)?;
    wanted(&proofs, &manifest).map_err(ParamsError::BadInput)
}

/// `c2q params check`: one line per file on stdout, then a summary.
pub fn check(args: &CheckArgs) -> std::result::Result<Verdict, ParamsError> {
    let files = plan(&args.proof, args.manifest.as_deref())?;
    let dir = args.dir.clone().unwrap_or_else(params_dir);
    let depth = if args.size_only {
        Depth::SizeOnly
    } else {
        Depth::Digest
    };
    let board = Board::new(Style::detect());
    let mut reports = Vec::with_capacity(files.len());
    for w in &files {
        let report = check_file(&dir, w, depth, &board);
        board.println(&report.line());
        reports.push(report);
    }
    board.println(&format!("{}: {}", dir.display(), summary(&reports)));
    Ok(if reports.iter().all(|r| r.status.is_good()) {
        Verdict::AllGood
    } else {
        Verdict::SomeBad
    })
}

fn seconds(s: f64, what: &str) -> Result<Duration> {
    Duration::try_from_secs_f64(s).with_context(|| format!("{what} must be a number of seconds"))
}

/// `c2q params fetch`: what is missing or bad, downloaded and checked; a line per file.
pub fn fetch_cmd(args: &FetchArgs) -> std::result::Result<Verdict, ParamsError> {
    let files = plan(&args.proof, args.manifest.as_deref())?;
    let dir = args.dir.clone().unwrap_or_else(params_dir);
    let mut opts = FetchOptions::new(dir.clone(), &args.from).map_err(ParamsError::BadInput)?;
    opts.concurrency = args.jobs.max(1);
    opts.attempts = args.attempts.max(1);
    opts.stall_timeout =
        seconds(args.stall_timeout_s, "--stall-timeout-s").map_err(ParamsError::BadInput)?;
    opts.retry_delay =
        seconds(args.retry_delay_s, "--retry-delay-s").map_err(ParamsError::BadInput)?;
    let board = Arc::new(Board::new(Style::detect()));
    board.note(&format!(
        "{} files into {} from {}",
        files.len(),
        dir.display(),
        opts.gateway
    ));
    let reports = fetch(&opts, &files, board.clone()).map_err(ParamsError::Failed)?;
    let failed = reports
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Failed(_)))
        .count();
    board.println(&format!(
        "{}: {} of {} files in place and checked",
        dir.display(),
        reports.len() - failed,
        reports.len()
    ));
    Ok(if failed == 0 {
        Verdict::AllGood
    } else {
        Verdict::SomeBad
    })
}
