//! Proving one job in this process: what `c2q prove` runs. The job goes through the same
//! pipeline as the worker's (`pipeline`): synthesis of the next partition overlaps proving
//! start of the current one, and with several GPUs each proves partitions of its own.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, Result};
use serde::Serialize;
use tokio::sync::oneshot;

use crate::groth16::Backend;
use crate::job::ProofJob;
use crate::pipeline::{self, Pipeline, Priority, Submission};

/// Seconds spent in each stage, summed over partitions.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StageTimings {
    pub params_s: f64,
    pub synthesis_s: f64,
    pub products_s: f64,
    pub start_s: f64,
    pub finish_s: f64,
    pub verify_s: f64,
    pub total_s: f64,
}

/// Where a failure happened: callers map these to exit codes and failure classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Params,
    Synthesis,
    Proving,
    Verification,
}

#[derive(Debug, thiserror::Error)]
#[error("{source:#}")]
pub struct StageError {
    pub stage: Stage,
    #[source]
    pub source: anyhow::Error,
}

fn at(stage: Stage) -> impl FnOnce(anyhow::Error) -> StageError {
    move |source| StageError { stage, source }
}

/// Stage seconds from the pipeline's per-partition timestamps (milliseconds since the job
/// was taken): each stage summed over partitions; parameters are what came before the first
/// synthesis.
fn stage_timings(proved: &pipeline::Proved, total_s: f64) -> StageTimings {
    let ms = |f: &dyn Fn(&crate::schema::PartitionTiming) -> u64| -> f64 {
        proved.timings.iter().map(f).sum::<u64>() as f64 / 1e3
    };
    StageTimings {
        params_s: proved
            .timings
            .iter()
            .map(|t| t.synth_start_ms)
            .min()
            .unwrap_or(0) as f64
            / 1e3,
        synthesis_s: ms(&|t| t.synth_end_ms.saturating_sub(t.synth_start_ms)),
        products_s: ms(&|t| t.products_end_ms.saturating_sub(t.products_start_ms)),
        start_s: ms(&|t| t.start_end_ms.saturating_sub(t.start_start_ms)),
        finish_s: ms(&|t| t.finish_end_ms.saturating_sub(t.finish_start_ms)),
        verify_s: proved.verify_ms as f64 / 1e3,
        total_s,
    }
}

/// Prove every partition of `job` on `backends` (one proving-start thread each) with
/// `synthesis_threads` partitions synthesized at once (default: one more than the backends),
/// verify the whole proof, and return its bytes (192 per partition) with stage timings.
pub fn prove_job(
    job: Arc<dyn ProofJob>,
    backends: Vec<Arc<dyn Backend>>,
    synthesis_threads: Option<usize>,
) -> Result<(Vec<u8>, StageTimings), StageError> {
    let total = Instant::now();
    let n = job.partitions();
    let on_terminal = std::io::stderr().is_terminal();
    if on_terminal {
        let names: Vec<String> = backends.iter().map(|b| b.name()).collect();
        eprintln!(
            "loading parameters, then proving {n} partition(s) on {} …",
            names.join(", ")
        );
    }
    // A partition's witness is computed on several threads (one per challenge) and waits
    // compact, so a few partitions in synthesis keep the backends fed. One G2 finalizer per
    // backend keeps finalizing off the critical path.
    let synthesizers = synthesis_threads
        .unwrap_or(backends.len() + 1)
        .clamp(1, n.max(1));
    let finalizers = backends.len();
    // One job fails at its first failed partition, so the quarantine of a failing GPU only
    // matters to a worker; the worker's default applies.
    let quarantine_after = crate::config::PipelineConfig::default().max_backend_failures;
    let pipeline = Pipeline::start(backends, synthesizers, finalizers, quarantine_after)
        .map_err(at(Stage::Proving))?;
    let (done, answer) = oneshot::channel();
    // Seconds since the command began, so a slow parameter load or a slow partition shows
    // against the ones before it.
    let progress: pipeline::Progress = Box::new(move |done| {
        if on_terminal {
            eprintln!(
                "  partition {}/{n} proved ({:.1} s)",
                n - done.remaining,
                total.elapsed().as_secs_f64()
            );
        }
    });
    pipeline
        .submit(Submission {
            id: "prove".into(),
            job,
            priority: Priority::Normal,
            progress,
            done,
        })
        .map_err(at(Stage::Proving))?;
    let result = answer
        .blocking_recv()
        .map_err(|_| at(Stage::Proving)(anyhow!("the proving pipeline stopped without an answer")));
    pipeline.shutdown();
    let proved = result?.map_err(|e| StageError {
        stage: match e.stage {
            pipeline::Stage::Srs => Stage::Params,
            pipeline::Stage::Synthesis => Stage::Synthesis,
            pipeline::Stage::Start | pipeline::Stage::Finish => Stage::Proving,
            pipeline::Stage::Verify => Stage::Verification,
        },
        source: e.error,
    })?;
    let timings = stage_timings(&proved, total.elapsed().as_secs_f64());
    if on_terminal {
        eprintln!("done in {:.1} s", timings.total_s);
    }
    Ok((proved.proof, timings))
}
