//! The fetch rule: which of a worker's queues it may take a job from now, and the memory a
//! job taken from one reserves.
//!
//! A class (given by its worst case, `classes::SizeClass::worst_case`) *fits* when its worst
//! case, with its SRS counted unless kept, fits what is free in the gate plus what kept
//! parameters no held job uses would give back ([`KeptParams::make_room`]). A normal class's
//! working memory is what its job adds to the partition pool (`partitions`: the pipeline's
//! places are reserved once for all the jobs in it); an urgent class's, its own partitions.
//!
//! - **Idle** (no job held): every class that fits is open. Nothing in flight will free
//!   memory, so waiting could only wait for ever; a class that does not fit even with every
//!   unused parameter released is skipped. (With nothing held, every class the worker serves
//!   fits: `classes::SizeClass::served` admits only classes whose worst case fits the budget.)
//! - **Busy** (jobs held): the open classes are the longest prefix of the fetch order (largest
//!   first) whose classes all fit. A busy worker thus takes a smaller job only while every job
//!   it prefers would still fit beside it: it never takes a small job that a large one would
//!   then wait for, nor one that would only wait behind the large one it is proving while
//!   another worker may be idle. When it does not fit, the jobs it holds finish and free memory
//!   (or make their parameters releasable), and the rule is applied again.
//! - **Urgent classes** (PoSt, due within a deadline) are open whenever they fit, busy or not,
//!   and stand outside that prefix: a WindowPoSt class whose parameters are not loaded does not
//!   stop a busy worker from taking its next PoRep job.
//! - **The urgent reserve**: a busy worker that serves urgent classes takes a non-urgent job
//!   only while room for an urgent one stays beside it ([`UrgentReserve`]; by default the
//!   largest urgent worst case, parameters included, since kept parameters count as room that
//!   could be released). An idle worker ignores it: its one job would otherwise wait for an
//!   urgent job that may never come.
//! - The **unsorted queue** (jobs of any class) is open when every class is, and a job from it
//!   reserves the largest worst case with every SRS counted, since its circuit is not known
//!   until it is decoded.
//!
//! Only after a message is taken are kept parameters released and memory reserved
//! ([`admit`]): parameters are not dropped for a queue that turns out empty. Between the check
//! and the reservation memory can only be freed (one fetch loop per worker reserves), so a
//! class found open is admitted.

use std::sync::Arc;

use super::{Estimate, JobHold, KeptParams, Partitions, PoolShare, Reservation};

/// A class as the fetch rule sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchClass {
    /// Its worst case (`classes::SizeClass::worst_case`).
    pub worst: Estimate,
    /// Whether its jobs are due within a deadline (`classes::SizeClass::always_urgent`).
    pub urgent: bool,
}

/// The queues a fetch may take from: `classes[i]` for the i-th class in fetch order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenQueues {
    pub classes: Vec<bool>,
    pub unsorted: bool,
}

impl OpenQueues {
    pub fn any(&self) -> bool {
        self.unsorted || self.classes.iter().any(|&open| open)
    }
}

/// The room a busy worker keeps for urgent jobs (`gate.urgent_reserve_bytes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UrgentReserve {
    /// The largest worst case, with its parameters, among the urgent classes served (none
    /// when the worker serves no urgent class).
    #[default]
    Auto,
    /// This many bytes, whatever the classes (0: no reserve).
    Bytes(u64),
}

impl UrgentReserve {
    /// The reserve `gate.urgent_reserve_bytes` sets.
    pub fn configured(cfg: &crate::config::GateConfig) -> UrgentReserve {
        match cfg.urgent_reserve_bytes {
            None => UrgentReserve::Auto,
            Some(bytes) => UrgentReserve::Bytes(bytes),
        }
    }

    /// The bytes kept for urgent jobs among `classes`.
    pub fn bytes(self, classes: &[FetchClass]) -> u64 {
        match self {
            UrgentReserve::Bytes(bytes) => bytes,
            UrgentReserve::Auto => classes
                .iter()
                .filter(|c| c.urgent)
                .map(|c| c.worst.srs_bytes + c.worst.work(c.worst.partitions))
                .max()
                .unwrap_or(0),
        }
    }
}

