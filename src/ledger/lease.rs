//! Keeping and giving up a job's lease (taken by `Ledger::claim`).
//!
//! Neither operation waits out a database outage the way the other ledger calls do: a renewal
//! comes again a few seconds later anyway, and a lease that is not released expires by itself.

use anyhow::{Context, Result};

use super::{Holder, Ledger};

impl Ledger {
    /// Extend the lease by a full term. `false`: this holder no longer has it (the job was
    /// proved, failed or taken over after the lease lapsed). A job cancelled while it is
    /// proved stays leased to its prover until it finishes.
    pub async fn renew_lease(&self, job_id: &str, holder: &Holder) -> Result<bool> {
        let n = self
            .client()
            .await?
            .execute(
                "UPDATE jobs SET lease_until = now() + make_interval(secs => $3)
                 WHERE job_id = $1 AND lease_holder = $2 AND status IN ('running', 'cancelled')
                       AND lease_until IS NOT NULL",
                &[&job_id, &holder.token, &holder.lease.as_secs_f64()],
            )
            .await
            .with_context(|| format!("ledger: renewing the lease on {job_id}"))?;
        Ok(n == 1)
    }

    /// Give the lease up, so that the next delivery of the job is taken at once by any worker.
    pub async fn release_lease(&self, job_id: &str, holder: &Holder) -> Result<()> {
        self.client()
            .await?
            .execute(
                "UPDATE jobs SET lease_until = NULL, updated_at = now()
                 WHERE job_id = $1 AND lease_holder = $2",
                &[&job_id, &holder.token],
            )
            .await
            .with_context(|| format!("ledger: releasing the lease on {job_id}"))?;
        Ok(())
    }
}
