//! The memory-budget gate: a worker takes a job from the broker only when its estimated working
//! set fits what is left of the budget, so no job waits in one worker while another is idle and
//! the process never grows past the machine.

pub mod admission;
pub mod budget;
pub mod estimate;
pub mod kept;
pub mod partitions;

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

pub use admission::{
    admit, admit_unsorted, open_queues, partitions_of, Admitted, FetchClass, OpenQueues,
    UrgentReserve,
};
pub use budget::detect_budget;
pub use estimate::Estimate;
pub use kept::{Eviction, JobHold, KeptParams, KeptStatus};
pub use partitions::{PartitionPool, Partitions, PoolShare};

/// Bytes reserved against a fixed budget.
#[derive(Debug)]
pub struct Gate {
    budget: u64,
    used: Mutex<Usage>,
    freed: Notify,
}

#[derive(Debug, Default)]
struct Usage {
    reserved: u64,
    /// The most ever reserved at once, for benchmarks and tests to compare with what the
    /// process really held.
    peak: u64,
}

impl Gate {
    /// `budget` is what jobs may use (the worker's own baseline already taken out).
    pub fn new(budget: u64) -> Arc<Gate> {
        Arc::new(Gate {
            budget,
            used: Mutex::new(Usage::default()),
            freed: Notify::new(),
        })
    }

    pub fn used(&self) -> u64 {
        self.lock().reserved
    }

    /// The bytes jobs may use in all.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// What is not reserved now.
    pub fn free(&self) -> u64 {
        self.budget.saturating_sub(self.lock().reserved)
    }

    /// The most reserved at once since the gate was made.
    pub fn peak_used(&self) -> u64 {
        self.lock().peak
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Usage> {
        // The guarded values are plain counters: a panic elsewhere cannot leave them torn.
        self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reserve `bytes` if they fit now.
    pub fn try_reserve(self: &Arc<Self>, bytes: u64) -> Option<Reservation> {
        let mut used = self.lock();
        if used.reserved + bytes > self.budget {
            return None;
        }
        used.reserved += bytes;
        used.peak = used.peak.max(used.reserved);
        Some(Reservation {
            gate: self.clone(),
            held: Mutex::new(bytes),
        })
    }

    /// A reservation of nothing, to grow by [`Reservation::absorb`].
    pub fn nothing(self: &Arc<Self>) -> Reservation {
        Reservation {
            gate: self.clone(),
            held: Mutex::new(0),
        }
    }

    /// Wait until `bytes` fit. A request larger than the whole budget never fits: callers
    /// check that at start-up.
    pub async fn reserve(self: &Arc<Self>, bytes: u64) -> Reservation {
        self.retry_until(|| self.try_reserve(bytes)).await
    }

    /// Retries `attempt` at each release of memory until it succeeds.
    pub(crate) async fn retry_until<T>(&self, mut attempt: impl FnMut() -> Option<T>) -> T {
        loop {
            // Register interest before trying, so a release in between is not missed.
            let freed = self.freed.notified();
            if let Some(done) = attempt() {
                return done;
            }
            freed.await;
        }
    }

    /// Resolves at the next release of memory (or of a job, `kept::JobHold`), for a fetch
    /// that found nothing open: create it before looking, so that a release in between is
    /// not missed.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.freed.notified()
    }

    /// Wake whoever waits in [`Gate::changed`] or [`Gate::reserve`].
    pub(crate) fn wake(&self) {
        self.freed.notify_waiters();
    }

    fn give_back(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut used = self.lock();
        used.reserved = used.reserved.saturating_sub(bytes);
        drop(used);
        self.wake();
    }
}

/// Memory held for one job. It travels with the work, shrinks as partitions finish, and
/// returns the rest to the gate when dropped.
#[derive(Debug)]
pub struct Reservation {
    gate: Arc<Gate>,
    held: Mutex<u64>,
}

impl Reservation {
    pub fn held(&self) -> u64 {
        *self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Shrink to `bytes` (never grows: growing could overshoot the budget).
    pub fn shrink_to(&self, bytes: u64) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if bytes < *held {
            let freed = *held - bytes;
            *held = bytes;
            drop(held);
            self.gate.give_back(freed);
        }
    }
}

impl Reservation {
    /// Take over `other`'s bytes (of the same gate): the two reservations become one.
    pub fn absorb(&self, other: Reservation) {
        debug_assert!(Arc::ptr_eq(&self.gate, &other.gate));
        let moved = std::mem::take(&mut *other.held.lock().unwrap_or_else(|e| e.into_inner()));
        *self.held.lock().unwrap_or_else(|e| e.into_inner()) += moved;
    }

    /// Move up to `bytes` of this reservation into a new one: the SRS part of a job's
    /// reservation outlives the job while the SRS stays resident.
    pub fn split(&self, bytes: u64) -> Reservation {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let moved = bytes.min(*held);
        *held -= moved;
        Reservation {
            gate: self.gate.clone(),
            held: Mutex::new(moved),
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let held = *self.held.get_mut().unwrap_or_else(|e| e.into_inner());
        self.gate.give_back(held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn reservations_add_up_and_shrink() {
        let gate = Gate::new(100);
        let a = gate.try_reserve(60).unwrap();
        assert!(gate.try_reserve(50).is_none());
        a.shrink_to(40);
        assert_eq!(gate.used(), 40);
        let b = gate.try_reserve(50).unwrap();
        a.shrink_to(70); // no growth
        assert_eq!(gate.used(), 90);
        drop(a);
        drop(b);
        assert_eq!(gate.used(), 0);
        assert_eq!(gate.peak_used(), 90);
    }

    #[test]
    fn absorbed_reservations_are_one() {
        let gate = Gate::new(100);
        let a = gate.nothing();
        a.absorb(gate.try_reserve(30).unwrap());
        a.absorb(gate.try_reserve(20).unwrap());
        assert_eq!((a.held(), gate.used()), (50, 50));
        a.shrink_to(10);
        assert_eq!(gate.used(), 10);
        drop(a);
        assert_eq!(gate.used(), 0);
    }

    #[tokio::test]
    async fn waiter_wakes_when_memory_is_freed() {
        let gate = Gate::new(100);
        let a = gate.try_reserve(80).unwrap();
        let g2 = gate.clone();
        let waiter = tokio::spawn(async move { g2.reserve(50).await.held() });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished());
        drop(a);
        let held = tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(held, 50);
    }
}
