//! The worker's place in its fleet: every few seconds it announces itself in the ledger (name,
//! backends, the size classes it fetches, the parameters it keeps loaded and released, whether
//! it stalls) and reads back what the fleet looks like, for the metrics that show jobs waiting
//! for a class no running worker fetches (`c2q_class_queue_jobs`, `c2q_class_workers`). When it
//! stops, it withdraws.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::Worker;
use crate::broker::UNSORTED;
use crate::classes::SizeClass;
use crate::ledger::{Announcement, SEEN_RECENTLY};

/// How often a worker announces itself and refreshes the class metrics.
const ANNOUNCE_EVERY: Duration = Duration::from_secs(10);

/// The longest a stopping worker waits to withdraw.
const WITHDRAW_WITHIN: Duration = Duration::from_secs(5);

/// The announcing task; [`Fleet::stop`] ends it with the worker's withdrawal.
pub(super) struct Fleet {
    task: JoinHandle<()>,
    stop: CancellationToken,
}

/// Announce the worker until [`Fleet::stop`]: the worker stops fetching for a signal or
/// because its backend broke, and withdraws either way.
pub(super) fn spawn(worker: Arc<Worker>) -> Fleet {
    let stop = CancellationToken::new();
    let task = tokio::spawn(announce_until(worker, stop.clone()));
    Fleet { task, stop }
}

async fn announce_until(worker: Arc<Worker>, stop: CancellationToken) {
    let mut stall = StallWatch::default();
    while !stop.is_cancelled() {
        // A round stuck on a database or broker outage is dropped at the stop, so that it
        // cannot hold up the drain.
        tokio::select! {
            _ = announce(&worker, &mut stall) => {}
            _ = stop.cancelled() => break,
        }
        tokio::select! {
            _ = tokio::time::sleep(ANNOUNCE_EVERY) => {}
            _ = stop.cancelled() => {}
        }
    }
    let withdrawn = tokio::time::timeout(WITHDRAW_WITHIN, worker.ledger.withdraw(&worker.holder));
    let why = match withdrawn.await {
        Ok(Ok(())) => return,
        Ok(Err(e)) => format!("{e:#}"),
        Err(_) => "the ledger did not answer in time".to_string(),
    };
    tracing::warn!(
        error = why,
        "could not withdraw from the fleet; it stops counting this worker within a minute"
    );
}

