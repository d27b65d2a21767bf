//! Parameters a worker keeps loaded between jobs, and the gate memory they hold.
//!
//! Loading a 32 GiB circuit's parameters and recorded constraints takes minutes, so a worker
//! keeps them after a job (the SRS part of the job's reservation moves here) for the next job
//! of the circuit. Kept memory is a choice, not a claim: parameters no fetched or in-flight
//! job uses are released, least recently used first, as soon as a fetch needs their memory
//! ([`KeptParams::make_room`]). Each release unloads them from the process's caches, so the
//! memory the gate gets back is really given back.
//!
//! The same registry counts the jobs this worker holds ([`JobHold`]: from fetch to ack) and
//! which parameters each uses: parameters in use are never released, and "nothing in flight"
//! is what the fetch rule (`admission`) reads to decide that it must not wait.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use super::{Estimate, Gate, PartitionPool, Reservation};
use crate::groth16::SrsKey;

/// How many evictions [`KeptParams::recent_evictions`] remembers.
const EVICTIONS_REMEMBERED: usize = 16;

/// Unloads a circuit's parameters from wherever the process holds them (the SRS and
/// recorded-constraint caches).
pub type Unload = Box<dyn Fn(&SrsKey) + Send + Sync>;

pub struct KeptParams {
    gate: Arc<Gate>,
    /// The partitions in flight of the worker's normal (non-urgent) jobs, reserved together.
    partitions: Arc<PartitionPool>,
    unload: Unload,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    kept: HashMap<SrsKey, Kept>,
    /// Jobs held (fetched, not yet settled) per parameters they use.
    users: HashMap<SrsKey, usize>,
    /// Jobs held, whether or not their parameters are known yet.
    jobs: usize,
    evictions: VecDeque<Eviction>,
    /// Releases since the worker started.
    evicted: u64,
}

struct Kept {
    reservation: Reservation,
    last_used: Instant,
}

/// Parameters kept loaded, as `c2q status` and the metrics show them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptStatus {
    pub key: SrsKey,
    pub bytes: u64,
    /// Jobs held that use them (0: they may be released when a fetch needs the memory).
    pub users: usize,
    pub idle_s: u64,
}

/// One release of kept parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eviction {
    /// 1 for the worker's first release, and so on.
    pub seq: u64,
    pub key: SrsKey,
    pub bytes: u64,
    /// What needed the memory.
    pub why: String,
    pub at: SystemTime,
}

impl KeptParams {
    pub fn new(gate: Arc<Gate>, unload: Unload) -> Arc<KeptParams> {
        Arc::new(KeptParams {
            partitions: PartitionPool::new(&gate),
            gate,
            unload,
            state: Mutex::new(State::default()),
        })
    }

    pub fn gate(&self) -> &Arc<Gate> {
        &self.gate
    }

