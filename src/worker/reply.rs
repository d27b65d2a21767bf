//! Settling a job on the broker: the result to its reply queue, and for failures the dead-letter
//! queue or a retry delay queue; a job being proved elsewhere goes to the wait queue, one this
//! worker cannot prove back to the job queue, one of a size class it does not fetch to that
//! class's queue. Every publish is confirmed before the job is acked.
//!
//! Putting a job off is done by publishing a copy and acking the delivery, never by a nack
//! with requeue: a quorum queue counts every requeue against `x-delivery-limit`, so a job
//! whose proof outlasts a few polls of a second worker would be dead-lettered as poison. The
//! copies carry the count of unsettled deliveries over (`headers::for_copy`), so a job that
//! kills workers is still caught.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use lapin::message::Delivery;
use lapin::types::ShortString;
use lapin::BasicProperties;

use super::handle::Outcome;
use super::Worker;
use crate::broker::{self, headers, publish_confirmed, topology::JOB_KEY, PublishError};
use crate::classes::SizeClass;
use crate::schema::{self, result::ErrorInfo, ErrorKind, JobError, JobV1, ResultV1, Status};

/// What a result echoes of its job.
pub(super) struct Echo {
    pub job_id: String,
    pub kind: String,
    pub registered_proof: String,
    pub miner_id: u64,
    pub sector_number: u64,
    /// Set when the message is rejected for reusing this job id with another payload: `job_id`
    /// is then the message's own identity (`schema::result::rejected_duplicate_id`).
    pub reused_job_id: Option<String>,
    /// Whether the fields above came from a decoded job (else they are placeholders).
    decoded: bool,
}

impl Echo {
    pub fn of(job: &JobV1) -> Echo {
        Echo {
            job_id: job.job_id.clone(),
            kind: job.kind.as_str().to_string(),
            registered_proof: job.registered_proof.clone(),
            miner_id: job.miner_id,
            sector_number: job.sector_number,
            reused_job_id: None,
            decoded: true,
        }
    }

    /// For a message rejected as `duplicate_mismatch`: answered under its own identity, so
    /// that nothing reading results by job id takes the rejection for a result of the job
    /// whose id it reused (which is proved, or was, as if this message had never come).
    pub fn rejected_duplicate(self, digest: &[u8; 32]) -> Echo {
        Echo {
            job_id: schema::result::rejected_duplicate_id(&self.job_id, digest),
            reused_job_id: Some(self.job_id),
            ..self
        }
    }

    /// For a message that did not decode.
    pub fn unknown(job_id: String) -> Echo {
        Echo {
            job_id,
            kind: String::new(),
            registered_proof: String::new(),
            miner_id: 0,
            sector_number: 0,
            reused_job_id: None,
            decoded: false,
        }
    }

    /// Miner and sector, where the job decoded far enough to have them.
    fn sector_identity(&self) -> Option<(u64, u64)> {
        self.decoded.then_some((self.miner_id, self.sector_number))
    }

