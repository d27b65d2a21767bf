//! What a delivery came to ([`Outcome`], decided while it is processed) and what is done about
//! it on the broker ([`Disposition`]): publish the result, retry later, dead-letter, put off,
//! hand back or re-route. [`dispose`] goes from one to the other without touching the broker,
//! the ledger or the clock, so every rule of it is tested here; `settle` carries it out.

use std::time::Duration;

use rand::Rng;

use super::delivery::{DeliveryFacts, SectorIdentity};
use crate::broker::{headers, retry};
use crate::classes::SizeClass;
use crate::config::RetryConfig;
use crate::schema::Status;
use crate::schema::{
    self, result::ErrorInfo, ErrorKind, JobError, PartitionTiming, ResultV1, StageTimes,
};

/// A proof to answer the job with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Proved {
    pub proof: Vec<u8>,
    /// Proving attempts the ledger counted.
    pub attempts: u32,
    /// The proof was in the ledger already (this or an earlier delivery, or another worker).
    pub from_ledger: bool,
    pub timings: Vec<PartitionTiming>,
    pub timings_origin_ms: u64,
    pub stages: StageTimes,
}

impl Proved {
    /// A proof the ledger held: no timings of this worker go with it.
    pub fn from_ledger(proof: Vec<u8>, attempts: u32) -> Proved {
        Proved {
            proof,
            attempts,
            from_ledger: true,
            timings: vec![],
            timings_origin_ms: 0,
            stages: StageTimes::default(),
        }
    }
}

/// How a delivery ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Answer the job with this proof.
    Answer(Proved),
    /// The job failed: retried if the failure is transient and retries are left, else
    /// dead-lettered (with a failed result where it is the job's own fault).
    Failed(JobError),
    /// The job is being proved now, by another worker or another task of this one: look at it
    /// again after `lease.busy_delay_ms`, without charging it a retry.
    Busy { holder: String },
    /// This worker's backend is broken: give the job to another worker, without charging it.
    HandBack,
    /// Deliveries of this job (over all its copies) ended unsettled more often than the
    /// delivery limit allows: it probably kills workers. Dead-letter it as poison.
    Poison,
    /// A job of a size class this worker does not fetch (it came from the unsorted queue, or
    /// was routed to the wrong class): send it to its class's queue, without charging it.
    Reroute { class: SizeClass },
    /// The job was cancelled: answer it so, without a proof, and do not dead-letter it (a
    /// cancellation is the client's choice, not a failure to inspect).
    Cancelled,
}

/// The configuration [`dispose`] reads.
pub(super) struct Policy<'a> {
    /// This worker's name, in the results it publishes.
    pub worker: &'a str,
    pub retry: &'a RetryConfig,
    pub busy_delay_ms: u64,
    pub delivery_limit: u32,
}

/// What is done about a delivery on the broker, before it is acked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Disposition {
    /// Publish this result to the job's reply queue.
    Publish { result: ResultV1 },
    /// Send the job to the delay queue of retry `attempt`, for `delay`.
    Retry {
        attempt: u32,
        delay: Duration,
        error: JobError,
    },
    /// Copy the job to the dead-letter queue.
    DeadLetter(DeadLettering),
    /// Put a copy in the wait queue for `delay_ms`, uncharged.
    Defer { delay_ms: u64, holder: String },
    /// Give the job back to the job queue, uncharged.
    HandBack,
    /// Send the job to its size class's queue, uncharged.
    Reroute { class: SizeClass },
}

/// A dead-lettering: in this order, the failure recorded in the ledger (where `record_failure`),
/// the failed result published (where there is one), the job copied to the dead-letter queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct DeadLettering {
    /// `x-c2q-reason`: the error's kind, or [`headers::POISON_REASON`].
    pub reason: &'static str,
    pub error: JobError,
    /// Transient-failure retries (or, for an unroutable result, proving attempts).
    pub attempts: u32,
    pub identity: Option<SectorIdentity>,
    /// Record the failure in the ledger first (best effort: the dead letter is the record of
    /// last resort). A permanent failure was recorded where it happened.
    pub record_failure: bool,
    /// A failed result for the job's reply queue, published first.
    pub result: Option<ResultV1>,
}

