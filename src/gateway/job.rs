//! The job a door's request asks for: the C1 checked as a worker would check it, for the miner,
//! sector and registered proof the request names, and the `porep-c2` job built from it; or a
//! SnapDeals request's vanilla proofs and commitments checked the same way, and its
//! `snap-prove` job.

use anyhow::{bail, Context, Result};
use filecoin_proofs_api::RegisteredSealProof;
use sha2::{Digest, Sha256};

use super::request_id::RequestId;
use crate::porep::{parse_c1, proof_name, PorepJob, REGISTERED_PROOFS};
use crate::post::{post_proof_name, PostInput, PostJob, REGISTERED_POST_PROOFS};
use crate::schema::{self, DecodedJob, JobKind, JobV1, Limits};
use crate::snap::commitment::{self, CommitmentKind};
use crate::snap::{update_proof_name, SnapInput, SnapJob, REGISTERED_UPDATE_PROOFS};

/// What is wrong with a request, as the client is told.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The request is not what the door reads (HTTP 400, gRPC `INVALID_ARGUMENT`).
    Malformed(String),
    /// The request is well formed but its C1 cannot be proved for that sector (HTTP 422, gRPC
    /// `INVALID_ARGUMENT`).
    Unprovable(String),
}

/// go-state-types' `abi.RegisteredSealProof` numbers: the index in [`REGISTERED_PROOFS`].
pub fn proof_from_number(n: u64) -> Option<RegisteredSealProof> {
    usize::try_from(n)
        .ok()
        .and_then(|i| REGISTERED_PROOFS.get(i).copied())
}

/// A request's PoRep job.
pub struct PorepRequest<'a> {
    /// The C1 output JSON, or lotus-bench's `Commit2In` JSON around it.
    pub c1: &'a [u8],
    pub proof: RegisteredSealProof,
    /// The request's name for the proof's field, for the refusal when it disagrees with the C1.
    pub proof_field: &'static str,
    pub miner: u64,
    pub sector: u64,
    /// The client's id for the job; `None`: the id `c2q submit` gives the same C1.
    pub job_id: Option<String>,
}

/// Check a request's C1 and build its job, as the worker will decode it (digest included).
/// Parsing and checking a 32 GiB C1 takes a few seconds of CPU: call it off the async threads.
pub fn porep_job(request: PorepRequest, limits: &Limits) -> Result<DecodedJob, Refusal> {
    let PorepRequest {
        c1,
        proof,
        proof_field,
        miner,
        sector,
        job_id,
    } = request;
    check_c1(c1, proof, proof_field, miner, sector)
        .map_err(|e| Refusal::Unprovable(one_line(&e)))?;
    let job_id = job_id.unwrap_or_else(|| {
        let digest = Sha256::digest(c1);
        format!("{miner}-{sector}-{}", hex::encode(&digest[..6]))
    });
    let phase1_output = zstd::encode_all(c1, 3)
        .map_err(|e| Refusal::Unprovable(format!("compressing the C1 output: {e}")))?;
    let job = JobV1 {
        v: schema::VERSION,
        job_id,
        kind: JobKind::PorepC2,
        registered_proof: proof_name(proof),
        miner_id: miner,
        sector_number: sector,
        phase1_output,
        deadline_unix_ms: None,
        canary: None,
    };
    decode_as_worker(job, limits)
}

/// A SnapDeals request as Curio's proving-engine protocol carries it.
/// How a SnapDeals request carries its vanilla partition proofs.
pub enum PartitionProofs<'a> {
    /// One bincode-serialized `PartitionProof` per partition, as Curio sends them.
    Each(&'a [Vec<u8>]),
    /// All of them in one JSON document, as Go's `json.Marshal([][]byte)` writes them: an
    /// array of base64 strings.
    Json(&'a [u8]),
}

impl PartitionProofs<'_> {
    fn decode(&self) -> Result<Vec<Vec<u8>>, String> {
        use base64::Engine;
        match self {
            PartitionProofs::Each(proofs) => Ok(proofs.to_vec()),
            PartitionProofs::Json(json) => {
                let texts: Vec<String> = serde_json::from_slice(json).map_err(|e| {
                    format!("vanilla_proof is not a JSON array of base64 partition proofs: {e}")
                })?;
                texts
                    .iter()
                    .enumerate()
                    .map(|(k, text)| {
                        base64::engine::general_purpose::STANDARD
                            .decode(text)
                            .map_err(|e| format!("vanilla proof {k} is not base64: {e}"))
                    })
                    .collect()
            }
        }
    }
}

