//! The record a dead letter carries in its headers: why the job was dead-lettered, by which
//! worker, after how many retries, when, and the job's miner and sector where known. The worker
//! writes it ([`DeadLetterRecord::to_headers`]); `c2q dlq` reads it back
//! ([`DeadLetterRecord::from_properties`]), together with what RabbitMQ records of the messages
//! it dead-letters itself.

use lapin::types::FieldTable;
use lapin::BasicProperties;

use super::headers;

/// Why, when and by whom a job was dead-lettered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetterRecord {
    /// An `error.kind` string, [`headers::POISON_REASON`], or, for a message RabbitMQ
    /// dead-lettered itself, the reason it gave (`"unknown"` where it gave none).
    pub reason: String,
    /// What went wrong; for a message RabbitMQ dead-lettered itself, what its reason means.
    pub error: String,
    /// The worker that dead-lettered the job; `None` when RabbitMQ did.
    pub worker: Option<String>,
    /// Transient-failure retries before the job was dead-lettered.
    pub attempts: i64,
    /// When the worker dead-lettered it (Unix milliseconds).
    pub dead_at_ms: Option<i64>,
    /// The job's miner and sector; `None` for a message that never decoded into a job, and
    /// for one RabbitMQ dead-lettered itself.
    pub identity: Option<(u64, u64)>,
}

impl DeadLetterRecord {
    /// `existing` with this record's headers set. Miner and sector are absent, not a made-up
    /// number, for a message that never decoded into a job.
    pub fn to_headers(&self, existing: Option<&FieldTable>) -> FieldTable {
        let mut set = vec![
            (headers::REASON, headers::string(&self.reason)),
            (headers::ERROR, headers::string(&self.error)),
        ];
        if let Some(worker) = &self.worker {
            set.push((headers::WORKER, headers::string(worker)));
        }
        set.push((headers::ATTEMPTS, headers::int(self.attempts)));
        if let Some(at) = self.dead_at_ms {
            set.push((headers::DEAD_AT, headers::int(at)));
        }
        if let Some((miner, sector)) = self.identity {
            set.push((headers::MINER, headers::uint(miner)));
            set.push((headers::SECTOR, headers::uint(sector)));
        }
        headers::with(existing, set, &[])
    }

    /// The record of a dead letter: the worker's own where it wrote one; else why RabbitMQ
    /// dead-lettered it most recently (a retried job also died once before, by expiring from
    /// its delay queue), and what that means.
    pub fn from_properties(props: &BasicProperties) -> DeadLetterRecord {
        let own_reason = headers::get_str(props, headers::REASON);
        let reason = own_reason
            .clone()
            .or_else(|| headers::last_death_reason(props))
            .or_else(|| headers::get_str(props, headers::FIRST_DEATH_REASON))
            .unwrap_or_else(|| "unknown".into());
        let error = headers::get_str(props, headers::ERROR)
            .filter(|_| own_reason.is_some())
            .unwrap_or_else(|| broker_reason_text(&reason, props));
        let identity = match (
            headers::get_u64(props, headers::MINER),
            headers::get_u64(props, headers::SECTOR),
        ) {
            (Some(m), Some(s)) => Some((m, s)),
            _ => None,
        };
        DeadLetterRecord {
            reason,
            error,
            worker: headers::get_str(props, headers::WORKER),
            attempts: headers::get_int(props, headers::ATTEMPTS).unwrap_or(0),
            dead_at_ms: headers::get_int(props, headers::DEAD_AT),
            identity,
        }
    }
}

/// What a reason RabbitMQ gave means, for a message the worker did not dead-letter itself.
fn broker_reason_text(reason: &str, props: &BasicProperties) -> String {
    match reason {
        headers::POISON_REASON => {
            let count = match headers::returns(props) {
                0 => "more deliveries than the job queue's x-delivery-limit allows".to_string(),
                n => format!("{n} deliveries"),
            };
            format!(
                "returned unacked after {count}: workers died or lost their channel while \
                 holding it (a job that crashes workers?)"
            )
        }
        "rejected" => "rejected by a consumer without requeue".into(),
        "expired" => "expired in a queue".into(),
        "maxlen" => "dropped because a queue was over its length limit".into(),
        other => format!("dead-lettered by RabbitMQ ({other})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::AMQPValue;

    #[test]
    fn a_record_reads_back_as_written() {
        for identity in [Some((1000, u64::MAX)), None] {
            let record = DeadLetterRecord {
                reason: "malformed_c1".into(),
                error: "bad proof inputs".into(),
                worker: Some("w1".into()),
                attempts: 2,
                dead_at_ms: Some(1_700_000_000_000),
                identity,
            };
            let mut existing = FieldTable::default();
            existing.insert("x-other".into(), AMQPValue::LongLongInt(7));
            let props = BasicProperties::default().with_headers(record.to_headers(Some(&existing)));
            assert_eq!(DeadLetterRecord::from_properties(&props), record);
            assert_eq!(headers::get_int(&props, "x-other"), Some(7), "kept");
        }
    }

    #[test]
    fn a_message_rabbitmq_dead_lettered_is_explained() {
        let mut h = FieldTable::default();
        h.insert(
            headers::FIRST_DEATH_REASON.into(),
            headers::string(headers::POISON_REASON),
        );
        h.insert(headers::RETURNS.into(), headers::int(6));
        let props = BasicProperties::default().with_headers(h);
        let record = DeadLetterRecord::from_properties(&props);
        assert_eq!(record.reason, headers::POISON_REASON);
        assert!(
            record.error.contains("after 6 deliveries"),
            "{}",
            record.error
        );
        assert_eq!((record.worker, record.identity), (None, None));
        let none = DeadLetterRecord::from_properties(&BasicProperties::default());
        assert_eq!(none.reason, "unknown");
        assert_eq!(none.attempts, 0);
    }
}
