//! Evaluations made on the CPU, kept page-locked from one partition to the next.
//!
//! Where a GPU has no room for the recorded constraints (24 and 16 GB cards at 32 GiB), a, b
//! and c (12.5 GB per partition) are made on the CPU and page-locked, so that the start copies
//! them by DMA rather than through busy cores. Locking them anew for every partition took the
//! driver ~0.5 s, and the start running beside it waited meanwhile (H's streamed MSM 2.06 s
//! against 1.23 s, `ops/bench/gpu-2026-12-04-u.md`). So once their values are on the device
//! they are kept here, still locked, and the products stage writes the next partition's over
//! them (`Backend::reusable_evaluations`, `R1cs::assignment_into`).
//!
//! They are the partitions' own memory, which the memory gate reserves while a job is in
//! flight: two sets per GPU at most are kept (one being filled, one waiting for the start),
//! and all are let go of when no start stage has anything to prove (`Backend::idle`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::groth16::Evaluations;

/// Sets kept, oldest first.
static KEPT: Mutex<Vec<Evaluations>> = Mutex::new(Vec::new());
/// CUDA backends open in this process: two sets are kept per GPU.
static GPUS: AtomicUsize = AtomicUsize::new(0);

pub(super) fn gpu_opened() {
    GPUS.fetch_add(1, Ordering::Relaxed);
}

pub(super) fn gpu_closed() {
    GPUS.fetch_sub(1, Ordering::Relaxed);
}

/// Keeps `evals`, whose values a GPU has copied, for the next partition where they are
/// page-locked and there is room; else lets go of them off the caller's path.
pub(super) fn give_back(evals: Evaluations) {
    if evals.pins.is_empty() {
        let_go(vec![evals]);
        return;
    }
    let room = 2 * GPUS.load(Ordering::Relaxed).max(1);
    let extra = match KEPT.lock() {
        Ok(mut kept) => {
            kept.push(evals);
            let over = kept.len().saturating_sub(room);
            kept.drain(..over).collect()
        }
        Err(_) => vec![evals],
    };
    let_go(extra);
}

/// A kept set of `rows` rows each, if any.
pub(super) fn take(rows: usize) -> Option<Evaluations> {
    let mut kept = KEPT.lock().ok()?;
    let at = kept.iter().position(|e| e.holds_rows(rows))?;
    Some(kept.remove(at))
}

/// Lets go of every kept set.
pub(super) fn release_all() {
    let all = match KEPT.lock() {
        Ok(mut kept) => std::mem::take(&mut *kept),
        Err(_) => return,
    };
    let_go(all);
}

/// Unlocks and frees `sets` on a thread of their own: for a 32 GiB partition both take a good
/// part of a second. (`Evaluations` drops its pins first, before the values they lock.)
fn let_go(sets: Vec<Evaluations>) {
    if !sets.is_empty() {
        std::thread::spawn(move || drop(sets));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::Scalar as Fr;

    fn evals(rows: usize, locked: bool) -> Evaluations {
        let e = Evaluations {
            pins: Default::default(),
            a: vec![Fr::from(1u64); rows],
            b: vec![Fr::from(2u64); rows],
            c: vec![Fr::from(3u64); rows],
        };
        if locked {
            e.pins.hold(Box::new(()));
        }
        e
    }

    fn kept() -> usize {
        KEPT.lock().map_or(0, |k| k.len())
    }

    /// Page-locked sets are kept, two per GPU, oldest let go of first, taken back by their
    /// rows; sets not locked are let go of at once; idle lets go of all. (One test: the pool is
    /// the process's.)
    #[test]
    fn locked_evaluations_are_kept_for_the_next_partition() {
        release_all();
        gpu_opened();
        give_back(evals(5, false));
        assert_eq!(kept(), 0);
        for rows in [5, 6, 5] {
            give_back(evals(rows, true));
        }
        assert_eq!(kept(), 2, "two per GPU");
        assert!(take(7).is_none());
        let five = take(5).expect("a set of 5 rows");
        assert!(five.holds_rows(5) && !five.pins.is_empty());
        assert!(take(5).is_none(), "the oldest set of 5 rows was let go of");
        assert!(take(6).is_some());
        give_back(five);
        release_all();
        assert_eq!(kept(), 0);
        gpu_closed();
    }
}
