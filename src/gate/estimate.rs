//! Memory estimates per job kind and sector size.
//!
//! A partition's witness is computed and waits in compact form (bitmaps and the few values
//! that are neither zero nor one); its full-size evaluations and witness (32 bytes per
//! constraint and per variable) exist from the products stage until proving start consumes
//! them, and the finalizer then holds only the witness. The pipeline keeps a bounded number of
//! full-size partitions alive (`PipelineConfig::partitions_in_flight`: per GPU one in the
//! products stage and one in proving start, plus one for the finalizer's witnesses), so a
//! job's reservation is the SRS (until it is resident) plus that many partitions, shrinking
//! once fewer than that remain. The numbers are deliberately generous: an overshoot costs
//! throughput, an undershoot costs the machine.

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// Which SRS the job needs: while resident, its memory is held once for all jobs.
    pub srs_key: String,
    pub srs_bytes: u64,
    pub per_partition: u64,
    pub partitions: u64,
    /// Partitions of one job the pipeline keeps alive at once.
    pub in_flight: u64,
}

impl Estimate {
    /// Working memory with `remaining` partitions still to finish (SRS not included).
    pub fn work(&self, remaining: u64) -> u64 {
        self.per_partition * remaining.min(self.in_flight)
    }

    /// SRS plus the working set of a fresh job.
    pub fn total(&self) -> u64 {
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

/// The estimate of a PoRep C2 job of this sector size and partition count, in a pipeline that
/// keeps `in_flight` partitions alive.
pub fn porep(sector_size: u64, partitions: u64, in_flight: u64) -> Estimate {
    // (resident bytes: the SRS and the recorded constraints; per-partition working set), from
    // the circuit sizes of filecoin-proofs v19 parameters; unknown sizes get the next larger
    // row. 32 GiB and 64 GiB sectors have the same circuit (130,278,869 constraints): ~47 GB of
    // points and 7.3 – 7.4 GB of recorded constraints on the host, and per full-size partition
    // its witness (4.2 GB) plus, where A, B, C are made on the CPU, its evaluations (12.5 GB).
    // Measured through the pipeline on one H200 (ops/bench/gpu-2026-12-01-h.md): peak RSS
    // 77.3 GB at 32 GiB and 77.6 GB at 64 GiB, against the 100 GiB this reserves for one GPU.
    let (srs, per_partition) = match sector_size {
        s if s <= 2 * KIB => (64 * MIB, 64 * MIB),
        s if s <= 8 * MIB => (256 * MIB, 256 * MIB),
        s if s <= 512 * MIB => (2 * GIB, 2 * GIB),
        s if s <= 64 * GIB => (52 * GIB, 16 * GIB),
        _ => (104 * GIB, 32 * GIB),
    };
    Estimate {
        srs_key: format!("porep-{sector_size}"),
        srs_bytes: srs,
        per_partition,
        partitions,
        in_flight,
    }
}

/// The canary circuit: a few thousand constraints, parameters generated in-process.
pub fn canary(partitions: u64, in_flight: u64) -> Estimate {
    Estimate {
        srs_key: "canary".into(),
        srs_bytes: 16 * MIB,
        per_partition: 16 * MIB,
        partitions,
        in_flight,
    }
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

    #[test]
    fn work_shrinks_only_when_fewer_than_in_flight_remain() {
        let e = porep(32 * GIB, 10, 3);
        assert_eq!(e.work(10), 3 * 16 * GIB);
        assert_eq!(e.work(3), 3 * 16 * GIB);
        assert_eq!(e.work(1), 16 * GIB);
        assert_eq!(e.work(0), 0);
        // More partitions alive (more synthesis threads or GPUs): a larger reservation.
        assert_eq!(porep(32 * GIB, 10, 6).work(10), 6 * 16 * GIB);
    }

    /// 32 GiB and 64 GiB sectors prove the same circuit: the same memory, and it covers the
    /// peak measured through the pipeline on one GPU (77.6 GB, three partitions alive).
    #[test]
    fn full_size_sectors_share_one_estimate_that_covers_the_measured_peak() {
        let (e32, e64) = (porep(32 * GIB, 10, 3), porep(64 * GIB, 10, 3));
        assert_eq!(
            (e32.srs_bytes, e32.per_partition),
            (e64.srs_bytes, e64.per_partition)
        );
        assert!(e64.total() >= 77_600_000_000);
    }
}
