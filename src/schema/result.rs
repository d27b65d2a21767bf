//! The result message, version 1 (`schemas/result.v1.schema.json`). Consumers may see a result
//! twice (at-least-once delivery) and must deduplicate by `job_id`.

use serde::{Deserialize, Serialize};

use super::ErrorKind;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Failed,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    pub kind: ErrorKind,
    pub message: String,
}

/// When each stage of one partition ran, in milliseconds since the job entered the pipeline.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionTiming {
    pub partition: u32,
    pub synth_start_ms: u64,
    pub synth_end_ms: u64,
    /// The A, B, C evaluations (sparse products with the recorded constraints). Absent from
    /// results of older workers.
    #[serde(default)]
    pub products_start_ms: u64,
    #[serde(default)]
    pub products_end_ms: u64,
    pub start_start_ms: u64,
    pub start_end_ms: u64,
    pub finish_start_ms: u64,
    pub finish_end_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultV1 {
    pub v: u32,
    pub job_id: String,
    pub status: Status,
    /// 192 bytes per partition, in order (the bytes `seal_commit_phase2` returns).
    #[serde(with = "serde_bytes", default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<Vec<u8>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    /// Echo of the job (empty / zero when the job did not decode).
    pub kind: String,
    pub registered_proof: String,
    pub miner_id: u64,
    pub sector_number: u64,
    pub worker: String,
    pub attempts: u32,
    /// True when the proof was answered from the ledger instead of proved again.
    #[serde(default)]
    pub from_ledger: bool,
    #[serde(default)]
    pub timings: Vec<PartitionTiming>,
    /// Unix time in milliseconds that `timings` count from (when the job entered the
    /// pipeline), so that the stages of different jobs can be laid on one time line. 0 when
    /// there are no timings.
    #[serde(default)]
    pub timings_origin_ms: u64,
}

impl ResultV1 {
    pub fn encode(&self) -> anyhow::Result<Vec<u8>> {
        Ok(rmp_serde::to_vec_named(self)?)
    }

    pub fn decode(bytes: &[u8]) -> anyhow::Result<Self> {
        Ok(rmp_serde::from_slice(bytes)?)
    }
}
