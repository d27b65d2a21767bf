//! The job message, version 1, and its staged decoding: bytes → header (`v`, `kind`) → the
//! whole message → the decompressed payload, each stage with its own error class.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{ErrorKind, JobError, Limits, VERSION};

/// The job kinds this worker proves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobKind {
    #[serde(rename = "porep-c2")]
    PorepC2,
    /// SnapDeals (`ProveReplicaUpdate2`): vanilla partition proofs and commitments in.
    #[serde(rename = "snap-prove")]
    SnapProve,
    /// One WindowPoSt partition: randomness and its sectors' vanilla proofs in.
    #[serde(rename = "window-post")]
    WindowPost,
    /// A WinningPoSt: randomness and its sector's vanilla proof in.
    #[serde(rename = "winning-post")]
    WinningPost,
    /// A small built-in circuit proved through the same path: fleet health checks, fast tests.
    #[serde(rename = "canary")]
    Canary,
}

impl JobKind {
    /// Every kind (`kinds` says what each one is).
    pub const ALL: [JobKind; 5] = [
        JobKind::PorepC2,
        JobKind::SnapProve,
        JobKind::WindowPost,
        JobKind::WinningPost,
        JobKind::Canary,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::PorepC2 => "porep-c2",
            JobKind::SnapProve => "snap-prove",
            JobKind::WindowPost => "window-post",
            JobKind::WinningPost => "winning-post",
            JobKind::Canary => "canary",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        JobKind::ALL.into_iter().find(|kind| kind.as_str() == s)
    }
}

/// What a canary job proves: `partitions` copies of the built-in circuit, seeded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanarySpec {
    pub partitions: u32,
    pub seed: u64,
}

/// Job message version 1 (`schemas/job.v1.schema.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobV1 {
    pub v: u32,
    /// Producer-chosen idempotency key; also the AMQP `message_id`.
    pub job_id: String,
    pub kind: JobKind,
    /// e.g. `StackedDrg32GiBV1_1`; must agree with the C1 output's own field. For `snap-prove`
    /// the update proof (`StackedDrg32GiBV1`), for `window-post` and `winning-post` the PoSt
    /// proof (`StackedDrgWindow32GiBV1_2`, `StackedDrgWinning32GiBV1`), agreeing with the
    /// input's. `canary` for canaries.
    pub registered_proof: String,
    pub miner_id: u64,
    /// The sector proved; 0 for PoSt jobs, which prove many.
    pub sector_number: u64,
    /// zstd-compressed C1 JSON as filecoin-ffi produced it; for `snap-prove` the SnapDeals
    /// input JSON (`snap::SnapInput`), for `window-post` and `winning-post` the PoSt input JSON
    /// (`post::PostInput`); empty for canaries.
    #[serde(with = "serde_bytes", default)]
    pub phase1_output: Vec<u8>,
    /// When the proof stops being of use, in Unix milliseconds: a job a worker would begin
    /// proving after it is answered failed (`deadline_exceeded`, permanent) instead, so that
    /// the caller learns at once. Not part of the job's identity (the same job sent again with
    /// a later deadline is the same job). PoSt jobs from a gateway carry one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_unix_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanarySpec>,
}

impl JobV1 {
    /// How long ago the job's deadline passed, if it has, at `now_unix_ms`.
    pub fn overdue_ms(&self, now_unix_ms: u64) -> Option<u64> {
        self.deadline_unix_ms
            .filter(|&deadline| now_unix_ms > deadline)
            .map(|deadline| now_unix_ms - deadline)
    }
}

/// A job that passed every schema check, with its payload decompressed.
#[derive(Clone, Debug)]
pub struct DecodedJob {
    pub job: JobV1,
    /// The decompressed payload: the C1 JSON of a PoRep job, the SnapDeals input of a
    /// `snap-prove` job, the PoSt input of a PoSt job, empty for a canary.
    pub c1: Vec<u8>,
    /// SHA-256 over everything that determines the proof: the ledger's duplicate check.
    pub digest: [u8; 32],
}

/// Only the fields needed to classify a message; unknown fields are ignored so that a newer
/// version is reported as such rather than as garbage.
#[derive(Deserialize)]
struct Header {
    v: Option<u32>,
    job_id: Option<String>,
    kind: Option<String>,
}

/// The job id of a message that may not decode, for the failed result.
pub fn peek_job_id(bytes: &[u8]) -> Option<String> {
    rmp_serde::from_slice::<Header>(bytes).ok()?.job_id
}

