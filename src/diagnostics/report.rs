//! What the checks print: the visible GPUs, the seed of the random inputs, one line per
//! comparison, and the closing count.

use std::ops::AddAssign;
use std::time::Instant;

use anyhow::{bail, Result};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::gpu::list_devices;

/// Prints the visible GPUs; used by every command here.
pub(super) fn print_devices() -> Result<()> {
    let devices = list_devices()?;
    if devices.is_empty() {
        bail!("no CUDA GPU found (no driver, or no device visible to this process)");
    }
    for d in &devices {
        eprintln!("{d}");
    }
    Ok(())
}

/// The inputs' random generator: from `seed`, or a fresh seed; printed either way, so that a
/// failure can be replayed with `--seed`.
pub(super) fn seeded_rng(seed: Option<u64>) -> ChaCha8Rng {
    let seed = seed.unwrap_or_else(|| rand::rngs::OsRng.next_u64());
    println!("seed {seed}");
    ChaCha8Rng::seed_from_u64(seed)
}

/// Comparisons made and failed. Each is printed as it is made (`ok` or `FAIL` and what was
/// compared); a check returns its own tally and the command adds them up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub checks: usize,
    pub failures: usize,
}

impl Tally {
    /// Records and prints one comparison.
    pub fn check(&mut self, what: &str, ok: bool) {
        self.checks += 1;
        if ok {
            println!("ok    {what}");
        } else {
            self.failures += 1;
            println!("FAIL  {what}");
        }
    }

    /// Whether every comparison matched.
    pub fn passed(&self) -> bool {
        self.failures == 0
    }

    /// The closing line: comparisons, failures, and the time since `started`.
    pub fn print_summary(&self, started: Instant) {
        println!(
            "{} checks, {} failed ({:.1} s)",
            self.checks,
            self.failures,
            started.elapsed().as_secs_f64()
        );
    }
}

impl AddAssign for Tally {
    fn add_assign(&mut self, other: Tally) {
        self.checks += other.checks;
        self.failures += other.failures;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_add_up() {
        let mut a = Tally::default();
        a.check("first", true);
        let mut b = Tally::default();
        b.check("second", false);
        b.check("third", true);
        a += b;
        assert_eq!(
            a,
            Tally {
                checks: 3,
                failures: 1
            }
        );
        assert!(!a.passed());
        assert!(Tally::default().passed());
    }
}
