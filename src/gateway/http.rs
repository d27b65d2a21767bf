//! The HTTP door: lotus's remote C2 (`POST {gateway.lotus_path}`, see [`super::lotus`]), plus
//! `/metrics` and `/healthz`. Every way a request ends is a [`Reply`]: a status code and a
//! one-line reason lotus logs.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use super::job::Refusal;
use super::listener::{Incoming, Peer};
use super::{lotus, Gateway, Submitted, Urgency, Waited};
use crate::schema::DecodedJob;

/// Serve the HTTP door on `incoming` until the gateway stops.
pub(super) async fn serve(gateway: Arc<Gateway>, incoming: Incoming, tls: bool) -> Result<()> {
    let addr =
        axum::serve::Listener::local_addr(&incoming).context("gateway: the bound address")?;
    let scheme = if tls { "https" } else { "http" };
    tracing::info!(addr = %addr, scheme, lotus_path = %gateway.cfg.lotus_path,
        authenticated = gateway.token.is_some(), "gateway listening");
    let app = Router::new()
        .route(&gateway.cfg.lotus_path, post(lotus_remote_commit2))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(gateway.clone());
    axum::serve(incoming, app.into_make_service_with_connect_info::<Peer>())
        .with_graceful_shutdown(gateway.stop.clone().cancelled_owned())
        .await
        .context("gateway: serving HTTP")
}

/// How a request ends.
enum Reply {
    /// 200 with the proof bytes.
    Proved(Vec<u8>),
    /// 400: not a request this door reads.
    Malformed(String),
    /// 422: a request for a job that cannot be proved (its input).
    Refused(String),
    /// 502: the fleet failed to prove it.
    Failed(String),
    /// 504: still proving when the wait ended.
    StillProving(u64),
    /// 503: the broker or the ledger is unreachable.
    Unavailable(String),
    /// 503: the gateway is stopping.
    ShuttingDown,
    /// 409: the job was cancelled (through the gRPC door).
    Cancelled,
    Unauthorized,
    TooLarge(u64),
    TooManyRequests(u32),
}

impl Reply {
    fn outcome(&self) -> &'static str {
        match self {
            Reply::Proved(_) => "proved",
            Reply::Malformed(_) => "malformed",
            Reply::Refused(_) => "refused",
            Reply::Failed(_) => "failed",
            Reply::StillProving(_) => "still_proving",
            Reply::Unavailable(_) => "unavailable",
            Reply::ShuttingDown => "shutting_down",
            Reply::Cancelled => "cancelled",
            Reply::Unauthorized => "unauthorized",
            Reply::TooLarge(_) => "too_large",
            Reply::TooManyRequests(_) => "too_many_requests",
        }
    }
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        let text = |status: StatusCode, line: String| (status, format!("{line}\n")).into_response();
        match self {
            Reply::Proved(proof) => (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/octet-stream")],
                proof,
            )
                .into_response(),
            Reply::Malformed(why) => text(StatusCode::BAD_REQUEST, why),
            Reply::Refused(why) => text(StatusCode::UNPROCESSABLE_ENTITY, why),
            Reply::Failed(why) => text(StatusCode::BAD_GATEWAY, format!("proving failed: {why}")),
            Reply::StillProving(s) => text(
                StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "still proving after {s} s; the job goes on: the same request later is \
                     answered with its proof"
                ),
            ),
            Reply::Unavailable(why) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("unavailable: {why}"),
            ),
            Reply::ShuttingDown => text(
                StatusCode::SERVICE_UNAVAILABLE,
                "the gateway is stopping; the job goes on: repeat the request".into(),
            ),
            Reply::Cancelled => text(
                StatusCode::CONFLICT,
                "the job was cancelled; the same request asks for it again".into(),
            ),
            Reply::Unauthorized => {
                let mut r = text(
                    StatusCode::UNAUTHORIZED,
                    "missing or wrong bearer token".into(),
                );
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer"),
                );
                r
            }
            Reply::TooLarge(limit) => text(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the body is over gateway.max_body_bytes ({limit} bytes)"),
            ),
            Reply::TooManyRequests(n) => text(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "this client already has {n} requests open (gateway.max_requests_per_client)"
                ),
            ),
        }
    }
}

/// `POST {gateway.lotus_path}`: lotus's `RemoteCommit2Params` in, the proof out.
async fn lotus_remote_commit2(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let (reply, job_id) = lotus_reply(&gateway, peer, &headers, body).await;
    let outcome = reply.outcome();
    gateway.count("lotus", outcome);
    tracing::info!(peer = %peer.0, job_id = job_id.as_deref().unwrap_or(""), outcome,
        seconds = started.elapsed().as_secs_f64(), "gateway: lotus remote C2");
    reply.into_response()
}

async fn lotus_reply(
    gateway: &Arc<Gateway>,
    peer: Peer,
    headers: &HeaderMap,
    body: Body,
) -> (Reply, Option<String>) {
    if !gateway.authorized(headers) {
        return (Reply::Unauthorized, None);
    }
    let limit = gateway.cfg.max_body_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return (Reply::TooLarge(limit), None);
    }
    let Some(_open) = gateway.open_request(peer.0.ip()) else {
        return (
            Reply::TooManyRequests(gateway.cfg.max_requests_per_client),
            None,
        );
    };
    let bytes = match axum::body::to_bytes(body, usize::try_from(limit).unwrap_or(usize::MAX)).await
    {
        Ok(b) => b,
        // An undeclared length over the limit ends the read the same way.
        Err(_) if declared.is_none() => return (Reply::TooLarge(limit), None),
        Err(e) => return (Reply::Malformed(format!("reading the body: {e}")), None),
    };
    let limits = gateway.config.limits.clone();
    let checked = tokio::task::spawn_blocking(move || lotus::job_of(&bytes, &limits)).await;
    let job = match checked {
        Ok(Ok(job)) => job,
        Ok(Err(Refusal::Malformed(why))) => return (Reply::Malformed(why), None),
        Ok(Err(Refusal::Unprovable(why))) => return (Reply::Refused(why), None),
        Err(e) => {
            return (
                Reply::Refused(format!("checking the C1 output failed: {e}")),
                None,
            )
        }
    };
    let reply = prove(gateway, &job).await;
    (reply, Some(job.job.job_id))
}

/// Get `job` proved: answered from the ledger when it is, else enqueued (unless it is being
/// proved already) and waited for until `gateway.wait_s`.
async fn prove(gateway: &Gateway, job: &DecodedJob) -> Reply {
    match gateway.submit(job, Urgency::Normal, None).await {
        Err(e) => Reply::Unavailable(format!("{e:#}")),
        Ok(Submitted::Proved(proof)) => Reply::Proved(proof),
        Ok(Submitted::Refused(why)) => Reply::Refused(why),
        Ok(Submitted::Mismatch) => Reply::Refused(format!(
            "job id {} is already used for another C1 output",
            job.job.job_id
        )),
        Ok(Submitted::Waiting) => {
            let deadline = gateway.default_deadline();
            match gateway.wait(&job.job.job_id, Some(deadline)).await {
                Waited::Proved(proof, _) => Reply::Proved(proof),
                Waited::Refused(why) => Reply::Refused(why),
                Waited::Failed(why) => Reply::Failed(why),
                Waited::Cancelled => Reply::Cancelled,
                Waited::TimedOut => Reply::StillProving(gateway.cfg.wait_s),
                Waited::ShuttingDown => Reply::ShuttingDown,
            }
        }
    }
}

async fn metrics(State(gateway): State<Arc<Gateway>>) -> String {
    gateway.metrics_text()
}
