//! Size limits on untrusted payloads, and zstd decompression that refuses to expand a bomb.

use std::io::Read;

use serde::{Deserialize, Serialize};

use super::{ErrorKind, JobError};

const MIB: u64 = 1024 * 1024;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest job message accepted from the broker (RabbitMQ 4 defaults to 16 MiB).
    pub max_message_bytes: u64,
    /// Largest decompressed C1 JSON (a 32 GiB sector's C1 is ~51 MB, 64 GiB's about twice).
    pub max_c1_bytes: u64,
    /// Largest sector this worker proves; the memory gate must be able to admit such a job.
    /// Unset: the largest sector size, up to [`Limits::LARGEST_SECTOR`], whose worst case the
    /// memory budget holds (decided at start, and logged).
    pub max_sector_size: Option<u64>,
    /// Most partitions a canary job may ask for: at most [`crate::canary::MAX_PARTITIONS`],
    /// which is also the schema's maximum (and the default).
    pub max_canary_partitions: u32,
    /// Size classes this worker fetches (`porep-32g`, `canary-4`, …: see `crate::classes`).
    /// Unset: every class whose worst case the limits above and the memory budget admit.
    pub classes: Option<Vec<String>>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: 64 * MIB,
            max_c1_bytes: 192 * MIB,
            max_sector_size: None,
            max_canary_partitions: crate::canary::MAX_PARTITIONS as u32,
            classes: None,
        }
    }
}

impl Limits {
    /// The largest sector Filecoin has (64 GiB): the limit when none is set and memory allows.
    pub const LARGEST_SECTOR: u64 = 64 * 1024 * MIB;

    /// The sector size limit in force: the configured one, else the largest there is (a
    /// worker narrows an unset limit to what its memory holds before it takes jobs).
    pub fn sector_size_limit(&self) -> u64 {
        self.max_sector_size.unwrap_or(Self::LARGEST_SECTOR)
    }

    /// Refuse limits the worker could not honour: a canary limit the canary itself does not
    /// allow would accept jobs that then fail at set-up.
    pub fn check(&self) -> anyhow::Result<()> {
        let most = crate::canary::MAX_PARTITIONS as u32;
        anyhow::ensure!(
            (1..=most).contains(&self.max_canary_partitions),
            "limits.max_canary_partitions must be 1 to {most} (a canary job proves at most \
             {most} partitions), not {}",
            self.max_canary_partitions
        );
        Ok(())
    }

    /// Decompress a zstd payload, never producing more than `max_c1_bytes`: the frame's declared
    /// size is checked first, and the stream is cut one byte past the limit for frames that do
    /// not declare it, so a bomb costs at most the limit in memory.
    pub fn decompress_c1(&self, compressed: &[u8]) -> Result<Vec<u8>, JobError> {
        if compressed.len() as u64 > self.max_message_bytes {
            return Err(JobError::new(
                ErrorKind::Oversize,
                format!(
                    "compressed C1 is {} bytes, the limit is {}",
                    compressed.len(),
                    self.max_message_bytes
                ),
            ));
        }
        if let Ok(Some(declared)) = zstd::zstd_safe::get_frame_content_size(compressed) {
            if declared > self.max_c1_bytes {
                return Err(oversize_c1(declared, self.max_c1_bytes));
            }
        }
        let decoder = zstd::stream::read::Decoder::new(compressed).map_err(|e| {
            JobError::new(
                ErrorKind::MalformedC1,
                format!("phase1_output is not zstd: {e}"),
            )
        })?;
        let mut out = Vec::new();
        decoder
            .take(self.max_c1_bytes + 1)
            .read_to_end(&mut out)
            .map_err(|e| {
                JobError::new(
                    ErrorKind::MalformedC1,
                    format!("phase1_output is not valid zstd: {e}"),
                )
            })?;
        if out.len() as u64 > self.max_c1_bytes {
            return Err(oversize_c1(out.len() as u64, self.max_c1_bytes));
        }
        Ok(out)
    }
}

fn oversize_c1(size: u64, limit: u64) -> JobError {
    JobError::new(
        ErrorKind::Oversize,
        format!("decompressed C1 is over {size} bytes, the limit is {limit}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Limits {
        Limits {
            max_c1_bytes: 1024,
            ..Limits::default()
        }
    }

    #[test]
    fn round_trip_under_the_limit() {
        let data = vec![b'x'; 1000];
        let z = zstd::encode_all(&data[..], 3).unwrap();
        assert_eq!(small().decompress_c1(&z).unwrap(), data);
    }

    #[test]
    fn declared_bomb_is_rejected_as_oversize() {
        let data = vec![0u8; 10 * 1024 * 1024];
        let z = zstd::encode_all(&data[..], 19).unwrap();
        assert!(z.len() < 4096, "a bomb is small on the wire");
        let err = small().decompress_c1(&z).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Oversize);
    }

    #[test]
    fn undeclared_bomb_is_cut_at_the_limit() {
        // A streamed frame does not declare its content size.
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 19).unwrap();
        enc.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut enc, &vec![0u8; 10 * 1024 * 1024]).unwrap();
        let z = enc.finish().unwrap();
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&z).ok().flatten(),
            None
        );
        let err = small().decompress_c1(&z).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Oversize);
    }

    #[test]
    fn canary_limit_must_be_one_the_canary_allows() {
        assert!(Limits::default().check().is_ok());
        for bad in [0, crate::canary::MAX_PARTITIONS as u32 + 1] {
            let limits = Limits {
                max_canary_partitions: bad,
                ..Limits::default()
            };
            let err = limits.check().unwrap_err().to_string();
            assert!(err.contains("max_canary_partitions"), "{err}");
        }
    }

    #[test]
    fn garbage_is_malformed() {
        let err = small().decompress_c1(b"not zstd at all").unwrap_err();
        assert_eq!(err.kind, ErrorKind::MalformedC1);
    }
}
