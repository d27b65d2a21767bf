//! A client's request id, and the job id it names.
//!
//! Curio writes its request ids with Go's `fmt.Sprintf` (`lib/ffi/cuzk_funcs.go`), and one of
//! them is not a job id: `wdpost-%d-%d-%d` prints the randomness, a byte slice, as Go prints
//! one under `%d` (`wdpost-31337-0-[42 69 70 152 116 226 101 176]`). The queue, the ledger and
//! the logs want short plain job ids, so the door takes any UTF-8 text as the client's key and
//! maps it to a job id by a pure function of the text: every gateway, restarted or not, maps
//! the same request id to the same job.
//!
//! - A request id that is a valid job id is the job id (`porep-1000-7`), so that ids in the
//!   form c2q already took keep naming the same jobs.
//! - Any other is its readable part, every run of characters a job id cannot hold replaced by
//!   one `_` and cut to [`READABLE_PREFIX`] bytes, then `-` and the first 8 bytes of its SHA-256
//!   in hex: `wdpost-31337-0-_42_69_70_152_116_226_101_176_-5c1b2a0f9e8d7c6b`.
//! - A job whose identity also depends on its payload (a PoSt partition: Curio sends the
//!   partitions of a deadline under one id) adds `-` and the payload's digest
//!   ([`RequestId::job_id_with`]).

use sha2::{Digest, Sha256};

use crate::schema::job::{is_valid_job_id, MAX_JOB_ID_LEN};

/// The longest request id accepted, in bytes of UTF-8.
pub const MAX_REQUEST_ID_BYTES: usize = 512;

/// The most of a mapped request id kept readable in its job id.
const READABLE_PREFIX: usize = 64;

/// A client's request id: 1 to [`MAX_REQUEST_ID_BYTES`] bytes of UTF-8.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestId(String);