/// Decode and validate a job message: [`decode_message`], then [`validate`].
pub fn decode(bytes: &[u8], limits: &Limits) -> Result<DecodedJob, JobError> {
    validate(decode_message(bytes, limits)?, limits)
}

/// Decode a job message's structure: size, version, kind, the fields and the job id's form.
/// What it returns has the fields a result and a dead letter echo, but is not yet known to be
/// a job that can be proved: see [`validate`].
pub fn decode_message(bytes: &[u8], limits: &Limits) -> Result<JobV1, JobError> {
    if bytes.len() as u64 > limits.max_message_bytes {
        return Err(JobError::new(
            ErrorKind::Oversize,
            format!(
                "message is {} bytes, the limit is {}",
                bytes.len(),
                limits.max_message_bytes
            ),
        ));
    }
    let header: Header = rmp_serde::from_slice(bytes).map_err(|e| {
        JobError::new(
            ErrorKind::Undecodable,
            format!("not a MessagePack job map: {e}"),
        )
    })?;
    match header.v {
        Some(VERSION) => {}
        Some(v) => {
            return Err(JobError::new(
                ErrorKind::UnknownVersion,
                format!("schema version {v} is not supported (this worker reads v{VERSION})"),
            ))
        }
        None => return Err(JobError::new(ErrorKind::Undecodable, "missing field `v`")),
    }
    let kind = header
        .kind
        .ok_or_else(|| JobError::new(ErrorKind::Undecodable, "missing field `kind`"))?;
    if JobKind::parse(&kind).is_none() {
        return Err(JobError::new(
            ErrorKind::WrongKind,
            format!(
                "job kind {kind:?} is not one of {}",
                JobKind::ALL.map(|k| format!("{:?}", k.as_str())).join(", ")
            ),
        ));
    }
    let job: JobV1 = rmp_serde::from_slice(bytes).map_err(|e| {
        JobError::new(
            ErrorKind::Undecodable,
            format!("job v1 does not decode: {e}"),
        )
    })?;
    validate_id(&job.job_id)?;
    Ok(job)
}

/// The job id in the body is what the ledger, the result and the dead letter go by; the AMQP
/// `message_id` is what the producer published under. A message where the two disagree was
/// built wrong (or altered), and proving it under either id could answer or fail another job:
/// it is refused, naming both.
pub fn check_message_id(job: &JobV1, message_id: Option<&str>) -> Result<(), JobError> {
    match message_id {
        Some(id) if !id.is_empty() && id != job.job_id => Err(JobError::new(
            ErrorKind::InvalidInput,
            format!(
                "job_id {:?} in the message body differs from the AMQP message_id {id:?}; \
                 producers set both to the same id",
                job.job_id
            ),
        )),
        _ => Ok(()),
    }
}

/// Check that a decoded job can be proved, and decompress its payload: the miner id and sector
/// number are ones Filecoin (and the ledger) can hold, a PoRep job carries a C1 within the
/// limits, a canary asks for 1 to `limits.max_canary_partitions` partitions.
pub fn validate(job: JobV1, limits: &Limits) -> Result<DecodedJob, JobError> {
    // Caught here, before the ledger: it stores both as signed 64-bit integers and would
    // otherwise fail the claim, which the worker cannot tell from a database outage.
    crate::porep::check_sector_identity(job.miner_id, job.sector_number)
        .map_err(|e| JobError::new(ErrorKind::InvalidInput, format!("{e:#}")))?;
    let c1 = match job.kind {
        JobKind::PorepC2 | JobKind::SnapProve | JobKind::WindowPost | JobKind::WinningPost => {
            if job.canary.is_some() {
                return Err(JobError::new(
                    ErrorKind::WrongKind,
                    format!("a {} job carries no canary spec", job.kind.as_str()),
                ));
            }
            limits.decompress_c1(&job.phase1_output)?
        }
        JobKind::Canary => {
            let spec = job.canary.as_ref().ok_or_else(|| {
                JobError::new(ErrorKind::Undecodable, "a canary job needs a `canary` spec")
            })?;
            if spec.partitions == 0 {
                return Err(JobError::new(
                    ErrorKind::InvalidInput,
                    "a canary job asks for 0 partitions; it proves 1 or more",
                ));
            }
            if spec.partitions > limits.max_canary_partitions {
                return Err(JobError::new(
                    ErrorKind::Oversize,
                    format!(
                        "canary asks for {} partitions, this worker allows 1..={}",
                        spec.partitions, limits.max_canary_partitions
                    ),
                ));
            }
            Vec::new()
        }
    };
    let digest = digest(&job, &c1);
    Ok(DecodedJob { job, c1, digest })
}

