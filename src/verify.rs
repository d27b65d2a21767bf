//! `c2q verify`: check a published proof without writing code. A PoRep proof is checked
//! against the C1 output it was made from (`porep::verify`, filecoin-proofs' verifier), a
//! SnapDeals proof against its input (filecoin-proofs' update verifier); a canary's against
//! the seed of its job. The proof may be the raw bytes (`c2q prove --out`,
//! `c2q submit --wait --out`) or the result message the worker published (MessagePack as on
//! the wire, or JSON as in `schemas/examples/`, the proof in base64).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, ensure, Context, Result};
use base64::Engine;

use crate::canary::{self, CanaryJob};
use crate::job::ProofJob;
use crate::porep::verify::{
    parse_partition_proofs, SealCheckError, SealStatement, SealVerdict, PARTITION_PROOF_BYTES,
};
use crate::porep::{proof_name, read_c1_file};
use crate::schema::{JobKind, ResultV1, Status};

/// No proof file is larger than this: 192 bytes per partition, or a result message with a
/// few hundred bytes more per partition for its timings.
const MAX_PROOF_FILE_BYTES: u64 = 16 << 20;

#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// The C1 output or SnapDeals input the proof was made from (as `c2q prove` takes it);
    /// with --canary, the proof itself.
    #[arg(value_name = "C1")]
    pub file: PathBuf,
    /// The proof: raw bytes (192 per partition) or the worker's result message (MessagePack
    /// or JSON). Not with --canary.
    #[arg(
        value_name = "PROOF",
        required_unless_present = "canary",
        conflicts_with = "canary"
    )]
    pub proof: Option<PathBuf>,
    /// The miner's actor id the proof is for (PoRep).
    #[arg(long, conflicts_with = "canary")]
    pub miner: Option<u64>,
    /// The sector number the proof is for (PoRep).
    #[arg(long, conflicts_with = "canary")]
    pub sector: Option<u64>,
    /// Verify a canary job's proof (FILE is the proof or result) against its `canary.seed`.
    #[arg(long, requires = "seed")]
    pub canary: bool,
    /// The canary job's seed (`canary.seed` in the job; `c2q submit --canary` prints it).
    #[arg(long, requires = "canary")]
    pub seed: Option<u64>,
    /// The canary job's partition count, if known (default: the proof's length says).
    #[arg(long, requires = "canary")]
    pub partitions: Option<usize>,
}

/// Why `c2q verify` gave no verdict; each maps to one exit code.
#[derive(Debug)]
pub enum VerifyError {
    /// Unreadable files, inputs that are not what they claim or do not belong together.
    BadInput(anyhow::Error),
    /// The verifying key is missing or corrupt.
    Params(anyhow::Error),
    /// The verifier itself failed.
    Failed(anyhow::Error),
}

/// The verdict on a proof whose inputs were in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Valid,
    Invalid(String),
}

/// `c2q verify`.
pub fn run(args: &VerifyArgs) -> Result<Verdict, VerifyError> {
    if args.canary {
        let seed = args
            .seed
            .ok_or_else(|| VerifyError::BadInput(anyhow!("--canary needs --seed")))?;
        let proof = read_proof_file(&args.file).map_err(VerifyError::BadInput)?;
        return verify_canary(&proof, seed, args.partitions);
    }
    let bad = |what: &str| VerifyError::BadInput(anyhow!("{what} is required"));
    let proof_path = args.proof.as_deref().ok_or_else(|| bad("PROOF"))?;
    if crate::snap::is_snap_input_file(&args.file).map_err(VerifyError::BadInput)? {
        return verify_snap(&args.file, proof_path);
    }
    if crate::post::is_post_input_file(&args.file).map_err(VerifyError::BadInput)? {
        return verify_post(&args.file, proof_path);
    }
    let miner = args.miner.ok_or_else(|| bad("--miner"))?;
    let sector = args.sector.ok_or_else(|| bad("--sector"))?;
    let c1 = read_c1_file(&args.file).map_err(VerifyError::BadInput)?;
    let statement = SealStatement::from_c1(&c1, miner, sector)
        .with_context(|| format!("{}", args.file.display()))
        .map_err(VerifyError::BadInput)?;
    let proof = read_proof_file(proof_path).map_err(VerifyError::BadInput)?;
    if let Some(result) = &proof.result {
        result_matches_porep(result, &statement)
            .with_context(|| format!("{}", proof_path.display()))
            .map_err(VerifyError::BadInput)?;
    }
    match statement.verify(&proof.bytes) {
        Ok(SealVerdict::Valid { .. }) => Ok(Verdict::Valid),
        Ok(SealVerdict::Invalid(reason)) => Ok(Verdict::Invalid(reason)),
        Err(SealCheckError::BadInput(e)) => Err(VerifyError::BadInput(
            e.context(format!("{}", proof_path.display())),
        )),
        Err(SealCheckError::Params(e)) => Err(VerifyError::Params(e)),
        Err(SealCheckError::Verifier(e)) => Err(VerifyError::Failed(e)),
    }
}

