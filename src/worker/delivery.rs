//! What the worker knows of one delivery: read from its headers when it is fetched, completed
//! once its job decodes, and then carried to the end. Nothing decodes the job message a second
//! time: what a result or a dead letter echoes of the job comes from here.

use lapin::BasicProperties;

use crate::broker::headers;
use crate::schema::{self, JobV1};

/// A job's miner and sector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SectorIdentity {
    pub miner: u64,
    pub sector: u64,
}

/// The job's own fields, where its message decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct JobFields {
    pub kind: String,
    pub registered_proof: String,
    pub identity: SectorIdentity,
}

impl JobFields {
    pub fn of(job: &JobV1) -> JobFields {
        JobFields {
            kind: job.kind.as_str().to_string(),
            registered_proof: job.registered_proof.clone(),
            identity: SectorIdentity {
                miner: job.miner_id,
                sector: job.sector_number,
            },
        }
    }
}

/// What the worker knows of one delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct DeliveryFacts {
    /// The job id results and dead letters are published under: the job's own once it
    /// decoded, else what could be read of it, else the AMQP `message_id` (maybe empty).
    pub job_id: String,
    /// Set once the message decoded into a job.
    pub job: Option<JobFields>,
    /// Set when the message is rejected for reusing this job id with another payload: `job_id`
    /// is then the message's own identity (`schema::result::rejected_duplicate_id`).
    pub reused_job_id: Option<String>,
    /// Transient-failure retries so far (`headers::ATTEMPTS`).
    pub retries: u32,
    /// Unsettled deliveries of this job over all its copies (`headers::returns`).
    pub returns: u32,
}

impl DeliveryFacts {
    /// What the headers say, before the body is read.
    pub fn of(props: &BasicProperties) -> DeliveryFacts {
        DeliveryFacts {
            job_id: props
                .message_id()
                .as_ref()
                .map(|s| s.to_string())
                .unwrap_or_default(),
            job: None,
            reused_job_id: None,
            retries: headers::attempts(props),
            returns: headers::returns(props),
        }
    }

    /// The job decoded: its own id and fields from here on.
    pub fn decoded(&mut self, job: &JobV1) {
        self.job_id = job.job_id.clone();
        self.job = Some(JobFields::of(job));
    }

    /// For a message rejected as `duplicate_mismatch`: answered under its own identity, so
    /// that nothing reading results by job id takes the rejection for a result of the job
    /// whose id it reused (which is proved, or was, as if this message had never come).
    pub fn rejected_duplicate(&mut self, digest: &[u8; 32]) {
        let reused = std::mem::take(&mut self.job_id);
        self.job_id = schema::result::rejected_duplicate_id(&reused, digest);
        self.reused_job_id = Some(reused);
    }

    /// Miner and sector, where the job decoded far enough to have them.
    pub fn identity(&self) -> Option<SectorIdentity> {
        self.job.as_ref().map(|j| j.identity)
    }
}
