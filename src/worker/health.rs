//! Whether this worker's proving backend still works.
//!
//! One failed proving start may be the job's bad luck (a transient device error): the job is
//! retried as usual. `pipeline.max_backend_failures` consecutive failures with no success in
//! between mean the backend itself is broken (a lost GPU context, say): from then on the worker
//! takes no jobs and hands back every job it holds, without charging it a retry, so that a
//! broken worker cannot burn the retry budgets of the whole queue.

use std::sync::atomic::{AtomicU32, Ordering};

use tokio_util::sync::CancellationToken;

pub(super) struct BackendHealth {
    threshold: u32,
    consecutive_failures: AtomicU32,
    broken: CancellationToken,
}

/// What one failed proving start means.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Retry the job as usual.
    StillHealthy,
    /// This failure crossed the threshold; `failures` in a row.
    JustBroke { failures: u32 },
    /// The backend was already judged broken.
    Broken,
}

impl BackendHealth {
    pub fn new(threshold: u32) -> BackendHealth {
        BackendHealth {
            threshold: threshold.max(1),
            consecutive_failures: AtomicU32::new(0),
            broken: CancellationToken::new(),
        }
    }

    pub fn succeeded(&self) {
        if !self.is_broken() {
            self.consecutive_failures.store(0, Ordering::Relaxed);
        }
    }

    pub fn failed(&self) -> Verdict {
        if self.is_broken() {
            return Verdict::Broken;
        }
        let failures = self.consecutive_failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures < self.threshold {
            return Verdict::StillHealthy;
        }
        self.broken.cancel();
        // Several in-flight jobs may fail together: only the one that crossed reports it.
        if failures == self.threshold {
            Verdict::JustBroke { failures }
        } else {
            Verdict::Broken
        }
    }

    pub fn is_broken(&self) -> bool {
        self.broken.is_cancelled()
    }

    /// Cancelled when the backend is judged broken.
    pub fn broken(&self) -> &CancellationToken {
        &self.broken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breaks_after_consecutive_failures_only() {
        let h = BackendHealth::new(3);
        assert_eq!(h.failed(), Verdict::StillHealthy);
        assert_eq!(h.failed(), Verdict::StillHealthy);
        h.succeeded();
        assert_eq!(h.failed(), Verdict::StillHealthy);
        assert_eq!(h.failed(), Verdict::StillHealthy);
        assert!(!h.is_broken());
        assert_eq!(h.failed(), Verdict::JustBroke { failures: 3 });
        assert!(h.is_broken());
        h.succeeded();
        assert_eq!(h.failed(), Verdict::Broken);
    }
}
