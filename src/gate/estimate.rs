//! Memory estimates per job kind and sector size.
//!
//! A partition's witness is computed and waits in compact form (bitmaps and the few values
//! that are neither zero nor one). Where A, B and C are made decides the rest:
//! - on the CPU (the CPU backend, or a GPU without room for the recorded constraints), the
//!   full-size evaluations and witness (32 bytes per constraint and per variable) exist from
//!   the products stage until proving start consumes them, and the finalizer may then hold the
//!   witness;
//! - on the GPU, the host only ever holds the compact witness and its packed copy (~90 MB each
//!   at 32 GiB): the expansion and the products happen in device memory.
//!
//! The pipeline keeps a bounded number of partitions alive (`pipeline::partitions_in_flight`:
//! per GPU one in the products stage and one in proving start, plus one for the finalizer's
//! witnesses), so a job's reservation is the SRS (until it is resident)
//! plus that many partitions, shrinking once fewer than that remain. Those places are the
//! pipeline's, not the job's: the normal jobs held at once reserve them together
//! (`partitions::PartitionPool`). Which side makes the
//! products is only known once the backend has taken a partition (it depends on the GPU's free
//! memory beside the parameters), so a job first reserves the CPU figure and shrinks to the GPU
//! figure when the pipeline reports a partition made there (`work_on_gpu`). The numbers are
//! generous: an overshoot costs throughput, an undershoot costs the machine.

use crate::groth16::SrsKey;

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * KIB;
pub const GIB: u64 = 1024 * MIB;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// Which SRS the job needs: while resident, its memory is held once for all jobs.
    pub srs_key: SrsKey,
    pub srs_bytes: u64,
    /// A partition's working set where A, B and C are made on the CPU: the worst case.
    pub per_partition: u64,
    /// A partition's working set where the GPU makes A, B and C from the packed witness.
    pub per_partition_on_gpu: u64,
    pub partitions: u64,
    /// Partitions of one job the pipeline keeps alive at once.
    pub in_flight: u64,
}

impl Estimate {
    /// Working memory with `remaining` partitions still to finish (SRS not included), A, B
    /// and C made on the CPU or not known yet.
    pub fn work(&self, remaining: u64) -> u64 {
        self.per_partition * remaining.min(self.in_flight)
    }

    /// The same once the GPU is known to make A, B and C.
    pub fn work_on_gpu(&self, remaining: u64) -> u64 {
        self.per_partition_on_gpu * remaining.min(self.in_flight)
    }

    /// SRS plus the working set of a fresh job (what the tests compare with measured peaks;
    /// the worker reserves the parts separately).
    #[cfg(test)]
    pub(crate) fn total(&self) -> u64 {
        self.srs_bytes + self.work(self.partitions)
    }
}

/// Sector size from a registered proof name such as `StackedDrg32GiBV1_1`.
pub fn sector_size_of(registered_proof: &str) -> Option<u64> {
    let rest = registered_proof.strip_prefix("StackedDrg")?;
    let end = rest.find("V1")?;
    let size = &rest[..end];
    let (num, unit) = size.split_at(size.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = num.parse().ok()?;
    let mul = match unit {
        "KiB" => KIB,
        "MiB" => MIB,
        "GiB" => GIB,
        _ => return None,
    };
    n.checked_mul(mul)
}

/// Sector sizes Filecoin registers PoRep proofs for, smallest first.
pub const SECTOR_SIZES: [u64; 5] = [2 * KIB, 8 * MIB, 512 * MIB, 32 * GIB, 64 * GIB];

/// The most one fresh job (parameters not loaded) can reserve among `estimates`.
pub fn largest(estimates: &[Estimate]) -> u64 {
    estimates
        .iter()
        .map(|e| e.srs_bytes + e.work(e.partitions))
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sector_sizes_parse_from_proof_names() {
        assert_eq!(sector_size_of("StackedDrg2KiBV1"), Some(2 * KIB));
        assert_eq!(sector_size_of("StackedDrg32GiBV1_1"), Some(32 * GIB));
        assert_eq!(
            sector_size_of("StackedDrg2KiBV1_2_Feat_NonInteractivePoRep"),
            Some(2 * KIB)
        );
        assert_eq!(sector_size_of("StackedDrgXGiBV1"), None);
        assert_eq!(sector_size_of("canary"), None);
    }
}
