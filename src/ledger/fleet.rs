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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeenWorker {
    pub name: String,
    /// Size class keys it fetches, largest first.
    pub classes: Vec<String>,
    pub backend: String,
    /// Circuits whose parameters it keeps loaded (`porep-32g`), most recently used first.
    pub resident: Vec<String>,
    /// The memory each of `resident` holds, in bytes.
    pub resident_bytes: Vec<u64>,
    /// Seconds since each of `resident` was last used.
    pub resident_idle_s: Vec<u64>,
    /// Its last releases of kept parameters, newest last.
    pub evicted: Vec<String>,
    /// Seconds it has held nothing while jobs of its classes were ready, if it does.
    pub stalled_s: Option<u64>,
    /// Seconds since it last announced itself.
    pub seen_s_ago: u64,
}

/// Parameters a worker keeps loaded, as it announces them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptCircuit {
    /// The fleet's name for the circuit (`porep-32g`).
    pub circuit: String,
    pub bytes: u64,
    /// Jobs the worker holds that use them.
    pub users: usize,
    pub idle_s: u64,
}

/// What a worker announces of itself every few seconds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Announcement {
    /// Size class keys it fetches, largest first.
    pub classes: Vec<String>,
    pub backend: String,
    pub kept: Vec<KeptCircuit>,
    /// Its last releases of kept parameters, one line each, newest last.
    pub evicted: Vec<String>,
    pub stalled_s: Option<u64>,
}

impl Ledger {
    /// Say that this worker process runs, and what it fetches, keeps loaded and released
    /// (called every few seconds).
    pub async fn announce(&self, holder: &Holder, a: &Announcement) -> Result<()> {
        let resident: Vec<&str> = a.kept.iter().map(|k| k.circuit.as_str()).collect();
        let bytes: Vec<i64> = a.kept.iter().map(|k| k.bytes as i64).collect();
        let idle: Vec<i64> = a.kept.iter().map(|k| k.idle_s as i64).collect();
        let stalled = a.stalled_s.map(|s| s as i64);
        self.client()
            .await?
            .execute(
                "INSERT INTO workers (token, name, classes, backend, resident, resident_bytes,
                                      resident_idle_s, evicted, stalled_s)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT (token) DO UPDATE
                 SET classes = $3, backend = $4, resident = $5, resident_bytes = $6,
                     resident_idle_s = $7, evicted = $8, stalled_s = $9, seen_at = now(),
                     stopped = false",
                &[
                    &holder.token,
                    &holder.worker,
                    &a.classes,
                    &a.backend,
                    &resident,
                    &bytes,
                    &idle,
                    &a.evicted,
                    &stalled,
                ],
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
                        floor(extract(epoch FROM now() - seen_at))::bigint,
                        resident_bytes, resident_idle_s, evicted, stalled_s
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
                resident_bytes: unsigned(r.get(5)),
                resident_idle_s: unsigned(r.get(6)),
                evicted: r.get(7),
                stalled_s: r.get::<_, Option<i64>>(8).map(|s| s.max(0) as u64),
            })
            .collect())
    }
}

fn unsigned(values: Vec<i64>) -> Vec<u64> {
    values.into_iter().map(|v| v.max(0) as u64).collect()
}