    /// The pool the worker's normal jobs reserve their partitions in flight from.
    pub fn partitions(&self) -> &Arc<PartitionPool> {
        &self.partitions
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Plain maps and counters: a panic elsewhere cannot leave them torn.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Count a job as held from now until the hold is dropped, using `key`'s parameters when
    /// known (they are then not released while it is held).
    pub fn hold(self: &Arc<Self>, key: Option<SrsKey>) -> JobHold {
        let mut state = self.lock();
        state.jobs += 1;
        if let Some(key) = &key {
            *state.users.entry(key.clone()).or_default() += 1;
            if let Some(kept) = state.kept.get_mut(key) {
                kept.last_used = Instant::now();
            }
        }
        JobHold {
            params: self.clone(),
            key,
        }
    }

    /// Jobs held now.
    pub fn jobs_held(&self) -> usize {
        self.lock().jobs
    }

    pub fn is_kept(&self, key: &SrsKey) -> bool {
        self.lock().kept.contains_key(key)
    }

    /// The SRS bytes a job of `e` still has to reserve: none while its parameters are kept.
    pub fn srs_needed(&self, e: &Estimate) -> u64 {
        if self.is_kept(&e.srs_key) {
            0
        } else {
            e.srs_bytes
        }
    }

    /// Keep `key`'s parameters loaded with `reservation` as their memory, after a job that
    /// used them. Parameters already kept keep their first reservation (this one is given
    /// back).
    pub fn keep(&self, key: &SrsKey, reservation: Reservation) {
        let mut state = self.lock();
        match state.kept.get_mut(key) {
            Some(kept) => kept.last_used = Instant::now(),
            None => {
                tracing::info!(params = %key, bytes = reservation.held(),
                    "keeping parameters loaded for the next job of their circuit");
                state.kept.insert(
                    key.clone(),
                    Kept {
                        reservation,
                        last_used: Instant::now(),
                    },
                );
            }
        }
    }

    /// Kept bytes that no held job uses, other than `except`'s: what [`make_room`] may release.
    ///
    /// [`make_room`]: KeptParams::make_room
    pub fn evictable_bytes(&self, except: Option<&SrsKey>) -> u64 {
        let state = self.lock();
        state
            .kept
            .iter()
            .filter(|(key, _)| Some(*key) != except && !state.in_use(key))
            .map(|(_, kept)| kept.reservation.held())
            .sum()
    }

    /// Release kept parameters that no held job uses (never `except`'s), least recently used
    /// first, until `bytes` are free in the gate or nothing more may go. `why` names what
    /// needs the room, for the log. Returns what was released.
    pub fn make_room(&self, bytes: u64, except: Option<&SrsKey>, why: &str) -> Vec<Eviction> {
        let mut released = Vec::new();
        let mut evicted = Vec::new();
        {
            let mut state = self.lock();
            while self.gate.free() < bytes {
                let victim = state
                    .kept
                    .iter()
                    .filter(|(key, _)| Some(*key) != except && !state.in_use(key))
                    .min_by_key(|(_, kept)| kept.last_used)
                    .map(|(key, _)| key.clone());
                let Some(key) = victim else { break };
                let Some(kept) = state.kept.remove(&key) else {
                    break;
                };
                state.evicted += 1;
                let eviction = Eviction {
                    seq: state.evicted,
                    key: key.clone(),
                    bytes: kept.reservation.held(),
                    why: why.to_string(),
                    at: SystemTime::now(),
                };
                tracing::info!(params = %key, bytes = eviction.bytes,
                    idle_s = kept.last_used.elapsed().as_secs(), needed_by = why,
                    "releasing kept parameters: no job uses them and a fetch needs the memory");
                if state.evictions.len() == EVICTIONS_REMEMBERED {
                    state.evictions.pop_front();
                }
                state.evictions.push_back(eviction.clone());
                released.push(eviction);
                // The memory goes back to the gate now; the caches are emptied below, outside
                // the lock (freeing tens of GB takes a moment). No job can load them again in
                // between without reserving their bytes first: they are no longer kept.
                drop(kept.reservation);
                evicted.push(key);
            }
        }
        for key in &evicted {
            (self.unload)(key);
        }
        released
    }

    /// What is kept now, most recently used first.
    pub fn status(&self) -> Vec<KeptStatus> {
        let state = self.lock();
        let mut out: Vec<(Instant, KeptStatus)> = state
            .kept
            .iter()
            .map(|(key, kept)| {
                let status = KeptStatus {
                    key: key.clone(),
                    bytes: kept.reservation.held(),
                    users: state.users.get(key).copied().unwrap_or(0),
                    idle_s: kept.last_used.elapsed().as_secs(),
                };
                (kept.last_used, status)
            })
            .collect();
        out.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.key.cmp(&b.1.key)));
        out.into_iter().map(|(_, s)| s).collect()
    }

    /// The last releases, oldest first.
    pub fn recent_evictions(&self) -> Vec<Eviction> {
        self.lock().evictions.iter().cloned().collect()
    }

    fn release(&self, key: Option<&SrsKey>) {
        let mut state = self.lock();
        state.jobs = state.jobs.saturating_sub(1);
        if let Some(key) = key {
            state.unuse(key);
        }
        drop(state);
        // A worker that now holds nothing may fetch what it could not while busy.
        self.gate.wake();
    }
}

impl State {
    fn in_use(&self, key: &SrsKey) -> bool {
        self.users.get(key).is_some_and(|&n| n > 0)
    }

