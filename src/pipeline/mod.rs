//! The in-process proving pipeline: synthesis → proving start (the backend) → G2 finalizer →
//! assembly and verification, each stage on its own OS threads, joined by bounded channels.
//!
//! While partition `p` is in proving start, `p + 1` is being synthesized and `p − 1` finalized,
//! across partitions and across jobs. The bounded hand-offs are the back-pressure that keeps
//! at most a few partitions' evaluations alive (see `gate::estimate::IN_FLIGHT`). None of this
//! runs on the async runtime: the broker's heartbeats, confirms and acks never wait for a proof.

mod stages;

use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use crossbeam_channel::{bounded, unbounded, Sender};
use tokio::sync::oneshot;

use crate::groth16::Backend;
use crate::job::ProofJob;
use crate::schema::PartitionTiming;

/// The stage a failure came from: the worker turns it into a failure class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Loading the SRS for the job.
    Srs,
    Synthesis,
    Start,
    Finish,
    Verify,
}

#[derive(Debug)]
pub struct StageError {
    pub stage: Stage,
    pub error: anyhow::Error,
}

impl std::fmt::Display for StageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} failed: {:#}", self.stage, self.error)
    }
}

/// A verified multi-partition proof and when each stage of each partition ran.
#[derive(Debug)]
pub struct Proved {
    pub proof: Vec<u8>,
    pub timings: Vec<PartitionTiming>,
    /// When the job entered the pipeline (Unix ms): the origin of `timings`.
    pub origin_unix_ms: u64,
    pub verify_ms: u64,
}

/// Called with the number of partitions still unfinished each time one is assembled, so the
/// memory reservation can shrink as the job progresses.
pub type Progress = Box<dyn Fn(usize) + Send + Sync>;

/// One job handed to the pipeline.
pub struct Submission {
    pub id: String,
    pub job: Arc<dyn ProofJob>,
    pub progress: Progress,
    pub done: oneshot::Sender<Result<Proved, StageError>>,
}

pub struct Pipeline {
    submit: Option<Sender<Submission>>,
    threads: Vec<JoinHandle<()>>,
}

impl Pipeline {
    /// Start the stage threads. `finalizers` G2 finalizer threads keep up with the backend.
    pub fn start(backend: Arc<dyn Backend>, finalizers: usize) -> Result<Pipeline> {
        // One job waits while one is being synthesized: the next job's synthesis starts as soon
        // as the last partition of the previous one is handed on.
        let (submit, jobs) = bounded::<Submission>(1);
        // One synthesized partition waits for the backend; this is what bounds a/b/c memory.
        let (to_start, start_rx) = bounded(1);
        // Witnesses waiting for the finalizer are smaller; let the backend run ahead a little.
        let (to_finish, finish_rx) = bounded(2);
        let (to_assemble, assemble_rx) = unbounded();

        let mut threads = Vec::new();
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.to_string())
                .spawn(f)
                .with_context(|| format!("spawning pipeline thread {name}"))
        };
        {
            let to_assemble = to_assemble.clone();
            threads.push(spawn(
                "c2q-synth",
                Box::new(move || stages::synthesis(jobs, to_start, to_assemble)),
            )?);
        }
        {
            let to_assemble = to_assemble.clone();
            threads.push(spawn(
                "c2q-start",
                Box::new(move || stages::start(backend, start_rx, to_finish, to_assemble)),
            )?);
        }
        for i in 0..finalizers.max(1) {
            let rx = finish_rx.clone();
            let tx = to_assemble.clone();
            threads.push(spawn(
                &format!("c2q-g2-{i}"),
                Box::new(move || stages::finalize(rx, tx)),
            )?);
        }
        drop(to_assemble);
        threads.push(spawn(
            "c2q-assemble",
            Box::new(move || stages::assemble(assemble_rx)),
        )?);
        Ok(Pipeline {
            submit: Some(submit),
            threads,
        })
    }

    /// Hand a job to the pipeline; blocks while the synthesis stage is busy with another job
    /// and one is already waiting, so call it from a blocking context.
    pub fn submit(&self, submission: Submission) -> Result<()> {
        self.submit
            .as_ref()
            .context("pipeline is shut down")?
            .send(submission)
            .map_err(|_| anyhow::anyhow!("pipeline threads have stopped"))
    }

    /// Let the stages finish what they hold, then join them.
    pub fn shutdown(mut self) {
        self.join();
    }

    fn join(&mut self) {
        self.submit.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.join();
    }
}
