//! Size classes: jobs grouped by how much memory proving them takes, so that each waits in a
//! queue of its own (`{P}.jobs.<class>`) and is fetched only by workers that can hold it.
//!
//! A PoRep job's class is its sector size, a SnapDeals job's its sector size too (in classes of
//! their own: the circuits differ); a canary's is the smallest of a few partition
//! buckets that holds its partition count (canaries stand in for sizes in tests and health
//! checks). A worker serves every class whose worst case its limits and memory budget admit,
//! or the classes its configuration names; a job of a class no running worker serves waits in
//! its queue, visibly (`c2q status`, `c2q_class_queue_jobs`, `c2q_class_workers`), instead of
//! failing.

use std::fmt;

use anyhow::{bail, Result};

use crate::gate::estimate::{self, Estimate, SECTOR_SIZES};
use crate::kinds;
use crate::schema::{JobKind, JobV1, Limits};

/// Partition counts the canary classes go up to, smallest first; the last is the canary's
/// maximum.
const CANARY_BUCKETS: [u32; 4] = [1, 4, 16, crate::canary::MAX_PARTITIONS as u32];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SizeClass {
    /// Canaries of up to this many partitions (and more than the next smaller bucket's).
    Canary { partitions: u32 },
    /// SnapDeals updates of one sector size, in bytes. Ordered before PoRep: a worker fetches
    /// PoRep first, whose proofs wait on a chain deadline.
    Snap { sector_size: u64 },
    /// PoRep C2 of one sector size, in bytes.
    Porep { sector_size: u64 },
    /// WindowPoSt partitions of one sector size. Ordered after PoRep: a worker fetches PoSt
    /// first, whose proofs wait on a deadline of minutes.
    WindowPost { sector_size: u64 },
    /// WinningPoSt of one sector size: fetched first of all, a block waits on it.
    WinningPost { sector_size: u64 },
}

impl SizeClass {
    /// Every class in order: canaries, SnapDeals, PoRep, WindowPoSt and WinningPoSt sector
    /// sizes, smallest first.
    pub fn all() -> Vec<SizeClass> {
        CANARY_BUCKETS
            .iter()
            .map(|&partitions| SizeClass::Canary { partitions })
            .chain(
                SECTOR_SIZES
                    .iter()
                    .map(|&sector_size| SizeClass::Snap { sector_size }),
            )
            .chain(
                SECTOR_SIZES
                    .iter()
                    .map(|&sector_size| SizeClass::Porep { sector_size }),
            )
            .chain(
                SECTOR_SIZES
                    .iter()
                    .map(|&sector_size| SizeClass::WindowPost { sector_size }),
            )
            .chain(
                SECTOR_SIZES
                    .iter()
                    .map(|&sector_size| SizeClass::WinningPost { sector_size }),
            )
            .collect()
    }

    /// Whether every job of the class is urgent: PoSt, whose proofs are due within a
    /// deadline. Such a class's jobs all wait in its urgent queue, whoever routes them
    /// (`broker::topology`), so that a retried or re-routed job stays urgent.
    pub fn always_urgent(&self) -> bool {
        matches!(
            self,
            SizeClass::WindowPost { .. } | SizeClass::WinningPost { .. }
        )
    }

    /// The class of a decoded job; `None` for one no class holds (a sector size Filecoin has
    /// no proof for, a canary of no or too many partitions): validation refuses those.
    pub fn of(job: &JobV1) -> Option<SizeClass> {
        match job.kind {
            JobKind::PorepC2 => {
                let size = estimate::sector_size_of(&job.registered_proof)?;
                SECTOR_SIZES
                    .contains(&size)
                    .then_some(SizeClass::Porep { sector_size: size })
            }
            JobKind::SnapProve => {
                let size = estimate::sector_size_of(&job.registered_proof)?;
                SECTOR_SIZES
                    .contains(&size)
                    .then_some(SizeClass::Snap { sector_size: size })
            }
            JobKind::WindowPost | JobKind::WinningPost => {
                let proof = crate::post::post_proof_from_name(&job.registered_proof).ok()?;
                let sector_size = u64::from(proof.sector_size());
                match (job.kind, crate::post::is_window(proof)) {
                    (JobKind::WindowPost, true) => Some(SizeClass::WindowPost { sector_size }),
                    (JobKind::WinningPost, false) => Some(SizeClass::WinningPost { sector_size }),
                    _ => None,
                }
            }
            JobKind::Canary => {
                let wanted = job.canary.as_ref()?.partitions;
                if wanted == 0 {
                    return None;
                }
                CANARY_BUCKETS
                    .iter()
                    .find(|&&bucket| wanted <= bucket)
                    .map(|&partitions| SizeClass::Canary { partitions })
            }
        }
    }

    /// The class's name: its routing key on the job exchange and its queue's suffix.
    pub fn key(&self) -> String {
        match *self {
            SizeClass::Canary { partitions } => format!("canary-{partitions}"),
            SizeClass::Snap { sector_size } => format!("snap-{}", size_name(sector_size)),
            SizeClass::Porep { sector_size } => format!("porep-{}", size_name(sector_size)),
            SizeClass::WindowPost { sector_size } => {
                format!("window-post-{}", size_name(sector_size))
            }
            SizeClass::WinningPost { sector_size } => {
                format!("winning-post-{}", size_name(sector_size))
            }
        }
    }

