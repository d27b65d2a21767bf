//! From a decoded job message to something the pipeline can prove, with the checks that make a
//! bad payload a permanent, classified failure. CPU-heavy (C1 JSON parsing, circuit set-up):
//! call from a blocking thread.

use std::sync::Arc;

use crate::canary::CanaryJob;
use crate::gate::estimate::{self, Estimate};
use crate::job::ProofJob;
use crate::porep::{parse_c1, proof_name, PorepJob};
use crate::schema::{DecodedJob, ErrorKind, JobError, JobKind, Limits};

pub struct Built {
    pub job: Arc<dyn ProofJob>,
    pub estimate: Estimate,
}

/// `in_flight`: partitions of one job the pipeline keeps alive (for the memory estimate).
pub fn build(decoded: &DecodedJob, limits: &Limits, in_flight: u64) -> Result<Built, JobError> {
    let job = &decoded.job;
    match job.kind {
        JobKind::Canary => {
            let spec = job
                .canary
                .as_ref()
                .ok_or_else(|| JobError::new(ErrorKind::Undecodable, "canary spec missing"))?;
            // `schema::job::validate` has checked the count against the limits, which never
            // exceed the canary's own; this is the canary's word on the same thing.
            let canary = CanaryJob::new(spec.partitions as usize, spec.seed)
                .map_err(|e| JobError::new(ErrorKind::InvalidInput, format!("{e:#}")))?;
            Ok(Built {
                estimate: estimate::canary(u64::from(spec.partitions), in_flight),
                job: Arc::new(canary),
            })
        }
        JobKind::PorepC2 => {
            // Refuse what this worker will not prove before spending a parse on it.
            if let Some(size) = estimate::sector_size_of(&job.registered_proof) {
                if size > limits.sector_size_limit() {
                    return Err(oversize_sector(size, limits));
                }
            }
            let c1 = parse_c1(&decoded.c1)
                .map_err(|e| JobError::new(ErrorKind::MalformedC1, format!("{e:#}")))?;
            let found = proof_name(c1.registered_proof());
            if found != job.registered_proof {
                return Err(JobError::new(
                    ErrorKind::ProofTypeMismatch,
                    format!(
                        "job says {}, the C1 output is for {found}",
                        job.registered_proof
                    ),
                ));
            }
            let porep = PorepJob::new(c1, job.miner_id, job.sector_number)
                .map_err(|e| JobError::new(ErrorKind::MalformedC1, format!("{e:#}")))?;
            let sector_size = porep.sector_size();
            if sector_size > limits.sector_size_limit() {
                return Err(oversize_sector(sector_size, limits));
            }
            let partitions = porep.partitions() as u64;
            Ok(Built {
                estimate: estimate::porep(sector_size, partitions, in_flight),
                job: Arc::new(porep),
            })
        }
    }
}

fn oversize_sector(size: u64, limits: &Limits) -> JobError {
    JobError::new(
        ErrorKind::Oversize,
        format!(
            "sector size {size} is over this worker's limit of {}",
            limits.sector_size_limit()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::porep::shape;
    use crate::schema::JobV1;

    /// A shape-only C1 is invalid input for good: a permanent failure, never retried.
    #[test]
    fn shape_only_c1_is_a_permanent_malformed_c1() {
        let proof = filecoin_proofs_api::RegisteredSealProof::StackedDrg2KiBV1_1;
        let made = shape::generate(proof, 1000, 3, 1, &|_, _| {}).unwrap();
        let decoded = DecodedJob {
            job: JobV1 {
                v: 1,
                job_id: "shape".into(),
                kind: JobKind::PorepC2,
                registered_proof: proof_name(proof),
                miner_id: 1000,
                sector_number: 3,
                phase1_output: Vec::new(),
                canary: None,
            },
            c1: made.c1_json().unwrap(),
            digest: [0; 32],
        };
        let Err(e) = build(&decoded, &Limits::default(), 1) else {
            panic!("a shape-only C1 was accepted");
        };
        assert_eq!(e.kind, ErrorKind::MalformedC1);
        assert!(e.kind.is_permanent());
        assert!(e.message.contains("--shape-only"), "{}", e.message);
    }
}
