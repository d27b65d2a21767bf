//! `/metrics`, `/healthz` (the process and its runtime answer) and `/readyz` (broker and ledger
//! reachable, proving backend working, not draining: a load balancer or orchestrator may route
//! work here). A 503 from `/readyz` names every reason.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use tokio_util::sync::CancellationToken;

use super::Metrics;

/// Readiness, set by the worker as its connections come and go.
#[derive(Default)]
pub struct Health {
    pub broker_up: AtomicBool,
    pub ledger_up: AtomicBool,
    pub draining: AtomicBool,
    /// Set once the proving backend is judged broken; says why.
    pub backend_broken: Mutex<Option<String>>,
}

impl Health {
    pub fn ready(&self) -> bool {
        self.not_ready_reasons().is_empty()
    }

    /// Why the worker is not ready; empty when it is.
    pub fn not_ready_reasons(&self) -> Vec<String> {
        let mut reasons = Vec::new();
        if !self.broker_up.load(Ordering::Relaxed) {
            reasons.push("RabbitMQ unreachable".to_string());
        }
        if !self.ledger_up.load(Ordering::Relaxed) {
            reasons.push("PostgreSQL unreachable".to_string());
        }
        if let Some(why) = self
            .backend_broken
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            reasons.push(format!("proving backend broken: {why}"));
        }
        if self.draining.load(Ordering::Relaxed) {
            reasons.push("draining".to_string());
        }
        reasons
    }
}

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    health: Arc<Health>,
}

/// Serve until `stop` is cancelled; returns the bound address (port 0 picks a free one).
pub async fn serve(
    listen: &str,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    stop: CancellationToken,
) -> Result<SocketAddr> {
    let addr: SocketAddr = listen
        .parse()
        .with_context(|| format!("telemetry.listen {listen:?} is not an address"))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the telemetry endpoint {addr}"))?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready_handler))
        .with_state(AppState { metrics, health });
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "telemetry endpoint stopped");
        }
    });
    Ok(bound)
}

async fn metrics_handler(State(s): State<AppState>) -> String {
    s.metrics.render()
}

async fn ready_handler(State(s): State<AppState>) -> (StatusCode, String) {
    let reasons = s.health.not_ready_reasons();
    if reasons.is_empty() {
        (StatusCode::OK, "ready\n".to_string())
    } else {
        let body = format!("not ready: {}\n", reasons.join("; "));
        (StatusCode::SERVICE_UNAVAILABLE, body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_ready_names_every_reason() {
        let h = Health::default();
        h.broker_up.store(true, Ordering::Relaxed);
        h.ledger_up.store(true, Ordering::Relaxed);
        assert!(h.ready());
        *h.backend_broken.lock().unwrap() = Some("3 proving starts failed".into());
        h.draining.store(true, Ordering::Relaxed);
        assert!(!h.ready());
        assert_eq!(
            h.not_ready_reasons(),
            vec![
                "proving backend broken: 3 proving starts failed".to_string(),
                "draining".to_string()
            ]
        );
    }
}
