//! The partitions in flight of all the jobs in one pipeline, reserved once for them together.
//!
//! The pipeline keeps a bounded number of full-size partitions alive, whichever jobs they
//! belong to (its bounded hand-offs, `pipeline::partitions_in_flight`). A job's estimate counts
//! that many of its own partitions; reserved job by job, two jobs held at once count the same
//! places twice. Where the budget holds the parameters and one job but not two (a 32 GiB job
//! whose A, B, C are made on the CPU reserves 3 × 16 GiB; on a 125 GiB host) the next job was
//! admitted only once the previous had finished, and its first partition was synthesized and
//! evaluated with the GPU idle (~4.5 s a job, `ops/bench/gpu-2026-12-05-w.md`).
//!
//! The pool holds, for its members together,
//!
//!   min(Σ_j per_j · min(remaining_j, in_flight), in_flight · max_j per_j)
//!
//! bytes: a job holds at most min(remaining, in_flight) of its partitions alive, all jobs
//! together at most in_flight, and each partition at most its own job's per-partition bytes.
//! A job joins with its worst case and reports its progress ([`PoolShare::update`]); the pool
//! gives back what its members no longer need, and a job joins when the gate has the growth
//! free. One job alone reserves exactly what it did job by job. Urgent jobs (PoSt) have their
//! own lane beside those places and keep a reservation each.

use std::sync::{Arc, Mutex, MutexGuard};

use super::{Gate, Reservation};

/// The full-size partitions of the pipeline's (non-urgent) jobs.
pub struct PartitionPool {
    gate: Arc<Gate>,
    state: Mutex<PoolState>,
}

struct PoolState {
    /// What the gate has given the pool: always `need(members)`.
    held: Reservation,
    members: Vec<Member>,
    next_id: u64,
}

/// One job's partitions as the pool counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partitions {
    /// Bytes of one of its partitions while alive.
    pub per_partition: u64,
    /// Partitions it has still to finish.
    pub remaining: u64,
    /// Partitions the pipeline keeps alive at once (the estimates' `in_flight`).
    pub in_flight: u64,
}

#[derive(Clone, Copy, Debug)]
struct Member {
    id: u64,
    partitions: Partitions,
}

/// What `members` can hold alive at once (see the module's notes).
fn need(members: impl Iterator<Item = Partitions> + Clone) -> u64 {
    let each: u64 = members
        .clone()
        .map(|p| p.per_partition.saturating_mul(p.remaining.min(p.in_flight)))
        .fold(0, u64::saturating_add);
    let places = members.clone().map(|p| p.in_flight).max().unwrap_or(0);
    let largest = members.map(|p| p.per_partition).max().unwrap_or(0);
    each.min(places.saturating_mul(largest))
}

