//! Where the budget comes from: configured bytes, or the machine's or cgroup's memory limit
//! (whichever is smaller) minus a safety margin.

use anyhow::{Context, Result};

use crate::config::GateConfig;

const GIB: u64 = 1024 * 1024 * 1024;
/// The worker's own footprint outside jobs when `gate.baseline_bytes` is not set.
pub const DEFAULT_BASELINE: u64 = 256 * 1024 * 1024;

/// The whole budget of the process and the part of it left to jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// What the process as a whole may use (peak RSS must stay under it).
    pub total: u64,
    /// `total` minus the worker's own baseline: what the gate hands to jobs.
    pub jobs: u64,
}

/// The budget: the configured total, or the memory (or cgroup limit) less a margin; less the
/// worker's own baseline, which by default counts `pinned` bytes of page-locked host memory
/// (the GPUs' staging buffers, never swapped).
pub fn detect_budget(cfg: &GateConfig, pinned: u64) -> Result<Budget> {
    let total = match cfg.budget_bytes {
        Some(b) => b,
        None => {
            let memory = available_memory()?;
            let margin = cfg.margin_bytes.unwrap_or((memory / 10).max(GIB));
            memory.saturating_sub(margin)
        }
    };
    let baseline = cfg.baseline_bytes.unwrap_or(DEFAULT_BASELINE + pinned);
    anyhow::ensure!(
        total > baseline,
        "memory budget {total} bytes does not even cover the worker's baseline of {baseline}"
    );
    Ok(Budget {
        total,
        jobs: total - baseline,
    })
}

/// Physical memory, capped by a cgroup v2 or v1 limit when one is set.
fn available_memory() -> Result<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").context("reading /proc/meminfo")?;
    let mut memory = parse_meminfo_total(&meminfo).context("no MemTotal in /proc/meminfo")?;
    for path in [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ] {
        if let Ok(s) = std::fs::read_to_string(path) {
            // "max" (v2) or a huge number (v1) mean no limit.
            if let Ok(limit) = s.trim().parse::<u64>() {
                memory = memory.min(limit);
            }
        }
    }
    Ok(memory)
}

fn parse_meminfo_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Resident set size of this process, from `/proc/self/status` (for metrics and tests).
pub fn rss_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_budget_wins_and_baseline_is_taken_out() {
        let cfg = GateConfig {
            budget_bytes: Some(GIB),
            margin_bytes: None,
            baseline_bytes: Some(GIB / 4),
            urgent_reserve_bytes: None,
        };
        let b = detect_budget(&cfg, GIB / 8).unwrap();
        assert_eq!(b.total, GIB);
        assert_eq!(b.jobs, GIB - GIB / 4);
        // Unset, the baseline counts the pinned host memory.
        let cfg = GateConfig {
            baseline_bytes: None,
            ..cfg
        };
        let none = detect_budget(&cfg, 0).unwrap();
        let pinned = detect_budget(&cfg, GIB / 8).unwrap();
        assert_eq!(none.jobs, GIB - DEFAULT_BASELINE);
        assert_eq!(none.jobs - pinned.jobs, GIB / 8);
    }

    #[test]
    fn detected_budget_leaves_a_margin() {
        let b = detect_budget(&GateConfig::default(), 0).unwrap();
        let total = parse_meminfo_total(&std::fs::read_to_string("/proc/meminfo").unwrap());
        assert!(b.total < total.unwrap());
        assert!(b.jobs < b.total);
    }

    #[test]
    fn parses_proc_files() {
        assert_eq!(
            parse_meminfo_total("MemTotal:  2048 kB\n"),
            Some(2048 * 1024)
        );
        assert_eq!(rss_bytes("Name: x\nVmRSS:\t  100 kB\n"), Some(100 * 1024));
    }
}
