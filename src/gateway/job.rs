//! The job a door's request asks for: the C1 checked as a worker would check it, for the miner,
//! sector and registered proof the request names, and the `porep-c2` job built from it.

use anyhow::{bail, Context, Result};
use filecoin_proofs_api::RegisteredSealProof;
use sha2::{Digest, Sha256};

use crate::porep::{parse_c1, proof_name, PorepJob, REGISTERED_PROOFS};
use crate::schema::{self, DecodedJob, JobKind, JobV1, Limits};

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
        canary: None,
    };
    // What the worker does first: the same checks (id, sizes) and the same payload digest,
    // which the ledger compares when the job id comes again.
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