/// What to do about a delivery that came to `outcome`. `rng` draws the jitter of a retry delay.
pub(super) fn dispose(
    outcome: Outcome,
    facts: &DeliveryFacts,
    policy: &Policy,
    rng: &mut impl Rng,
) -> Disposition {
    match outcome {
        Outcome::Answer(proved) => Disposition::Publish {
            result: answer(facts, policy.worker, proved),
        },
        Outcome::Failed(error) if !error.kind.is_permanent() => {
            if facts.retries < policy.retry.max_retries {
                let attempt = facts.retries + 1;
                return Disposition::Retry {
                    attempt,
                    delay: retry::delay(policy.retry, attempt, rng),
                    error,
                };
            }
            // A proof that never verified keeps that name; other failures are the retries'.
            let kind = match error.kind {
                ErrorKind::VerificationFailed => ErrorKind::VerificationFailed,
                _ => ErrorKind::RetriesExhausted,
            };
            let exhausted = JobError::new(
                kind,
                format!(
                    "{} retries failed; last error: {}",
                    facts.retries, error.message
                ),
            );
            Disposition::DeadLetter(failed(facts, policy.worker, exhausted, true))
        }
        Outcome::Failed(error) => {
            Disposition::DeadLetter(failed(facts, policy.worker, error, false))
        }
        Outcome::Busy { holder } => Disposition::Defer {
            delay_ms: policy.busy_delay_ms,
            holder,
        },
        Outcome::HandBack => Disposition::HandBack,
        Outcome::Reroute { class } => Disposition::Reroute { class },
        Outcome::Cancelled => {
            let mut result = result(facts, policy.worker, Status::Failed, facts.retries);
            result.error = Some(ErrorInfo {
                kind: ErrorKind::Cancelled,
                message: "cancelled before its proof was published".into(),
            });
            Disposition::Publish { result }
        }
        Outcome::Poison => Disposition::DeadLetter(DeadLettering {
            reason: headers::POISON_REASON,
            error: JobError::new(
                ErrorKind::Transient,
                format!(
                    "delivered {} times without being settled (workers died or lost their \
                     channel while holding it), over the delivery limit of {}",
                    facts.returns, policy.delivery_limit
                ),
            ),
            attempts: facts.retries,
            identity: facts.identity(),
            record_failure: false,
            result: None,
        }),
    }
}

/// A result no queue took (its `reply_to` names none): dead-lettered `unroutable`. The proof
/// stays in the ledger; a replay from the dead-letter queue with a working `reply_to` answers
/// from it.
pub(super) fn unroutable(result: &ResultV1, why: String) -> DeadLettering {
    let error = JobError::new(ErrorKind::Unroutable, why);
    DeadLettering {
        reason: error.kind.as_str(),
        error,
        attempts: result.attempts,
        identity: Some(SectorIdentity {
            miner: result.miner_id,
            sector: result.sector_number,
        }),
        record_failure: true,
        result: None,
    }
}

/// Dead-letter a failed job, with a failed result for its reply queue.
fn failed(facts: &DeliveryFacts, worker: &str, error: JobError, record: bool) -> DeadLettering {
    let mut result = result(facts, worker, Status::Failed, facts.retries);
    result.error = Some(ErrorInfo {
        kind: error.kind,
        message: error.message.clone(),
    });
    DeadLettering {
        reason: error.kind.as_str(),
        error,
        attempts: facts.retries,
        identity: facts.identity(),
        record_failure: record,
        result: Some(result),
    }
}

