//! How a worker stops, stage by stage.
//!
//! 1. **Stop fetching** ([`Shutdown::fetching_stopped`]): on SIGTERM or a first SIGINT (a stop
//!    is [`requested`](Shutdown::requested)), or once the proving backend is judged broken
//!    (`health`). The fetch loop takes no more jobs, and the fleet stops counting the worker.
//!    A worker whose backend broke and that is told to stay (`pipeline.on_unhealthy = "stay"`)
//!    waits here, up and not ready, until a stop is requested.
//! 2. **Drain** ([`Shutdown::drain`]): `/readyz` answers `draining`, and every job already
//!    fetched runs to its end (proved, published and acked; or failed, retried, handed back)
//!    while no new one starts. Then the broker connection is closed.
//! 3. **Done** ([`Shutdown::done`]): the telemetry endpoint stops, and the worker exits: 0, or
//!    non-zero when its backend broke or the broker stayed unreachable.
//!
//! **Abort**: a second SIGINT (one after a stop was requested) exits at once with status 130
//! (128 + SIGINT, what a shell reports for Ctrl-C). Nothing is drained: the broker delivers
//! the unacked jobs again, to this worker or another. A further SIGTERM changes nothing; the
//! drain goes on.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::telemetry::http::Health;

/// The exit status of an aborted worker: 128 + SIGINT.
const ABORTED: i32 = 130;

/// One worker's stop, from the first signal to the exit. Clones share it.
#[derive(Clone)]
pub(super) struct Shutdown {
    /// Cancelled by SIGTERM or a first SIGINT: stop fetching, then drain.
    requested: CancellationToken,
    /// Cancelled when the proving backend is judged broken (owned by `BackendHealth`, only
    /// watched here): stop fetching too.
    backend_broken: CancellationToken,
    /// The fetched jobs being handled: what the drain waits for.
    jobs: TaskTracker,
    /// Cancelled when done: stops the telemetry endpoint, which keeps answering (`/readyz`:
    /// draining) throughout the drain.
    telemetry: CancellationToken,
    /// Where `/readyz` learns that the worker is draining.
    health: Arc<Health>,
}

impl Shutdown {
    pub fn new(health: Arc<Health>, backend_broken: CancellationToken) -> Shutdown {
        Shutdown {
            requested: CancellationToken::new(),
            backend_broken,
            jobs: TaskTracker::new(),
            telemetry: CancellationToken::new(),
            health,
        }
    }

    /// Turn SIGTERM and SIGINT into the stages above, for as long as the process runs.
    pub fn on_signals(&self) -> Result<()> {
        let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
        let requested = self.requested.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    // The stop takes effect before it is logged: whoever reads the line (an
                    // operator, a test) may rely on no job being fetched after it.
                    _ = term.recv() => {
                        requested.cancel();
                        tracing::info!("SIGTERM: draining (no new jobs; in-flight jobs finish)");
                    }
                    _ = int.recv() => {
                        if requested.is_cancelled() {
                            tracing::warn!("second SIGINT: exiting now; unacked jobs will be redelivered");
                            abort();
                        }
                        requested.cancel();
                        tracing::info!("SIGINT: draining; press Ctrl-C again to exit at once");
                    }
                }
            }
        });
        Ok(())
    }

    /// What the telemetry endpoint serves until: cancelled when [`done`](Shutdown::done).
    pub fn telemetry_stop(&self) -> CancellationToken {
        self.telemetry.clone()
    }

    /// Whether a stop was requested (SIGTERM or SIGINT).
    pub fn is_requested(&self) -> bool {
        self.requested.is_cancelled()
    }

    /// Resolves once a stop is requested (SIGTERM or SIGINT); a broken backend alone does not
    /// resolve it.
    pub async fn requested(&self) {
        self.requested.cancelled().await
    }

    /// Whether the fetch loop should stop: a stop was requested, or the backend is broken.
    pub fn is_fetching_stopped(&self) -> bool {
        self.is_requested() || self.backend_broken.is_cancelled()
    }

    /// Resolves once the fetch loop should stop (see [`is_fetching_stopped`]).
    ///
    /// [`is_fetching_stopped`]: Shutdown::is_fetching_stopped
    pub async fn fetching_stopped(&self) {
        tokio::select! {
            _ = self.requested.cancelled() => {}
            _ = self.backend_broken.cancelled() => {}
        }
    }

    /// Run a fetched job's handling as a task the drain waits for.
    pub fn track<F>(&self, job: F)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.jobs.spawn(job);
    }

    /// Report not ready (draining), then wait until every tracked job has ended. Call once
    /// fetching has stopped: nothing may be tracked after this.
    pub async fn drain(&self) {
        self.health.draining.store(true, Ordering::Relaxed);
        self.jobs.close();
        tracing::info!(
            in_flight = self.jobs.len(),
            "draining: waiting for in-flight jobs"
        );
        self.jobs.wait().await;
    }

    /// The worker has drained and let go of the broker: stop the telemetry endpoint.
    pub fn done(&self) {
        self.telemetry.cancel();
    }
}

/// Exit at once, leaving unacked jobs to the broker (see the module's documentation).
fn abort() -> ! {
    std::process::exit(ABORTED)
}
