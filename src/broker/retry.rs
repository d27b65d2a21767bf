//! Delay of the next retry of a transiently failed job: exponential with jitter, so a fleet
//! that failed together does not retry together.

use std::time::Duration;

use rand::Rng;

use crate::config::RetryConfig;

/// Delay before retry number `attempt` (1-based): `base · 2^(attempt−1)`, capped, times a
/// random factor in [0.5, 1.5).
pub fn delay(cfg: &RetryConfig, attempt: u32, rng: &mut impl Rng) -> Duration {
    let exp = attempt.saturating_sub(1).min(30);
    let nominal = cfg
        .base_delay_ms
        .saturating_mul(1u64 << exp)
        .min(cfg.max_delay_ms);
    let jitter: f64 = rng.gen_range(0.5..1.5);
    Duration::from_millis(((nominal as f64) * jitter) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_exponentially_with_bounded_jitter() {
        let cfg = RetryConfig {
            max_retries: 10,
            base_delay_ms: 100,
            max_delay_ms: 1_000,
        };
        let mut rng = rand::thread_rng();
        for _ in 0..100 {
            let d1 = delay(&cfg, 1, &mut rng).as_millis();
            assert!((50..150).contains(&d1), "{d1}");
            let d3 = delay(&cfg, 3, &mut rng).as_millis();
            assert!((200..600).contains(&d3), "{d3}");
            let d9 = delay(&cfg, 9, &mut rng).as_millis();
            assert!((500..1500).contains(&d9), "{d9}");
        }
    }
}
