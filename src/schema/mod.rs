//! Message contracts between producers, workers and result consumers (see `schemas/`).
//!
//! Jobs and results are MessagePack maps with named fields and a `v` version field, so a
//! producer in any language can be written from the JSON Schemas alone. Decoding is staged so
//! that every kind of bad input gets its own, clear, permanent error class.

pub mod error;
pub mod job;
pub mod limits;
pub mod result;

pub use error::{ErrorKind, JobError};
pub use job::{CanarySpec, DecodedJob, JobKind, JobV1};
pub use limits::Limits;
pub use result::{PartitionTiming, ResultV1, StageTimes, Status};

/// The schema version this worker reads and writes.
pub const VERSION: u32 = 1;

/// AMQP content type of every message.
pub const CONTENT_TYPE: &str = "application/msgpack";
