//! lotus's remote C2: `POST {gateway.lotus_path}` with `RemoteCommit2Params` as Go's
//! encoding/json writes it, `{"Sector":{"Miner":1000,"Number":42},"ProofType":8,
//! "Commit1Out":"<base64>"}`, answered 200 with the raw proof bytes; lotus treats any other
//! status as a failure and says so with the body.
//!
//! The request becomes an ordinary `porep-c2` job with the job id `c2q submit` would give the
//! same C1 (`{miner}-{sector}-{first 6 bytes of its SHA-256, hex}`), so a request repeated after
//! the client gave up is answered from the ledger.

use base64::Engine;
use serde::Deserialize;

use super::job::{porep_job, proof_from_number, PorepRequest, Refusal};
use crate::schema::{DecodedJob, Limits};

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

/// Check a request body and build its job. Parsing and checking a 32 GiB C1 takes a few
/// seconds of CPU: call it off the async threads.
pub fn job_of(body: &[u8], limits: &Limits) -> Result<DecodedJob, Refusal> {
    let params: RemoteCommit2Params = serde_json::from_slice(body).map_err(|e| {
        Refusal::Malformed(format!(
            "not RemoteCommit2Params JSON ({e}): expected {{\"Sector\":{{\"Miner\":…,\"Number\":…}},\
             \"ProofType\":…,\"Commit1Out\":\"<base64>\"}}"
        ))
    })?;
    let proof = u64::try_from(params.proof_type)
        .ok()
        .and_then(proof_from_number)
        .ok_or_else(|| {
            Refusal::Malformed(format!(
                "ProofType {} is not a registered PoRep proof (0 to 19)",
                params.proof_type
            ))
        })?;
    let c1 = base64::engine::general_purpose::STANDARD
        .decode(params.commit1_out.as_bytes())
        .map_err(|e| Refusal::Malformed(format!("Commit1Out is not base64: {e}")))?;
    let request = PorepRequest {
        c1: &c1,
        proof,
        proof_field: "ProofType",
        miner: params.sector.miner,
        sector: params.sector.number,
        job_id: None,
    };
    porep_job(request, limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::porep::proof_name;

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
        assert_eq!(name(u64::MAX), None);
    }

    #[test]
    fn malformed_requests_are_refused_with_a_reason() {
        let limits = Limits::default();
        let refused = |body: &[u8]| match job_of(body, &limits) {
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
            job_of(body.as_bytes(), &limits),
            Err(Refusal::Unprovable(_))
        ));
    }
}