/// A SnapDeals proof against the input it was made from.
fn verify_snap(input_path: &Path, proof_path: &Path) -> Result<Verdict, VerifyError> {
    let in_file = |e: anyhow::Error, path: &Path| e.context(format!("{}", path.display()));
    let input = crate::snap::read_snap_input_file(input_path).map_err(VerifyError::BadInput)?;
    let job = crate::snap::SnapJob::new(input)
        .map_err(|e| VerifyError::BadInput(in_file(e, input_path)))?;
    let proof = read_proof_file(proof_path).map_err(VerifyError::BadInput)?;
    let name = crate::snap::update_proof_name(job.registered_proof());
    if let Some(result) = &proof.result {
        let matches = result.kind == JobKind::SnapProve.as_str() && result.registered_proof == name;
        if !matches {
            return Err(VerifyError::BadInput(anyhow!(
                "{}: the result of job {:?} is of a {:?} job for {}, not a snap-prove job for {name}",
                proof_path.display(),
                result.job_id,
                result.kind,
                result.registered_proof
            )));
        }
    }
    let expected = job.partitions() * PARTITION_PROOF_BYTES;
    if proof.bytes.len() != expected {
        return Err(VerifyError::BadInput(anyhow!(
            "{}: the proof is {} bytes, a {name} update proof is {expected}",
            proof_path.display(),
            proof.bytes.len()
        )));
    }
    let against = format!("{}'s commitments", input_path.display());
    check_with_key(&job.verifying_key_path(), &against, || {
        job.check_proof(&proof.bytes)
    })
}

/// The last step of a file verification: the verifying key must be there, then `check` says
/// whether the proof verifies against `against` (what the input commits to).
fn check_with_key(
    vk: &Path,
    against: &str,
    check: impl FnOnce() -> anyhow::Result<bool>,
) -> Result<Verdict, VerifyError> {
    if !vk.is_file() {
        return Err(VerifyError::Params(anyhow!(
            "the verifying key {} is missing",
            vk.display()
        )));
    }
    match check() {
        Ok(true) => Ok(Verdict::Valid),
        Ok(false) => Ok(Verdict::Invalid(format!(
            "the proof does not verify against {against}"
        ))),
        Err(e) => Err(VerifyError::Failed(e)),
    }
}

/// A PoSt proof (a WindowPoSt partition's or a WinningPoSt's) against the input it was made
/// from.
fn verify_post(input_path: &Path, proof_path: &Path) -> Result<Verdict, VerifyError> {
    let in_file = |e: anyhow::Error, path: &Path| e.context(format!("{}", path.display()));
    let input = crate::post::read_post_input_file(input_path).map_err(VerifyError::BadInput)?;
    let job = crate::post::PostJob::new(input)
        .map_err(|e| VerifyError::BadInput(in_file(e, input_path)))?;
    let proof = read_proof_file(proof_path).map_err(VerifyError::BadInput)?;
    let name = crate::post::post_proof_name(job.registered_proof());
    let kind = if job.input.is_window() {
        JobKind::WindowPost
    } else {
        JobKind::WinningPost
    };
    if let Some(result) = &proof.result {
        if result.kind != kind.as_str() || result.registered_proof != name {
            return Err(VerifyError::BadInput(anyhow!(
                "{}: the result of job {:?} is of a {:?} job for {}, not a {} job for {name}",
                proof_path.display(),
                result.job_id,
                result.kind,
                result.registered_proof,
                kind.as_str()
            )));
        }
    }
    if proof.bytes.len() != PARTITION_PROOF_BYTES {
        return Err(VerifyError::BadInput(anyhow!(
            "{}: the proof is {} bytes, a {name} proof is {PARTITION_PROOF_BYTES}",
            proof_path.display(),
            proof.bytes.len()
        )));
    }
    let against = format!("{}'s randomness and sectors", input_path.display());
    check_with_key(&job.verifying_key_path(), &against, || {
        job.check_proof(&proof.bytes)
    })
}

