//! Every job kind c2q proves, registered in one place: how a job of the kind is built from its
//! message (with the checks that make a bad payload a permanent, classified failure), what it
//! holds in memory, its worst case for a worker's limits, and how a failure in each pipeline
//! stage is classified. A new kind is a `schema::JobKind` variant, its [`ProofJob`], its size
//! classes (`classes`), and an arm in each match here, which the compiler asks for.

use std::sync::Arc;

use crate::canary::{self, CanaryJob};
use crate::gate::estimate::{largest, sector_size_of, Estimate, GIB, KIB, MIB, SECTOR_SIZES};
use crate::job::ProofJob;
use crate::pipeline::{Priority, Stage};
use crate::porep::{self, parse_c1, proof_name, PorepJob};
use crate::post::{self, parse_post_input, post_proof_name, PostJob};
use crate::schema::{DecodedJob, ErrorKind, JobError, JobKind, Limits};
use crate::snap::{self, parse_snap_input, update_proof_name, SnapJob};

/// A job ready for the pipeline, with what it may hold in memory.
pub struct Built {
    pub job: Arc<dyn ProofJob>,
    pub estimate: Estimate,
    /// The pipeline lane its partitions take: urgent for proofs due within a deadline.
    pub priority: Priority,
}

/// Build the job a decoded message describes. CPU-heavy (C1 JSON parsing, circuit set-up):
/// call from a blocking thread. `in_flight`: partitions of one job the pipeline keeps alive
/// (for the memory estimate).
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
                estimate: canary_estimate(u64::from(spec.partitions), in_flight),
                job: Arc::new(canary),
                priority: Priority::Normal,
            })
        }
        JobKind::PorepC2 => {
            // Refuse what this worker will not prove before spending a parse on it.
            if let Some(size) = sector_size_of(&job.registered_proof) {
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
                estimate: porep_estimate(sector_size, partitions, in_flight),
                job: Arc::new(porep),
                priority: Priority::Normal,
            })
        }
        JobKind::SnapProve => {
            if let Some(size) = sector_size_of(&job.registered_proof) {
                if size > limits.sector_size_limit() {
                    return Err(oversize_sector(size, limits));
                }
            }
            let input = parse_snap_input(&decoded.c1)
                .map_err(|e| JobError::new(ErrorKind::InvalidInput, format!("{e:#}")))?;
            let found = update_proof_name(input.registered_proof);
            if found != job.registered_proof {
                return Err(JobError::new(
                    ErrorKind::ProofTypeMismatch,
                    format!(
                        "job says {}, the SnapDeals input is for {found}",
                        job.registered_proof
                    ),
                ));
            }
            let sector_size = input.sector_size();
            if sector_size > limits.sector_size_limit() {
                return Err(oversize_sector(sector_size, limits));
            }
            let snap = SnapJob::new(input)
                .map_err(|e| JobError::new(ErrorKind::InvalidInput, format!("{e:#}")))?;
            Ok(Built {
                estimate: snap_estimate(sector_size, snap.partitions() as u64, in_flight),
                job: Arc::new(snap),
                priority: Priority::Normal,
            })
        }
        JobKind::WindowPost | JobKind::WinningPost => {
            let invalid =
                |e: anyhow::Error| JobError::new(ErrorKind::InvalidInput, format!("{e:#}"));
            let input = parse_post_input(&decoded.c1).map_err(invalid)?;
            let found = post_proof_name(input.registered_proof);
            let window = job.kind == JobKind::WindowPost;
            let named = post::post_proof_from_name(&job.registered_proof).ok();
            if named != Some(input.registered_proof) || input.is_window() != window {
                return Err(JobError::new(
                    ErrorKind::ProofTypeMismatch,
                    format!(
                        "a {} job says {}, its input is for {found}",
                        job.kind.as_str(),
                        job.registered_proof
                    ),
                ));
            }
            if input.miner_id != job.miner_id {
                return Err(JobError::new(
                    ErrorKind::InvalidInput,
                    format!(
                        "the job is for miner {}, its PoSt input for miner {}",
                        job.miner_id, input.miner_id
                    ),
                ));
            }
            let sector_size = input.sector_size();
            if sector_size > limits.sector_size_limit() {
                return Err(oversize_sector(sector_size, limits));
            }
            let post = PostJob::new(input).map_err(invalid)?;
            Ok(Built {
                estimate: post_estimate(window, sector_size, in_flight),
                job: Arc::new(post),
                // A WindowPoSt is due within its deadline's window, a WinningPoSt within the
                // epoch: ahead of every PoRep or SnapDeals partition that has not started.
                priority: Priority::Urgent,
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

/// The failure class of a job of `kind` that failed in the pipeline's `stage` (a failure to
/// begin proving is the backend's, handled apart).
pub fn failure_kind(stage: Stage, kind: JobKind) -> ErrorKind {
    match (stage, kind) {
        // Synthesis of a PoRep partition fails on inputs that do not describe a sealed
        // sector: permanent. Everything else may be the machine's fault.
        (Stage::Synthesis, JobKind::PorepC2) => ErrorKind::MalformedC1,
        // Likewise for vanilla proofs that passed their check but do not synthesize.
        (Stage::Synthesis, JobKind::SnapProve) => ErrorKind::InvalidInput,
        // And for PoSt vanilla proofs.
        (Stage::Synthesis, JobKind::WindowPost | JobKind::WinningPost) => ErrorKind::InvalidInput,
        // Retried like a transient failure, under its own name.
        (Stage::Verify, _) => ErrorKind::VerificationFailed,
        (Stage::Srs | Stage::Synthesis | Stage::Start | Stage::Finish, _) => ErrorKind::Transient,
    }
}

/// The estimate of a PoRep C2 job of this sector size and partition count, in a pipeline that
/// keeps `in_flight` partitions alive.
pub fn porep_estimate(sector_size: u64, partitions: u64, in_flight: u64) -> Estimate {
    // (resident bytes: the SRS and the recorded constraints; per-partition working set with A,
    // B, C made on the CPU; the same made on the GPU), from the circuit sizes of
    // filecoin-proofs v19 parameters; unknown sizes get the next larger row. 32 GiB and 64 GiB
    // sectors have the same circuit (130,278,869 constraints): ~47.4 GB of points and 7.3 GB of
    // recorded constraints on the host (50.9 GiB together), and per full-size partition its
    // witness (4.2 GB) plus, where A, B, C are made on the CPU, its evaluations (12.5 GB) and
    // its aux values' compact form until the start (0.1 GB): 15.7 GiB.
    // Measured through the pipeline on one H200:
    // - products on the CPU (ops/bench/gpu-2026-12-01-h.md): peak RSS 77.3 GB at 32 GiB and
    //   77.6 GB at 64 GiB, against the 100 GiB this reserves for one GPU;
    // - products on the GPU (ops/bench/gpu-2026-12-01-j.md, -k.md): peak RSS 56.0 GB with
    //   three partitions in flight and three more jobs parsed and waiting: ~1.3 GB besides the
    //   points and the constraints, against the 3 GiB this reserves per job.
    // 2 KiB, measured with `c2q prove --backend cpu` (one partition): peak RSS 1.80 GB, of
    // which the decoded parameters 1.11 GB and the recorded constraints 0.15 GB; the rest is
    // the partition on the CPU backend (evaluations, witness, transforms) and the process.
    // 8 MiB and 512 MiB are not measured: scaled from their parameter files (8 MiB: 1.4 GB).
    let (srs, per_partition, per_partition_on_gpu) = match sector_size {
        s if s <= 2 * KIB => (1280 * MIB, 512 * MIB, 128 * MIB),
        s if s <= 8 * MIB => (1792 * MIB, GIB, 256 * MIB),
        s if s <= 512 * MIB => (8 * GIB, 4 * GIB, GIB),
        s if s <= 64 * GIB => (52 * GIB, 16 * GIB, GIB),
        _ => (104 * GIB, 32 * GIB, 2 * GIB),
    };
    Estimate {
        srs_key: porep::srs_key(sector_size),
        srs_bytes: srs,
        per_partition,
        per_partition_on_gpu,
        partitions,
        in_flight,
    }
}

/// The estimate of a SnapDeals job of this sector size and partition count, in a pipeline
/// that keeps `in_flight` partitions alive.
pub fn snap_estimate(sector_size: u64, partitions: u64, in_flight: u64) -> Estimate {
    // (resident: the SRS and the recorded constraints; per partition with A, B, C on the CPU;
    // on the GPU). 2 KiB, measured with `c2q prove --backend cpu` on a test update: parameters
    // 656 MB, recorded constraints 95 MB, peak RSS 1.11 GB. 32 GiB and 64 GiB, measured through
    // the pipeline on an H200 (ops/bench/gpu-2026-12-03-q.md, gpu-2026-12-04-r.md): SRS 34.5 GB
    // on the host, recorded constraints 4.7 GB, peak RSS 39.9 GB and 41.2 GB with A, B, C on
    // the GPU and two or three jobs queued (~0.1 GB per partition in flight: a 51 MB compact
    // witness, packed once). 512 MiB and 8 MiB are scaled from their circuits: the update
    // circuit's constraints are mostly its challenges' SHA-256 paths through TreeD, ~81M per
    // partition at 32 GiB and 64 GiB, ~60M at 512 MiB; 8 MiB has 10 challenges per partition.
    let (srs, per_partition, per_partition_on_gpu) = match sector_size {
        s if s <= 2 * KIB => (768 * MIB, 512 * MIB, 128 * MIB),
        s if s <= 8 * MIB => (2 * GIB, GIB, 256 * MIB),
        s if s <= 512 * MIB => (28 * GIB, 8 * GIB, GIB),
        _ => (38 * GIB, 10 * GIB, GIB),
    };
    Estimate {
        srs_key: snap::srs_key(sector_size),
        srs_bytes: srs,
        per_partition,
        per_partition_on_gpu,
        partitions,
        in_flight,
    }
}

/// The estimate of a PoSt job (one partition): a WindowPoSt partition if `window`, else a
/// WinningPoSt, of this sector size, in a pipeline that keeps `in_flight` partitions alive.
pub fn post_estimate(window: bool, sector_size: u64, in_flight: u64) -> Estimate {
    // (resident: the SRS and the recorded constraints; the partition with A, B, C on the CPU;
    // on the GPU). A 32 GiB or 64 GiB WindowPoSt partition is 125,279,217 constraints
    // (2,349 sectors of ten challenges), nearly a PoRep partition's 130,278,869: PoRep's
    // figures. Smaller WindowPoSt partitions hold two sectors; a WinningPoSt is 66 challenges
    // of one sector, 370,590 constraints at 32 GiB: under a GiB of parameters. 2 KiB circuits
    // are small (21,866 constraints for a window partition, 90,750 for a WinningPoSt):
    // measured with `c2q prove --backend cpu`, peak RSS 47 MB and 156 MB. Unlike PoRep's, a
    // full-size window partition's witness is nearly all Poseidon state (99 % of its 126.9M
    // variables neither 0 nor 1): 4.1 GB compact, as much again packed for the GPU, 4.1 GB
    // expanded where the finalizer or the CPU needs it, so 9 GiB with A, B, C on the GPU and
    // 20 GiB with them (12.5 GB) on the CPU. A WinningPoSt 32 GiB ran in 0.5 GB of peak RSS
    // (ops/bench/gpu-2026-12-03-q.md).
    let (srs, per_partition, per_partition_on_gpu) = match (window, sector_size) {
        (_, s) if s <= 2 * KIB => (256 * MIB, 256 * MIB, 64 * MIB),
        (true, s) if s <= 512 * MIB => (512 * MIB, 512 * MIB, 128 * MIB),
        (true, _) => (52 * GIB, 20 * GIB, 9 * GIB),
        (false, _) => (GIB, GIB, 256 * MIB),
    };
    Estimate {
        srs_key: post::srs_key(window, sector_size),
        srs_bytes: srs,
        per_partition,
        per_partition_on_gpu,
        partitions: 1,
        in_flight,
    }
}

/// The canary circuit: a few thousand constraints, parameters generated in-process.
pub fn canary_estimate(partitions: u64, in_flight: u64) -> Estimate {
    Estimate {
        srs_key: canary::srs_key(),
        srs_bytes: 16 * MIB,
        per_partition: 16 * MIB,
        per_partition_on_gpu: 16 * MIB,
        partitions,
        in_flight,
    }
}

/// The worst case of every job kind a worker with these limits accepts (for PoRep and
/// SnapDeals, their largest sector with as many partitions as the pipeline keeps alive): what
/// the gate must have free before a message is fetched, with each kind's SRS counted while it
/// is not loaded.
pub fn worst_cases(
    max_sector_size: u64,
    max_canary_partitions: u64,
    in_flight: u64,
) -> Vec<Estimate> {
    JobKind::ALL
        .iter()
        .map(|kind| match kind {
            JobKind::PorepC2 => porep_estimate(max_sector_size, in_flight, in_flight),
            JobKind::SnapProve => snap_estimate(max_sector_size, in_flight, in_flight),
            JobKind::WindowPost => post_estimate(true, max_sector_size, in_flight),
            JobKind::WinningPost => post_estimate(false, max_sector_size, in_flight),
            JobKind::Canary => canary_estimate(max_canary_partitions, in_flight),
        })
        .collect()
}

/// The largest sector size up to `at_most` whose PoRep worst case, beside the canary's, fits
/// `job_budget`: what a worker without a configured sector limit takes. `None` when not even
/// the smallest fits. SnapDeals sizes are not held against it: a worker serves each SnapDeals
/// size class whose own worst case fits (`classes`), so that a SnapDeals size it cannot hold
/// never narrows the PoRep sectors it proves.
pub fn largest_sector_within(
    job_budget: u64,
    at_most: u64,
    max_canary_partitions: u64,
    in_flight: u64,
) -> Option<u64> {
    SECTOR_SIZES
        .iter()
        .rev()
        .copied()
        .filter(|&size| size <= at_most)
        .find(|&size| {
            let porep_and_canary = [
                porep_estimate(size, in_flight, in_flight),
                canary_estimate(max_canary_partitions, in_flight),
            ];
            largest(&porep_and_canary) <= job_budget
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::porep::shape;
    use crate::schema::JobV1;

    #[test]
    fn work_shrinks_only_when_fewer_than_in_flight_remain() {
        let e = porep_estimate(32 * GIB, 10, 3);
        assert_eq!(e.work(10), 3 * 16 * GIB);
        assert_eq!(e.work(3), 3 * 16 * GIB);
        assert_eq!(e.work(1), 16 * GIB);
        assert_eq!(e.work(0), 0);
        // More partitions alive (more synthesis threads or GPUs): a larger reservation.
        assert_eq!(porep_estimate(32 * GIB, 10, 6).work(10), 6 * 16 * GIB);
    }

    /// 32 GiB and 64 GiB sectors prove the same circuit: the same memory, and it covers the
    /// peak measured through the pipeline on one GPU (77.6 GB, three partitions alive).
    #[test]
    fn full_size_sectors_share_one_estimate_that_covers_the_measured_peak() {
        let (e32, e64) = (
            porep_estimate(32 * GIB, 10, 3),
            porep_estimate(64 * GIB, 10, 3),
        );
        assert_eq!(
            (e32.srs_bytes, e32.per_partition),
            (e64.srs_bytes, e64.per_partition)
        );
        assert!(e64.total() >= 77_600_000_000);
        assert_eq!(e32.per_partition_on_gpu, e64.per_partition_on_gpu);
    }

    /// A worker without a configured sector limit takes the largest size its memory holds:
    /// on a 24 GiB machine (21.6 GiB after the 10 % margin) 512 MiB sectors, on the H200 box
    /// (125 GiB) every size.
    #[test]
    fn an_unset_sector_limit_takes_what_the_budget_holds() {
        let within = |budget| largest_sector_within(budget, 64 * GIB, 64, 3);
        let small_box = 24 * GIB - 24 * GIB / 10 - 256 * MIB;
        assert_eq!(within(small_box), Some(512 * MIB));
        let h200_box = 125 * GIB - 125 * GIB / 10 - 256 * MIB;
        assert_eq!(within(h200_box), Some(64 * GIB));
        assert_eq!(
            largest_sector_within(h200_box, 32 * GIB, 64, 3),
            Some(32 * GIB)
        );
        assert_eq!(within(GIB), None);
        // Exactly the worst case of a size is enough for it.
        let exact = largest(&[porep_estimate(8 * MIB, 3, 3), canary_estimate(64, 3)]);
        assert_eq!(within(exact), Some(8 * MIB));
        assert_eq!(within(exact - 1), Some(2 * KIB));
    }

    /// With A, B, C made on the GPU a full-size job holds a fraction of the CPU figure, and
    /// still covers the measured peak: 56.0 GB with three partitions in flight.
    #[test]
    fn products_on_the_gpu_shrink_a_full_size_job_to_what_was_measured() {
        let e = porep_estimate(32 * GIB, 10, 3);
        assert_eq!(e.work_on_gpu(10), 3 * GIB);
        assert_eq!(e.work_on_gpu(2), 2 * GIB);
        assert!(e.srs_bytes + e.work_on_gpu(10) >= 56_000_000_000);
        assert!(e.work_on_gpu(10) * 10 < e.work(10));
        // Two 32 GiB jobs fit beside one resident SRS on the H200 box (125 GiB less its 10 %
        // margin) once the first has shown where its products are made.
        let budget = 125 * GIB - 125 * GIB / 10;
        assert!(e.srs_bytes + e.work_on_gpu(10) + e.work(10) <= budget);
    }

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
                deadline_unix_ms: None,
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

    /// A shape-only SnapDeals input is invalid input for good, as a shape-only C1 is.
    #[test]
    fn shape_only_snap_input_is_a_permanent_invalid_input() {
        let proof = filecoin_proofs_api::RegisteredUpdateProof::StackedDrg2KiBV1;
        let made = snap::shape::generate(proof, 1).unwrap();
        let decoded = DecodedJob {
            job: JobV1 {
                v: 1,
                job_id: "shape".into(),
                kind: JobKind::SnapProve,
                registered_proof: update_proof_name(proof),
                miner_id: 1000,
                sector_number: 3,
                phase1_output: Vec::new(),
                deadline_unix_ms: None,
                canary: None,
            },
            c1: made.to_json().unwrap(),
            digest: [0; 32],
        };
        let Err(e) = build(&decoded, &Limits::default(), 1) else {
            panic!("a shape-only SnapDeals input was accepted");
        };
        assert_eq!(e.kind, ErrorKind::InvalidInput);
        assert!(e.kind.is_permanent());
        assert!(e.message.contains("--shape-only"), "{}", e.message);
    }

    /// A shape-only PoSt input is invalid input for good, whichever kind carries it.
    #[test]
    fn shape_only_post_input_is_a_permanent_invalid_input() {
        use filecoin_proofs_api::RegisteredPoStProof;
        for (proof, kind) in [
            (
                RegisteredPoStProof::StackedDrgWindow2KiBV1_2,
                JobKind::WindowPost,
            ),
            (
                RegisteredPoStProof::StackedDrgWinning2KiBV1,
                JobKind::WinningPost,
            ),
        ] {
            let input = post::shape::generate(proof, 1000, 1).unwrap();
            let decoded = DecodedJob {
                job: JobV1 {
                    v: 1,
                    job_id: "shape".into(),
                    kind,
                    registered_proof: post_proof_name(proof),
                    miner_id: 1000,
                    sector_number: 0,
                    phase1_output: Vec::new(),
                    deadline_unix_ms: None,
                    canary: None,
                },
                c1: input.to_json().unwrap(),
                digest: [0; 32],
            };
            let Err(e) = build(&decoded, &Limits::default(), 1) else {
                panic!("a shape-only PoSt input was accepted");
            };
            assert_eq!(e.kind, ErrorKind::InvalidInput);
            assert!(e.kind.is_permanent());
            assert!(e.message.contains("--shape-only"), "{}", e.message);
        }
    }

    /// The `snap-prove` example in `schemas/examples/` is a whole 2 KiB update: it decodes as
    /// a worker decodes it and builds a job (its vanilla proofs verify), in the snap-2k class;
    /// the same input under another proof name, or tampered, is a permanent failure.
    #[test]
    fn the_snap_example_builds_and_bad_snap_jobs_fail_for_good() {
        use base64::Engine;
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/schemas/examples/job.snap-prove.json"
        );
        let mut example: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let b64 = example["phase1_output"].as_str().unwrap().to_string();
        example["phase1_output"] = serde_json::Value::Null;
        let mut job: JobV1 = serde_json::from_value(serde_json::json!({
            "v": example["v"], "job_id": example["job_id"], "kind": example["kind"],
            "registered_proof": example["registered_proof"], "miner_id": example["miner_id"],
            "sector_number": example["sector_number"],
        }))
        .unwrap();
        job.phase1_output = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        let decode = |job: &JobV1| {
            crate::schema::job::decode(
                &crate::schema::job::encode(job).unwrap(),
                &Limits::default(),
            )
            .unwrap()
        };
        let decoded = decode(&job);
        assert_eq!(
            crate::classes::SizeClass::of(&job).unwrap().key(),
            "snap-2k"
        );
        let built = build(&decoded, &Limits::default(), 1).unwrap();
        assert_eq!(built.job.partitions(), 1);
        assert_eq!(built.estimate.srs_key, snap::srs_key(2 * KIB));
        // Covers the measured peak of a 2 KiB update proved on the CPU: 1.11 GB.
        assert!(built.estimate.total() >= 1_115_000_000);

        let renamed = JobV1 {
            registered_proof: "StackedDrg8MiBV1".into(),
            ..job.clone()
        };
        let Err(e) = build(&decode(&renamed), &Limits::default(), 1) else {
            panic!("a snap job under another proof name was accepted");
        };
        assert_eq!(e.kind, ErrorKind::ProofTypeMismatch, "{e}");

        let mut input = parse_snap_input(&decoded.c1).unwrap();
        input.vanilla_proofs[0][100] ^= 1;
        let tampered = JobV1 {
            phase1_output: zstd::encode_all(&input.to_json().unwrap()[..], 3).unwrap(),
            ..job
        };
        let Err(e) = build(&decode(&tampered), &Limits::default(), 1) else {
            panic!("a tampered snap job was accepted");
        };
        assert_eq!(e.kind, ErrorKind::InvalidInput, "{e}");
        assert!(e.kind.is_permanent());
    }

    /// The `window-post` and `winning-post` examples in `schemas/examples/` are whole 2 KiB
    /// proofs: each decodes as a worker decodes it and builds a job (its vanilla proofs
    /// verify) in its class; under the other kind, another proof or another miner, the same
    /// input is a permanent failure.
    #[test]
    fn the_post_examples_build_and_mislabelled_post_jobs_fail_for_good() {
        use base64::Engine;
        for (file, class) in [
            ("job.window-post.json", "window-post-2k"),
            ("job.winning-post.json", "winning-post-2k"),
        ] {
            let path = format!("{}/schemas/examples/{file}", env!("CARGO_MANIFEST_DIR"));
            let mut example: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            let payload = base64::engine::general_purpose::STANDARD
                .decode(example["phase1_output"].as_str().unwrap())
                .unwrap();
            example["phase1_output"] = serde_json::json!([]);
            let mut job: JobV1 = serde_json::from_value(example).unwrap();
            job.phase1_output = payload;
            let decode = |job: &JobV1| {
                crate::schema::job::decode(
                    &crate::schema::job::encode(job).unwrap(),
                    &Limits::default(),
                )
                .unwrap()
            };
            assert_eq!(crate::classes::SizeClass::of(&job).unwrap().key(), class);
            let built = build(&decode(&job), &Limits::default(), 1).unwrap();
            assert_eq!(built.job.partitions(), 1);
            // Covers the peak measured for a 2 KiB PoSt on the CPU (156 MB).
            assert!(built.estimate.total() >= 156_000_000);

            let other_kind = if job.kind == JobKind::WindowPost {
                JobKind::WinningPost
            } else {
                JobKind::WindowPost
            };
            for wrong in [
                JobV1 {
                    kind: other_kind,
                    ..job.clone()
                },
                JobV1 {
                    registered_proof: "StackedDrgWindow8MiBV1_2".into(),
                    ..job.clone()
                },
            ] {
                let Err(e) = build(&decode(&wrong), &Limits::default(), 1) else {
                    panic!("a mislabelled PoSt job was accepted");
                };
                assert_eq!(e.kind, ErrorKind::ProofTypeMismatch, "{e}");
            }
            let elsewhere = JobV1 {
                miner_id: 1001,
                ..job.clone()
            };
            let Err(e) = build(&decode(&elsewhere), &Limits::default(), 1) else {
                panic!("a PoSt job of another miner was accepted");
            };
            assert_eq!(e.kind, ErrorKind::InvalidInput, "{e}");
            assert!(e.kind.is_permanent());
        }
    }

    #[test]
    fn failures_are_classified_by_stage_and_kind() {
        assert_eq!(
            failure_kind(Stage::Synthesis, JobKind::PorepC2),
            ErrorKind::MalformedC1
        );
        assert_eq!(
            failure_kind(Stage::Synthesis, JobKind::SnapProve),
            ErrorKind::InvalidInput
        );
        assert_eq!(
            failure_kind(Stage::Synthesis, JobKind::Canary),
            ErrorKind::Transient
        );
        for kind in JobKind::ALL {
            assert_eq!(
                failure_kind(Stage::Verify, kind),
                ErrorKind::VerificationFailed
            );
            assert_eq!(failure_kind(Stage::Finish, kind), ErrorKind::Transient);
        }
    }
}
