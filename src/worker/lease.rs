//! The heartbeat that keeps a job's ledger lease while this worker proves it.
//!
//! The lease is what stops a second worker from proving the same job: a claim on a job whose
//! lease is live is answered `Busy`. Renewal runs on the async runtime (a short UPDATE every
//! `lease.renew_s`), never behind the proof. If the worker dies, renewals stop and the lease
//! lapses after `lease.duration_s`; then another worker takes the job over.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::ledger::{Holder, Ledger};

pub(super) struct LeaseKeeper {
    ledger: Ledger,
    job_id: String,
    holder: Holder,
    stop: CancellationToken,
    heartbeat: JoinHandle<()>,
}

impl LeaseKeeper {
    /// Start renewing the lease `holder` took on `job_id` in its claim.
    pub fn start(ledger: Ledger, job_id: &str, holder: Holder, every: Duration) -> LeaseKeeper {
        let stop = CancellationToken::new();
        let heartbeat = tokio::spawn(renew_until_stopped(
            ledger.clone(),
            job_id.to_string(),
            holder.clone(),
            every,
            stop.clone(),
        ));
        LeaseKeeper {
            ledger,
            job_id: job_id.to_string(),
            holder,
            stop,
            heartbeat,
        }
    }

    /// Stop renewing and give the lease up (a no-op once the proof or a failure is recorded:
    /// both end it), so that the next delivery of the job does not wait for it to lapse.
    pub async fn release(mut self) {
        self.stop.cancel();
        let _ = (&mut self.heartbeat).await;
        if let Err(e) = self.ledger.release_lease(&self.job_id, &self.holder).await {
            // It lapses by itself within `lease.duration_s`.
            tracing::warn!(job_id = %self.job_id, error = format!("{e:#}"), "could not release the lease");
        }
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        // A task that ends without `release` (it panicked) must not keep renewing.
        self.stop.cancel();
    }
}

async fn renew_until_stopped(
    ledger: Ledger,
    job_id: String,
    holder: Holder,
    every: Duration,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.cancelled() => return,
        }
        match ledger.renew_lease(&job_id, &holder).await {
            Ok(true) => tracing::debug!(job_id, "lease renewed"),
            Ok(false) => {
                // Renewals failed for longer than the lease (a database outage) and another
                // worker took the job over. Both may now prove it; the ledger keeps the proof
                // recorded first and every result carries those bytes.
                tracing::warn!(job_id, "lease lost to another worker; finishing anyway");
                return;
            }
            Err(e) => {
                tracing::warn!(
                    job_id,
                    error = format!("{e:#}"),
                    "lease renewal failed; trying again"
                )
            }
        }
    }
}
