//! Jobs as a gateway sees them: registered when accepted (before they are enqueued), cancelled
//! on request, and counted for a client asking how the fleet is doing.

use anyhow::{Context, Result};

use super::{Answer, JobIdentity, Ledger};
use crate::schema::StageTimes;

/// What the ledger says when a gateway registers a job it accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Registration {
    /// A job id the ledger had not seen: recorded as queued.
    New,
    /// The same job, seen before: where it stands. A cancelled one is revived (queued again, or
    /// proved if it was proved before the cancellation landed).
    Known(Answer),
    /// The job id is known with another payload.
    Mismatch,
}

/// What a cancellation did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cancellation {
    /// Recorded. `was_running`: a worker is proving it now; it finishes, and its proof is not
    /// answered.
    Cancelled { was_running: bool },
    /// Nothing to cancel: the job has ended already (`proved`, `published` or `failed`).
    Ended { status: String },
    /// Cancelled before.
    AlreadyCancelled,
    /// The ledger does not know the job id.
    Unknown,
}

/// How long a proved job took, in milliseconds, as a gateway reports it (Curio's
/// `AwaitProofResponse` fields). Every part is at most `total_ms`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProofTimes {
    /// From submission to the recorded proof.
    pub total_ms: u64,
    /// Before the job entered a worker's proving pipeline: waiting in the queue, for the
    /// worker's memory, for the job ahead, and the job's set-up (reading its input).
    pub queue_wait_ms: u64,
    /// The proving worker's figures; `proving_ms` the rest of `total_ms`.
    pub stages: StageTimes,
}

impl ProofTimes {
    /// From the time the ledger saw elapse and the worker's stage times. The two clocks are
    /// different machines': the total is never less than the worker's own part.
    pub fn new(elapsed_ms: u64, stages: StageTimes) -> ProofTimes {
        let total_ms = elapsed_ms.max(stages.proving_ms);
        ProofTimes {
            total_ms,
            queue_wait_ms: match stages.proving_ms {
                // Nothing measured by the worker: the wait is not known.
                0 => 0,
                proving => total_ms - proving,
            },
            stages,
        }
    }
}

/// Jobs per state, over the whole ledger.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Registered by a gateway and not yet taken by a worker.
    pub queued: u64,
    /// Taken by a worker and not finished (being proved, or waiting for a retry).
    pub running: u64,
    /// Proved (published or not).
    pub proved: u64,
    pub failed: u64,
    pub cancelled: u64,
}

impl Ledger {
    /// Record a job a gateway accepted, before it is enqueued, with the client's own name for
    /// it (`request_id`, where the client gave one).
    pub async fn register(
        &self,
        id: &JobIdentity,
        request_id: Option<&str>,
    ) -> Result<Registration> {
        let context = || format!("ledger: registering job {}", id.job_id);
        let miner = i64::try_from(id.miner_id)
            .context("the miner id does not fit the ledger")
            .with_context(context)?;
        let sector = i64::try_from(id.sector_number)
            .context("the sector number does not fit the ledger")
            .with_context(context)?;
        self.retrying(|| self.register_once(id, request_id, miner, sector))
            .await
            .with_context(context)
    }

