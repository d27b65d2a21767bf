//! Proving one job in this process, partition after partition: what `c2q prove` runs.
//! (The worker's pipeline overlaps the same stages across partitions and jobs.)

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::Result;
use blstrs::Scalar as Fr;
use ff::Field;
use serde::Serialize;

use crate::groth16::{self, Backend, Proof};
use crate::job::ProofJob;

/// Seconds spent in each stage, summed over partitions.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StageTimings {
    pub params_s: f64,
    pub synthesis_s: f64,
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

/// Progress lines on stderr, when stderr is a terminal.
struct Reporter {
    on: bool,
}

impl Reporter {
    fn line(&self, msg: &str) {
        if self.on {
            eprintln!("{msg}");
        }
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Prove every partition of `job`, verify the whole proof, and return it with timings.
pub fn prove_job(
    job: &dyn ProofJob,
    backend: &dyn Backend,
) -> Result<(Vec<Proof>, StageTimings), StageError> {
    let report = Reporter {
        on: std::io::stderr().is_terminal(),
    };
    let total = Instant::now();
    let mut t = StageTimings::default();
    let n = job.partitions();

    report.line("loading parameters …");
    let started = Instant::now();
    let srs = job.srs().map_err(at(Stage::Params))?;
    t.params_s = secs(started.elapsed());
    report.line(&format!("  parameters ready in {:.1} s", t.params_s));

    let mut rng = rand::rngs::OsRng;
    let mut proofs = Vec::with_capacity(n);
    for k in 0..n {
        report.line(&format!("partition {}/{n}: synthesis …", k + 1));
        let started = Instant::now();
        let assignment = job.synthesize(k).map_err(at(Stage::Synthesis))?;
        t.synthesis_s += secs(started.elapsed());

        report.line(&format!(
            "partition {}/{n}: proving ({}) …",
            k + 1,
            backend.name()
        ));
        let groth16::Assignment { witness, evals } = assignment;
        groth16::prover::check_shape(&srs, &evals, &witness).map_err(at(Stage::Params))?;
        let started = Instant::now();
        let sums = backend
            .start(&srs, evals, &witness)
            .map_err(at(Stage::Proving))?;
        t.start_s += secs(started.elapsed());
        let started = Instant::now();
        let proof = groth16::finish(
            &srs,
            &sums,
            &witness,
            Fr::random(&mut rng),
            Fr::random(&mut rng),
        )
        .map_err(at(Stage::Proving))?;
        t.finish_s += secs(started.elapsed());
        proofs.push(proof);
    }

    report.line("verifying …");
    let started = Instant::now();
    job.verify(&proofs).map_err(at(Stage::Verification))?;
    t.verify_s = secs(started.elapsed());
    t.total_s = secs(total.elapsed());
    report.line(&format!("done in {:.1} s", t.total_s));
    Ok((proofs, t))
}