    fn failed(self, worker: &str, error: &JobError, attempts: u32) -> ResultV1 {
        ResultV1 {
            v: schema::VERSION,
            job_id: self.job_id,
            status: Status::Failed,
            proof: None,
            error: Some(ErrorInfo {
                kind: error.kind,
                message: error.message.clone(),
            }),
            reused_job_id: self.reused_job_id,
            kind: self.kind,
            registered_proof: self.registered_proof,
            miner_id: self.miner_id,
            sector_number: self.sector_number,
            worker: worker.to_string(),
            attempts,
            from_ledger: false,
            timings: vec![],
            timings_origin_ms: 0,
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Publish what the outcome calls for. `Ok` means the job may be acked.
pub(super) async fn settle(worker: &Worker, delivery: &Delivery, outcome: Outcome) -> Result<()> {
    match outcome {
        Outcome::Answer(result) => {
            let t = std::time::Instant::now();
            match publish_result(worker, delivery, &result).await {
                Ok(()) => {}
                Err(PublishErrorOr::Unroutable(e)) => {
                    // The proof stays in the ledger; a replay from the dead-letter queue with
                    // a working reply_to answers from it.
                    let err = JobError::new(ErrorKind::Unroutable, e.to_string());
                    let _ = worker
                        .ledger
                        .record_failure(&result.job_id, err.kind.as_str(), &err.message)
                        .await;
                    let identity = Some((result.miner_id, result.sector_number));
                    return dead_letter(
                        worker,
                        delivery,
                        &err,
                        result.attempts,
                        &result.job_id,
                        identity,
                    )
                    .await;
                }
                Err(PublishErrorOr::Other(e)) => return Err(e),
            }
            worker
                .metrics
                .observe_ms("publish", t.elapsed().as_millis() as u64);
            if worker.cfg.pipeline.fault.as_deref() == Some("kill-after-publish") {
                tracing::warn!(job_id = %result.job_id, "fault injection: SIGKILL between publish and ack");
                // SAFETY: kill(2) on our own pid has no memory-safety preconditions.
                unsafe {
                    libc::kill(libc::getpid(), libc::SIGKILL);
                }
            }
            worker.ledger.mark_published(&result.job_id).await?;
            Ok(())
        }
        Outcome::Failed(error, echo, retries) => {
            if !error.kind.is_permanent() {
                if retries < worker.cfg.retry.max_retries {
                    return retry(worker, delivery, &error, retries + 1).await;
                }
                let exhausted = JobError::new(
                    ErrorKind::RetriesExhausted,
                    format!("{} retries failed; last error: {}", retries, error.message),
                );
                let _ = worker
                    .ledger
                    .record_failure(&echo.job_id, exhausted.kind.as_str(), &exhausted.message)
                    .await;
                return fail_and_dead_letter(worker, delivery, exhausted, echo, retries).await;
            }
            fail_and_dead_letter(worker, delivery, error, echo, retries).await
        }
        Outcome::Busy { job_id, holder } => defer(worker, delivery, &job_id, &holder).await,
        Outcome::HandBack { job_id } => hand_back(worker, delivery, &job_id).await,
        Outcome::Reroute { job_id, class } => reroute(worker, delivery, &job_id, class).await,
        Outcome::Poison { job_id, returns } => {
            let error = JobError::new(
                ErrorKind::Transient,
                format!(
                    "delivered {returns} times without being settled (workers died or lost their \
                     channel while holding it), over the delivery limit of {}",
                    worker.cfg.broker.delivery_limit
                ),
            );
            let retries = headers::attempts(&delivery.properties);
            let identity = schema::job::decode_message(&delivery.data, &worker.cfg.limits)
                .ok()
                .map(|job| (job.miner_id, job.sector_number));
            dead_letter_as(
                worker,
                delivery,
                headers::POISON_REASON,
                &error,
                retries,
                &job_id,
                identity,
            )
            .await
        }
    }
}

/// Put off a job another worker (or task) is proving: a copy waits `lease.busy_delay_ms` in the
/// wait queue, then returns to the job queue, where it is answered from the ledger once the
/// proof is recorded, or taken over if the lease lapsed. No retry is counted.
async fn defer(worker: &Worker, delivery: &Delivery, job_id: &str, holder: &str) -> Result<()> {
    let broker = worker.broker().await?;
    let delay = worker.cfg.lease.busy_delay_ms;
    let props = delivery
        .properties
        .clone()
        .with_headers(headers::for_copy(&delivery.properties, vec![]))
        .with_expiration(ShortString::from(delay.to_string()));
    let queue = broker.names.wait_queue();
    publish_confirmed(&broker.publish, "", &queue, &delivery.data, props)
        .await
        .with_context(|| format!("putting job {job_id} off in {queue}"))?;
    worker.metrics.jobs.with_label_values(&["deferred"]).inc();
    tracing::info!(
        job_id,
        holder,
        delay_ms = delay,
        "job put off while it is being proved elsewhere"
    );
    Ok(())
}

/// Give a job back to the job queue for another worker, with its retry count unchanged.
async fn hand_back(worker: &Worker, delivery: &Delivery, job_id: &str) -> Result<()> {
    let broker = worker.broker().await?;
    let props = delivery
        .properties
        .clone()
        .with_headers(headers::for_copy(&delivery.properties, vec![]));
    publish_confirmed(
        &broker.publish,
        &broker.names.jobs_exchange(),
        JOB_KEY,
        &delivery.data,
        props,
    )
    .await
    .with_context(|| format!("handing job {job_id} back to the job queue"))?;
    worker
        .metrics
        .jobs
        .with_label_values(&["handed_back"])
        .inc();
    tracing::warn!(
        job_id,
        "job handed back to the queue: this worker's proving backend is broken"
    );
    Ok(())
}

/// Send a job to its size class's queue, for the workers that fetch that class, with its
/// retry count unchanged. Until one runs, it waits there (`c2q status` says so).
async fn reroute(
    worker: &Worker,
    delivery: &Delivery,
    job_id: &str,
    class: SizeClass,
) -> Result<()> {
    let broker = worker.broker().await?;
    let props = delivery
        .properties
        .clone()
        .with_headers(headers::for_copy(&delivery.properties, vec![]));
    let key = class.key();
    publish_confirmed(
        &broker.publish,
        &broker.names.jobs_exchange(),
        &key,
        &delivery.data,
        props,
    )
    .await
    .with_context(|| format!("routing job {job_id} to size class {key}"))?;
    worker.metrics.jobs.with_label_values(&["rerouted"]).inc();
    tracing::info!(
        job_id,
        class = %key,
        "job of a size class this worker does not fetch: sent to that class's queue"
    );
    Ok(())
}

async fn fail_and_dead_letter(
    worker: &Worker,
    delivery: &Delivery,
    error: JobError,
    echo: Echo,
    retries: u32,
) -> Result<()> {
    let job_id = echo.job_id.clone();
    let identity = echo.sector_identity();
    let result = echo.failed(&worker.name, &error, retries);
    match publish_result(worker, delivery, &result).await {
        Ok(()) | Err(PublishErrorOr::Unroutable(_)) => {}
        Err(PublishErrorOr::Other(e)) => return Err(e),
    }
    worker.metrics.jobs.with_label_values(&["failed"]).inc();
    dead_letter(worker, delivery, &error, retries, &job_id, identity).await
}

enum PublishErrorOr {
    Unroutable(PublishError),
    Other(anyhow::Error),
}

async fn publish_result(
    worker: &Worker,
    delivery: &Delivery,
    result: &ResultV1,
) -> Result<(), PublishErrorOr> {
    let broker = worker.broker().await.map_err(PublishErrorOr::Other)?;
    let reply_to = delivery
        .properties
        .reply_to()
        .as_ref()
        .map(|s| s.to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| broker.names.results());
    let payload = result
        .encode()
        .context("encoding the result")
        .map_err(PublishErrorOr::Other)?;
    let props = BasicProperties::default()
        .with_content_type(schema::CONTENT_TYPE.into())
        .with_delivery_mode(2)
        .with_message_id(ShortString::from(result.job_id.clone()))
        .with_correlation_id(ShortString::from(result.job_id.clone()))
        .with_timestamp((now_ms() / 1000) as u64);
    match publish_confirmed(&broker.publish, "", &reply_to, &payload, props).await {
        Ok(()) => Ok(()),
        Err(e @ PublishError::Unroutable { .. }) => Err(PublishErrorOr::Unroutable(e)),
        Err(e) => Err(PublishErrorOr::Other(
            anyhow::Error::new(e).context(format!("publishing the result to {reply_to}")),
        )),
    }
}

/// Copy the job to the dead-letter exchange with the reason in its headers. `identity`: the
/// job's miner and sector, where it decoded far enough to have them.
async fn dead_letter(
    worker: &Worker,
    delivery: &Delivery,
    error: &JobError,
    retries: u32,
    job_id: &str,
    identity: Option<(u64, u64)>,
) -> Result<()> {
    dead_letter_as(
        worker,
        delivery,
        error.kind.as_str(),
        error,
        retries,
        job_id,
        identity,
    )
    .await
}

/// `dead_letter` with a reason other than the error's kind.
async fn dead_letter_as(
    worker: &Worker,
    delivery: &Delivery,
    reason: &str,
    error: &JobError,
    retries: u32,
    job_id: &str,
    identity: Option<(u64, u64)>,
) -> Result<()> {
    let broker = worker.broker().await?;
    let props = delivery.properties.clone();
    let mut set = vec![
        (headers::REASON, headers::string(reason)),
        (headers::ERROR, headers::string(&error.message)),
        (headers::WORKER, headers::string(&worker.name)),
        (headers::ATTEMPTS, headers::int(i64::from(retries))),
        (headers::DEAD_AT, headers::int(now_ms())),
    ];
    // Absent, not a made-up number, for a message that never decoded into a job.
    if let Some((miner, sector)) = identity {
        set.push((headers::MINER, headers::uint(miner)));
        set.push((headers::SECTOR, headers::uint(sector)));
    }
    let hdrs = headers::with(props.headers().as_ref(), set, &[]);
    let mut props = props.with_headers(hdrs);
    if props.message_id().is_none() && !job_id.is_empty() {
        props = props.with_message_id(job_id.into());
    }
    publish_confirmed(
        &broker.publish,
        &broker.names.dlx(),
        "",
        &delivery.data,
        props,
    )
    .await
    .context("dead-lettering the job")?;
    worker
        .metrics
        .jobs
        .with_label_values(&["dead_lettered"])
        .inc();
    tracing::warn!(job_id, reason, error = %error.message, "job dead-lettered");
    Ok(())
}

/// Send the job to the delay queue of retry `attempt`; it comes back to the job queue when its
/// per-message TTL expires.
async fn retry(worker: &Worker, delivery: &Delivery, error: &JobError, attempt: u32) -> Result<()> {
    let broker = worker.broker().await?;
    let delay = broker::retry::delay(&worker.cfg.retry, attempt, &mut rand::thread_rng());
    let hdrs = headers::for_copy(
        &delivery.properties,
        vec![
            (headers::ATTEMPTS, headers::int(i64::from(attempt))),
            (headers::ERROR, headers::string(&error.message)),
        ],
    );
    let props = delivery
        .properties
        .clone()
        .with_headers(hdrs)
        .with_expiration(ShortString::from(delay.as_millis().to_string()));
    let queue = broker.names.retry_queue(attempt);
    publish_confirmed(&broker.publish, "", &queue, &delivery.data, props)
        .await
        .with_context(|| format!("sending the job to {queue}"))?;
    worker.metrics.retries.inc();
    worker.metrics.jobs.with_label_values(&["retried"]).inc();
    tracing::warn!(error = %error, attempt, delay_ms = delay.as_millis() as u64, "transient failure: retrying later");
    Ok(())
}