    async fn register_once(
        &self,
        id: &JobIdentity,
        request_id: Option<&str>,
        miner: i64,
        sector: i64,
    ) -> Result<Registration> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let inserted = tx
            .execute(
                "INSERT INTO jobs (job_id, kind, registered_proof, miner_id, sector_number,
                                   c1_digest, status, request_id, requested_at, submitted_at)
                 VALUES ($1, $2, $3, $4, $5, $6, 'queued', $7, now(), now())
                 ON CONFLICT (job_id) DO NOTHING",
                &[
                    &id.job_id,
                    &id.kind,
                    &id.registered_proof,
                    &miner,
                    &sector,
                    &&id.digest[..],
                    &request_id.map(str::as_bytes),
                ],
            )
            .await?;
        if inserted == 1 {
            tx.commit().await?;
            return Ok(Registration::New);
        }
        let digest: Vec<u8> = tx
            .query_one(
                "SELECT c1_digest FROM jobs WHERE job_id = $1 FOR UPDATE",
                &[&id.job_id],
            )
            .await?
            .get(0);
        if digest != id.digest {
            tx.commit().await?;
            return Ok(Registration::Mismatch);
        }
        // Asked for now: the job its request id names, among those sharing it.
        tx.execute(
            "UPDATE jobs SET requested_at = now(), request_id = coalesce(request_id, $2)
             WHERE job_id = $1",
            &[&id.job_id, &request_id.map(str::as_bytes)],
        )
        .await?;
        // Submitting a cancelled job again asks for it again.
        tx.execute(
            "UPDATE jobs SET cancelled_at = NULL, updated_at = now(),
                    submitted_at = CASE WHEN proof IS NULL THEN now() ELSE submitted_at END,
                    status = CASE WHEN proof IS NOT NULL THEN 'proved' ELSE 'queued' END
             WHERE job_id = $1 AND status = 'cancelled'",
            &[&id.job_id],
        )
        .await?;
        tx.commit().await?;
        drop(client);
        let answer = self
            .answer(&id.job_id)
            .await?
            .context("the job's ledger row is gone")?;
        Ok(Registration::Known(answer))
    }

    /// Queue a failed job again: a gateway asked for it once more and enqueues it.
    pub async fn requeue(&self, job_id: &str) -> Result<()> {
        self.retrying(|| async {
            self.client()
                .await?
                .execute(
                    "UPDATE jobs SET status = 'queued', error_kind = NULL, error_message = NULL,
                            updated_at = now(), submitted_at = now()
                     WHERE job_id = $1 AND status = 'failed'",
                    &[&job_id],
                )
                .await?;
            Ok(())
        })
        .await
        .with_context(|| format!("ledger: queueing job {job_id} again"))
    }

    /// The job a client's request id names: of the jobs registered under it, the one asked
    /// for last; `None` when no job was.
    pub async fn job_for_request(&self, request_id: &str) -> Result<Option<String>> {
        let row = self
            .client()
            .await?
            .query_opt(
                "SELECT job_id FROM jobs WHERE request_id = $1
                 ORDER BY requested_at DESC NULLS LAST, job_id LIMIT 1",
                &[&request_id.as_bytes()],
            )
            .await
            .with_context(|| format!("ledger: the job of request id {request_id:?}"))?;
        Ok(row.map(|r| r.get(0)))
    }

    /// How long a proved job took, as its client is told; `None` until it is proved.
    /// `total_ms` counts from when a gateway last put it on the queue (or when a worker first
    /// took it, for a job that came another way) to its recorded proof, on the database's
    /// clock; the stages are the proving worker's.
    pub async fn proof_times(&self, job_id: &str) -> Result<Option<ProofTimes>> {
        let row = self
            .client()
            .await?
            .query_opt(
                "SELECT stage_ms::text,
                        (extract(epoch FROM proved_at - coalesce(submitted_at, created_at))
                         * 1000)::bigint
                 FROM jobs WHERE job_id = $1 AND proved_at IS NOT NULL",
                &[&job_id],
            )
            .await
            .with_context(|| format!("ledger: the times of {job_id}"))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let stages: Option<String> = row.get(0);
        let stages = match stages {
            // Recorded by a worker that measured no stages.
            None => StageTimes::default(),
            Some(json) => serde_json::from_str(&json)
                .with_context(|| format!("ledger: the stage times of {job_id}: {json}"))?,
        };
        let elapsed: Option<i64> = row.get(1);
        Ok(Some(ProofTimes::new(
            u64::try_from(elapsed.unwrap_or(0)).unwrap_or(0),
            stages,
        )))
    }

    /// Cancel a job that has not ended. A worker that fetches it later does not prove it; one
    /// proving it now finishes, and the job is answered as cancelled all the same.
    pub async fn cancel(&self, job_id: &str) -> Result<Cancellation> {
        self.retrying(|| async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let Some(row) = tx
                .query_opt(
                    "SELECT status, coalesce(lease_until > now(), false)
                     FROM jobs WHERE job_id = $1 FOR UPDATE",
                    &[&job_id],
                )
                .await?
            else {
                tx.commit().await?;
                return Ok(Cancellation::Unknown);
            };
            let status: String = row.get(0);
            let leased: bool = row.get(1);
            let cancellation = match status.as_str() {
                "queued" | "running" => {
                    tx.execute(
                        "UPDATE jobs SET status = 'cancelled', cancelled_at = now(),
                                updated_at = now()
                         WHERE job_id = $1",
                        &[&job_id],
                    )
                    .await?;
                    Cancellation::Cancelled {
                        was_running: status == "running" && leased,
                    }
                }
                "cancelled" => Cancellation::AlreadyCancelled,
                _ => Cancellation::Ended { status },
            };
            tx.commit().await?;
            Ok(cancellation)
        })
        .await
        .with_context(|| format!("ledger: cancelling job {job_id}"))
    }

    /// Jobs per state.
    pub async fn totals(&self) -> Result<Totals> {
        let mut totals = Totals::default();
        for (status, n) in self.counts().await? {
            let n = n.max(0) as u64;
            match status.as_str() {
                "queued" => totals.queued += n,
                "running" => totals.running += n,
                "proved" | "published" => totals.proved += n,
                "failed" => totals.failed += n,
                "cancelled" => totals.cancelled += n,
                _ => {}
            }
        }
        Ok(totals)
    }
}