pub struct SnapRequest<'a> {
    /// `abi.RegisteredUpdateProof`: 0 (2 KiB) to 4 (64 GiB).
    pub proof_number: u64,
    pub vanilla_proofs: PartitionProofs<'a>,
    /// Binary CIDs (or the 32 bytes alone): the sector key's comm_r, the new comm_r, the new
    /// comm_d.
    pub sector_key_cid: &'a [u8],
    pub new_sealed_cid: &'a [u8],
    pub new_unsealed_cid: &'a [u8],
    pub miner: u64,
    pub sector: u64,
    /// The client's id for the job; `None`: one derived from the miner, sector and input.
    pub job_id: Option<String>,
}

/// Check a SnapDeals request as a worker will (the vanilla proofs verified against the
/// commitments) and build its `snap-prove` job. Call it off the async threads.
pub fn snap_job(request: SnapRequest, limits: &Limits) -> Result<DecodedJob, Refusal> {
    let malformed = |why: String| Refusal::Malformed(why);
    let proof = usize::try_from(request.proof_number)
        .ok()
        .and_then(|i| REGISTERED_UPDATE_PROOFS.get(i).copied())
        .ok_or_else(|| {
            malformed(format!(
                "registered_proof {} is not a registered update proof (0 to 4)",
                request.proof_number
            ))
        })?;
    let vanilla_proofs = request.vanilla_proofs.decode().map_err(malformed)?;
    let cid = |bytes: &[u8], kind, field: &str| {
        commitment::parse_bytes(bytes, kind).map_err(|e| malformed(format!("{field}: {e:#}")))
    };
    let input = SnapInput {
        registered_proof: proof,
        comm_r_old: cid(
            request.sector_key_cid,
            CommitmentKind::Sealed,
            "sector_key_cid",
        )?,
        comm_r_new: cid(
            request.new_sealed_cid,
            CommitmentKind::Sealed,
            "new_sealed_cid",
        )?,
        comm_d_new: cid(
            request.new_unsealed_cid,
            CommitmentKind::Unsealed,
            "new_unsealed_cid",
        )?,
        vanilla_proofs,
        // Curio's protocol carries no marker: a shape-only update's random proofs arrive as
        // ordinary ones, and fail their verification below.
        shape_only: false,
    };
    SnapJob::new(input.clone())
        .map_err(|e| Refusal::Unprovable(one_line(&e.context("the update cannot be proved"))))?;
    let payload = input
        .to_json()
        .map_err(|e| Refusal::Unprovable(format!("{e:#}")))?;
    let (miner, sector) = (request.miner, request.sector);
    let job_id = request.job_id.unwrap_or_else(|| {
        let digest = Sha256::digest(&payload);
        format!("{miner}-{sector}-{}", hex::encode(&digest[..6]))
    });
    let phase1_output = zstd::encode_all(&payload[..], 3)
        .map_err(|e| Refusal::Unprovable(format!("compressing the SnapDeals input: {e}")))?;
    decode_as_worker(
        JobV1 {
            v: schema::VERSION,
            job_id,
            kind: JobKind::SnapProve,
            registered_proof: update_proof_name(proof),
            miner_id: miner,
            sector_number: sector,
            phase1_output,
            deadline_unix_ms: None,
            canary: None,
        },
        limits,
    )
}

/// A PoSt request as Curio's proving-engine protocol carries it (`WindowPoStCuzk`,
/// `WinningPoStCuzk`).
pub struct PostRequest<'a> {
    /// A WindowPoSt partition (`WINDOW_POST_PARTITION`), else a WinningPoSt.
    pub window: bool,
    /// Go's `abi.RegisteredPoStProof`.
    pub proof_number: u64,
    pub sector_size: u64,
    pub miner: u64,
    pub randomness: &'a [u8],
    pub partition_index: u32,
    /// One `generate_single_vanilla_proof` output per sector.
    pub vanilla_proofs: &'a [Vec<u8>],
    /// The client's request id.
    pub request_id: RequestId,
    /// When the proof stops being of use (Unix ms): the job's `deadline_unix_ms`.
    pub deadline_unix_ms: Option<u64>,
}

