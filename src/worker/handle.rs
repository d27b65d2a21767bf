//! One delivery, from fetch to ack.
//!
//! Order of effects, which is what makes worker death at any point safe:
//! claim in the ledger (taking the job's lease) → prove, renewing the lease → record the proof
//! (ending the lease) → publish the result (confirmed) → mark published → ack. A redelivery
//! after any of these either waits (the lease is live: the job is being proved elsewhere),
//! proves again (nothing was recorded and the lease lapsed or was given up) or is answered
//! from the ledger (the proof was).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicNackOptions};
use tokio::sync::oneshot;

use super::delivery::{DeliveryFacts, JobFields};
use super::disposition::{self, Outcome, Policy, Proved};
use super::health::Verdict;
use super::lease::LeaseKeeper;
use super::settle;
use super::{Fetched, NotBegun, Worker};
use crate::broker::{headers, Broker};
use crate::classes::SizeClass;
use crate::gate::{JobHold, PoolShare, Reservation};
use crate::kinds;
use crate::ledger::{Claim, JobIdentity};
use crate::pipeline::{PartitionDone, Stage, StageError, Submission};
use crate::schema::{self, DecodedJob, ErrorKind, JobError, PartitionTiming};
use crate::telemetry::Metrics;

/// The longest an ack or a nack may take. Neither waits for an answer from the broker (AMQP has
/// none for them): they only have to be handed to the connection, so this is generous. It
/// bounds the case where the connection dies between the check of its channel and the ack.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);

/// A delivery counted in `c2q_jobs_in_flight` from its fetch until this is dropped, on every
/// way out of `handle` (a panic included), so no path can leave the gauge up.
struct InFlight(Arc<Metrics>);

impl InFlight {
    fn start(metrics: &Arc<Metrics>) -> InFlight {
        metrics.jobs_in_flight.inc();
        InFlight(metrics.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.jobs_in_flight.dec();
    }
}

/// Ack the delivery once its job is settled, or hand it back (nack with requeue) when it could
/// not be, on the channel it came from.
///
/// Not when that channel is gone (a broker restart, a consumer timeout): the broker took the
/// delivery back when the channel closed and delivers it again, and the ledger answers it. An
/// ack on a dead connection's delivery would never complete: lapin hands it to the connection's
/// I/O loop, which has stopped, and its promise is never resolved. Waiting on it kept the task,
/// and with it the drain on SIGTERM, waiting forever.
async fn finish_delivery(fetched_on: &Broker, delivery: &Delivery, settled: anyhow::Result<()>) {
    let channel_alive = fetched_on.fetch.status().connected();
    match settled {
        Ok(()) if !channel_alive => tracing::warn!(
            "the job's channel closed before its ack (the broker restarted or timed the \
             delivery out): the broker delivers it again and the ledger answers it"
        ),
        Ok(()) => {
            if let Err(e) = bounded(delivery.acker.ack(BasicAckOptions::default())).await {
                tracing::warn!(
                    error = format!("{e:#}"),
                    "ack failed; the job will be redelivered and answered from the ledger"
                );
            }
        }
        Err(e) => {
            tracing::error!(
                error = format!("{e:#}"),
                "could not settle the job; handing it back"
            );
            if !channel_alive {
                return;
            }
            let requeue = BasicNackOptions {
                requeue: true,
                ..Default::default()
            };
            if let Err(e) = bounded(delivery.acker.nack(requeue)).await {
                tracing::warn!(
                    error = format!("{e:#}"),
                    "hand-back failed; the broker returns the job when the channel closes"
                );
            }
        }
    }
}

/// An ack or nack, given up after [`SETTLE_TIMEOUT`].
async fn bounded(
    settle: impl std::future::Future<Output = lapin::Result<bool>>,
) -> anyhow::Result<()> {
    match tokio::time::timeout(SETTLE_TIMEOUT, settle).await {
        Ok(done) => crate::broker::settled(done),
        Err(_) => Err(anyhow::anyhow!(
            "not handed to the connection within {SETTLE_TIMEOUT:?} (it is probably gone)"
        )),
    }
}

/// What a job holds from its fetch while it is handled (see [`Fetched`]).
struct Taken {
    reservation: Reservation,
    share: Option<PoolShare>,
    /// Dropped when the job is settled: until then it counts as in flight and its parameters
    /// stay loaded.
    hold: JobHold,
    class: Option<SizeClass>,
}

impl Worker {
    pub(super) async fn handle(
        self: Arc<Self>,
        fetched_on: Arc<Broker>,
        fetched: Fetched,
        not_begun: NotBegun,
    ) {
        let _in_flight = InFlight::start(&self.metrics);
        let Fetched {
            delivery,
            reservation,
            share,
            hold,
            class,
        } = fetched;
        let taken = Taken {
            reservation,
            share,
            hold,
            class,
        };
        // Copies the worker published itself (retries, put-off or handed-back deliveries)
        // keep the job's first timestamp: counting them again would report time spent in a
        // delay queue or being proved elsewhere as time waiting for a worker.
        let is_copy = headers::get(&delivery.properties, headers::RETURNS).is_some();
        if let (Some(ts), false) = (delivery.properties.timestamp(), is_copy) {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            self.metrics
                .queue_wait_seconds
                .observe(now.saturating_sub(*ts) as f64);
        }
        let started = Instant::now();
        let mut facts = DeliveryFacts::of(&delivery.properties);
        let outcome = self.process(&delivery, &mut facts, taken, not_begun).await;
        let policy = Policy {
            worker: &self.name,
            retry: &self.cfg.retry,
            busy_delay_ms: self.cfg.lease.busy_delay_ms,
            delivery_limit: self.cfg.broker.delivery_limit,
        };
        let disposition = disposition::dispose(outcome, &facts, &policy, &mut rand::thread_rng());
        let settled = settle::settle(&self, &delivery, &facts, disposition).await;
        finish_delivery(&fetched_on, &delivery, settled).await;
        self.metrics
            .observe_ms("total", started.elapsed().as_millis() as u64);
        self.metrics
            .gate_reserved_bytes
            .set(self.gate.used() as i64);
        self.export_kept();
    }