impl Fleet {
    /// Stop announcing and withdraw (bounded by [`WITHDRAW_WITHIN`]).
    pub(super) async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// One round: read the job queues' depths, tell a stall, announce, then refresh the class
/// gauges. Failures are logged and the gauges kept as they were: the worker's own work does not
/// depend on them.
async fn announce(worker: &Worker, stall: &mut StallWatch) {
    // The connection the fetch loop keeps, if it is up: reconnecting is the fetch loop's job.
    let broker = worker
        .broker
        .lock()
        .await
        .clone()
        .filter(|b| b.is_healthy());
    let depths = match broker {
        Some(broker) => match broker.job_queue_depths().await {
            Ok(depths) => Some(depths),
            Err(e) => {
                tracing::warn!(
                    error = format!("{e:#}"),
                    "could not read the job queues' depths"
                );
                None
            }
        },
        None => None,
    };
    let classes = worker.class_keys();
    if let Some(depths) = &depths {
        for d in depths {
            worker
                .metrics
                .class_queue_jobs
                .with_label_values(&[&d.class])
                .set(i64::from(d.ready));
        }
        let ready: u64 = depths
            .iter()
            .filter(|d| d.class == UNSORTED || classes.contains(&d.class))
            .map(|d| u64::from(d.ready))
            .sum();
        let last_taken = *worker.last_taken.lock().unwrap_or_else(|p| p.into_inner());
        let idle = worker.kept.jobs_held() == 0;
        let stalled = stall.observe(idle, ready, last_taken, Instant::now());
        worker
            .metrics
            .stalled_seconds
            .set(stalled.map_or(0, |d| d.as_secs() as i64));
        if let Some(for_) = stalled {
            tracing::error!(ready, stalled_s = for_.as_secs(), kept = ?worker.kept_circuits(),
                gate_free = worker.gate.free(),
                "stalled: this worker holds no job while jobs of its classes are ready");
        }
    }
    let announcement = Announcement {
        classes,
        backend: worker.backend_name.clone(),
        kept: worker.kept_circuits(),
        evicted: worker
            .kept
            .recent_evictions()
            .iter()
            .map(|e| {
                let ago = e.at.elapsed().map(|d| d.as_secs()).unwrap_or(0);
                format!(
                    "{} ({} bytes) released {ago} s ago for {}",
                    super::circuit_id(e.key.as_str()),
                    e.bytes,
                    e.why
                )
            })
            .collect(),
        stalled_s: stall.stalled_s(),
    };
    if let Err(e) = worker.ledger.announce(&worker.holder, &announcement).await {
        tracing::warn!(
            error = format!("{e:#}"),
            "could not announce the worker in the ledger"
        );
    }
    match worker.ledger.workers_seen(SEEN_RECENTLY).await {
        Ok(seen) => {
            let mut per_class: HashMap<String, i64> = HashMap::new();
            for w in &seen {
                for class in &w.classes {
                    *per_class.entry(class.clone()).or_default() += 1;
                }
            }
            for class in SizeClass::all() {
                let key = class.key();
                let n = per_class.get(&key).copied().unwrap_or(0);
                worker
                    .metrics
                    .class_workers
                    .with_label_values(&[&key])
                    .set(n);
            }
        }
        Err(e) => tracing::warn!(
            error = format!("{e:#}"),
            "could not read the fleet from the ledger"
        ),
    }
}

/// Tells a stall: a worker that holds no job while jobs of its classes are ready, and has
/// taken none for [`STALL_AFTER`] since they were first seen ready. The fetch rule never lets
/// an idle worker wait for memory, so this should never fire; if it does, something else
/// keeps the worker from fetching, and an operator must know.
#[derive(Debug, Default)]
pub(super) struct StallWatch {
    /// Since when an idle worker has seen jobs ready, without a break.
    ready_since: Option<Instant>,
    stalled: Option<Duration>,
}

/// How long an idle worker may leave ready jobs untaken before it counts as stalled: many
/// poll intervals (it polls every 250 ms by default), and more than one announcement round,
/// so that a job that arrived just before a round is not mistaken for one left waiting.
pub(super) const STALL_AFTER: Duration = Duration::from_secs(15);

impl StallWatch {
    /// One observation: whether the worker holds no job, how many jobs of its classes are
    /// ready, and when it last took one. Returns how long it has been stalled, if it is.
    pub(super) fn observe(
        &mut self,
        idle: bool,
        ready: u64,
        last_taken: Instant,
        now: Instant,
    ) -> Option<Duration> {
        if !idle || ready == 0 {
            self.ready_since = None;
            self.stalled = None;
            return None;
        }
        let since = *self.ready_since.get_or_insert(now);
        let waiting = now.saturating_duration_since(since.max(last_taken));
        self.stalled = (waiting >= STALL_AFTER).then_some(waiting);
        self.stalled
    }

    pub(super) fn stalled_s(&self) -> Option<u64> {
        self.stalled.map(|d| d.as_secs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_is_an_idle_worker_beside_ready_jobs_it_does_not_take() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut watch = StallWatch::default();
        // Jobs ready and a worker that has not taken one for an hour: not stalled at first
        // sight (they may have just arrived), stalled once they stay untaken.
        assert_eq!(watch.observe(true, 3, t0, at(3600)), None);
        assert_eq!(watch.observe(true, 3, t0, at(3610)), None);
        assert_eq!(
            watch.observe(true, 3, t0, at(3620)),
            Some(Duration::from_secs(20))
        );
        assert_eq!(watch.stalled_s(), Some(20));
        // Taking a job, being busy, or empty queues end it.
        assert_eq!(watch.observe(true, 3, at(3625), at(3630)), None);
        assert_eq!(watch.observe(false, 3, at(3625), at(3650)), None);
        assert_eq!(watch.observe(true, 0, at(3625), at(3660)), None);
        assert_eq!(watch.stalled_s(), None);
        // A busy worker with ready jobs is not stalled however long it takes.
        assert_eq!(watch.observe(false, 9, t0, at(9000)), None);
    }
}