/// Check a PoSt request as a worker will (each vanilla proof decoded and verified for the
/// randomness) and build its job. The job id is the request id and the payload's digest:
/// Curio sends every partition of a deadline under one request id, each partition a job of
/// its own, while the same partition sent again is the same job. Call it off the async
/// threads.
pub fn post_job(request: PostRequest, limits: &Limits) -> Result<DecodedJob, Refusal> {
    let malformed = |why: String| Refusal::Malformed(why);
    let (kind, what) = if request.window {
        (JobKind::WindowPost, "a WindowPoSt")
    } else {
        (JobKind::WinningPost, "a WinningPoSt")
    };
    let proof = usize::try_from(request.proof_number)
        .ok()
        .and_then(|i| REGISTERED_POST_PROOFS.get(i).copied())
        .filter(|p| crate::post::is_window(*p) == request.window)
        .ok_or_else(|| {
            malformed(format!(
                "registered_proof {} is not {what} proof (WinningPoSt 0 to 4, WindowPoSt 5 to 14)",
                request.proof_number
            ))
        })?;
    let size = u64::from(proof.sector_size());
    if request.sector_size != 0 && request.sector_size != size {
        return Err(malformed(format!(
            "sector_size {} disagrees with registered_proof {} ({size} bytes)",
            request.sector_size, request.proof_number
        )));
    }
    if request.vanilla_proofs.is_empty() {
        return Err(malformed(
            "vanilla_proofs is empty: it carries one vanilla proof per sector".into(),
        ));
    }
    let randomness: [u8; 32] = request.randomness.try_into().map_err(|_| {
        malformed(format!(
            "randomness is {} bytes, not 32",
            request.randomness.len()
        ))
    })?;
    let input = PostInput {
        registered_proof: proof,
        miner_id: request.miner,
        randomness,
        partition_index: u64::from(request.partition_index),
        vanilla_proofs: request.vanilla_proofs.to_vec(),
        shape_only: false,
    };
    PostJob::new(input.clone())
        .map_err(|e| Refusal::Unprovable(one_line(&e.context("the PoSt cannot be proved"))))?;
    let payload = input
        .to_json()
        .map_err(|e| Refusal::Unprovable(format!("{e:#}")))?;
    let digest: [u8; 32] = Sha256::digest(&payload).into();
    let job_id = request.request_id.job_id_with(&digest);
    let phase1_output = zstd::encode_all(&payload[..], 3)
        .map_err(|e| Refusal::Unprovable(format!("compressing the PoSt input: {e}")))?;
    decode_as_worker(
        JobV1 {
            v: schema::VERSION,
            job_id,
            kind,
            registered_proof: post_proof_name(proof),
            miner_id: request.miner,
            sector_number: 0,
            phase1_output,
            deadline_unix_ms: request.deadline_unix_ms,
            canary: None,
        },
        limits,
    )
}

/// What the worker does first: the same checks (id, sizes) and the same payload digest, which
/// the ledger compares when the job id comes again.
fn decode_as_worker(job: JobV1, limits: &Limits) -> Result<DecodedJob, Refusal> {
    let encoded = schema::job::encode(&job).map_err(|e| Refusal::Unprovable(format!("{e:#}")))?;
    schema::job::decode(&encoded, limits).map_err(|e| match e.kind {
        schema::ErrorKind::Undecodable | schema::ErrorKind::InvalidInput => {
            Refusal::Malformed(e.message)
        }
        _ => Refusal::Unprovable(e.to_string()),
    })
}

/// The C1 is one the worker can prove for this miner and sector under this proof type: it
/// parses, names the same proof, and passes every check a worker makes before proving (replica
/// id bound to the miner and sector, commitments, the vanilla proofs).
fn check_c1(
    c1: &[u8],
    proof: RegisteredSealProof,
    proof_field: &str,
    miner: u64,
    sector: u64,
) -> Result<()> {
    let parsed = parse_c1(c1)?;
    if parsed.registered_proof() != proof {
        bail!(
            "{proof_field} says {}, the C1 output is for {}",
            proof_name(proof),
            proof_name(parsed.registered_proof())
        );
    }
    PorepJob::new(parsed, miner, sector)
        .context("the C1 output cannot be proved for this sector")?;
    Ok(())
}

