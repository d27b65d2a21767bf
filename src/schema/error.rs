//! Failure classes. Invalid input is permanent (a `failed` result and the dead-letter queue, no
//! retry); transient failures go through the retry queue up to a limit.

use serde::{Deserialize, Serialize};

/// The `error.kind` strings of a failed result and of the dead-letter reason header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Not MessagePack, or not a map with the required fields.
    Undecodable,
    /// `v` is not a version this worker reads.
    UnknownVersion,
    /// `kind` is not a job kind this worker proves.
    WrongKind,
    /// `registered_proof` disagrees with the C1 output's own proof type.
    ProofTypeMismatch,
    /// The C1 output cannot be parsed or does not describe a provable sector.
    MalformedC1,
    /// The message, the compressed or the decompressed payload, the sector size or a canary's
    /// partitions are over this worker's limit.
    Oversize,
    /// The job decodes but cannot mean anything: a miner id or sector number Filecoin cannot
    /// have (2^63 and above), a canary of no partitions, or a `job_id` that contradicts the
    /// message's AMQP `message_id`.
    InvalidInput,
    /// The job id was seen before with a different payload.
    DuplicateMismatch,
    /// The proof did not verify, repeatedly.
    VerificationFailed,
    /// The result could not be routed to the reply queue.
    Unroutable,
    /// A transient failure (backend, broker, ledger) that outlived its retries.
    RetriesExhausted,
    /// A transient failure, retried through the delay queue.
    Transient,
    /// The job was cancelled (`CancelProof` through a gateway) before a worker proved it, or
    /// while one did: no proof is published for it.
    Cancelled,
    /// The job's deadline (`deadline_unix_ms`) had passed when a worker would have begun
    /// proving it: not proved late.
    DeadlineExceeded,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Undecodable => "undecodable",
            ErrorKind::UnknownVersion => "unknown_version",
            ErrorKind::WrongKind => "wrong_kind",
            ErrorKind::ProofTypeMismatch => "proof_type_mismatch",
            ErrorKind::MalformedC1 => "malformed_c1",
            ErrorKind::Oversize => "oversize",
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::DuplicateMismatch => "duplicate_mismatch",
            ErrorKind::VerificationFailed => "verification_failed",
            ErrorKind::Unroutable => "unroutable",
            ErrorKind::RetriesExhausted => "retries_exhausted",
            ErrorKind::Transient => "transient",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::DeadlineExceeded => "deadline_exceeded",
        }
    }

    /// Permanent failures are dead-lettered at once; only `Transient` and
    /// `VerificationFailed` (a faulty machine may have made the proof) are retried.
    pub fn is_permanent(self) -> bool {
        !matches!(self, ErrorKind::Transient | ErrorKind::VerificationFailed)
    }
}

/// A job failure with its class and a message fit for an operator.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", kind.as_str())]
pub struct JobError {
    pub kind: ErrorKind,
    pub message: String,
}

impl JobError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        JobError {
            kind,
            message: message.into(),
        }
    }

    /// A transient failure, keeping the whole context chain of the cause.
    pub fn transient(err: &anyhow::Error) -> Self {
        JobError::new(ErrorKind::Transient, format!("{err:#}"))
    }
}
