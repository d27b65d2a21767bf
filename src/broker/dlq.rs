//! Operations on the dead-letter queue, returning what they found (`c2q dlq` prints it):
//! browse, replay, purge. Browsing fetches every message without acking and then
//! closes the channel, which returns them all in order; that is why the DLQ is a classic queue
//! (no delivery limit to burn).

use anyhow::{Context, Result};
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicGetOptions, QueuePurgeOptions};
use lapin::{BasicProperties, Channel};

use super::{headers, publish_confirmed, topology::JOB_KEY, Broker};

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

/// A dead-lettered message, as it lies in the dead-letter queue.
#[derive(Clone, Debug)]
pub struct DeadMessage {
    pub properties: BasicProperties,
    pub data: Vec<u8>,
}

/// Delete every dead letter; how many there were.
pub async fn purge(broker: &Broker) -> Result<u32> {
    broker
        .publish
        .queue_purge(
            broker.names.dlq().as_str().into(),
            QueuePurgeOptions::default(),
        )
        .await
        .context("purging the dead-letter queue")
}

/// Every dead letter, in queue order; the queue is left as it was.
pub async fn browse(broker: &Broker) -> Result<Vec<DeadMessage>> {
    let (ch, held) = hold_all(broker).await?;
    let out = held
        .into_iter()
        .map(|d| DeadMessage {
            properties: d.properties,
            data: d.data,
        })
        .collect();
    let _ = ch.close(200, "browsed".into()).await;
    Ok(out)
}

/// Send the dead letters `chosen` picks back to the job queue, attempts reset, in queue order;
/// how many were. Each leaves the dead-letter queue once the broker confirmed its copy.
pub async fn replay(
    broker: &Broker,
    chosen: impl Fn(&BasicProperties, &[u8]) -> bool,
) -> Result<usize> {
    let (ch, held) = hold_all(broker).await?;
    let mut replayed = Ok(0);
    for d in &held {
        if !chosen(&d.properties, &d.data) {
            continue;
        }
        if let Err(e) = replay_one(broker, d).await {
            replayed = Err(e);
            break;
        }
        replayed = replayed.map(|n| n + 1);
    }
    let _ = ch.close(200, "browsed".into()).await;
    replayed
}

/// Every dead letter, fetched without acking on a channel of its own: closing that channel
/// hands back everything not acked.
async fn hold_all(broker: &Broker) -> Result<(Channel, Vec<Delivery>)> {
    let ch = broker
        .conn
        .create_channel()
        .await
        .context("opening a channel")?;
    let mut held: Vec<Delivery> = Vec::new();
    while let Some(m) = ch
        .basic_get(
            broker.names.dlq().as_str().into(),
            BasicGetOptions { no_ack: false },
        )
        .await
        .context("reading the dead-letter queue")?
    {
        held.push(m.delivery);
    }
    Ok((ch, held))
}

/// Back to the job queue with attempts reset; the dead letter is acked only once the broker
/// confirmed the copy.
async fn replay_one(broker: &Broker, d: &Delivery) -> Result<()> {
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
