//! Checking parameter files on disk against the manifest.

use std::fmt;
use std::path::{Path, PathBuf};

use super::digest::{digest_file, Digest};
use super::layout::{declared_len, Kind};
use super::progress::{bytes, Board};
use super::Wanted;
use crate::porep::params::test_marker_for;

/// How far a check goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// Presence and length against the file's own counts: a few small reads per file.
    SizeOnly,
    /// Also the whole file's digest against the manifest: minutes for a 47 GB file.
    Digest,
}

/// What a file turned out to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Its digest is the manifest's.
    Ok,
    /// Present with the length its counts declare; the digest was not checked (`SizeOnly`).
    SizeOk,
    Missing,
    /// Its length is not the one its counts declare (truncated, over-long, or no parameter
    /// file at all).
    WrongSize {
        actual: u64,
        declared: Option<u64>,
    },
    /// A digest other than the manifest's.
    DigestMismatch {
        actual: Digest,
        expected: Digest,
    },
    /// Made by `c2q params generate` (its marker is beside it): never official.
    TestParameters,
    /// It could not be read (permissions, I/O error).
    Unreadable(String),
}

impl Status {
    /// Whether the file may be used as official parameters.
    pub fn is_good(&self) -> bool {
        matches!(self, Status::Ok | Status::SizeOk)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Ok => f.write_str("ok"),
            Status::SizeOk => f.write_str("ok (size only, digest not checked)"),
            Status::Missing => f.write_str("missing"),
            Status::WrongSize {
                actual,
                declared: Some(d),
            } => write!(
                f,
                "wrong size ({actual} bytes, its counts declare {d}: {})",
                if actual < d { "truncated" } else { "too long" }
            ),
            Status::WrongSize {
                actual,
                declared: None,
            } => write!(
                f,
                "wrong size ({actual} bytes, too short to hold its own counts)"
            ),
            Status::DigestMismatch { actual, expected } => {
                write!(f, "digest mismatch ({actual}, the manifest has {expected})")
            }
            Status::TestParameters => {
                f.write_str("test parameters (made by `c2q params generate`, not official)")
            }
            Status::Unreadable(why) => write!(f, "unreadable ({why})"),
        }
    }
}

/// One file's result.
#[derive(Clone, Debug)]
pub struct FileReport {
    pub name: String,
    pub path: PathBuf,
    pub status: Status,
}

impl FileReport {
    /// The line `c2q params check` prints.
    pub fn line(&self) -> String {
        let tag = if self.status.is_good() { "ok" } else { "BAD" };
        format!("{tag:<3} {}: {}", self.name, self.status)
    }
}

/// Check one file in `dir`, showing the digest's progress on `board`.
pub fn check_file(dir: &Path, wanted: &Wanted, depth: Depth, board: &Board) -> FileReport {
    let path = dir.join(&wanted.name);
    let status = status(&path, wanted, depth, board);
    FileReport {
        name: wanted.name.clone(),
        path,
        status,
    }
}

fn status(path: &Path, wanted: &Wanted, depth: Depth, board: &Board) -> Status {
    let meta = match std::fs::metadata(path) {
        Ok(m) if m.is_file() => m,
        Ok(_) => return Status::Unreadable("not a regular file".into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Status::Missing,
        Err(e) => return Status::Unreadable(e.to_string()),
    };
    let actual = meta.len();
    if let Some(kind) = Kind::of(&wanted.name) {
        match declared_len(path, kind) {
            Ok(declared) if declared == actual => {}
            Ok(declared) => {
                return Status::WrongSize {
                    actual,
                    declared: Some(declared),
                }
            }
            Err(_) => {
                return Status::WrongSize {
                    actual,
                    declared: None,
                }
            }
        }
    }
    let test = test_marker_for(path).exists();
    if depth == Depth::SizeOnly {
        return if test {
            Status::TestParameters
        } else {
            Status::SizeOk
        };
    }
    let bar = board.start(&wanted.name, "digest", 0, Some(actual));
    let digest = digest_file(path, &mut |done| board.set(bar, done, None));
    board.end(bar);
    match digest {
        Ok(d) if d == wanted.entry.digest => Status::Ok,
        // The digest decides: official files under a stale marker are still official.
        Ok(_) if test => Status::TestParameters,
        Ok(d) => Status::DigestMismatch {
            actual: d,
            expected: wanted.entry.digest,
        },
        Err(e) => Status::Unreadable(format!("{e:#}")),
    }
}

/// What a set of checks found, for the summary line.
pub fn summary(reports: &[FileReport]) -> String {
    let bad = reports.iter().filter(|r| !r.status.is_good()).count();
    let on_disk: u64 = reports
        .iter()
        .filter_map(|r| std::fs::metadata(&r.path).ok().map(|m| m.len()))
        .sum();
    if bad == 0 {
        format!("{} files ok ({} on disk)", reports.len(), bytes(on_disk))
    } else {
        format!("{bad} of {} files missing or bad", reports.len())
    }
}
