//! The worker's place in its fleet: every few seconds it announces itself in the ledger (name,
//! backends, the size classes it fetches) and reads back what the fleet looks like, for the
//! metrics that show jobs waiting for a class no running worker fetches
//! (`c2q_class_queue_jobs`, `c2q_class_workers`). When it stops, it withdraws.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::Worker;
use crate::classes::SizeClass;
use crate::ledger::SEEN_RECENTLY;

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
    while !stop.is_cancelled() {
        // A round stuck on a database or broker outage is dropped at the stop, so that it
        // cannot hold up the drain.
        tokio::select! {
            _ = announce(&worker) => {}
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

/// One round: announce, then refresh the class gauges. Failures are logged and the gauges kept
/// as they were: the worker's own work does not depend on them.
async fn announce(worker: &Worker) {
    let classes = worker.class_keys();
    let resident = worker.resident_circuits();
    if let Err(e) = worker
        .ledger
        .announce(&worker.holder, &classes, &worker.backend_name, &resident)
        .await
    {
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
    // The connection the fetch loop keeps, if it is up: reconnecting is the fetch loop's job.
    let broker = worker
        .broker
        .lock()
        .await
        .clone()
        .filter(|b| b.is_healthy());
    let depths = match broker {
        Some(broker) => broker.job_queue_depths().await,
        None => return,
    };
    match depths {
        Ok(depths) => {
            for d in depths {
                worker
                    .metrics
                    .class_queue_jobs
                    .with_label_values(&[&d.class])
                    .set(i64::from(d.ready));
            }
        }
        Err(e) => tracing::warn!(
            error = format!("{e:#}"),
            "could not read the job queues' depths"
        ),
    }
}