/// A proof as read from a file, and the result message it came in, if it did.
#[derive(Debug)]
pub struct ProofFile {
    pub bytes: Vec<u8>,
    pub result: Option<ResultV1>,
}

pub fn read_proof_file(path: &Path) -> Result<ProofFile> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    ensure!(
        meta.len() <= MAX_PROOF_FILE_BYTES,
        "{} is {} bytes, more than a proof or a result message can be",
        path.display(),
        meta.len()
    );
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse_proof_file(&bytes).with_context(|| format!("{}", path.display()))
}

/// Tell a result message from raw proof bytes. Raw bytes begin with a compressed curve point,
/// whose first byte has its top bit set: never `{`, so JSON is unambiguous. That byte can
/// look like the start of a MessagePack map, so a message is recognised by decoding as a
/// whole result (named fields `v`, `job_id`, `status`, …), which proof bytes never do.
pub fn parse_proof_file(bytes: &[u8]) -> Result<ProofFile> {
    let result = if bytes.trim_ascii_start().starts_with(b"{") {
        parse_json_result(bytes)?
    } else {
        match ResultV1::decode(bytes) {
            Ok(result) => result,
            Err(_) if !bytes.is_empty() && bytes.len().is_multiple_of(PARTITION_PROOF_BYTES) => {
                return Ok(ProofFile {
                    bytes: bytes.to_vec(),
                    result: None,
                })
            }
            Err(e) => bail!(
                "{} bytes are neither raw proof bytes ({PARTITION_PROOF_BYTES} per partition) nor \
                 a c2q result message ({e:#})",
                bytes.len()
            ),
        }
    };
    if result.status != Status::Ok {
        let why = result
            .error
            .as_ref()
            .map(|e| format!("{}: {}", e.kind.as_str(), e.message))
            .unwrap_or_else(|| "no error given".into());
        bail!(
            "the result of job {:?} is a failure ({why}): it carries no proof",
            result.job_id
        );
    }
    let bytes = match &result.proof {
        Some(p) if !p.is_empty() => p.clone(),
        _ => bail!(
            "the result of job {:?} says ok but carries no proof",
            result.job_id
        ),
    };
    Ok(ProofFile {
        bytes,
        result: Some(result),
    })
}

/// A result message as JSON, as in `schemas/examples/`: the proof in base64.
fn parse_json_result(bytes: &[u8]) -> Result<ResultV1> {
    let mut value: serde_json::Value =
        serde_json::from_slice(bytes).context("not JSON, though it begins like JSON")?;
    if let Some(proof) = value.get_mut("proof") {
        let text = proof
            .as_str()
            .context("`proof` of a JSON result must be a base64 string")?;
        let raw = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .context("`proof` of the JSON result is not base64")?;
        *proof = serde_json::Value::from(raw);
    }
    serde_json::from_value(value).context("JSON, but not a c2q result message")
}

/// A result message must be the result of this very job: a result for another sector is not
/// a proof that fails, it is the wrong file.
fn result_matches_porep(result: &ResultV1, statement: &SealStatement) -> Result<()> {
    ensure!(
        result.kind == JobKind::PorepC2.as_str(),
        "the result of job {:?} is of a {:?} job, not porep-c2{}",
        result.job_id,
        result.kind,
        if result.kind == JobKind::Canary.as_str() {
            " (verify it with --canary --seed)"
        } else {
            ""
        }
    );
    let name = proof_name(statement.registered_proof);
    ensure!(
        result.registered_proof == name,
        "the result of job {:?} is for a {} proof, the C1 output for {name}",
        result.job_id,
        result.registered_proof
    );
    ensure!(
        (result.miner_id, result.sector_number) == (statement.miner_id, statement.sector_number),
        "the result of job {:?} is for miner {} sector {}, not miner {} sector {}",
        result.job_id,
        result.miner_id,
        result.sector_number,
        statement.miner_id,
        statement.sector_number
    );
    Ok(())
}