impl RequestId {
    /// The request id as the client sent it, or the one line that says why it is refused.
    pub fn parse(raw: &str) -> Result<RequestId, String> {
        if raw.is_empty() {
            return Err("request_id is empty: it is the client's key for the job \
                        (any UTF-8 text up to 512 bytes)"
                .into());
        }
        if raw.len() > MAX_REQUEST_ID_BYTES {
            return Err(format!(
                "request_id is {} bytes: at most {MAX_REQUEST_ID_BYTES} are accepted",
                raw.len()
            ));
        }
        Ok(RequestId(raw.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The job id this request id names.
    pub fn job_id(&self) -> String {
        self.mapped("")
    }

    /// The job id of this request id with this payload: the job id and the payload digest's
    /// first 6 bytes in hex.
    pub fn job_id_with(&self, payload_digest: &[u8; 32]) -> String {
        self.mapped(&format!("-{}", hex::encode(&payload_digest[..6])))
    }

    /// The job id with `suffix` appended: the request id itself where that makes a valid job
    /// id, else its readable part and its digest.
    fn mapped(&self, suffix: &str) -> String {
        let as_is = format!("{}{suffix}", self.0);
        if is_valid_job_id(&as_is) {
            return as_is;
        }
        let digest = hex::encode(&Sha256::digest(self.0.as_bytes())[..8]);
        let mapped = format!("{}-{digest}{suffix}", readable(&self.0));
        debug_assert!(mapped.len() <= MAX_JOB_ID_LEN && is_valid_job_id(&mapped));
        mapped
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `text` with each run of characters a job id cannot hold replaced by one `_`, cut to
/// [`READABLE_PREFIX`] bytes (all ASCII by then).
fn readable(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(READABLE_PREFIX));
    let mut in_run = false;
    for c in text.chars() {
        let kept = c.is_ascii_alphanumeric() || "-_.:".contains(c);
        match (kept, in_run) {
            (true, _) => out.push(c),
            (false, false) => out.push('_'),
            (false, true) => {}
        }
        in_run = !kept;
        if out.len() >= READABLE_PREFIX {
            break;
        }
    }
    out.truncate(READABLE_PREFIX);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Curio's request ids as Go's `fmt.Sprintf` renders them (`lib/ffi/cuzk_funcs.go`,
    /// `tasks/proofshare/task_prove.go`): `%d` of `abi.ActorID`/`abi.SectorNumber` is the
    /// decimal number, `%d` of the `abi.PoStRandomness` slice `randomness[:8]` is its bytes in
    /// decimal, space-separated in brackets, `%x` of it lower-case hex. The integration test
    /// `gateway_curio` takes the same ids from Go itself where Go is installed.
    fn curio_ids() -> [String; 6] {
        let randomness = [42u8, 69, 70, 152, 116, 226, 101, 176];
        let go_d = format!(
            "[{}]",
            randomness
                .iter()
                .map(u8::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        );
        [
            "porep-1000-7".to_string(),
            "snap-1000-7".to_string(),
            format!("wdpost-31337-0-{go_d}"),
            format!("winpost-31337-{}", hex::encode(randomness)),
            "ps-porep-1000-7-42".to_string(),
            "ps-snap-1000-7-42".to_string(),
        ]
    }

    #[test]
    fn curio_request_ids_are_accepted_and_name_valid_job_ids() {
        let ids = curio_ids();
        assert_eq!(ids[2], "wdpost-31337-0-[42 69 70 152 116 226 101 176]");
        assert_eq!(ids[3], "winpost-31337-2a45469874e265b0");
        for raw in &ids {
            let id = RequestId::parse(raw).unwrap();
            for job in [id.job_id(), id.job_id_with(&[7; 32])] {
                assert!(is_valid_job_id(&job), "{raw} -> {job}");
            }
        }
        // Those that are job ids already stay as they are.
        for raw in [&ids[0], &ids[1], &ids[3], &ids[4], &ids[5]] {
            assert_eq!(RequestId::parse(raw).unwrap().job_id(), *raw);
        }
        let window = RequestId::parse(&ids[2]).unwrap();
        let job = window.job_id();
        assert!(
            job.starts_with("wdpost-31337-0-_42_69_70_152_116_226_101_176_-"),
            "{job}"
        );
        assert_eq!(
            job.len(),
            "wdpost-31337-0-_42_69_70_152_116_226_101_176_-".len() + 16
        );
    }

    /// The mapping is a function of the text alone: the same on every gateway, and different
    /// for ids that differ anywhere, the readable part alike or not.
    #[test]
    fn the_job_id_is_a_function_of_the_request_id() {
        let a = RequestId::parse("wdpost-1-0-[1 2 3]").unwrap();
        let b = RequestId::parse("wdpost-1-0-[1 2 4]").unwrap();
        let c = RequestId::parse("wdpost-1-0-[1 2 3]").unwrap();
        assert_eq!(a.job_id(), c.job_id());
        assert_ne!(a.job_id(), b.job_id());
        // Same readable part, other text.
        let d = RequestId::parse("wdpost-1-0-[1 2 3 ").unwrap();
        assert_ne!(a.job_id(), d.job_id());
        // A payload makes another job; the same payload the same one.
        assert_ne!(a.job_id_with(&[1; 32]), a.job_id_with(&[2; 32]));
        assert_eq!(a.job_id_with(&[1; 32]), c.job_id_with(&[1; 32]));
    }

    #[test]
    fn any_utf8_up_to_the_limit_is_accepted() {
        let longest = "é".repeat(MAX_REQUEST_ID_BYTES / 2);
        for raw in [
            "日本語の要求",
            " ",
            "\u{0}\n\t",
            "x".repeat(MAX_JOB_ID_LEN + 1).as_str(),
            longest.as_str(),
            "a".repeat(MAX_JOB_ID_LEN).as_str(),
        ] {
            let id = RequestId::parse(raw).unwrap();
            for job in [id.job_id(), id.job_id_with(&[9; 32])] {
                assert!(
                    is_valid_job_id(&job) && job.len() <= MAX_JOB_ID_LEN,
                    "{raw:?} -> {job}"
                );
            }
        }
        // A valid job id too long to carry the payload digest is mapped, not cut.
        let full = RequestId::parse(&"a".repeat(MAX_JOB_ID_LEN)).unwrap();
        assert_eq!(full.job_id(), "a".repeat(MAX_JOB_ID_LEN));
        let with_payload = full.job_id_with(&[9; 32]);
        assert_eq!(
            with_payload.len(),
            READABLE_PREFIX + 1 + 16 + 1 + 12,
            "{with_payload}"
        );
        assert!(with_payload.ends_with("-090909090909"), "{with_payload}");
    }

    #[test]
    fn empty_and_overlong_request_ids_are_refused_in_one_line() {
        let empty = RequestId::parse("").unwrap_err();
        assert!(empty.contains("request_id is empty"), "{empty}");
        let long = RequestId::parse(&"x".repeat(MAX_REQUEST_ID_BYTES + 1)).unwrap_err();
        assert!(long.contains("513 bytes") && long.contains("512"), "{long}");
        assert!(!empty.contains('\n') && !long.contains('\n'));
        assert!(RequestId::parse(&"x".repeat(MAX_REQUEST_ID_BYTES)).is_ok());
    }
}