fn answer(facts: &DeliveryFacts, worker: &str, proved: Proved) -> ResultV1 {
    let mut result = result(facts, worker, Status::Ok, proved.attempts);
    result.proof = Some(proved.proof);
    result.from_ledger = proved.from_ledger;
    result.timings = proved.timings;
    result.timings_origin_ms = proved.timings_origin_ms;
    result.stages = proved.stages;
    result
}

/// A result echoing the job's fields (placeholders where the message did not decode).
fn result(facts: &DeliveryFacts, worker: &str, status: Status, attempts: u32) -> ResultV1 {
    let job = facts.job.as_ref();
    ResultV1 {
        v: schema::VERSION,
        job_id: facts.job_id.clone(),
        status,
        proof: None,
        error: None,
        reused_job_id: facts.reused_job_id.clone(),
        kind: job.map(|j| j.kind.clone()).unwrap_or_default(),
        registered_proof: job.map(|j| j.registered_proof.clone()).unwrap_or_default(),
        miner_id: job.map_or(0, |j| j.identity.miner),
        sector_number: job.map_or(0, |j| j.identity.sector),
        worker: worker.to_string(),
        attempts,
        from_ledger: false,
        timings: vec![],
        timings_origin_ms: 0,
        stages: StageTimes::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::delivery::JobFields;
    use rand::SeedableRng;

    const RETRY: RetryConfig = RetryConfig {
        max_retries: 3,
        base_delay_ms: 1_000,
        max_delay_ms: 60_000,
    };

    fn policy() -> Policy<'static> {
        Policy {
            worker: "w1",
            retry: &RETRY,
            busy_delay_ms: 5_000,
            delivery_limit: 5,
        }
    }

    fn facts(retries: u32) -> DeliveryFacts {
        DeliveryFacts {
            job_id: "job-1".into(),
            job: Some(JobFields {
                kind: "porep_c2".into(),
                registered_proof: "StackedDrg32GiBV1_1".into(),
                identity: SectorIdentity {
                    miner: 1000,
                    sector: 7,
                },
            }),
            reused_job_id: None,
            retries,
            returns: 0,
        }
    }

    fn rng() -> rand_chacha::ChaCha8Rng {
        rand_chacha::ChaCha8Rng::seed_from_u64(7)
    }

    fn dispose_(outcome: Outcome, facts: &DeliveryFacts) -> Disposition {
        dispose(outcome, facts, &policy(), &mut rng())
    }

    fn dead_lettering(d: Disposition) -> DeadLettering {
        match d {
            Disposition::DeadLetter(d) => d,
            other => panic!("not dead-lettered: {other:?}"),
        }
    }

    #[test]
    fn an_answer_is_published_echoing_the_job() {
        let proved = Proved {
            proof: vec![1, 2, 3],
            attempts: 2,
            from_ledger: false,
            timings: vec![PartitionTiming::default()],
            timings_origin_ms: 99,
            stages: StageTimes {
                proving_ms: 50,
                ..Default::default()
            },
        };
        let Disposition::Publish { result } = dispose_(Outcome::Answer(proved), &facts(1)) else {
            panic!("not published")
        };
        assert_eq!(result.status, Status::Ok);
        assert_eq!(result.job_id, "job-1");
        assert_eq!(result.proof, Some(vec![1, 2, 3]));
        assert_eq!((result.miner_id, result.sector_number), (1000, 7));
        assert_eq!(result.kind, "porep_c2");
        assert_eq!(result.registered_proof, "StackedDrg32GiBV1_1");
        assert_eq!((result.worker.as_str(), result.attempts), ("w1", 2));
        assert!(!result.from_ledger);
        assert_eq!((result.timings.len(), result.timings_origin_ms), (1, 99));
        assert_eq!(result.stages.proving_ms, 50);
        assert_eq!(result.error, None);

        let Disposition::Publish { result } =
            dispose_(Outcome::Answer(Proved::from_ledger(vec![4], 3)), &facts(0))
        else {
            panic!("not published")
        };
        assert!(result.from_ledger);
        assert_eq!((result.attempts, result.timings.len()), (3, 0));
    }

    #[test]
    fn a_proof_that_does_not_verify_is_retried_and_dead_lettered_under_its_own_kind() {
        let error = JobError::new(ErrorKind::VerificationFailed, "partition 3 did not verify");
        let d = dispose_(Outcome::Failed(error.clone()), &facts(0));
        assert!(matches!(d, Disposition::Retry { attempt: 1, .. }), "{d:?}");
        let d = dead_lettering(dispose_(Outcome::Failed(error), &facts(RETRY.max_retries)));
        assert_eq!(d.reason, "verification_failed");
        assert_eq!(d.error.kind, ErrorKind::VerificationFailed);
        assert!(d.record_failure);
        let result = d.result.expect("a failed result");
        assert_eq!(
            result.error.map(|e| e.kind),
            Some(ErrorKind::VerificationFailed)
        );
    }

    #[test]
    fn a_cancelled_job_is_answered_cancelled_without_a_proof_and_not_dead_lettered() {
        let Disposition::Publish { result } = dispose_(Outcome::Cancelled, &facts(1)) else {
            panic!("not published")
        };
        assert_eq!(result.status, Status::Failed);
        assert_eq!(result.proof, None);
        assert_eq!(result.error.map(|e| e.kind), Some(ErrorKind::Cancelled));
        assert_eq!((result.job_id.as_str(), result.attempts), ("job-1", 1));
    }

    #[test]
    fn a_transient_failure_under_the_limit_is_retried_with_the_next_attempt() {
        let error = JobError::new(ErrorKind::Transient, "gpu fell over");
        let d = dispose_(Outcome::Failed(error.clone()), &facts(1));
        let expected_delay = retry::delay(&RETRY, 2, &mut rng());
        assert_eq!(
            d,
            Disposition::Retry {
                attempt: 2,
                delay: expected_delay,
                error
            }
        );
        // Within the jitter of retry 2: 2 s ± 50%.
        assert!((1_000..3_000).contains(&expected_delay.as_millis()));
    }

    #[test]
    fn a_transient_failure_at_the_limit_is_dead_lettered_naming_the_last_error() {
        let error = JobError::new(ErrorKind::Transient, "gpu fell over");
        let d = dead_lettering(dispose_(Outcome::Failed(error), &facts(3)));
        assert_eq!(d.reason, "retries_exhausted");
        assert_eq!(d.error.kind, ErrorKind::RetriesExhausted);
        assert_eq!(
            d.error.message,
            "3 retries failed; last error: gpu fell over"
        );
        assert!(d.record_failure, "recorded in the ledger");
        assert_eq!(d.attempts, 3);
        assert_eq!(
            d.identity,
            Some(SectorIdentity {
                miner: 1000,
                sector: 7
            })
        );
        let result = d.result.expect("a failed result");
        assert_eq!(result.status, Status::Failed);
        assert_eq!(
            result.error.map(|e| e.kind),
            Some(ErrorKind::RetriesExhausted)
        );
    }

    #[test]
    fn a_permanent_failure_is_dead_lettered_with_its_kind_and_a_failed_result() {
        let error = JobError::new(ErrorKind::MalformedC1, "not a sealed sector");
        let d = dead_lettering(dispose_(Outcome::Failed(error.clone()), &facts(1)));
        assert_eq!(d.reason, "malformed_c1");
        assert_eq!(d.error, error);
        assert!(!d.record_failure, "recorded where it happened");
        assert_eq!(d.attempts, 1);
        let result = d.result.expect("a failed result");
        assert_eq!(result.status, Status::Failed);
        assert_eq!(result.job_id, "job-1");
        assert_eq!(
            (result.miner_id, result.sector_number, result.attempts),
            (1000, 7, 1)
        );
        assert_eq!(
            result.error,
            Some(ErrorInfo {
                kind: ErrorKind::MalformedC1,
                message: "not a sealed sector".into()
            })
        );
        assert_eq!(result.proof, None);
    }

    #[test]
    fn a_message_that_did_not_decode_has_placeholders_and_no_identity() {
        let mut f = DeliveryFacts {
            job: None,
            ..facts(0)
        };
        f.job_id = "peeked".into();
        let error = JobError::new(ErrorKind::Undecodable, "not a job");
        let d = dead_lettering(dispose_(Outcome::Failed(error), &f));
        assert_eq!(d.identity, None);
        let result = d.result.expect("a failed result");
        assert_eq!(result.job_id, "peeked");
        assert_eq!((result.miner_id, result.sector_number), (0, 0));
        assert_eq!(result.kind, "");
    }

    #[test]
    fn a_reused_job_id_is_answered_under_the_message_s_own_identity() {
        let mut f = facts(0);
        f.rejected_duplicate(&[7; 32]);
        let error = JobError::new(ErrorKind::DuplicateMismatch, "reused");
        let d = dead_lettering(dispose_(Outcome::Failed(error), &f));
        let result = d.result.expect("a failed result");
        assert_eq!(result.reused_job_id.as_deref(), Some("job-1"));
        assert_eq!(
            result.job_id,
            schema::result::rejected_duplicate_id("job-1", &[7; 32])
        );
    }

    #[test]
    fn busy_is_put_off_for_the_busy_delay() {
        let d = dispose_(
            Outcome::Busy {
                holder: "w2".into(),
            },
            &facts(0),
        );
        assert_eq!(
            d,
            Disposition::Defer {
                delay_ms: 5_000,
                holder: "w2".into()
            }
        );
    }

    #[test]
    fn hand_back_and_reroute_are_carried_through() {
        assert_eq!(
            dispose_(Outcome::HandBack, &facts(2)),
            Disposition::HandBack
        );
        let class = SizeClass::Canary { partitions: 4 };
        assert_eq!(
            dispose_(Outcome::Reroute { class }, &facts(2)),
            Disposition::Reroute { class }
        );
    }

    #[test]
    fn poison_is_dead_lettered_as_delivery_limit_with_what_is_known() {
        let mut f = facts(2);
        f.returns = 6;
        let d = dead_lettering(dispose_(Outcome::Poison, &f));
        assert_eq!(d.reason, "delivery_limit");
        assert!(
            d.error
                .message
                .starts_with("delivered 6 times without being settled"),
            "{}",
            d.error.message
        );
        assert!(d.error.message.ends_with("over the delivery limit of 5"));
        assert_eq!(d.attempts, 2);
        assert_eq!(
            d.identity,
            Some(SectorIdentity {
                miner: 1000,
                sector: 7
            })
        );
        assert_eq!((d.record_failure, d.result), (false, None));
        // A message that did not decode: no identity, not a made-up one.
        let undecoded = DeliveryFacts { job: None, ..f };
        assert_eq!(
            dead_lettering(dispose_(Outcome::Poison, &undecoded)).identity,
            None
        );
    }

    #[test]
    fn an_unroutable_result_is_dead_lettered_and_recorded() {
        let Disposition::Publish { result } =
            dispose_(Outcome::Answer(Proved::from_ledger(vec![1], 4)), &facts(0))
        else {
            panic!("not published")
        };
        let d = unroutable(&result, "no queue c2q.nowhere".into());
        assert_eq!(d.reason, "unroutable");
        assert_eq!(d.error.message, "no queue c2q.nowhere");
        assert!(d.record_failure);
        assert_eq!(d.attempts, 4);
        assert_eq!(
            d.identity,
            Some(SectorIdentity {
                miner: 1000,
                sector: 7
            })
        );
        assert_eq!(d.result, None);
    }
}