    fn unuse(&mut self, key: &SrsKey) {
        if let Some(n) = self.users.get_mut(key) {
            *n -= 1;
            if *n == 0 {
                self.users.remove(key);
            }
        }
        if let Some(kept) = self.kept.get_mut(key) {
            kept.last_used = Instant::now();
        }
    }
}

/// A job this worker holds, from its fetch until it is settled: counted as in flight, and its
/// parameters (once known) are not released meanwhile.
pub struct JobHold {
    params: Arc<KeptParams>,
    key: Option<SrsKey>,
}

impl JobHold {
    /// The job uses `key`'s parameters (its class was not known at fetch, or its message
    /// named another circuit than its queue's).
    pub fn uses(&mut self, key: &SrsKey) {
        if self.key.as_ref() == Some(key) {
            return;
        }
        let mut state = self.params.lock();
        *state.users.entry(key.clone()).or_default() += 1;
        if let Some(old) = self.key.replace(key.clone()) {
            state.unuse(&old);
        }
    }
}

impl Drop for JobHold {
    fn drop(&mut self) {
        self.params.release(self.key.as_ref());
    }
}

impl std::fmt::Debug for JobHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobHold").field("key", &self.key).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn params(budget: u64) -> (Arc<KeptParams>, Arc<AtomicUsize>) {
        let unloads = Arc::new(AtomicUsize::new(0));
        let counted = unloads.clone();
        let unload: Unload = Box::new(move |_| {
            counted.fetch_add(1, Ordering::Relaxed);
        });
        (KeptParams::new(Gate::new(budget), unload), unloads)
    }

    #[test]
    fn unused_parameters_go_least_recently_used_first_and_used_ones_stay() {
        let (kept, unloads) = params(100);
        let gate = kept.gate().clone();
        let (a, b, c) = (SrsKey::new("a"), SrsKey::new("b"), SrsKey::new("c"));
        kept.keep(&a, gate.try_reserve(30).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(2));
        kept.keep(&b, gate.try_reserve(30).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(2));
        kept.keep(&c, gate.try_reserve(30).unwrap());
        let using_a = kept.hold(Some(a.clone()));
        assert_eq!(kept.evictable_bytes(None), 60);
        assert_eq!(kept.evictable_bytes(Some(&b)), 30);
        // `a` is in use; `b` is the least recently used of the others.
        let released = kept.make_room(40, None, "test");
        assert_eq!(
            released.iter().map(|e| e.key.clone()).collect::<Vec<_>>(),
            vec![b.clone()]
        );
        assert_eq!(gate.free(), 40);
        assert_eq!(unloads.load(Ordering::Relaxed), 1);
        // Nothing releasable is left but `c`, and `c` is spared when asked.
        assert!(kept.make_room(100, Some(&c), "test").is_empty());
        assert_eq!(kept.make_room(100, None, "test").len(), 1);
        assert_eq!(gate.free(), 70);
        assert!(kept.is_kept(&a));
        drop(using_a);
        assert_eq!(kept.jobs_held(), 0);
        assert_eq!(kept.make_room(100, None, "test").len(), 1);
        assert_eq!(gate.free(), 100);
        assert_eq!(kept.recent_evictions().len(), 3);
    }

    #[test]
    fn a_hold_moves_to_the_parameters_its_job_turned_out_to_use() {
        let (kept, _) = params(100);
        let gate = kept.gate().clone();
        let (a, b) = (SrsKey::new("a"), SrsKey::new("b"));
        kept.keep(&a, gate.try_reserve(10).unwrap());
        kept.keep(&b, gate.try_reserve(10).unwrap());
        let mut hold = kept.hold(None);
        assert_eq!(kept.jobs_held(), 1);
        assert_eq!(kept.evictable_bytes(None), 20);
        hold.uses(&a);
        assert_eq!(kept.evictable_bytes(None), 10);
        hold.uses(&b);
        assert_eq!(kept.status().iter().find(|s| s.key == b).unwrap().users, 1);
        assert_eq!(kept.status().iter().find(|s| s.key == a).unwrap().users, 0);
        drop(hold);
        assert_eq!(kept.evictable_bytes(None), 20);
        assert_eq!(kept.jobs_held(), 0);
    }
}
