//! Exchange and queue names under one prefix, and their idempotent declaration.
//!
//! ```text
//! producer ──▶ {P}.jobs (direct) ──<class>──▶ {P}.jobs.<class> (quorum, x-delivery-limit,
//!                 │  ▲  ──<class>.urgent──▶ {P}.jobs.<class>.urgent   DLX {P}.dlx), one pair
//!                 │  │                              │       per size class
//!                 │  │                              │ worker: basic_get from the classes it
//!                 └──┼──job──▶ {P}.jobs (quorum) ───┤ serves, gated by memory; a job here of
//!                    │                              │ a class it does not serve is re-routed
//!                    │                              │ to that class's queue
//!                 │ TTL expiry (dead-letter)        ├──▶ result ──▶ reply_to | {P}.results
//!  {P}.retry.N (classic, per-message TTL) ◀─────────┤ transient failure, attempt N
//!  {P}.wait (classic, per-message TTL) ◀────────────┤ another worker holds the job's lease
//!                                                   └──▶ {P}.dlx (fanout) ──▶ {P}.dlq
//! ```
//! Producers route a job by its size class (`crate::classes`), so that only workers that can
//! hold it fetch it; the unsorted queue (key `job`) takes producers that do not, and the jobs
//! coming back from the delay queues, and is sorted by whichever worker fetches from it.
//! One delay queue per retry level keeps messages with very different delays from blocking
//! each other (TTL expiry happens only at a queue's head). `{P}.wait` holds jobs for one fixed
//! delay and costs them nothing: no retry is counted.
//!
//! Urgent jobs (a gateway's `HIGH` and `CRITICAL` requests, or any producer's job routed with
//! `<class>.urgent`) wait in a second queue per class, which workers empty first. A second queue
//! rather than message priorities: quorum queues have no priorities on RabbitMQ 3.x (and only
//! two levels on 4.x), and a classic queue's `x-max-priority` cannot be added to a queue that
//! exists, so priorities would have meant recreating every deployed job queue.

use anyhow::{Context, Result};
use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, ExchangeKind};

use crate::classes::SizeClass;

/// Routing key of unsorted jobs on the job exchange: jobs whose producer did not route them by
/// size class, and jobs coming back from a delay queue.
pub const JOB_KEY: &str = "job";

#[derive(Clone, Debug)]
pub struct Names {
    pub prefix: String,
}

impl Names {
    pub fn new(prefix: &str) -> Names {
        Names {
            prefix: prefix.to_string(),
        }
    }
    pub fn jobs_exchange(&self) -> String {
        format!("{}.jobs", self.prefix)
    }
    /// The unsorted job queue (routing key [`JOB_KEY`]).
    pub fn jobs_queue(&self) -> String {
        format!("{}.jobs", self.prefix)
    }
    /// The queue of one size class's jobs (routing key: the class's key).
    pub fn class_queue(&self, class: SizeClass) -> String {
        format!("{}.jobs.{}", self.prefix, class.key())
    }
    /// The queue of one size class's urgent jobs (routing key [`urgent_key`]), fetched before
    /// the class's other jobs.
    pub fn urgent_queue(&self, class: SizeClass) -> String {
        format!("{}.jobs.{}", self.prefix, urgent_key(class))
    }
    pub fn dlx(&self) -> String {
        format!("{}.dlx", self.prefix)
    }
    pub fn dlq(&self) -> String {
        format!("{}.dlq", self.prefix)
    }
    pub fn results(&self) -> String {
        format!("{}.results", self.prefix)
    }
    pub fn retry_queue(&self, attempt: u32) -> String {
        format!("{}.retry.{attempt}", self.prefix)
    }
    /// Delay queue for deliveries of jobs that another worker is proving.
    pub fn wait_queue(&self) -> String {
        format!("{}.wait", self.prefix)
    }
    /// The queues of one size class: its urgent queue and its other queue, or, for a class
    /// whose jobs are all urgent (PoSt), the urgent queue alone.
    pub fn class_queues(&self, class: SizeClass) -> Vec<String> {
        if class.always_urgent() {
            vec![self.urgent_queue(class)]
        } else {
            vec![self.class_queue(class), self.urgent_queue(class)]
        }
    }

