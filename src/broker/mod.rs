//! RabbitMQ: connection with backoff, topology, confirmed publishing, retry and dead-letter
//! routing. Knows messages only as bytes and headers.

pub mod dead_letter;
pub mod dlq;
pub mod headers;
pub mod publish;
pub mod retry;
pub mod topology;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use backon::{ExponentialBuilder, Retryable};
use lapin::options::{ConfirmSelectOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::uri::AMQPUri;
use lapin::{Channel, Connection, ConnectionProperties};

use crate::classes::SizeClass;
use crate::config::BrokerConfig;
pub use publish::{publish_confirmed, PublishError};
pub use topology::Names;

/// The class name [`Broker::job_queue_depths`] gives the unsorted job queue.
pub const UNSORTED: &str = "unsorted";

/// How many jobs wait in one job queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueDepth {
    /// A size class key, or [`UNSORTED`].
    pub class: String,
    /// The class's queue (its urgent queue is counted with it).
    pub queue: String,
    /// Jobs waiting, urgent ones included.
    pub ready: u32,
    pub consumers: u32,
}

/// One connection with a channel for fetching and acking and a confirm-mode channel for
/// publishing. Dropping the last handle closes the connection, which hands its unacked
/// deliveries back to the queue.
pub struct Broker {
    pub(crate) conn: Arc<Connection>,
    /// Deliveries must be acked on the channel they came from.
    pub fetch: Channel,
    pub publish: Channel,
    pub names: Names,
}

impl Broker {
    /// Connect once and declare the topology.
    pub async fn connect(cfg: &BrokerConfig, retries: u32, name: &str) -> Result<Broker> {
        let uri = uri(cfg)?;
        let props = ConnectionProperties::default().with_connection_name(name.into());
        let conn = Connection::connect_uri(uri, props)
            .await
            .with_context(|| format!("connecting to RabbitMQ at {}", redact(&cfg.url)))?;
        let fetch = conn.create_channel().await.context("opening channel")?;
        let publish = conn.create_channel().await.context("opening channel")?;
        publish
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .context("enabling publisher confirms")?;
        let names = Names::new(&cfg.prefix);
        topology::declare(&publish, &names, cfg.delivery_limit, retries).await?;
        Ok(Broker {
            conn: Arc::new(conn),
            fetch,
            publish,
            names,
        })
    }

    /// Connect with exponential backoff and jitter, giving up after `give_up` (so a worker
    /// whose broker stays away fails visibly instead of hanging).
    pub async fn connect_with_backoff(
        cfg: &BrokerConfig,
        retries: u32,
        name: &str,
        give_up: Duration,
    ) -> Result<Broker> {
        let backoff = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(200))
            .with_max_delay(Duration::from_secs(10))
            .with_total_delay(Some(give_up))
            .without_max_times()
            .with_jitter();
        (|| Broker::connect(cfg, retries, name))
            .retry(backoff)
            .notify(|e, wait| {
                tracing::warn!(error = format!("{e:#}"), retry_in = ?wait, "RabbitMQ unavailable")
            })
            .await
    }

    /// Both channels and the connection are usable.
    pub fn is_healthy(&self) -> bool {
        self.conn.status().connected()
            && self.fetch.status().connected()
            && self.publish.status().connected()
    }

    /// Jobs ready in the queue of every size class, and in the unsorted queue (class
    /// [`UNSORTED`]). Asked on a channel of its own: a failed passive declare closes its channel,
    /// which must not be the one deliveries are acked on.
    pub async fn job_queue_depths(&self) -> Result<Vec<QueueDepth>> {
        let ch = self
            .conn
            .create_channel()
            .await
            .context("opening a channel to read queue depths")?;
        // A class's urgent queue counts with its other queue.
        let queues = SizeClass::all()
            .into_iter()
            .map(|c| {
                let queues = self.names.class_queues(c);
                (c.key(), queues)
            })
            .chain([(UNSORTED.to_string(), vec![self.names.jobs_queue()])]);
        let mut depths = Vec::new();
        for (class, queues) in queues {
            let mut depth = QueueDepth {
                class,
                queue: queues[0].clone(),
                ready: 0,
                consumers: 0,
            };
            for queue in &queues {
                let passive = QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                };
                let info = ch
                    .queue_declare(queue.as_str().into(), passive, FieldTable::default())
                    .await
                    .with_context(|| format!("reading the depth of {queue}"))?;
                depth.ready += info.message_count();
                depth.consumers += info.consumer_count();
            }
            depths.push(depth);
        }
        let _ = ch.close(200, "queue depths read".into()).await;
        Ok(depths)
    }

    pub async fn close(&self) {
        if self.conn.status().connected() {
            let _ = self.conn.close(200, "c2q closing".into()).await;
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        // Replaced connections must not linger holding unacked deliveries.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let conn = self.conn.clone();
            rt.spawn(async move {
                if conn.status().connected() {
                    let _ = conn.close(200, "c2q replaced connection".into()).await;
                }
            });
        }
    }
}

/// What an ack, nack or reject came to. lapin answers `false` without sending anything when
/// the delivery was settled already or its channel has closed: the message was not settled.
pub fn settled(outcome: lapin::Result<bool>) -> Result<()> {
    match outcome {
        Ok(true) => Ok(()),
        Ok(false) => Err(anyhow!(
            "not sent: the delivery was settled already or its channel has closed"
        )),
        Err(e) => Err(e).context("the broker connection refused it"),
    }
}

/// The broker URL with credentials from the environment (never from the file or the CLI).
fn uri(cfg: &BrokerConfig) -> Result<AMQPUri> {
    let url = cfg.effective_url();
    let mut uri: AMQPUri = url
        .parse()
        .map_err(|e| anyhow!("invalid broker url {}: {e}", redact(&url)))?;
    if let Some(password) = cfg.password()? {
        uri.authority.userinfo.username = cfg.username.clone();
        uri.authority.userinfo.password = password;
    }
    uri.query.heartbeat = Some(cfg.heartbeat_s);
    Ok(uri)
}

/// A URL fit for logs: any `user:password@` part is dropped.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***@{}", &url[..s + 3], &url[at + 1..]),
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_credentials() {
        assert_eq!(
            redact("amqps://u:secret@host:5671/vh"),
            "amqps://***@host:5671/vh"
        );
        assert_eq!(redact("amqp://host/"), "amqp://host/");
    }
}
