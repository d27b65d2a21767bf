//! Publishing with publisher confirms and `mandatory`: a message counts as sent only when the
//! broker has taken responsibility for it, and an unroutable one is an error, not a loss.

use anyhow::Result;
use lapin::options::BasicPublishOptions;
use lapin::Confirmation;
use lapin::{BasicProperties, Channel};

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("no queue is bound for {exchange:?}/{routing_key:?}: the message was returned")]
    Unroutable {
        exchange: String,
        routing_key: String,
    },
    #[error("the broker refused the message (nack)")]
    Nacked,
    #[error("the channel is not in confirm mode")]
    NotConfirmed,
    #[error("broker connection: {0}")]
    Io(#[from] lapin::Error),
}

/// Publish and wait for the broker's confirm.
pub async fn publish_confirmed(
    ch: &Channel,
    exchange: &str,
    routing_key: &str,
    payload: &[u8],
    properties: BasicProperties,
) -> Result<(), PublishError> {
    let opts = BasicPublishOptions {
        mandatory: true,
        ..Default::default()
    };
    let confirm = ch
        .basic_publish(
            exchange.into(),
            routing_key.into(),
            opts,
            payload,
            properties,
        )
        .await?;
    match confirm.await? {
        Confirmation::Ack(None) => Ok(()),
        Confirmation::Ack(Some(_returned)) => Err(PublishError::Unroutable {
            exchange: exchange.to_string(),
            routing_key: routing_key.to_string(),
        }),
        Confirmation::Nack(_) => Err(PublishError::Nacked),
        Confirmation::NotRequested => Err(PublishError::NotConfirmed),
    }
}