/// The longest job id accepted.
pub const MAX_JOB_ID_LEN: usize = 128;

/// Job ids end up in AMQP headers, SQL rows and file names: short and plain, 1 to
/// [`MAX_JOB_ID_LEN`] characters of `[A-Za-z0-9-_.:]`.
pub fn is_valid_job_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_JOB_ID_LEN
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
}

fn validate_id(id: &str) -> Result<(), JobError> {
    if is_valid_job_id(id) {
        Ok(())
    } else {
        Err(JobError::new(
            ErrorKind::Undecodable,
            "job_id must be 1..=128 characters of [A-Za-z0-9-_.:]",
        ))
    }
}

/// The payload digest: the decompressed C1 (compression levels differ between producers) and
/// every field that changes the proof.
fn digest(job: &JobV1, c1: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(job.kind.as_str().as_bytes());
    h.update([0]);
    h.update(job.registered_proof.as_bytes());
    h.update([0]);
    h.update(job.miner_id.to_le_bytes());
    h.update(job.sector_number.to_le_bytes());
    if let Some(spec) = &job.canary {
        h.update(spec.partitions.to_le_bytes());
        h.update(spec.seed.to_le_bytes());
    }
    h.update((c1.len() as u64).to_le_bytes());
    h.update(c1);
    h.finalize().into()
}