    /// What the delivery comes to; `facts` is completed on the way.
    async fn process(
        &self,
        delivery: &Delivery,
        facts: &mut DeliveryFacts,
        taken: Taken,
        not_begun: NotBegun,
    ) -> Outcome {
        // Decoded once: the poison check below wants the job's miner and sector for its dead
        // letter, and everything after it the job.
        let decoded = schema::job::decode_message(&delivery.data, &self.cfg.limits);
        // The broker enforces the delivery limit on each copy of a job; this enforces it on
        // the sum over the copies the worker itself published (see `headers::RETURNS`).
        if facts.returns > self.cfg.broker.delivery_limit {
            facts.job = decoded.as_ref().ok().map(JobFields::of);
            return Outcome::Poison;
        }
        if self.backend_health.is_broken() {
            return Outcome::HandBack;
        }
        let decoded = match decoded {
            Ok(job) => job,
            Err(e) => {
                if let Some(peeked) = schema::job::peek_job_id(&delivery.data) {
                    facts.job_id = peeked;
                }
                tracing::warn!(job_id = facts.job_id, error = %e, "rejected job message");
                return Outcome::Failed(e);
            }
        };
        // From here on the result and the dead letter echo the job's own fields. The ledger
        // is not told of a job refused before its claim: its id may be another job's.
        let message_id = std::mem::take(&mut facts.job_id);
        facts.decoded(&decoded);
        let message_id = (!message_id.is_empty()).then_some(message_id.as_str());
        if let Err(e) = schema::job::check_message_id(&decoded, message_id) {
            tracing::warn!(job_id = %facts.job_id, error = %e, "rejected job message");
            return Outcome::Failed(e);
        }
        // Before the payload is decompressed: a job this worker cannot hold goes to the queue
        // of the workers that can. One no class holds is refused by validation below.
        // So does one that came from another class's queue: its memory was reserved for
        // that class.
        if let Some(class) = SizeClass::of(&decoded) {
            let from_other_queue = taken.class.is_some_and(|queue| queue != class);
            if !self.classes.contains(&class) || from_other_queue {
                return Outcome::Reroute { class };
            }
        }
        let decoded = match schema::job::validate(decoded, &self.cfg.limits) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(job_id = %facts.job_id, error = %e, "rejected job message");
                return Outcome::Failed(e);
            }
        };
        let job = &decoded.job;
        // One task per job id in this process. Another delivery of a job this process is
        // proving (a duplicate message, or a redelivery after the broker closed the channel
        // under the first) is put off like one whose lease another worker holds, rather than
        // waiting here holding a memory reservation for the whole proof.
        let lock = self.job_lock(&job.job_id);
        let Ok(_proving) = lock.try_lock_owned() else {
            return Outcome::Busy {
                holder: format!("{} (this worker)", self.name),
            };
        };
        let identity = JobIdentity {
            job_id: job.job_id.clone(),
            kind: job.kind.as_str().to_string(),
            registered_proof: job.registered_proof.clone(),
            miner_id: job.miner_id,
            sector_number: job.sector_number,
            digest: decoded.digest,
        };
        let claim = match self.ledger.claim(&identity, &self.holder).await {
            Ok(c) => c,
            Err(e) => return Outcome::Failed(JobError::transient(&e)),
        };
        let attempts = match claim {
            Claim::Mismatch => {
                let e = JobError::new(
                    ErrorKind::DuplicateMismatch,
                    format!(
                        "job id {} already used for a different payload; that job is unaffected",
                        job.job_id
                    ),
                );
                facts.rejected_duplicate(&decoded.digest);
                return Outcome::Failed(e);
            }
            Claim::Proved { proof, attempts } => {
                // Whether the broker redelivered it (a channel closed before its ack) or it is
                // another message (a resubmission, a copy this worker published), for anyone
                // tracing a result seen twice.
                tracing::info!(job_id = %job.job_id, redelivered = delivery.redelivered,
                    returns = facts.returns, "already proved: answering from the ledger");
                self.metrics.jobs.with_label_values(&["from_ledger"]).inc();
                return Outcome::Answer(Proved::from_ledger(proof, attempts));
            }
            Claim::Busy { worker, lease_left } => {
                tracing::info!(job_id = %job.job_id, holder = %worker,
                    lease_left_ms = lease_left.as_millis() as u64,
                    "job is being proved by another worker (its lease is live): not proving it here");
                return Outcome::Busy { holder: worker };
            }
            Claim::Cancelled => {
                tracing::info!(job_id = %job.job_id, "cancelled: not proving it");
                self.metrics.jobs.with_label_values(&["cancelled"]).inc();
                return Outcome::Cancelled;
            }
            Claim::Prove { attempts } => attempts,
        };
        // Too late to be of use: answered at once, never proved late (a proof the ledger
        // already holds was answered above, whatever the deadline).
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        if let Some(late_ms) = job.overdue_ms(now_ms) {
            tracing::warn!(job_id = %job.job_id, late_ms, "deadline passed: not proving it");
            let e = JobError::new(
                ErrorKind::DeadlineExceeded,
                format!(
                    "the job's deadline passed {late_ms} ms before a worker could begin proving it"
                ),
            );
            return Outcome::Failed(e);
        }
        tracing::info!(job_id = %job.job_id, kind = job.kind.as_str(), miner = job.miner_id,
            sector = job.sector_number, attempts, "proving");
        let lease = LeaseKeeper::start(
            self.ledger.clone(),
            &job.job_id,
            self.holder.clone(),
            Duration::from_secs(self.cfg.lease.renew_s),
        );
        let outcome = self
            .prove(&decoded, facts, attempts, taken, not_begun)
            .await;
        lease.release().await;
        outcome
    }

    /// Build, prove, verify and record a job this worker holds the lease of.
    async fn prove(
        &self,
        decoded: &DecodedJob,
        facts: &DeliveryFacts,
        attempts: u32,
        taken: Taken,
        not_begun: NotBegun,
    ) -> Outcome {
        let Taken {
            reservation,
            share,
            mut hold,
            ..
        } = taken;
        let job = &decoded.job;
        let limits = self.cfg.limits.clone();
        let build_input = decoded.clone();
        let in_flight = self.cfg.pipeline.partitions_in_flight();
        let built =
            tokio::task::spawn_blocking(move || kinds::build(&build_input, &limits, in_flight))
                .await;
        let built = match built {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => return self.fail(e, facts).await,
            Err(e) => {
                let e = JobError::new(ErrorKind::MalformedC1, format!("job set-up panicked: {e}"));
                return self.fail(e, facts).await;
            }
        };

        // Shrink the fetch-time reservation to this job's estimate; the progress callback
        // shrinks it further as partitions finish, keeping the SRS part to the end. A normal
        // job's partitions are counted in the partition pool instead, beside the other jobs'.
        let est = built.estimate.clone();
        // Its parameters stay loaded while the job is held (a job of the unsorted queue
        // names them only now).
        hold.uses(&est.srs_key);
        let srs_part = self.kept.srs_needed(&est);
        match &share {
            Some(share) => {
                reservation.shrink_to(srs_part);
                share.update(est.per_partition, est.partitions);
            }
            None => reservation.shrink_to(srs_part + est.work(est.partitions)),
        }
        self.metrics
            .gate_reserved_bytes
            .set(self.gate.used() as i64);
        let reservation = Arc::new(reservation);
        let share = share.map(Arc::new);
        let progress = {
            let r = reservation.clone();
            let share = share.clone();
            let est = est.clone();
            // A partition whose A, B, C the GPU made shows where this job's are made: from
            // then on the reservation follows the GPU figure. It never grows back: a later
            // partition falls back to the CPU only if another circuit's points took the GPU's
            // room in between, which the pipeline logs.
            Box::new(move |done: PartitionDone| {
                let remaining = done.remaining as u64;
                let on_gpu = done.products_on_gpu;
                match &share {
                    Some(share) => share.update(
                        match on_gpu {
                            true => est.per_partition_on_gpu,
                            false => est.per_partition,
                        },
                        remaining,
                    ),
                    None => r.shrink_to(
                        srs_part
                            + match on_gpu {
                                true => est.work_on_gpu(remaining),
                                false => est.work(remaining),
                            },
                    ),
                }
            })
        };

        let (done_tx, done_rx) = oneshot::channel();
        let submission = Submission {
            id: job.job_id.clone(),
            job: built.job,
            priority: built.priority,
            progress,
            done: done_tx,
        };
        // The hand-off blocks while the pipeline is full: keep that off the runtime threads.
        let pipeline = self.pipeline.clone();
        let submitted = tokio::task::spawn_blocking(move || pipeline.submit(submission))
            .await
            .map_err(anyhow::Error::from)
            .and_then(|r| r);
        // Begun: the pipeline holds it (or refused it); the next job may be fetched.
        drop(not_begun);
        if let Err(e) = submitted {
            return self.fail(JobError::transient(&e), facts).await;
        }
        let proved = match done_rx.await {
            Ok(Ok(p)) => p,
            Ok(Err(stage_err)) if stage_err.stage == Stage::Start => {
                return self.backend_failed(stage_err, facts).await;
            }
            Ok(Err(stage_err)) => {
                let kind = kinds::failure_kind(stage_err.stage, job.kind);
                return self
                    .fail(JobError::new(kind, stage_err.to_string()), facts)
                    .await;
            }
            Err(_) => {
                let e = JobError::new(ErrorKind::Transient, "pipeline dropped the job");
                return self.fail(e, facts).await;
            }
        };
        self.backend_health.succeeded();
        let srs_reservation = reservation.split(srs_part);
        self.kept.keep(&est.srs_key, srs_reservation);
        drop(reservation);
        drop(share);
        self.export_kept();

        self.observe_timings(&proved.timings, proved.verify_ms);
        let timings_json = serde_json::to_string(&proved.timings).unwrap_or_else(|_| "[]".into());
        let recorded = match self
            .ledger
            .record_proof(&job.job_id, &proved.proof, &timings_json, &proved.stages)
            .await
        {
            Ok(p) => p,
            Err(e) => return Outcome::Failed(JobError::transient(&e)),
        };
        self.metrics.jobs.with_label_values(&["proved"]).inc();
        tracing::info!(job_id = %job.job_id, partitions = proved.timings.len(),
            verify_ms = proved.verify_ms, "proof verified and recorded");
        if recorded.cancelled {
            tracing::info!(job_id = %job.job_id,
                "the job was cancelled while it was proved: its proof is not published");
            self.metrics.jobs.with_label_values(&["cancelled"]).inc();
            return Outcome::Cancelled;
        }
        let recorded = recorded.proof;
        if recorded != proved.proof {
            // Only after a lapsed lease (see `lease`): publish what the ledger holds, so that
            // every result of this job carries the same bytes.
            tracing::warn!(job_id = %job.job_id, "another worker recorded a proof first; publishing that one");
            return Outcome::Answer(Proved::from_ledger(recorded, attempts));
        }
        Outcome::Answer(Proved {
            proof: proved.proof,
            attempts,
            from_ledger: false,
            timings: proved.timings,
            timings_origin_ms: proved.origin_unix_ms,
            stages: proved.stages,
        })
    }

    /// A failed proving start: retried like any transient failure while the backend counts
    /// as healthy; once it does not, the job is handed back uncharged.
    async fn backend_failed(&self, e: StageError, facts: &DeliveryFacts) -> Outcome {
        self.metrics.backend_failures.inc();
        // The pipeline may just have taken a failing GPU out of service (it says which in the
        // log); the worker goes on with the others.
        let out = self.pipeline.backends_out_of_service();
        self.metrics.backends_out_of_service.set(out.len() as i64);
        match self.backend_health.failed() {
            Verdict::StillHealthy => {
                self.fail(JobError::new(ErrorKind::Transient, e.to_string()), facts)
                    .await
            }
            Verdict::JustBroke { failures } => {
                let why = format!(
                    "{failures} consecutive proving starts failed on backend {}; last error: {:#}",
                    self.backend_name, e.error
                );
                tracing::error!(
                    reason = %why,
                    "the proving backend is broken: this worker takes no more jobs and hands \
                     back the ones it holds (their retry budgets untouched). Check the GPU \
                     (nvidia-smi, kernel log for Xid errors), then restart the worker"
                );
                *self
                    .health
                    .backend_broken
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = Some(why);
                self.metrics.backend_healthy.set(0);
                Outcome::HandBack
            }
            Verdict::Broken => Outcome::HandBack,
        }
    }

    fn job_lock(&self, job_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.job_locks.lock().unwrap_or_else(|p| p.into_inner());
        // Forget locks nobody holds or waits for.
        locks.retain(|_, l| Arc::strong_count(l) > 1);
        locks.entry(job_id.to_string()).or_default().clone()
    }

    /// Record a failure in the ledger (best effort: the dead-letter queue is the record of
    /// last resort) and turn it into an outcome.
    async fn fail(&self, e: JobError, facts: &DeliveryFacts) -> Outcome {
        if e.kind.is_permanent() {
            if let Err(le) = self
                .ledger
                .record_failure(&facts.job_id, e.kind.as_str(), &e.message)
                .await
            {
                tracing::warn!(error = format!("{le:#}"), "could not record the failure");
            }
        }
        tracing::warn!(job_id = %facts.job_id, error = %e, "job failed");
        Outcome::Failed(e)
    }

    fn observe_timings(&self, timings: &[PartitionTiming], verify_ms: u64) {
        for t in timings {
            self.metrics
                .observe_ms("synthesis", t.synth_end_ms - t.synth_start_ms);
            self.metrics
                .observe_ms("start", t.start_end_ms - t.start_start_ms);
            self.metrics
                .observe_ms("finish", t.finish_end_ms - t.finish_start_ms);
        }
        self.metrics.observe_ms("verify", verify_ms);
    }
}
