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
//! plus that many partitions, shrinking once fewer than that remain. Which side makes the
//! products is only known once the backend has taken a partition (it depends on the GPU's free
//! memory beside the parameters), so a job first reserves the CPU figure and shrinks to the GPU
//! figure when the pipeline reports a partition made there (`work_on_gpu`). The numbers are
//! generous: an overshoot costs throughput, an undershoot costs the machine.

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// Which SRS the job needs: while resident, its memory is held once for all jobs.
    pub srs_key: String,
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
    fn total(&self) -> u64 {
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
    // (resident bytes: the SRS and the recorded constraints; per-partition working set with A,
    // B, C made on the CPU; the same made on the GPU), from the circuit sizes of
    // filecoin-proofs v19 parameters; unknown sizes get the next larger row. 32 GiB and 64 GiB
    // sectors have the same circuit (130,278,869 constraints): ~47.4 GB of points and 7.3 GB of
    // recorded constraints on the host (50.9 GiB together), and per full-size partition its
    // witness (4.2 GB) plus, where A, B, C are made on the CPU, its evaluations (12.5 GB).
    // Measured through the pipeline on one H200:
    // - products on the CPU (ops/bench/gpu-2026-12-01-h.md): peak RSS 77.3 GB at 32 GiB and
    //   77.6 GB at 64 GiB, against the 100 GiB this reserves for one GPU;
    // - products on the GPU (ops/bench/gpu-2026-12-01-j.md, -k.md): peak RSS 56.0 GB with
    //   three partitions in flight and three more jobs parsed and waiting: ~1.3 GB besides the
    //   points and the constraints, against the 3 GiB this reserves per job.
    // 2 KiB, measured with `c2q prove --backend cpu` (one partition): peak RSS 1.80 GB, of
    // which the decoded parameters 1.11 GB and the recorded constraints 0.15 GB; the rest is
    // the partition on the CPU backend (evaluations, witness, transforms) and the process.
    // 8 MiB and 512 MiB are not measured: scaled from their parameter files (8 MiB: 1.4 GB).
    let (srs, per_partition, per_partition_on_gpu) = match sector_size {
        s if s <= 2 * KIB => (1280 * MIB, 512 * MIB, 128 * MIB),
        s if s <= 8 * MIB => (1792 * MIB, GIB, 256 * MIB),
        s if s <= 512 * MIB => (8 * GIB, 4 * GIB, GIB),
        s if s <= 64 * GIB => (52 * GIB, 16 * GIB, GIB),
        _ => (104 * GIB, 32 * GIB, 2 * GIB),
    };
    Estimate {
        srs_key: format!("porep-{sector_size}"),
        srs_bytes: srs,
        per_partition,
        per_partition_on_gpu,
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
        per_partition_on_gpu: 16 * MIB,
        partitions,
        in_flight,
    }
}

/// The worst case of every job kind a worker with these limits accepts (for the PoRep kind, its
/// largest sector with as many partitions as the pipeline keeps alive): what the gate must
/// have free before a message is fetched, with each kind's SRS counted while it is not loaded.
pub fn accepted(max_sector_size: u64, max_canary_partitions: u64, in_flight: u64) -> [Estimate; 2] {
    [
        porep(max_sector_size, in_flight, in_flight),
        canary(max_canary_partitions, in_flight),
    ]
}

/// Sector sizes Filecoin registers PoRep proofs for, smallest first.
pub const SECTOR_SIZES: [u64; 5] = [2 * KIB, 8 * MIB, 512 * MIB, 32 * GIB, 64 * GIB];

/// The largest sector size up to `at_most` whose worst case, beside the canary's, fits
/// `job_budget`: what a worker without a configured sector limit takes. `None` when not even
/// the smallest fits.
pub fn largest_sector_within(
    job_budget: u64,
    at_most: u64,
    max_canary_partitions: u64,
    in_flight: u64,
) -> Option<u64> {
    SECTOR_SIZES
        .iter()
        .rev()
        .copied()
        .filter(|&size| size <= at_most)
        .find(|&size| largest(&accepted(size, max_canary_partitions, in_flight)) <= job_budget)
}

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
        assert_eq!(e32.per_partition_on_gpu, e64.per_partition_on_gpu);
    }

    /// A worker without a configured sector limit takes the largest size its memory holds:
    /// on a 24 GiB machine (21.6 GiB after the 10 % margin) 512 MiB sectors, on the H200 box
    /// (125 GiB) every size.
    #[test]
    fn an_unset_sector_limit_takes_what_the_budget_holds() {
        let within = |budget| largest_sector_within(budget, 64 * GIB, 64, 3);
        let small_box = 24 * GIB - 24 * GIB / 10 - 256 * MIB;
        assert_eq!(within(small_box), Some(512 * MIB));
        let h200_box = 125 * GIB - 125 * GIB / 10 - 256 * MIB;
        assert_eq!(within(h200_box), Some(64 * GIB));
        assert_eq!(
            largest_sector_within(h200_box, 32 * GIB, 64, 3),
            Some(32 * GIB)
        );
        assert_eq!(within(GIB), None);
        // Exactly the worst case of a size is enough for it.
        let exact = largest(&accepted(8 * MIB, 64, 3));
        assert_eq!(within(exact), Some(8 * MIB));
        assert_eq!(within(exact - 1), Some(2 * KIB));
    }

    /// With A, B, C made on the GPU a full-size job holds a fraction of the CPU figure, and
    /// still covers the measured peak: 56.0 GB with three partitions in flight.
    #[test]
    fn products_on_the_gpu_shrink_a_full_size_job_to_what_was_measured() {
        let e = porep(32 * GIB, 10, 3);
        assert_eq!(e.work_on_gpu(10), 3 * GIB);
        assert_eq!(e.work_on_gpu(2), 2 * GIB);
        assert!(e.srs_bytes + e.work_on_gpu(10) >= 56_000_000_000);
        assert!(e.work_on_gpu(10) * 10 < e.work(10));
        // Two 32 GiB jobs fit beside one resident SRS on the H200 box (125 GiB less its 10 %
        // margin) once the first has shown where its products are made.
        let budget = 125 * GIB - 125 * GIB / 10;
        assert!(e.srs_bytes + e.work_on_gpu(10) + e.work(10) <= budget);
    }
}