/// A canary's proof against the circuit c2q builds in: the same seed gives the same secrets,
/// hence the same public outputs; the parameters are fixed in c2q.
pub fn verify_canary(
    proof: &ProofFile,
    seed: u64,
    partitions: Option<usize>,
) -> Result<Verdict, VerifyError> {
    if let Some(result) = &proof.result {
        if result.kind != JobKind::Canary.as_str() {
            return Err(VerifyError::BadInput(anyhow!(
                "the result of job {:?} is of a {:?} job, not a canary",
                result.job_id,
                result.kind
            )));
        }
    }
    let bytes = &proof.bytes;
    if !bytes.len().is_multiple_of(PARTITION_PROOF_BYTES) {
        return Err(VerifyError::BadInput(anyhow!(
            "{} bytes are not whole partition proofs of {PARTITION_PROOF_BYTES} bytes",
            bytes.len()
        )));
    }
    let found = bytes.len() / PARTITION_PROOF_BYTES;
    if let Some(expected) = partitions {
        if expected != found {
            return Err(VerifyError::BadInput(anyhow!(
                "the proof has {found} partition(s), {expected} were asked for"
            )));
        }
    }
    let job = CanaryJob::new(found, seed)
        .with_context(|| {
            format!(
                "a proof of {found} partition(s) is no canary's (1 to {})",
                canary::MAX_PARTITIONS
            )
        })
        .map_err(VerifyError::BadInput)?;
    let proofs = match parse_partition_proofs(bytes) {
        Ok(p) => p,
        Err(reason) => return Ok(Verdict::Invalid(reason)),
    };
    Ok(match job.verify(&proofs) {
        Ok(()) => Verdict::Valid,
        Err(e) => Verdict::Invalid(format!("{e:#} (with seed {seed})")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::result::ErrorInfo;
    use crate::schema::ErrorKind;

    fn result(status: Status, proof: Option<Vec<u8>>) -> ResultV1 {
        ResultV1 {
            v: 1,
            job_id: "j-1".into(),
            status,
            proof,
            error: (status == Status::Failed).then(|| ErrorInfo {
                kind: ErrorKind::MalformedC1,
                message: "bad".into(),
            }),
            reused_job_id: None,
            kind: "porep-c2".into(),
            registered_proof: "StackedDrg2KiBV1_1".into(),
            miner_id: 1000,
            sector_number: 7,
            worker: "w".into(),
            attempts: 1,
            from_ledger: false,
            timings: vec![],
            timings_origin_ms: 0,
            stages: Default::default(),
        }
    }

    /// A raw proof's first byte (compressed point flag set) can look like a MessagePack map:
    /// it is still read as raw bytes.
    #[test]
    fn raw_proof_bytes_are_not_mistaken_for_a_message() {
        for first in [0x80u8, 0x8f, 0xa0, 0xc0] {
            let mut raw = vec![7u8; 2 * PARTITION_PROOF_BYTES];
            raw[0] = first;
            let read = parse_proof_file(&raw).unwrap();
            assert!(read.result.is_none());
            assert_eq!(read.bytes, raw);
        }
    }

    #[test]
    fn result_messages_in_msgpack_and_json_give_their_proof() {
        let proof: Vec<u8> = (0..PARTITION_PROOF_BYTES as u32).map(|i| i as u8).collect();
        let ok = result(Status::Ok, Some(proof.clone()));
        let from_msgpack = parse_proof_file(&ok.encode().unwrap()).unwrap();
        assert_eq!(from_msgpack.bytes, proof);
        assert_eq!(from_msgpack.result.as_ref(), Some(&ok));

        let example = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/schemas/examples/result.ok.json"
        ))
        .unwrap();
        let from_json = parse_proof_file(&example).unwrap();
        assert_eq!(from_json.bytes.len(), 2 * PARTITION_PROOF_BYTES);
        assert_eq!(from_json.result.unwrap().kind, "canary");
    }

    #[test]
    fn what_carries_no_proof_is_refused_with_the_reason() {
        let failed = result(Status::Failed, None);
        let err = format!(
            "{:#}",
            parse_proof_file(&failed.encode().unwrap()).unwrap_err()
        );
        assert!(err.contains("a failure (malformed_c1: bad)"), "{err}");
        let err = format!("{:#}", parse_proof_file(&[1, 2, 3]).unwrap_err());
        assert!(err.contains("3 bytes are neither"), "{err}");
        let err = format!("{:#}", parse_proof_file(b"{\"v\": 1}").unwrap_err());
        assert!(err.contains("not a c2q result message"), "{err}");
    }
}
