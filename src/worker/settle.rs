//! Settling a job on the broker: carrying out its [`Disposition`] (`disposition` decides it) —
//! the result to its reply queue, and for failures the dead-letter queue or a retry delay
//! queue; a job being proved elsewhere goes to the wait queue, one this worker cannot prove
//! back to the job queue, one of a size class it does not fetch to that class's queue. Every
//! publish is confirmed before the caller acks the job. Failures the ledger is to know of are
//! recorded here, best effort.
//!
//! Putting a job off is done by publishing a copy and acking the delivery, never by a nack
//! with requeue: a quorum queue counts every requeue against `x-delivery-limit`, so a job
//! whose proof outlasts a few polls of a second worker would be dead-lettered as poison. The
//! copies carry the count of unsettled deliveries over (`headers::for_copy`), so a job that
//! kills workers is still caught.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use lapin::message::Delivery;
use lapin::types::ShortString;
use lapin::BasicProperties;

use super::delivery::DeliveryFacts;
use super::disposition::{self, DeadLettering, Disposition};
use super::Worker;
use crate::broker::dead_letter::DeadLetterRecord;
use crate::broker::{headers, publish_confirmed, topology::JOB_KEY, PublishError};
use crate::classes::SizeClass;
use crate::schema::{self, JobError, ResultV1};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Carry out `disposition` on the broker, every publish confirmed. `Ok` means the job may be
/// acked.
pub(super) async fn settle(
    worker: &Worker,
    delivery: &Delivery,
    facts: &DeliveryFacts,
    disposition: Disposition,
) -> Result<()> {
    let job_id = facts.job_id.as_str();
    match disposition {
        Disposition::Publish { result } => {
            let t = std::time::Instant::now();
            match publish_result(worker, delivery, &result).await {
                Ok(()) => {}
                Err(PublishErrorOr::Unroutable(e)) => {
                    let unroutable = disposition::unroutable(&result, e.to_string());
                    return dead_letter(worker, delivery, job_id, unroutable).await;
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
        Disposition::Retry {
            attempt,
            delay,
            error,
        } => retry(worker, delivery, &error, attempt, delay).await,
        Disposition::DeadLetter(d) => dead_letter(worker, delivery, job_id, d).await,
        Disposition::Defer { delay_ms, holder } => {
            defer(worker, delivery, job_id, &holder, delay_ms).await
        }
        Disposition::HandBack => hand_back(worker, delivery, job_id).await,
        Disposition::Reroute { class } => reroute(worker, delivery, job_id, class).await,
    }
}

/// Put off a job another worker (or task) is proving: a copy waits `lease.busy_delay_ms` in the
/// wait queue, then returns to the job queue, where it is answered from the ledger once the
/// proof is recorded, or taken over if the lease lapsed. No retry is counted.
async fn defer(
    worker: &Worker,
    delivery: &Delivery,
    job_id: &str,
    holder: &str,
    delay: u64,
) -> Result<()> {
    let broker = worker.broker().await?;
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

/// Dead-letter the job: the failure recorded in the ledger where called for (best effort: the
/// dead letter is the record of last resort), the failed result published where there is one
/// (a result no queue takes is no reason not to dead-letter), then the job copied to the
/// dead-letter exchange with a [`DeadLetterRecord`] in its headers.
async fn dead_letter(
    worker: &Worker,
    delivery: &Delivery,
    job_id: &str,
    d: DeadLettering,
) -> Result<()> {
    if d.record_failure {
        let _ = worker
            .ledger
            .record_failure(job_id, d.error.kind.as_str(), &d.error.message)
            .await;
    }
    if let Some(result) = &d.result {
        match publish_result(worker, delivery, result).await {
            Ok(()) | Err(PublishErrorOr::Unroutable(_)) => {}
            Err(PublishErrorOr::Other(e)) => return Err(e),
        }
        worker.metrics.jobs.with_label_values(&["failed"]).inc();
    }
    let broker = worker.broker().await?;
    let record = DeadLetterRecord {
        reason: d.reason.to_string(),
        error: d.error.message.clone(),
        worker: Some(worker.name.clone()),
        attempts: i64::from(d.attempts),
        dead_at_ms: Some(now_ms()),
        identity: d.identity.map(|i| (i.miner, i.sector)),
    };
    let props = delivery.properties.clone();
    let hdrs = record.to_headers(props.headers().as_ref());
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
    tracing::warn!(job_id, reason = d.reason, error = %d.error.message, "job dead-lettered");
    Ok(())
}

/// Send the job to the delay queue of retry `attempt`; it comes back to the job queue when its
/// per-message TTL expires.
async fn retry(
    worker: &Worker,
    delivery: &Delivery,
    error: &JobError,
    attempt: u32,
    delay: Duration,
) -> Result<()> {
    let broker = worker.broker().await?;
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