/// An error with its causes on one line, for a one-line refusal.
pub fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shape-only update cannot come through Curio's door as one (the protocol carries no
    /// marker), and its random vanilla proofs do not verify: refused as unprovable.
    #[test]
    fn a_shape_only_update_is_refused_as_unprovable() {
        let proof = crate::snap::REGISTERED_UPDATE_PROOFS[0];
        let input = crate::snap::shape::generate(proof, 2).unwrap();
        let request = SnapRequest {
            proof_number: 0,
            vanilla_proofs: PartitionProofs::Each(&input.vanilla_proofs),
            sector_key_cid: &input.comm_r_old,
            new_sealed_cid: &input.comm_r_new,
            new_unsealed_cid: &input.comm_d_new,
            miner: 1000,
            sector: 1,
            job_id: None,
        };
        match snap_job(request, &Limits::default()) {
            Err(Refusal::Unprovable(why)) => assert!(why.contains("do not verify"), "{why}"),
            Err(Refusal::Malformed(why)) => panic!("refused as malformed: {why}"),
            Ok(_) => panic!("a shape-only update was accepted"),
        }
    }

    /// Curio's PoSt requests: one request id for every partition of a deadline, so each
    /// partition's payload is a job of its own and the same one sent again the same job; the
    /// wrong kind of proof number, bad randomness and truncated proofs are refused.
    #[test]
    fn post_requests_are_jobs_by_request_id_and_payload() {
        use filecoin_proofs_api::RegisteredPoStProof;
        let sectors = crate::post::testdata::seal_2kib(1000, &[1, 2, 3], 7).unwrap();
        let randomness = crate::post::testdata::randomness(7);
        let window = RegisteredPoStProof::StackedDrgWindow2KiBV1_2;
        let first = sectors.post_input(window, randomness, &[1, 2]).unwrap();
        let second = sectors.post_input(window, randomness, &[3]).unwrap();
        let request = |proofs: &'static [Vec<u8>], number: u64, window: bool| PostRequest {
            window,
            proof_number: number,
            sector_size: 2048,
            miner: 1000,
            randomness: Box::leak(Box::new(randomness)),
            partition_index: 0,
            vanilla_proofs: proofs,
            // Curio's `wdpost-%d-%d-%d` of miner, partition and randomness[:8].
            request_id: RequestId::parse("wdpost-1000-0-[1 2 3 4 5 6 7 8]").unwrap(),
            deadline_unix_ms: None,
        };
        let first: &'static [Vec<u8>] = Box::leak(first.vanilla_proofs.into_boxed_slice());
        let second: &'static [Vec<u8>] = Box::leak(second.vanilla_proofs.into_boxed_slice());
        let limits = Limits::default();
        let a = post_job(request(first, 10, true), &limits).unwrap();
        let b = post_job(request(second, 10, true), &limits).unwrap();
        // The same partition sent again, with a deadline of its own: the same job.
        let again = post_job(
            PostRequest {
                deadline_unix_ms: Some(u64::MAX),
                ..request(first, 10, true)
            },
            &limits,
        )
        .unwrap();
        assert_eq!(again.job.deadline_unix_ms, Some(u64::MAX));
        assert_eq!(again.digest, a.digest);
        assert_ne!(a.job.job_id, b.job.job_id);
        assert!(
            a.job.job_id.starts_with("wdpost-1000-0-_1_2_3_4_5_6_7_8_-"),
            "{}",
            a.job.job_id
        );
        assert_eq!(a.job.job_id, again.job.job_id);
        assert_eq!(a.digest, again.digest);
        assert_eq!(a.job.kind, JobKind::WindowPost);
        assert_eq!(a.job.registered_proof, "StackedDrgWindow2KiBV1_2");

        let refused = |r: PostRequest| match post_job(r, &limits) {
            Err(Refusal::Malformed(why) | Refusal::Unprovable(why)) => why,
            Ok(_) => panic!("accepted"),
        };
        assert!(refused(request(first, 0, true)).contains("not a WindowPoSt"));
        assert!(refused(request(first, 10, false)).contains("not a WinningPoSt"));
        let mut cut = first.to_vec();
        cut[0].truncate(100);
        let truncated: &'static [Vec<u8>] = Box::leak(cut.into_boxed_slice());
        let why = refused(request(truncated, 10, true));
        assert!(why.contains("vanilla proof 0"), "{why}");
        let mut short = request(first, 10, true);
        short.randomness = &short.randomness[..31];
        assert!(refused(short).contains("31 bytes"));
    }
}