/// Encode a job for the wire (named fields).
pub fn encode(job: &JobV1) -> anyhow::Result<Vec<u8>> {
    Ok(rmp_serde::to_vec_named(job)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canary(id: &str) -> JobV1 {
        JobV1 {
            v: 1,
            job_id: id.into(),
            kind: JobKind::Canary,
            registered_proof: "canary".into(),
            miner_id: 1000,
            sector_number: 1,
            phase1_output: vec![],
            deadline_unix_ms: None,
            canary: Some(CanarySpec {
                partitions: 2,
                seed: 7,
            }),
        }
    }

    fn porep(c1: &[u8]) -> JobV1 {
        JobV1 {
            v: 1,
            job_id: "p-1".into(),
            kind: JobKind::PorepC2,
            registered_proof: "StackedDrg2KiBV1_1".into(),
            miner_id: 1000,
            sector_number: 1,
            phase1_output: zstd::encode_all(c1, 3).unwrap(),
            deadline_unix_ms: None,
            canary: None,
        }
    }

    fn kind_of(bytes: &[u8]) -> ErrorKind {
        decode(bytes, &Limits::default()).unwrap_err().kind
    }

    #[test]
    fn round_trip_and_digest_ignores_compression_level() {
        let mut a = porep(b"{\"c1\":1}");
        let da = decode(&encode(&a).unwrap(), &Limits::default()).unwrap();
        assert_eq!(da.c1, b"{\"c1\":1}");
        a.phase1_output = zstd::encode_all(&b"{\"c1\":1}"[..], 19).unwrap();
        let db = decode(&encode(&a).unwrap(), &Limits::default()).unwrap();
        assert_eq!(da.digest, db.digest);
        a.sector_number = 2;
        let dc = decode(&encode(&a).unwrap(), &Limits::default()).unwrap();
        assert_ne!(da.digest, dc.digest);
    }

    /// The job as a producer with a free-form `kind` would write it.
    #[derive(Serialize)]
    struct RawJob<'a> {
        v: u32,
        job_id: &'a str,
        kind: &'a str,
        registered_proof: &'a str,
        miner_id: u64,
        sector_number: u64,
        #[serde(with = "serde_bytes")]
        phase1_output: &'a [u8],
    }

    #[test]
    fn fields_are_named_on_the_wire() {
        let bytes = encode(&canary("c-1")).unwrap();
        for name in [
            "job_id",
            "kind",
            "registered_proof",
            "phase1_output",
            "canary",
        ] {
            assert!(
                bytes.windows(name.len()).any(|w| w == name.as_bytes()),
                "{name} is not on the wire"
            );
        }
        // And a map with named fields written by someone else decodes.
        let raw = RawJob {
            v: 1,
            job_id: "p-2",
            kind: "porep-c2",
            registered_proof: "StackedDrg2KiBV1_1",
            miner_id: 1,
            sector_number: 2,
            phase1_output: &zstd::encode_all(&b"{}"[..], 1).unwrap(),
        };
        let d = decode(&rmp_serde::to_vec_named(&raw).unwrap(), &Limits::default()).unwrap();
        assert_eq!(d.job.sector_number, 2);
    }

    #[test]
    fn each_bad_input_has_its_class() {
        assert_eq!(kind_of(b"\xc1\xc1garbage"), ErrorKind::Undecodable);
        let mut j = canary("c-1");
        j.v = 2;
        assert_eq!(kind_of(&encode(&j).unwrap()), ErrorKind::UnknownVersion);
        let raw = RawJob {
            v: 1,
            job_id: "w-1",
            kind: "election-post",
            registered_proof: "StackedDrg2KiBV1_1",
            miner_id: 1,
            sector_number: 2,
            phase1_output: b"",
        };
        assert_eq!(
            kind_of(&rmp_serde::to_vec_named(&raw).unwrap()),
            ErrorKind::WrongKind
        );
        let bytes = encode(&canary("c-1")).unwrap();
        assert_eq!(kind_of(&bytes[..bytes.len() / 2]), ErrorKind::Undecodable);
        let mut p = porep(b"{}");
        p.phase1_output = b"not zstd".to_vec();
        assert_eq!(kind_of(&encode(&p).unwrap()), ErrorKind::MalformedC1);
        let mut c = canary("c-1");
        c.canary = Some(CanarySpec {
            partitions: 10_000,
            seed: 1,
        });
        assert_eq!(kind_of(&encode(&c).unwrap()), ErrorKind::Oversize);
        assert_eq!(
            kind_of(&encode(&canary("bad id!")).unwrap()),
            ErrorKind::Undecodable
        );
    }

    /// Miner ids and sector numbers Filecoin cannot have are invalid input, found before the
    /// ledger (whose signed 64-bit columns would refuse them as if the database were down).
    #[test]
    fn miner_and_sector_beyond_2_pow_63_are_invalid_input() {
        let mut largest = canary("c-max");
        largest.miner_id = i64::MAX as u64;
        largest.sector_number = i64::MAX as u64;
        decode(&encode(&largest).unwrap(), &Limits::default()).expect("2^63 - 1 is valid");
        for (miner, sector, named) in [
            (u64::MAX, 1, "miner id 18446744073709551615"),
            (1 << 63, 1, "miner id 9223372036854775808"),
            (1000, u64::MAX, "sector number 18446744073709551615"),
        ] {
            let mut j = canary("c-big");
            j.miner_id = miner;
            j.sector_number = sector;
            let e = decode(&encode(&j).unwrap(), &Limits::default()).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidInput, "{e}");
            assert!(e.kind.is_permanent());
            assert!(e.message.contains(named), "{e}");
            // The fields still decode, for the failed result and the dead letter to echo.
            let echoed = decode_message(&encode(&j).unwrap(), &Limits::default()).unwrap();
            assert_eq!((echoed.miner_id, echoed.sector_number), (miner, sector));
        }
        let mut p = porep(b"{}");
        p.miner_id = u64::MAX;
        assert_eq!(kind_of(&encode(&p).unwrap()), ErrorKind::InvalidInput);
    }

    #[test]
    fn canary_partitions_are_1_to_the_limit_and_0_is_invalid_not_oversize() {
        let with = |partitions| {
            let mut c = canary("c-p");
            c.canary = Some(CanarySpec {
                partitions,
                seed: 1,
            });
            decode(&encode(&c).unwrap(), &Limits::default())
        };
        let most = crate::canary::MAX_PARTITIONS as u32;
        assert_eq!(Limits::default().max_canary_partitions, most);
        assert!(with(1).is_ok());
        assert!(with(most).is_ok(), "the default limit is the canary's own");
        assert_eq!(with(most + 1).unwrap_err().kind, ErrorKind::Oversize);
        let zero = with(0).unwrap_err();
        assert_eq!(zero.kind, ErrorKind::InvalidInput, "{zero}");
        assert!(zero.message.contains("0 partitions"), "{zero}");
        // A lower configured limit is this worker's choice: over it is oversize.
        let mut c = canary("c-p");
        c.canary = Some(CanarySpec {
            partitions: 9,
            seed: 1,
        });
        let eight = Limits {
            max_canary_partitions: 8,
            ..Limits::default()
        };
        let e = decode(&encode(&c).unwrap(), &eight).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Oversize, "{e}");
    }

    /// The published contract (`schemas/job.v1.schema.json`) states the limits the worker
    /// enforces: canary partitions, miner ids and sector numbers, the job id's form, and the
    /// configurable limits' defaults (`x-c2q-limits`).
    #[test]
    fn the_job_schema_states_the_limits_the_worker_enforces() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schemas/job.v1.schema.json");
        let schema: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let props = &schema["properties"];
        let partitions = &props["canary"]["properties"]["partitions"];
        assert_eq!(partitions["minimum"], 1);
        assert_eq!(
            partitions["maximum"],
            crate::canary::MAX_PARTITIONS as u64,
            "schema and canary disagree"
        );
        assert_eq!(
            partitions["maximum"],
            u64::from(Limits::default().max_canary_partitions),
            "schema and the default limit disagree"
        );
        assert_eq!(props["miner_id"]["maximum"], crate::porep::MAX_MINER_ID);
        assert_eq!(
            props["sector_number"]["maximum"],
            crate::porep::MAX_SECTOR_NUMBER
        );

        let job_id = &props["job_id"];
        assert_eq!(job_id["maxLength"], MAX_JOB_ID_LEN as u64);
        assert_eq!(
            job_id["pattern"],
            format!("^[A-Za-z0-9._:-]{{1,{MAX_JOB_ID_LEN}}}$")
        );
        let longest = "j".repeat(MAX_JOB_ID_LEN);
        assert!(validate_id(&longest).is_ok());
        assert!(validate_id(&format!("{longest}j")).is_err());
        assert!(validate_id("a@b").is_err(), "the pattern has no '@'");

        let stated = &schema["x-c2q-limits"];
        let limits = Limits::default();
        let broker = crate::config::BrokerConfig::default();
        let retry = crate::config::RetryConfig::default();
        for (name, worker) in [
            ("max_message_bytes", limits.max_message_bytes),
            ("max_c1_bytes", limits.max_c1_bytes),
            ("max_sector_size", limits.sector_size_limit()),
            (
                "max_canary_partitions",
                u64::from(limits.max_canary_partitions),
            ),
            ("delivery_limit", u64::from(broker.delivery_limit)),
            ("max_retries", u64::from(retry.max_retries)),
        ] {
            assert_eq!(stated[name], worker, "x-c2q-limits.{name}");
        }
        let documented: Vec<&String> = stated
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "description")
            .collect();
        assert_eq!(
            documented.len(),
            6,
            "a limit stated but not checked: {documented:?}"
        );
        // The contract's README gives the same defaults in words.
        let readme = concat!(env!("CARGO_MANIFEST_DIR"), "/schemas/README.md");
        let readme = std::fs::read_to_string(readme).unwrap();
        for row in [
            "| job message size | 64 MiB | `limits.max_message_bytes`",
            "| decompressed C1 (`phase1_output`) | 192 MiB | `limits.max_c1_bytes`",
            "| sector size | 64 GiB (unset: the largest size the memory budget holds",
            "| transient retries | 5 | `retry.max_retries`",
        ] {
            assert!(readme.contains(row), "schemas/README.md lacks {row:?}");
        }
        assert_eq!(limits.max_message_bytes, 64 * 1024 * 1024);
        assert_eq!(limits.max_c1_bytes, 192 * 1024 * 1024);
        assert_eq!(limits.sector_size_limit(), 64 << 30);
        assert_eq!(broker.delivery_limit, 5);
    }

    #[test]
    fn job_id_must_match_the_message_id_when_both_exist() {
        let j = canary("c-7");
        assert!(check_message_id(&j, Some("c-7")).is_ok());
        assert!(check_message_id(&j, None).is_ok());
        assert!(check_message_id(&j, Some("")).is_ok());
        let e = check_message_id(&j, Some("c-8")).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidInput);
        assert!(
            e.message.contains("\"c-7\"") && e.message.contains("\"c-8\""),
            "{e}"
        );
    }

    #[test]
    fn peek_finds_the_id_of_a_message_that_fails_later() {
        let mut j = canary("c-9");
        j.v = 3;
        assert_eq!(peek_job_id(&encode(&j).unwrap()).as_deref(), Some("c-9"));
    }
}
