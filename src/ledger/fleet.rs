//! The workers of a fleet as they announce themselves: who runs, with which backends, fetching
//! which size classes. What `c2q status` and the class metrics read to tell a class whose jobs
//! no running worker takes.

use std::time::Duration;

use anyhow::{Context, Result};

use super::{Holder, Ledger};

/// A worker not heard from for this long no longer counts as running (workers announce
/// themselves every 10 s).
pub const SEEN_RECENTLY: Duration = Duration::from_secs(60);

/// A worker process as it last announced itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenWorker {
    pub name: String,
    /// Size class keys it fetches, largest first.
    pub classes: Vec<String>,
    pub backend: String,
    /// Circuits whose parameters it holds loaded (`porep-32g`).
    pub resident: Vec<String>,
    /// Seconds since it last announced itself.
    pub seen_s_ago: u64,
}

impl Ledger {
    /// Say that this worker process runs, fetches `classes` and holds the parameters of the
    /// `resident` circuits loaded (called every few seconds).
    pub async fn announce(
        &self,
        holder: &Holder,
        classes: &[String],
        backend: &str,
        resident: &[String],
    ) -> Result<()> {
        self.client()
            .await?
            .execute(
                "INSERT INTO workers (token, name, classes, backend, resident)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (token) DO UPDATE
                 SET classes = $3, backend = $4, resident = $5, seen_at = now(),
                     stopped = false",
                &[&holder.token, &holder.worker, &classes, &backend, &resident],
            )
            .await
            .context("ledger: announcing the worker")?;
        Ok(())
    }

    /// Say that this worker process has stopped: its classes no longer count as served.
    pub async fn withdraw(&self, holder: &Holder) -> Result<()> {
        self.client()
            .await?
            .execute(
                "UPDATE workers SET stopped = true, seen_at = now() WHERE token = $1",
                &[&holder.token],
            )
            .await
            .context("ledger: withdrawing the worker")?;
        Ok(())
    }

    /// Workers that announced themselves within `recently` and have not stopped, by name; rows
    /// of workers gone for a day are removed on the way.
    pub async fn workers_seen(&self, recently: Duration) -> Result<Vec<SeenWorker>> {
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM workers WHERE seen_at < now() - interval '1 day'",
                &[],
            )
            .await
            .context("ledger: forgetting workers gone for a day")?;
        let rows = client
            .query(
                "SELECT name, classes, backend, resident,
                        floor(extract(epoch FROM now() - seen_at))::bigint
                 FROM workers
                 WHERE NOT stopped AND seen_at > now() - make_interval(secs => $1)
                 ORDER BY name, token",
                &[&recently.as_secs_f64()],
            )
            .await
            .context("ledger: listing workers")?;
        Ok(rows
            .iter()
            .map(|r| SeenWorker {
                name: r.get(0),
                classes: r.get(1),
                backend: r.get(2),
                resident: r.get(3),
                seen_s_ago: r.get::<_, i64>(4).max(0) as u64,
            })
            .collect())
    }
}
