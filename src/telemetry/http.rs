//! `/metrics`, `/healthz` (the process and its runtime answer) and `/readyz` (broker and ledger
//! reachable, not draining: a load balancer or orchestrator may route work here).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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
}

impl Health {
    pub fn ready(&self) -> bool {
        self.broker_up.load(Ordering::Relaxed)
            && self.ledger_up.load(Ordering::Relaxed)
            && !self.draining.load(Ordering::Relaxed)
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

async fn ready_handler(State(s): State<AppState>) -> (StatusCode, &'static str) {
    if s.health.ready() {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
    }
}