/// A job's partitions as the partition pool counts them, from its worst case or estimate.
pub fn partitions_of(e: &Estimate) -> Partitions {
    Partitions {
        per_partition: e.per_partition,
        remaining: e.partitions,
        in_flight: e.in_flight,
    }
}

/// The working memory a job of class `c` adds: an urgent job its own partitions (its lane is
/// beside the pipeline's places), a normal job what it adds to the partition pool, where the
/// jobs in the pipeline share its places ([`PartitionPool`]).
fn work_need(kept: &KeptParams, c: &FetchClass) -> u64 {
    match c.urgent {
        true => c.worst.work(c.worst.partitions),
        false => kept.partitions().growth(partitions_of(&c.worst)),
    }
}

/// What a job of class `c` reserves at fetch: its working memory and its SRS unless kept.
pub fn need(kept: &KeptParams, c: &FetchClass) -> u64 {
    work_need(kept, c) + kept.srs_needed(&c.worst)
}

/// Whether a job of class `c` can be admitted now, releasing unused parameters of other
/// circuits if need be.
pub fn fits(kept: &KeptParams, c: &FetchClass) -> bool {
    need(kept, c) <= kept.gate().free() + kept.evictable_bytes(Some(&c.worst.srs_key))
}

/// What a job from the unsorted queue reserves: the largest worst case, SRS always counted
/// (its kind, and so its lane, is known only once it is decoded).
fn unsorted_need(classes: &[FetchClass]) -> u64 {
    classes
        .iter()
        .map(|c| c.worst.srs_bytes + c.worst.work(c.worst.partitions))
        .max()
        .unwrap_or(0)
}

/// Whether a non-urgent job of class `c` can be admitted now with `reserve` bytes left for
/// urgent jobs, counting what releasing unused parameters would give back.
fn fits_beside(kept: &KeptParams, c: &FetchClass, reserve: u64) -> bool {
    need(kept, c) + reserve <= kept.gate().free() + kept.evictable_bytes(Some(&c.worst.srs_key))
}

/// The queues open now, for `classes` in fetch order.
pub fn open_queues(
    kept: &KeptParams,
    classes: &[FetchClass],
    reserve: UrgentReserve,
) -> OpenQueues {
    let busy = kept.jobs_held() > 0;
    let reserve = reserve.bytes(classes);
    // Whether every non-urgent class before this one fits (the busy worker's prefix).
    let mut prefix_fits = true;
    let open: Vec<bool> = classes
        .iter()
        .map(|c| {
            if !busy || c.urgent {
                return fits(kept, c);
            }
            prefix_fits &= fits_beside(kept, c, reserve);
            prefix_fits
        })
        .collect();
    let unsorted = open.iter().all(|&o| o)
        && unsorted_need(classes) <= kept.gate().free() + kept.evictable_bytes(None);
    OpenQueues {
        classes: open,
        unsorted,
    }
}

impl OpenQueues {
    /// These queues with every non-urgent one closed: what a fetch may take from when only an
    /// urgent job may be fetched (`pipeline.prefetch` jobs already wait to begin).
    pub fn urgent_only(mut self, classes: &[FetchClass]) -> OpenQueues {
        for (open, class) in self.classes.iter_mut().zip(classes) {
            *open &= class.urgent;
        }
        self.unsorted = false;
        self
    }
}

/// What an admitted job holds until it is settled.
#[derive(Debug)]
pub struct Admitted {
    /// Its SRS unless kept, and an urgent (or unsorted) job's working memory.
    pub reservation: Reservation,
    /// A normal job's place in the partition pool.
    pub share: Option<PoolShare>,
    /// Counts it in flight and keeps its parameters loaded.
    pub hold: JobHold,
}

