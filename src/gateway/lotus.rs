//! lotus's remote C2: `POST {gateway.lotus_path}` with `RemoteCommit2Params` as Go's
//! encoding/json writes it, `{"Sector":{"Miner":1000,"Number":42},"ProofType":8,
//! "Commit1Out":"<base64>"}`, answered 200 with the raw proof bytes; lotus treats any other
//! status as a failure and says so with the body.
//!
//! The request becomes an ordinary `porep-c2` job with the job id `c2q submit` would give the
//! same C1 (`{miner}-{sector}-{first 6 bytes of its SHA-256, hex}`), so a request repeated after
//! the client gave up is answered from the ledger.

use anyhow::{bail, Context, Result};
use base64::Engine;
use filecoin_proofs_api::RegisteredSealProof;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::porep::{parse_c1, proof_name, PorepJob, REGISTERED_PROOFS};
use crate::schema::{self, JobKind, JobV1};

/// `RemoteCommit2Params`, field for field.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoteCommit2Params {
    #[serde(rename = "Sector")]
    sector: SectorId,
    #[serde(rename = "ProofType")]
    proof_type: i64,
    /// Go's `[]byte`: standard base64.
    #[serde(rename = "Commit1Out")]
    commit1_out: String,
}

/// `abi.SectorID`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SectorId {
    #[serde(rename = "Miner")]
    miner: u64,
    #[serde(rename = "Number")]
    number: u64,
}

/// What is wrong with a request, as the client is told.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The request is not what lotus sends (400).
    Malformed(String),
    /// The request is well formed but its C1 cannot be proved for that sector (422).
    Unprovable(String),
}

/// The job a valid request asks for.
pub struct LotusJob {
    pub job: JobV1,
    pub registered_proof: RegisteredSealProof,
}

/// go-state-types' `abi.RegisteredSealProof` numbers: the index in [`REGISTERED_PROOFS`].
fn proof_from_number(n: i64) -> Option<RegisteredSealProof> {
    usize::try_from(n)
        .ok()
        .and_then(|i| REGISTERED_PROOFS.get(i).copied())
}

/// Check a request body and build its job. Parsing and checking a 32 GiB C1 takes a few
/// seconds of CPU: call it off the async threads.
pub fn job_of(body: &[u8]) -> Result<LotusJob, Refusal> {
    let params: RemoteCommit2Params = serde_json::from_slice(body).map_err(|e| {
        Refusal::Malformed(format!(
            "not RemoteCommit2Params JSON ({e}): expected {{\"Sector\":{{\"Miner\":…,\"Number\":…}},\
             \"ProofType\":…,\"Commit1Out\":\"<base64>\"}}"
        ))
    })?;
    let registered_proof = proof_from_number(params.proof_type).ok_or_else(|| {
        Refusal::Malformed(format!(
            "ProofType {} is not a registered PoRep proof (0 to 19)",
            params.proof_type
        ))
    })?;
    let c1 = base64::engine::general_purpose::STANDARD
        .decode(params.commit1_out.as_bytes())
        .map_err(|e| Refusal::Malformed(format!("Commit1Out is not base64: {e}")))?;
    let (miner, sector) = (params.sector.miner, params.sector.number);
    check_c1(&c1, registered_proof, miner, sector)
        .map_err(|e| Refusal::Unprovable(one_line(&e)))?;

    let digest = Sha256::digest(&c1);
    let phase1_output = zstd::encode_all(&c1[..], 3)
        .map_err(|e| Refusal::Unprovable(format!("compressing the C1 output: {e}")))?;
    let job = JobV1 {
        v: schema::VERSION,
        job_id: format!("{miner}-{sector}-{}", hex::encode(&digest[..6])),
        kind: JobKind::PorepC2,
        registered_proof: proof_name(registered_proof),
        miner_id: miner,
        sector_number: sector,
        phase1_output,
        canary: None,
    };
    Ok(LotusJob {
        job,
        registered_proof,
    })
}

/// The C1 is one the worker can prove for this miner and sector under this proof type: it
/// parses, names the same proof, and passes every check a worker makes before proving (replica
/// id bound to the miner and sector, commitments, the vanilla proofs).
fn check_c1(c1: &[u8], proof: RegisteredSealProof, miner: u64, sector: u64) -> Result<()> {
    let parsed = parse_c1(c1)?;
    if parsed.registered_proof() != proof {
        bail!(
            "ProofType says {}, the C1 output is for {}",
            proof_name(proof),
            proof_name(parsed.registered_proof())
        );
    }
    PorepJob::new(parsed, miner, sector)
        .context("the C1 output cannot be proved for this sector")?;
    Ok(())
}

/// An error chain on one line, as lotus logs a failed remote C2's body.
fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proof_type_numbers_are_go_state_types() {
        let name = |n| proof_from_number(n).map(proof_name);
        assert_eq!(name(0).as_deref(), Some("StackedDrg2KiBV1"));
        assert_eq!(name(3).as_deref(), Some("StackedDrg32GiBV1"));
        assert_eq!(name(8).as_deref(), Some("StackedDrg32GiBV1_1"));
        assert_eq!(name(9).as_deref(), Some("StackedDrg64GiBV1_1"));
        assert_eq!(
            name(13).as_deref(),
            Some("StackedDrg32GiBV1_1_Feat_SyntheticPoRep")
        );
        assert_eq!(
            name(15).as_deref(),
            Some("StackedDrg2KiBV1_2_Feat_NonInteractivePoRep")
        );
        assert_eq!(
            name(19).as_deref(),
            Some("StackedDrg64GiBV1_2_Feat_NonInteractivePoRep")
        );
        assert_eq!(name(20), None);
        assert_eq!(name(-1), None);
    }

    #[test]
    fn malformed_requests_are_refused_with_a_reason() {
        let refused = |body: &[u8]| match job_of(body) {
            Err(Refusal::Malformed(why)) => why,
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("accepted"),
        };
        assert!(refused(b"not json").contains("not RemoteCommit2Params JSON"));
        assert!(
            refused(br#"{"Sector":{"Miner":1,"Number":2},"ProofType":8}"#).contains("Commit1Out")
        );
        assert!(
            refused(br#"{"Sector":{"Miner":1,"Number":2},"ProofType":42,"Commit1Out":""}"#)
                .contains("ProofType 42")
        );
        assert!(
            refused(br#"{"Sector":{"Miner":1,"Number":2},"ProofType":8,"Commit1Out":"%%%"}"#)
                .contains("not base64")
        );
        // A C1 that is not one: decoded fine, but unprovable.
        let body = format!(
            r#"{{"Sector":{{"Miner":1,"Number":2}},"ProofType":8,"Commit1Out":"{}"}}"#,
            base64::engine::general_purpose::STANDARD.encode(b"{}")
        );
        assert!(matches!(
            job_of(body.as_bytes()),
            Err(Refusal::Unprovable(_))
        ));
    }
}