    /// The class named `key`, as [`SizeClass::key`] writes it.
    pub fn parse(key: &str) -> Result<SizeClass> {
        match SizeClass::all().into_iter().find(|c| c.key() == key) {
            Some(class) => Ok(class),
            None => bail!(
                "unknown size class {key:?} (one of {})",
                SizeClass::all()
                    .iter()
                    .map(|c| c.key())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// The most memory a job of this class can need, with the pipeline keeping `in_flight`
    /// partitions alive: what must be free before one is fetched.
    pub fn worst_case(&self, in_flight: u64) -> Estimate {
        match *self {
            SizeClass::Canary { partitions } => {
                kinds::canary_estimate(u64::from(partitions), in_flight)
            }
            SizeClass::Snap { sector_size } => {
                kinds::snap_estimate(sector_size, in_flight, in_flight)
            }
            SizeClass::Porep { sector_size } => {
                kinds::porep_estimate(sector_size, in_flight, in_flight)
            }
            SizeClass::WindowPost { sector_size } => {
                kinds::post_estimate(true, sector_size, in_flight)
            }
            SizeClass::WinningPost { sector_size } => {
                kinds::post_estimate(false, sector_size, in_flight)
            }
        }
    }

    /// Whether every job of this class is within `limits`.
    pub fn within(&self, limits: &Limits) -> bool {
        match *self {
            SizeClass::Canary { partitions } => partitions <= limits.max_canary_partitions,
            SizeClass::Snap { sector_size }
            | SizeClass::Porep { sector_size }
            | SizeClass::WindowPost { sector_size }
            | SizeClass::WinningPost { sector_size } => sector_size <= limits.sector_size_limit(),
        }
    }

    /// The classes a worker with these limits fetches, largest first: the configured ones
    /// (`limits.classes`), each of which must be within the limits and fit `job_budget`, or,
    /// unset, every class that does.
    pub fn served(limits: &Limits, in_flight: u64, job_budget: u64) -> Result<Vec<SizeClass>> {
        let fits = |c: &SizeClass| {
            let worst = c.worst_case(in_flight);
            c.within(limits) && worst.srs_bytes + worst.work(worst.partitions) <= job_budget
        };
        let mut served = match &limits.classes {
            Some(keys) => {
                let mut chosen = Vec::new();
                for key in keys {
                    let class = SizeClass::parse(key)
                        .map_err(|e| anyhow::anyhow!("limits.classes: {e}"))?;
                    if !fits(&class) {
                        bail!(
                            "limits.classes names {key}, which this worker cannot hold: its \
                             limits (max_sector_size {}, max_canary_partitions {}) or its \
                             memory budget for jobs ({job_budget} bytes) are too small",
                            limits.sector_size_limit(),
                            limits.max_canary_partitions
                        );
                    }
                    if !chosen.contains(&class) {
                        chosen.push(class);
                    }
                }
                chosen
            }
            None => SizeClass::all().into_iter().filter(fits).collect(),
        };
        if served.is_empty() {
            bail!(
                "this worker serves no size class: limits.classes is empty, or its memory \
                 budget for jobs ({job_budget} bytes) holds none"
            );
        }
        served.sort();
        served.reverse();
        Ok(served)
    }
}

impl fmt::Display for SizeClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

/// `2k`, `8m`, `512m`, `32g`: a sector size as class names write it.
fn size_name(bytes: u64) -> String {
    const KIB: u64 = 1024;
    match bytes {
        b if b >= KIB * KIB * KIB && b % (KIB * KIB * KIB) == 0 => {
            format!("{}g", b / (KIB * KIB * KIB))
        }
        b if b >= KIB * KIB && b % (KIB * KIB) == 0 => format!("{}m", b / (KIB * KIB)),
        b if b >= KIB && b % KIB == 0 => format!("{}k", b / KIB),
        b => format!("{b}b"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::CanarySpec;

    fn porep(proof: &str) -> JobV1 {
        JobV1 {
            v: crate::schema::VERSION,
            job_id: "j".into(),
            kind: JobKind::PorepC2,
            registered_proof: proof.into(),
            miner_id: 1,
            sector_number: 1,
            phase1_output: vec![],
            deadline_unix_ms: None,
            canary: None,
        }
    }

    fn canary(partitions: u32) -> JobV1 {
        JobV1 {
            kind: JobKind::Canary,
            registered_proof: "canary".into(),
            deadline_unix_ms: None,
            canary: Some(CanarySpec {
                partitions,
                seed: 7,
            }),
            ..porep("canary")
        }
    }

    #[test]
    fn keys_name_every_class_once_and_parse_back() {
        let keys: Vec<String> = SizeClass::all().iter().map(|c| c.key()).collect();
        assert_eq!(
            keys,
            [
                "canary-1",
                "canary-4",
                "canary-16",
                "canary-64",
                "snap-2k",
                "snap-8m",
                "snap-512m",
                "snap-32g",
                "snap-64g",
                "porep-2k",
                "porep-8m",
                "porep-512m",
                "porep-32g",
                "porep-64g",
                "window-post-2k",
                "window-post-8m",
                "window-post-512m",
                "window-post-32g",
                "window-post-64g",
                "winning-post-2k",
                "winning-post-8m",
                "winning-post-512m",
                "winning-post-32g",
                "winning-post-64g"
            ]
        );
        for class in SizeClass::all() {
            assert_eq!(SizeClass::parse(&class.key()).unwrap(), class);
        }
        assert!(SizeClass::parse("porep-1t").is_err());
    }

    #[test]
    fn a_job_falls_in_the_class_of_its_size() {
        let of = |job: &JobV1| SizeClass::of(job).map(|c| c.key());
        assert_eq!(
            of(&porep("StackedDrg32GiBV1_1")).as_deref(),
            Some("porep-32g")
        );
        assert_eq!(
            of(&porep("StackedDrg2KiBV1_2_Feat_NonInteractivePoRep")).as_deref(),
            Some("porep-2k")
        );
        assert_eq!(of(&porep("StackedDrg3GiBV1")), None);
        let snap = |proof: &str| JobV1 {
            kind: JobKind::SnapProve,
            ..porep(proof)
        };
        assert_eq!(of(&snap("StackedDrg32GiBV1")).as_deref(), Some("snap-32g"));
        assert_eq!(of(&snap("StackedDrg2KiBV1")).as_deref(), Some("snap-2k"));
        let post = |kind: JobKind, proof: &str| JobV1 {
            kind,
            ..porep(proof)
        };
        assert_eq!(
            of(&post(JobKind::WindowPost, "StackedDrgWindow32GiBV1_2")).as_deref(),
            Some("window-post-32g")
        );
        assert_eq!(
            of(&post(JobKind::WindowPost, "10")).as_deref(),
            Some("window-post-2k")
        );
        assert_eq!(
            of(&post(JobKind::WinningPost, "StackedDrgWinning2KiBV1")).as_deref(),
            Some("winning-post-2k")
        );
        // A WinningPoSt proof in a window-post job (and the reverse) is in no class.
        assert_eq!(
            of(&post(JobKind::WindowPost, "StackedDrgWinning2KiBV1")),
            None
        );
        assert_eq!(
            of(&post(JobKind::WinningPost, "StackedDrgWindow2KiBV1_2")),
            None
        );
        assert_eq!(of(&canary(1)).as_deref(), Some("canary-1"));
        assert_eq!(of(&canary(2)).as_deref(), Some("canary-4"));
        assert_eq!(of(&canary(16)).as_deref(), Some("canary-16"));
        assert_eq!(of(&canary(17)).as_deref(), Some("canary-64"));
        assert_eq!(of(&canary(0)), None);
        assert_eq!(of(&canary(65)), None);
    }

    #[test]
    fn a_worker_serves_what_its_limits_and_budget_hold_largest_first() {
        let gib = 1u64 << 30;
        let limits = Limits {
            max_sector_size: Some(8 << 20),
            max_canary_partitions: 4,
            ..Limits::default()
        };
        let served = SizeClass::served(&limits, 3, 1024 * gib).unwrap();
        let keys: Vec<String> = served.iter().map(|c| c.key()).collect();
        assert_eq!(
            keys,
            [
                "winning-post-8m",
                "winning-post-2k",
                "window-post-8m",
                "window-post-2k",
                "porep-8m",
                "porep-2k",
                "snap-8m",
                "snap-2k",
                "canary-4",
                "canary-1"
            ]
        );

        // A budget too small for 8 MiB drops that class, not the worker.
        let porep_8m = SizeClass::Porep {
            sector_size: 8 << 20,
        }
        .worst_case(3);
        let budget = porep_8m.srs_bytes + porep_8m.work(3) - 1;
        let served = SizeClass::served(&limits, 3, budget).unwrap();
        assert!(!served.contains(&SizeClass::Porep {
            sector_size: 8 << 20
        }));

        // Named classes are served as named, and refused when the worker cannot hold them.
        let named = Limits {
            classes: Some(vec!["canary-1".into(), "porep-2k".into()]),
            ..limits.clone()
        };
        let keys: Vec<String> = SizeClass::served(&named, 3, 1024 * gib)
            .unwrap()
            .iter()
            .map(|c| c.key())
            .collect();
        assert_eq!(keys, ["porep-2k", "canary-1"]);
        let too_big = Limits {
            classes: Some(vec!["porep-32g".into()]),
            ..limits.clone()
        };
        let e = SizeClass::served(&too_big, 3, 1024 * gib).unwrap_err();
        assert!(e.to_string().contains("porep-32g"), "{e}");
        let unknown = Limits {
            classes: Some(vec!["porep-3g".into()]),
            ..limits
        };
        assert!(SizeClass::served(&unknown, 3, 1024 * gib).is_err());
    }
}