/// Reserve for a job of class `c` just taken from its class queue, releasing unused
/// parameters of other circuits (least recently used first) where the memory is short. The
/// hold pins the class's parameters first, so that they are not among those released. `None`
/// when it does not fit after all.
pub fn admit(kept: &Arc<KeptParams>, c: &FetchClass, why: &str) -> Option<Admitted> {
    let hold = kept.hold(Some(c.worst.srs_key.clone()));
    kept.make_room(need(kept, c), Some(&c.worst.srs_key), why);
    let srs = kept.srs_needed(&c.worst);
    if c.urgent {
        let reservation = kept
            .gate()
            .try_reserve(srs + c.worst.work(c.worst.partitions))?;
        return Some(Admitted {
            reservation,
            share: None,
            hold,
        });
    }
    let reservation = kept.gate().try_reserve(srs)?;
    let share = kept.partitions().try_join(partitions_of(&c.worst))?;
    Some(Admitted {
        reservation,
        share: Some(share),
        hold,
    })
}

/// Reserve for a job just taken from the unsorted queue (see the module's notes).
pub fn admit_unsorted(kept: &Arc<KeptParams>, classes: &[FetchClass]) -> Option<Admitted> {
    let hold = kept.hold(None);
    let bytes = unsorted_need(classes);
    kept.make_room(bytes, None, "a job of the unsorted queue");
    let reservation = kept.gate().try_reserve(bytes)?;
    Some(Admitted {
        reservation,
        share: None,
        hold,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::estimate::{GIB, MIB};
    use crate::gate::kept::Unload;
    use crate::gate::Gate;
    use crate::groth16::SrsKey;
    use crate::kinds::{canary_estimate, porep_estimate, snap_estimate};
    use rand::{Rng, SeedableRng};
    use std::collections::VecDeque;

    fn registry(budget: u64) -> Arc<KeptParams> {
        let unload: Unload = Box::new(|_| {});
        KeptParams::new(Gate::new(budget), unload)
    }

    /// The H200 box of the sizing notes: 125 GiB less a 10 % margin, the worker's baseline
    /// taken out, as `gate::detect_budget` gives it there (121.3 GB of jobs).
    const H200_JOB_BUDGET: u64 = 121_300_000_000;

    #[test]
    fn a_snapdeals_job_is_admitted_beside_kept_porep_parameters_on_the_h200_box() {
        let in_flight = 3;
        let kept = registry(H200_JOB_BUDGET);
        let porep = porep_estimate(32 * GIB, in_flight, in_flight);
        let snap = snap_estimate(32 * GIB, in_flight, in_flight);
        // The first job, a 32 GiB PoRep proof, is done: its parameters stay loaded.
        {
            let first = admit(&kept, &normal(&porep), "test").expect("first job");
            let srs = first.reservation.split(porep.srs_bytes);
            kept.keep(&porep.srs_key, srs);
        }
        assert!(kept.is_kept(&porep.srs_key));
        // The worker serves both classes; only a SnapDeals job waits. The worker holds
        // nothing, so the SnapDeals queue is open, and taking its job releases the PoRep
        // parameters, which it needs the memory of.
        let worst = [normal(&porep), normal(&snap)];
        let open = open_queues(&kept, &worst, UrgentReserve::Bytes(0));
        assert_eq!(open.classes, vec![true, true]);
        let admitted = admit(&kept, &normal(&snap), "snap-32g").expect("admitted");
        assert_eq!(admitted.reservation.held(), snap.srs_bytes);
        assert!(admitted.share.is_some());
        assert_eq!(kept.partitions().held(), snap.work(in_flight));
        assert!(!kept.is_kept(&porep.srs_key));
        assert_eq!(kept.recent_evictions()[0].key, porep.srs_key);
        assert!(kept.gate().used() <= H200_JOB_BUDGET);
    }

    #[test]
    fn a_busy_worker_takes_a_smaller_job_only_while_the_larger_one_still_fits() {
        let kept = registry(10 * GIB);
        let large = Estimate {
            srs_key: SrsKey::new("large"),
            srs_bytes: 3 * GIB,
            per_partition: 2 * GIB,
            per_partition_on_gpu: 2 * GIB,
            partitions: 2,
            in_flight: 2,
        };
        let small = canary_estimate(1, 2);
        let worst = [normal(&large), normal(&small)];
        let first = admit(&kept, &worst[0], "test").unwrap();
        // 3 + 4 GiB held, 3 free. A second large job adds its SRS (not kept yet) and nothing
        // to the partition pool: the pipeline's two places are reserved already. So both
        // queues are open.
        assert_eq!(kept.partitions().growth(partitions_of(&large)), 0);
        assert_eq!(
            open_queues(&kept, &worst, UrgentReserve::Bytes(0)).classes,
            vec![true, true]
        );
        let small_job = admit(&kept, &worst[1], "test").unwrap();
        assert_eq!(
            kept.partitions().held(),
            4 * GIB,
            "the places, at the large size"
        );
        // The small job's SRS taken: a large one no longer fits, and the small class closes
        // with it.
        assert_eq!(
            open_queues(&kept, &worst, UrgentReserve::Bytes(0)).classes,
            vec![false, false]
        );
        assert!(!open_queues(&kept, &worst, UrgentReserve::Bytes(0)).unsorted);
        // Once the first job has finished with its SRS kept, the large class fits again.
        kept.keep(&large.srs_key, first.reservation.split(large.srs_bytes));
        drop(first);
        assert_eq!(
            open_queues(&kept, &worst, UrgentReserve::Bytes(0)).classes,
            vec![true, true]
        );
        drop(small_job);
        // An urgent class first in line that does not fit closes nothing behind it, and is
        // open itself as soon as it fits.
        let post = Estimate {
            srs_key: SrsKey::new("post"),
            // More than the budget holds beside the kept parameters, even with them released.
            srs_bytes: 11 * GIB,
            ..small.clone()
        };
        let first = [
            FetchClass {
                worst: post,
                urgent: true,
            },
            normal(&small),
        ];
        assert_eq!(
            open_queues(&kept, &first, UrgentReserve::Bytes(0)).classes,
            vec![false, true]
        );
        let urgent_small = [FetchClass {
            worst: small.clone(),
            urgent: true,
        }];
        assert_eq!(
            open_queues(&kept, &urgent_small, UrgentReserve::Bytes(0)).classes,
            vec![true]
        );
    }

    /// Two jobs of one circuit held at once reserve the pipeline's places once: on the H200
    /// box with A, B, C made on the CPU, the next 32 GiB job is taken while the first proves
    /// (job by job, 52 + 2 × 48 GiB did not fit the budget).
    #[test]
    fn a_second_full_size_job_shares_the_places_of_the_first() {
        let in_flight = 3;
        let kept = registry(H200_JOB_BUDGET);
        let porep = normal(&porep_estimate(32 * GIB, in_flight, in_flight));
        let first = admit(&kept, &porep, "test").expect("first job");
        // Its parameters kept while it proves, as the worker keeps them after a job.
        kept.keep(
            &porep.worst.srs_key,
            first.reservation.split(porep.worst.srs_bytes),
        );
        assert!(porep.worst.srs_bytes + 2 * porep.worst.work(in_flight) > H200_JOB_BUDGET);
        assert!(fits(&kept, &porep));
        let second = admit(&kept, &porep, "test").expect("second job");
        assert_eq!(kept.partitions().held(), porep.worst.work(in_flight));
        assert!(kept.gate().used() <= H200_JOB_BUDGET);
        // The first finishes; the second keeps the places until its own partitions run out.
        drop(first);
        assert_eq!(kept.partitions().held(), porep.worst.work(in_flight));
        second
            .share
            .as_ref()
            .unwrap()
            .update(porep.worst.per_partition, 1);
        assert_eq!(kept.partitions().held(), porep.worst.per_partition);
    }

    /// A busy worker that serves an urgent class takes another normal job only while the
    /// urgent class's worst case still fits beside it; an idle one takes it regardless.
    #[test]
    fn a_busy_worker_keeps_room_for_urgent_jobs() {
        let large = Estimate {
            srs_key: SrsKey::new("porep"),
            srs_bytes: 2 * GIB,
            per_partition: 2 * GIB,
            per_partition_on_gpu: GIB,
            partitions: 1,
            in_flight: 1,
        };
        let post = Estimate {
            srs_key: SrsKey::new("post"),
            srs_bytes: 2 * GIB,
            per_partition: GIB,
            per_partition_on_gpu: GIB,
            partitions: 1,
            in_flight: 1,
        };
        let classes = [
            normal(&large),
            FetchClass {
                worst: post.clone(),
                urgent: true,
            },
        ];
        assert_eq!(UrgentReserve::Auto.bytes(&classes), 3 * GIB);
        assert_eq!(UrgentReserve::Auto.bytes(&classes[..1]), 0);
        // Idle, on a budget that holds one large job but not the reserve beside it: open.
        let small_box = registry(5 * GIB);
        assert_eq!(
            open_queues(&small_box, &classes, UrgentReserve::Auto).classes,
            vec![true, true]
        );
        let kept = registry(8 * GIB);
        let _first = admit(&kept, &classes[0], "test").expect("first job");
        // 4 GiB held, 4 free: a second large job (its SRS, 2; its partition shares the
        // pipeline's one place, reserved already) leaves 2, less than the 3 reserved.
        assert_eq!(
            open_queues(&kept, &classes, UrgentReserve::Auto).classes,
            vec![false, true]
        );
        // Without a reserve, or with a smaller configured one, it is taken.
        for reserve in [UrgentReserve::Bytes(0), UrgentReserve::Bytes(GIB)] {
            assert_eq!(
                open_queues(&kept, &classes, reserve).classes,
                vec![true, true],
                "{reserve:?}"
            );
        }
        // The urgent job is admitted into the room kept for it.
        let _post = admit(&kept, &classes[1], "test").expect("urgent job");
        assert!(kept.gate().used() <= 8 * GIB);
    }

    fn normal(worst: &Estimate) -> FetchClass {
        FetchClass {
            worst: worst.clone(),
            urgent: false,
        }
    }

    /// A class as the simulation sees it: a worst case and the jobs waiting in its queue.
    struct SimClass {
        worst: Estimate,
        urgent: bool,
        waiting: VecDeque<SimJob>,
    }

    #[derive(Clone, Copy, Debug)]
    struct SimJob {
        partitions: u64,
    }

    struct Running {
        class: usize,
        remaining: u64,
        reservation: Reservation,
        share: Option<PoolShare>,
        hold: JobHold,
        srs_part: u64,
    }

    /// Random workers (classes of random sizes sharing a few parameter sets, random budgets)
    /// under random arrivals and completions, through the rules above and the real gate and
    /// registry: after every step the gate holds no more than its budget, and whenever the
    /// worker holds nothing while a job waits in one of its queues, the next fetch takes one.
    #[test]
    fn simulated_workers_never_exceed_the_budget_and_never_stall() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x6a7e);
        for round in 0..300 {
            let keys: Vec<SrsKey> = (0..rng.gen_range(1..4))
                .map(|k| SrsKey::new(format!("p{k}")))
                .collect();
            let srs_of: Vec<u64> = keys
                .iter()
                .map(|_| rng.gen_range(1..40) * 64 * MIB)
                .collect();
            let in_flight = rng.gen_range(1..4);
            let mut classes: Vec<SimClass> = (0..rng.gen_range(1..5))
                .map(|_| {
                    let k = rng.gen_range(0..keys.len());
                    let per = rng.gen_range(1..20) * 32 * MIB;
                    SimClass {
                        urgent: rng.gen_bool(0.2),
                        worst: Estimate {
                            srs_key: keys[k].clone(),
                            srs_bytes: srs_of[k],
                            per_partition: per,
                            per_partition_on_gpu: per / 2 + 1,
                            partitions: in_flight,
                            in_flight,
                        },
                        waiting: VecDeque::new(),
                    }
                })
                .collect();
            // Fetch order: largest worst case first, as a worker orders its classes.
            classes.sort_by_key(|c| std::cmp::Reverse(c.worst.srs_bytes + c.worst.work(in_flight)));
            let largest = classes
                .iter()
                .map(|c| c.worst.srs_bytes + c.worst.work(in_flight))
                .max()
                .unwrap();
            // A budget every class fits alone, with room for a few jobs at most.
            let budget = largest + rng.gen_range(0..3) * largest / 2;
            let kept = registry(budget);
            let worst: Vec<FetchClass> = classes
                .iter()
                .map(|c| FetchClass {
                    worst: c.worst.clone(),
                    urgent: c.urgent,
                })
                .collect();
            let mut running: Vec<Running> = Vec::new();
            for step in 0..200 {
                match rng.gen_range(0..10) {
                    // A job arrives in a random class queue.
                    0..=2 => {
                        let c = rng.gen_range(0..classes.len());
                        let partitions = rng.gen_range(1..=2 * in_flight);
                        classes[c].waiting.push_back(SimJob { partitions });
                    }
                    // A partition of a running job finishes; a job with none left is done and
                    // keeps its parameters, as the worker does.
                    3..=5 if !running.is_empty() => {
                        let i = rng.gen_range(0..running.len());
                        let r = &mut running[i];
                        r.remaining -= 1;
                        let e = &classes[r.class].worst;
                        match &r.share {
                            Some(share) => share.update(e.per_partition_on_gpu, r.remaining),
                            None => r
                                .reservation
                                .shrink_to(r.srs_part + e.work_on_gpu(r.remaining)),
                        }
                        if r.remaining == 0 {
                            let r = running.swap_remove(i);
                            let key = classes[r.class].worst.srs_key.clone();
                            kept.keep(&key, r.reservation.split(r.srs_part));
                            drop(r.hold);
                        }
                    }
                    // A fetch round.
                    _ => {
                        let idle = kept.jobs_held() == 0;
                        let waiting = classes.iter().any(|c| !c.waiting.is_empty());
                        let open = open_queues(&kept, &worst, UrgentReserve::Auto);
                        let taken = open
                            .classes
                            .iter()
                            .enumerate()
                            .find(|&(c, &is_open)| is_open && !classes[c].waiting.is_empty())
                            .map(|(c, _)| c);
                        if idle && waiting {
                            assert!(
                                taken.is_some(),
                                "round {round} step {step}: idle with jobs waiting and no \
                                 queue open ({open:?}, free {}, budget {budget})",
                                kept.gate().free()
                            );
                        }
                        if let Some(c) = taken {
                            let job = classes[c].waiting.pop_front().unwrap();
                            let e = classes[c].worst.clone();
                            let Admitted {
                                reservation,
                                share,
                                hold,
                            } = admit(&kept, &worst[c], "sim").unwrap_or_else(|| {
                                panic!("round {round} step {step}: an open class was not admitted")
                            });
                            // The job, built: shrink to its own estimate.
                            let srs_part = kept.srs_needed(&e).min(reservation.held());
                            let actual = Estimate {
                                partitions: job.partitions,
                                ..e.clone()
                            };
                            match &share {
                                Some(share) => {
                                    reservation.shrink_to(srs_part);
                                    share.update(actual.per_partition, actual.partitions);
                                }
                                None => {
                                    reservation.shrink_to(srs_part + actual.work(job.partitions))
                                }
                            }
                            running.push(Running {
                                class: c,
                                remaining: job.partitions,
                                reservation,
                                share,
                                hold,
                                srs_part,
                            });
                        }
                    }
                }
                assert!(
                    kept.gate().used() <= budget,
                    "round {round} step {step}: {} reserved of {budget}",
                    kept.gate().used()
                );
            }
        }
    }
}
