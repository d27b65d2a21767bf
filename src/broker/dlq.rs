//! Operating on the dead-letter queue. Browsing fetches every message without acking and then
//! closes the channel, which returns them all in order; that is why the DLQ is a classic queue
//! (no delivery limit to burn).

use anyhow::{bail, Context, Result};
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicGetOptions, QueuePurgeOptions};

use super::{headers, publish_confirmed, topology::JOB_KEY, Broker};
use crate::cli_queue::{DeadLetter, DlqCommand};
use crate::schema::job::{decode_message, validate};
use crate::schema::Limits;

/// Headers that describe a past life of the message and must not follow it back to the queue.
const DROP_ON_REPLAY: &[&str] = &[
    headers::ATTEMPTS,
    headers::REASON,
    headers::ERROR,
    headers::WORKER,
    headers::MINER,
    headers::SECTOR,
    headers::DEAD_AT,
    headers::FIRST_DEATH_REASON,
    headers::DELIVERY_COUNT,
    headers::RETURNS,
    "x-death",
    "x-first-death-exchange",
    "x-first-death-queue",
    "x-last-death-reason",
    "x-last-death-exchange",
    "x-last-death-queue",
];

/// `limits`: the configuration's, for decoding the dead-lettered jobs as the worker would.
pub async fn run(broker: &Broker, command: &DlqCommand, limits: &Limits) -> Result<()> {
    let dlq = broker.names.dlq();
    if let DlqCommand::Purge = command {
        let n = broker
            .publish
            .queue_purge(dlq.as_str().into(), QueuePurgeOptions::default())
            .await
            .context("purging the dead-letter queue")?;
        println!("purged {n} dead-lettered jobs");
        return Ok(());
    }
    // A channel of its own: closing it hands back everything not acked.
    let ch = broker
        .conn
        .create_channel()
        .await
        .context("opening a channel")?;
    let mut held: Vec<Delivery> = Vec::new();
    while let Some(m) = ch
        .basic_get(dlq.as_str().into(), BasicGetOptions { no_ack: false })
        .await
        .context("reading the dead-letter queue")?
    {
        held.push(m.delivery);
    }
    let result = act(broker, &held, command, limits).await;
    let _ = ch.close(200, "browsed".into()).await;
    result
}

async fn act(
    broker: &Broker,
    held: &[Delivery],
    command: &DlqCommand,
    limits: &Limits,
) -> Result<()> {
    let summary = |d: &Delivery| DeadLetter::of(&d.properties, &d.data, limits);
    let or_dash = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    match command {
        DlqCommand::List => {
            println!(
                "{:<12} {:<40} {:<22} {:>8} {:>20} {:>20}  error",
                "address", "job_id", "reason", "attempts", "miner", "sector"
            );
            for d in held {
                let s = summary(d);
                let error: String = s.error.chars().take(80).collect();
                let job_id = if s.job_id.is_empty() { "-" } else { &s.job_id };
                println!(
                    "{:<12} {job_id:<40} {:<22} {:>8} {:>20} {:>20}  {error}",
                    s.address,
                    s.reason,
                    s.attempts,
                    or_dash(s.miner),
                    or_dash(s.sector)
                );
            }
            println!("{} dead-lettered", held.len());
        }
        DlqCommand::Show { job_id: selector } => {
            let d = held
                .iter()
                .find(|d| summary(d).is(selector))
                .with_context(|| format!("no dead-lettered job with id or address {selector:?}"))?;
            let s = summary(d);
            let described = match decode_message(&d.data, limits) {
                Ok(job) => {
                    let mut described = serde_json::json!({
                        "job_id": job.job_id,
                        "kind": job.kind.as_str(),
                        "registered_proof": job.registered_proof,
                        "miner_id": job.miner_id,
                        "sector_number": job.sector_number,
                    });
                    match validate(job, limits) {
                        Ok(valid) => described["c1_bytes"] = valid.c1.len().into(),
                        Err(e) => described["invalid"] = e.to_string().into(),
                    }
                    described
                }
                Err(e) => serde_json::json!({ "undecodable": e.to_string() }),
            };
            let out = serde_json::json!({
                "address": s.address, "job_id": s.job_id, "reason": s.reason,
                "attempts": s.attempts, "miner": s.miner, "sector": s.sector, "error": s.error,
                "message_bytes": d.data.len(),
                "reply_to": d.properties.reply_to().as_ref().map(|s| s.to_string()),
                "job": described,
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        DlqCommand::Replay { job_id, all } => {
            let mut n = 0;
            for d in held {
                let chosen = *all || job_id.as_deref().is_some_and(|sel| summary(d).is(sel));
                if !chosen {
                    continue;
                }
                replay(broker, d).await?;
                n += 1;
            }
            if n == 0 && !*all {
                bail!(
                    "no dead-lettered job with id or address {:?}",
                    job_id.as_deref().unwrap_or("")
                );
            }
            println!("replayed {n} jobs");
        }
        DlqCommand::Purge => {}
    }
    Ok(())
}

/// Back to the job queue with attempts reset; the dead letter is acked only once the broker
/// confirmed the copy.
async fn replay(broker: &Broker, d: &Delivery) -> Result<()> {
    let hdrs = headers::with(d.properties.headers().as_ref(), vec![], DROP_ON_REPLAY);
    let props = d.properties.clone().with_headers(hdrs);
    publish_confirmed(
        &broker.publish,
        &broker.names.jobs_exchange(),
        JOB_KEY,
        &d.data,
        props,
    )
    .await
    .context("replaying a dead-lettered job")?;
    super::settled(d.acker.ack(BasicAckOptions::default()).await)
        .context("removing the replayed job from the dead-letter queue")?;
    Ok(())
}