    /// Every queue c2q declares under this prefix, with `retries` retry levels.
    pub fn all_queues(&self, retries: u32) -> Vec<String> {
        let mut queues: Vec<String> = SizeClass::all()
            .into_iter()
            .flat_map(|c| self.class_queues(c))
            .collect();
        queues.extend([
            self.jobs_queue(),
            self.wait_queue(),
            self.dlq(),
            self.results(),
        ]);
        queues.extend((1..=retries).map(|a| self.retry_queue(a)));
        queues
    }
}

/// Routing key of a size class's urgent jobs.
pub fn urgent_key(class: SizeClass) -> String {
    format!("{}.urgent", class.key())
}

fn durable_queue() -> QueueDeclareOptions {
    QueueDeclareOptions {
        durable: true,
        ..Default::default()
    }
}

fn str_value(s: &str) -> AMQPValue {
    AMQPValue::LongString(s.into())
}

/// Declare everything. Safe to run from every worker and every `c2q submit`: declarations
/// with identical arguments are no-ops.
pub async fn declare(ch: &Channel, names: &Names, delivery_limit: u32, retries: u32) -> Result<()> {
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    for (name, kind) in [
        (names.jobs_exchange(), ExchangeKind::Direct),
        (names.dlx(), ExchangeKind::Fanout),
    ] {
        ch.exchange_declare(name.as_str().into(), kind, durable, FieldTable::default())
            .await
            .with_context(|| format!("declaring exchange {name}"))?;
    }

    // The unsorted queue and two queues per size class (urgent and the rest): quorum queues
    // with the same delivery limit and dead-lettering. A class whose jobs are all urgent
    // (PoSt) has its urgent queue alone, bound to its class key too: a job routed by class
    // alone (a producer's, a worker's re-route of a retried job) waits with the urgent ones,
    // and no queue that stays empty is declared (every quorum queue costs the broker).
    let jobs_queues = std::iter::once((names.jobs_queue(), vec![JOB_KEY.to_string()])).chain(
        SizeClass::all().into_iter().flat_map(|c| {
            if c.always_urgent() {
                vec![(names.urgent_queue(c), vec![urgent_key(c), c.key()])]
            } else {
                vec![
                    (names.class_queue(c), vec![c.key()]),
                    (names.urgent_queue(c), vec![urgent_key(c)]),
                ]
            }
        }),
    );
    for (q, keys) in jobs_queues {
        let mut jobs = FieldTable::default();
        jobs.insert("x-queue-type".into(), str_value("quorum"));
        jobs.insert(
            "x-delivery-limit".into(),
            AMQPValue::LongInt(delivery_limit as i32),
        );
        jobs.insert("x-dead-letter-exchange".into(), str_value(&names.dlx()));
        ch.queue_declare(q.as_str().into(), durable_queue(), jobs)
            .await
            .with_context(|| format!("declaring quorum queue {q} (an existing queue with other arguments must be deleted or changed by policy)"))?;
        for key in keys {
            ch.queue_bind(
                q.as_str().into(),
                names.jobs_exchange().into(),
                key.as_str().into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .with_context(|| format!("binding {q} to key {key}"))?;
        }
    }

    // The dead-letter queue is a classic queue: operators browse it by fetching and requeueing,
    // which must not count against a delivery limit (quorum queues in RabbitMQ 4 have one).
    let dlq = names.dlq();
    ch.queue_declare(dlq.as_str().into(), durable_queue(), FieldTable::default())
        .await
        .with_context(|| format!("declaring {dlq}"))?;
    ch.queue_bind(
        dlq.as_str().into(),
        names.dlx().into(),
        "".into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .context("binding the dead-letter queue")?;

    let mut results = FieldTable::default();
    results.insert("x-queue-type".into(), str_value("quorum"));
    let rq = names.results();
    ch.queue_declare(rq.as_str().into(), durable_queue(), results)
        .await
        .with_context(|| format!("declaring {rq}"))?;

    let delay_queues = (1..=retries)
        .map(|attempt| names.retry_queue(attempt))
        .chain([names.wait_queue()]);
    for name in delay_queues {
        // Expired messages go back to the job queue.
        let mut args = FieldTable::default();
        args.insert(
            "x-dead-letter-exchange".into(),
            str_value(&names.jobs_exchange()),
        );
        args.insert("x-dead-letter-routing-key".into(), str_value(JOB_KEY));
        ch.queue_declare(name.as_str().into(), durable_queue(), args)
            .await
            .with_context(|| format!("declaring {name}"))?;
    }
    Ok(())
}
