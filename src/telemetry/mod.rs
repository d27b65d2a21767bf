//! Logs (`tracing`, human or JSON), Prometheus metrics and the health endpoints.

pub mod http;
pub mod metrics;

pub use metrics::Metrics;

use crate::config::LogFormat;

/// Install the global subscriber; `RUST_LOG` filters (default `info`). Logs go to stderr.
pub fn init_logging(format: &LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // A second initialisation (tests, embedding) keeps the first subscriber.
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Human => builder.try_init(),
    };
}
