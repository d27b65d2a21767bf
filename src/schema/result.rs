//! The result message, version 1 (`schemas/result.v1.schema.json`). Consumers may see a result
//! twice (at-least-once delivery) and must deduplicate by `job_id`; a message rejected as a
//! `duplicate_mismatch` is answered under an identity of its own ([`rejected_duplicate_id`]).

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

/// Where one job's time went in the worker that proved it, in milliseconds: what a gateway
/// reports to its client (Curio's `srs_load_ms`, `synthesis_ms`, `gpu_compute_ms`). A stage's
/// figure is the wall time during which at least one of the job's partitions was in it, so
/// that no figure exceeds `proving_ms` however many partitions overlapped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageTimes {
    /// From the job entering the proving pipeline to its verified proof.
    #[serde(default)]
    pub proving_ms: u64,
    /// Loading the circuit's parameters and recorded constraints for the job (near 0 when the
    /// worker kept them loaded).
    #[serde(default)]
    pub srs_load_ms: u64,
    /// Witness synthesis.
    #[serde(default)]
    pub synthesis_ms: u64,
    /// The proving start: H's transforms and the G1 multiexps, on the GPU with the `cuda`
    /// backend.
    #[serde(default)]
    pub start_ms: u64,
}

impl StageTimes {
    /// The stage figures of a job whose partitions ran as `partitions` say.
    pub fn of(partitions: &[PartitionTiming], srs_load_ms: u64, proving_ms: u64) -> StageTimes {
        let synthesis = partitions
            .iter()
            .map(|t| (t.synth_start_ms, t.synth_end_ms));
        let start = partitions
            .iter()
            .map(|t| (t.start_start_ms, t.start_end_ms));
        StageTimes {
            proving_ms,
            srs_load_ms: srs_load_ms.min(proving_ms),
            synthesis_ms: covered(synthesis).min(proving_ms),
            start_ms: covered(start).min(proving_ms),
        }
    }
}

/// The length of the union of `[start, end)` spans.
fn covered(spans: impl Iterator<Item = (u64, u64)>) -> u64 {
    let mut spans: Vec<(u64, u64)> = spans.filter(|(a, b)| b > a).collect();
    spans.sort_unstable();
    let mut total = 0;
    let mut open: Option<(u64, u64)> = None;
    for (a, b) in spans {
        open = match open {
            Some((s, e)) if a <= e => Some((s, e.max(b))),
            Some((s, e)) => {
                total += e - s;
                Some((a, b))
            }
            None => Some((a, b)),
        };
    }
    total + open.map_or(0, |(s, e)| e - s)
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
    /// `duplicate_mismatch` only: the job id the rejected message reused. The result's own
    /// `job_id` is then the message's identity (see `schemas/README.md`), so that consumers
    /// deduplicating by `job_id` never take the rejection for that job's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused_job_id: Option<String>,
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
    /// The job's time by stage, as the proving worker measured it (zero when the proof came
    /// from the ledger, or from an older worker).
    #[serde(default)]
    pub stages: StageTimes,
}

/// The `job_id` of the result answering a message rejected as `duplicate_mismatch`: the job id it
/// reused and the start of its payload digest, joined by `@`, which no job id contains, so it
/// can never be taken for the result of a job; the same for every copy of that message.
pub fn rejected_duplicate_id(reused_job_id: &str, digest: &[u8; 32]) -> String {
    format!("{reused_job_id}@{}", hex::encode(&digest[..8]))
}

impl ResultV1 {
    pub fn encode(&self) -> anyhow::Result<Vec<u8>> {
        Ok(rmp_serde::to_vec_named(self)?)
    }

    pub fn decode(bytes: &[u8]) -> anyhow::Result<Self> {
        Ok(rmp_serde::from_slice(bytes)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(synth: (u64, u64), start: (u64, u64)) -> PartitionTiming {
        PartitionTiming {
            synth_start_ms: synth.0,
            synth_end_ms: synth.1,
            start_start_ms: start.0,
            start_end_ms: start.1,
            ..Default::default()
        }
    }

    /// Overlapping partitions count once: the figures are wall time, never over the whole.
    #[test]
    fn stage_times_are_the_wall_time_covered() {
        let partitions = [
            partition((100, 400), (400, 500)),
            partition((150, 450), (500, 600)),
            partition((700, 800), (800, 900)),
        ];
        let t = StageTimes::of(&partitions, 90, 1000);
        assert_eq!(
            t,
            StageTimes {
                proving_ms: 1000,
                srs_load_ms: 90,
                synthesis_ms: 350 + 100,
                start_ms: 200 + 100,
            }
        );
        assert_eq!(StageTimes::of(&[], 5, 3).srs_load_ms, 3);
        assert_eq!(covered([(5, 5), (9, 2)].into_iter()), 0);
    }

    /// A result of an older worker (no `stages`) still decodes, with zeros.
    #[test]
    fn stage_times_default_to_zero() {
        let example = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/schemas/examples/result.failed.json"
        );
        let mut value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(example).unwrap()).unwrap();
        value.as_object_mut().unwrap().remove("stages");
        let result: ResultV1 = serde_json::from_value(value).unwrap();
        assert_eq!(result.stages, StageTimes::default());
    }

    #[test]
    fn a_rejected_duplicate_has_an_identity_no_job_can_have() {
        let id = rejected_duplicate_id("dup-1", &[0xab; 32]);
        assert_eq!(id, "dup-1@abababababababab");
        let job = crate::schema::JobV1 {
            v: 1,
            job_id: id,
            kind: crate::schema::JobKind::Canary,
            registered_proof: "canary".into(),
            miner_id: 1,
            sector_number: 1,
            phase1_output: vec![],
            deadline_unix_ms: None,
            canary: Some(crate::schema::CanarySpec {
                partitions: 1,
                seed: 1,
            }),
        };
        let encoded = crate::schema::job::encode(&job).unwrap();
        let e = crate::schema::job::decode_message(&encoded, &crate::schema::Limits::default())
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Undecodable, "{e}");
    }

    /// The contract's example of a rejected duplicate reads as a result whose identity is the
    /// one the worker gives such a message.
    #[test]
    fn the_duplicate_mismatch_example_follows_the_contract() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/schemas/examples/result.duplicate_mismatch.json"
        );
        let example: ResultV1 =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(example.error.unwrap().kind, ErrorKind::DuplicateMismatch);
        let reused = example.reused_job_id.unwrap();
        let (id, digest) = example.job_id.split_once('@').unwrap();
        assert_eq!(id, reused);
        assert_eq!(digest.len(), 16);
        assert!(digest.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
