//! Operating on the dead-letter queue. Browsing fetches every message without acking and then
//! closes the channel, which returns them all in order; that is why the DLQ is a classic queue
//! (no delivery limit to burn).

use anyhow::{bail, Context, Result};
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicGetOptions, QueuePurgeOptions};

use super::{headers, publish_confirmed, topology::JOB_KEY, Broker};
use crate::cli_queue::{dlq_summary, DlqCommand};

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

pub async fn run(broker: &Broker, command: &DlqCommand) -> Result<()> {
    let dlq = broker.names.dlq();
    if let DlqCommand::Purge = command {
        let n = broker
            .publish
            .queue_purge(&dlq, QueuePurgeOptions::default())
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
        .basic_get(&dlq, BasicGetOptions { no_ack: false })
        .await
        .context("reading the dead-letter queue")?
    {
        held.push(m.delivery);
    }
    let result = act(broker, &held, command).await;
    let _ = ch.close(200, "browsed").await;
    result
}

async fn act(broker: &Broker, held: &[Delivery], command: &DlqCommand) -> Result<()> {
    match command {
        DlqCommand::List => {
            println!(
                "{:<40} {:<22} {:>8} {:>12} {:>10}  error",
                "job_id", "reason", "attempts", "miner", "sector"
            );
            for d in held {
                let (id, reason, attempts, miner, sector, error) = dlq_summary(&d.properties);
                let error: String = error.chars().take(80).collect();
                println!("{id:<40} {reason:<22} {attempts:>8} {miner:>12} {sector:>10}  {error}");
            }
            println!("{} dead-lettered", held.len());
        }
        DlqCommand::Show { job_id } => {
            let d = find(held, job_id)?;
            let (id, reason, attempts, miner, sector, error) = dlq_summary(&d.properties);
            let job = crate::schema::job::decode(&d.data, &crate::schema::Limits::default());
            let described = match &job {
                Ok(j) => serde_json::json!({
                    "kind": j.job.kind.as_str(),
                    "registered_proof": j.job.registered_proof,
                    "c1_bytes": j.c1.len(),
                }),
                Err(e) => serde_json::json!({ "undecodable": e.to_string() }),
            };
            let out = serde_json::json!({
                "job_id": id, "reason": reason, "attempts": attempts, "miner": miner,
                "sector": sector, "error": error, "message_bytes": d.data.len(),
                "reply_to": d.properties.reply_to().as_ref().map(|s| s.to_string()),
                "job": described,
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        DlqCommand::Replay { job_id, all } => {
            let mut n = 0;
            for d in held {
                let (id, ..) = dlq_summary(&d.properties);
                if !*all && job_id.as_deref() != Some(id.as_str()) {
                    continue;
                }
                replay(broker, d).await?;
                n += 1;
            }
            if n == 0 && !*all {
                bail!("no dead-lettered job {:?}", job_id.as_deref().unwrap_or(""));
            }
            println!("replayed {n} jobs");
        }
        DlqCommand::Purge => {}
    }
    Ok(())
}

fn find<'a>(held: &'a [Delivery], job_id: &str) -> Result<&'a Delivery> {
    held.iter()
        .find(|d| dlq_summary(&d.properties).0 == job_id)
        .with_context(|| format!("no dead-lettered job {job_id:?}"))
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
    d.acker
        .ack(BasicAckOptions::default())
        .await
        .context("removing the replayed job from the dead-letter queue")?;
    Ok(())
}