impl PartitionPool {
    pub fn new(gate: &Arc<Gate>) -> Arc<PartitionPool> {
        Arc::new(PartitionPool {
            gate: gate.clone(),
            state: Mutex::new(PoolState {
                held: gate.nothing(),
                members: Vec::new(),
                next_id: 0,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // Counters and a reservation: a panic elsewhere cannot leave them torn.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the gate has given the pool.
    pub fn held(&self) -> u64 {
        self.lock().held.held()
    }

    /// Jobs in the pool.
    pub fn members(&self) -> usize {
        self.lock().members.len()
    }

    /// Bytes the gate must give for a job of `partitions` to join now.
    pub fn growth(&self, partitions: Partitions) -> u64 {
        let state = self.lock();
        growth(&state, partitions)
    }

    /// Joins the pool if the gate has the growth free now.
    pub fn try_join(self: &Arc<Self>, partitions: Partitions) -> Option<PoolShare> {
        let mut state = self.lock();
        let more = growth(&state, partitions);
        if more > 0 {
            let reserved = self.gate.try_reserve(more)?;
            state.held.absorb(reserved);
        }
        let id = state.next_id;
        state.next_id += 1;
        state.members.push(Member { id, partitions });
        Some(PoolShare {
            pool: self.clone(),
            id,
        })
    }

    /// Waits until a job of `partitions` can join.
    pub async fn join(self: &Arc<Self>, partitions: Partitions) -> PoolShare {
        self.gate.retry_until(|| self.try_join(partitions)).await
    }

    /// Gives the gate back what the members no longer need.
    fn settle(state: &mut PoolState) {
        let need = need(state.members.iter().map(|m| m.partitions));
        state.held.shrink_to(need);
    }
}

fn growth(state: &PoolState, partitions: Partitions) -> u64 {
    let with = need(
        state
            .members
            .iter()
            .map(|m| m.partitions)
            .chain(std::iter::once(partitions)),
    );
    with.saturating_sub(state.held.held())
}

/// One job's place in the pool: it leaves when dropped.
pub struct PoolShare {
    pool: Arc<PartitionPool>,
    id: u64,
}

impl std::fmt::Debug for PoolShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolShare").field("id", &self.id).finish()
    }
}

impl PoolShare {
    /// The job has `remaining` partitions of `per_partition` bytes left: the pool gives back
    /// what no member needs any more. Neither figure ever grows (a job's first estimate is its
    /// worst case; growing could overshoot the budget).
    pub fn update(&self, per_partition: u64, remaining: u64) {
        let mut state = self.pool.lock();
        if let Some(m) = state.members.iter_mut().find(|m| m.id == self.id) {
            let p = &mut m.partitions;
            p.per_partition = p.per_partition.min(per_partition);
            p.remaining = p.remaining.min(remaining);
        }
        PartitionPool::settle(&mut state);
    }
}

impl Drop for PoolShare {
    fn drop(&mut self) {
        let mut state = self.pool.lock();
        state.members.retain(|m| m.id != self.id);
        PartitionPool::settle(&mut state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: u64 = 1 << 30;

    fn job(per_partition: u64, remaining: u64) -> Partitions {
        Partitions {
            per_partition,
            remaining,
            in_flight: 3,
        }
    }

    /// One job reserves what it would alone; a second of the same shape joins for nothing
    /// more while the first still has all its places, and the pool shrinks only when the two
    /// together need fewer than the pipeline's places.
    #[test]
    fn jobs_share_the_pipelines_places() {
        let gate = Gate::new(100 * GB);
        let _parameters = gate.try_reserve(52 * GB).unwrap();
        let pool = PartitionPool::new(&gate);
        let first = pool.try_join(job(16 * GB, 10)).unwrap();
        assert_eq!(pool.held(), 48 * GB);
        assert_eq!(gate.used(), 100 * GB);
        // Job by job the second would need 48 GB more; here nothing.
        assert_eq!(pool.growth(job(16 * GB, 10)), 0);
        let second = pool.try_join(job(16 * GB, 10)).unwrap();
        assert_eq!(pool.held(), 48 * GB);
        // Progress of one job alone frees nothing: the other can fill the places.
        first.update(16 * GB, 1);
        assert_eq!(pool.held(), 48 * GB);
        // The first leaves; the second keeps three places.
        drop(first);
        assert_eq!(pool.held(), 48 * GB);
        second.update(16 * GB, 2);
        assert_eq!(pool.held(), 32 * GB);
        // A's products on the GPU: the figure shrinks, never grows back.
        second.update(GB, 2);
        assert_eq!(pool.held(), 2 * GB);
        second.update(16 * GB, 2);
        assert_eq!(pool.held(), 2 * GB);
        drop(second);
        assert_eq!(pool.held(), 0);
        assert_eq!(pool.members(), 0);
        assert_eq!(gate.used(), 52 * GB);
    }

    /// Jobs of different sizes: the places are counted at the largest member's size, and a
    /// small job beside a large one costs no more than its own partitions.
    #[test]
    fn places_are_counted_at_the_largest_size() {
        let gate = Gate::new(200 * GB);
        let pool = PartitionPool::new(&gate);
        let small = pool.try_join(job(GB, 1)).unwrap();
        assert_eq!(pool.held(), GB);
        // A large job: three places of 16 GB at most (not 3 × 16 + 1).
        assert_eq!(pool.growth(job(16 * GB, 10)), 47 * GB);
        let large = pool.try_join(job(16 * GB, 10)).unwrap();
        assert_eq!(pool.held(), 48 * GB);
        drop(large);
        assert_eq!(pool.held(), GB);
        drop(small);
        assert_eq!(gate.used(), 0);
    }

    /// A job that does not fit waits for the gate, and joins when memory is freed.
    #[tokio::test]
    async fn a_job_waits_for_its_growth() {
        let gate = Gate::new(50 * GB);
        let pool = PartitionPool::new(&gate);
        let other = gate.try_reserve(10 * GB).unwrap();
        assert!(pool.try_join(job(16 * GB, 3)).is_none());
        assert_eq!(pool.members(), 0);
        let p = pool.clone();
        let waiter = tokio::spawn(async move { p.join(job(16 * GB, 3)).await });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiter.is_finished());
        drop(other);
        let share = tokio::time::timeout(std::time::Duration::from_secs(1), waiter)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(pool.held(), 48 * GB);
        drop(share);
        assert_eq!(gate.used(), 0);
    }

    /// Whatever the order of joins, progress and departures, the pool holds exactly what its
    /// members can have alive at once, and never more than the gate's budget.
    #[test]
    fn the_pool_holds_its_members_need() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let gate = Gate::new(500 * GB);
        let pool = PartitionPool::new(&gate);
        let mut shares: Vec<(PoolShare, Partitions)> = Vec::new();
        for _ in 0..2000 {
            match rng.gen_range(0..3) {
                0 => {
                    let p = job(rng.gen_range(1..=16) * GB, rng.gen_range(1..=12));
                    if let Some(s) = pool.try_join(p) {
                        shares.push((s, p));
                    }
                }
                1 if !shares.is_empty() => {
                    let i = rng.gen_range(0..shares.len());
                    let (s, p) = &mut shares[i];
                    p.remaining = p.remaining.saturating_sub(1);
                    s.update(p.per_partition, p.remaining);
                    if p.remaining == 0 {
                        shares.swap_remove(i);
                    }
                }
                _ if !shares.is_empty() => {
                    let i = rng.gen_range(0..shares.len());
                    shares.swap_remove(i);
                }
                _ => {}
            }
            let want = need(shares.iter().map(|(_, p)| *p));
            assert_eq!(pool.held(), want);
            assert_eq!(gate.used(), want);
            assert!(want <= 3 * 16 * GB);
        }
    }
}
