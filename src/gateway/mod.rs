//! `c2q gateway`: the door existing pipelines already know, onto the queue. A lotus that sends
//! its C2 to a remote endpoint (`RemoteCommit2Endpoint`) points it here; every request becomes
//! an ordinary job on RabbitMQ (same job ids, ledger, retries, dead letters and verification as
//! any other), and is answered when the ledger holds its proof.
//!
//! The gateway keeps no state of its own: what a request waits for is in the queue and the
//! ledger, so a restarted gateway (or another one) answers a repeated request from the ledger.
//! Requests are bearer-authenticated, size-checked before their body is read, limited per
//! client, and served over TLS when a certificate is configured.

pub mod listener;
pub mod lotus;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use base64::Engine;
use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::BasicProperties;
use prometheus::{IntCounterVec, Opts, Registry, TextEncoder};
use tokio_util::sync::CancellationToken;

use crate::broker::{publish_confirmed, Broker};
use crate::classes::SizeClass;
use crate::config::{secret, Config, GatewayConfig};
use crate::ledger::{Answer, AnswerState, Ledger};
use crate::schema::{self, ErrorKind, JobV1};
use listener::Peer;

/// How long a request waits for a broker that went away before it is answered 503.
const BROKER_PATIENCE: Duration = Duration::from_secs(10);

/// How often a waiting request looks at the ledger.
const POLL: Duration = Duration::from_millis(500);

/// Results of the jobs the gateway enqueues are kept this long in its reply queue (nothing
/// reads them: requests are answered from the ledger), so that the queue cannot grow without
/// bound and a worker's publish is always routable.
const RESULTS_TTL_MS: i64 = 24 * 3600 * 1000;

#[derive(clap::Args, Debug)]
pub struct GatewayArgs {
    /// TOML configuration file (environment overrides: `C2Q__SECTION__KEY`); the `[gateway]`
    /// section, and `[broker]`, `[ledger]` as the workers have them.
    #[arg(long, env = "C2Q_CONFIG")]
    pub config: Option<PathBuf>,
}

/// Entry point of `c2q gateway`.
pub fn run(args: GatewayArgs) -> Result<()> {
    let config = Config::load(args.config.as_deref())?;
    crate::telemetry::init_logging(&config.telemetry.log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("c2q-gateway")
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let stop = CancellationToken::new();
        spawn_signal_handler(stop.clone())?;
        serve(config, stop).await
    })
}

/// Serve until `stop`. Requests still waiting then are answered 503 (their jobs go on, and a
/// repeated request is answered from the ledger).
pub async fn serve(config: Config, stop: CancellationToken) -> Result<()> {
    let gateway = Arc::new(Gateway::start(config, stop.clone()).await?);
    let cfg = &gateway.cfg;
    let tls = match (&cfg.tls_cert, &cfg.tls_key) {
        (Some(cert), Some(key)) => Some(listener::tls_acceptor(cert, key)?),
        (None, None) => None,
        _ => bail!("gateway.tls_cert and gateway.tls_key go together: set both or neither"),
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let incoming = listener::bind(&cfg.http_listen, tls).await?;
    let addr =
        axum::serve::Listener::local_addr(&incoming).context("gateway: the bound address")?;
    tracing::info!(addr = %addr, scheme, lotus_path = %cfg.lotus_path,
        authenticated = gateway.token.is_some(), "gateway listening");
    let app = Router::new()
        .route(&cfg.lotus_path, post(lotus_remote_commit2))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(gateway.clone());
    axum::serve(incoming, app.into_make_service_with_connect_info::<Peer>())
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
        .context("gateway: serving")?;
    tracing::info!("gateway stopped");
    Ok(())
}

struct Gateway {
    cfg: GatewayConfig,
    config: Config,
    ledger: Ledger,
    broker: tokio::sync::Mutex<Option<Arc<Broker>>>,
    token: Option<String>,
    /// Requests open per client address.
    open: Mutex<HashMap<IpAddr, u32>>,
    metrics: GatewayMetrics,
    stop: CancellationToken,
}

impl Gateway {
    async fn start(config: Config, stop: CancellationToken) -> Result<Gateway> {
        let cfg = config.gateway.clone();
        let token =
            secret("C2Q_GATEWAY_TOKEN", cfg.token_file.as_deref())?.filter(|t| !t.is_empty());
        if token.is_none() && !listens_on_loopback_only(&cfg.http_listen) {
            bail!(
                "gateway: no bearer token (C2Q_GATEWAY_TOKEN, C2Q_GATEWAY_TOKEN_FILE or \
                 gateway.token_file) and gateway.http_listen {} is reachable from other \
                 machines: set a token, or listen on 127.0.0.1",
                cfg.http_listen
            );
        }
        let ledger = Ledger::connect(&config.ledger).await?;
        let gateway = Gateway {
            cfg,
            config,
            ledger,
            broker: tokio::sync::Mutex::new(None),
            token,
            open: Mutex::new(HashMap::new()),
            metrics: GatewayMetrics::new()?,
            stop,
        };
        // Fail at start, not at the first request, when the broker is unreachable.
        gateway.broker().await?;
        Ok(gateway)
    }

    /// The broker connection, replaced when it died; the topology and the gateway's reply
    /// queue declared on every new one.
    async fn broker(&self) -> Result<Arc<Broker>> {
        let mut current = self.broker.lock().await;
        if let Some(b) = current.as_ref().filter(|b| b.is_healthy()) {
            return Ok(b.clone());
        }
        *current = None;
        let b = Broker::connect_with_backoff(
            &self.config.broker,
            self.config.retry.max_retries,
            "c2q-gateway",
            BROKER_PATIENCE,
        )
        .await
        .context("RabbitMQ is unreachable")?;
        let mut args = FieldTable::default();
        args.insert(
            "x-message-ttl".into(),
            AMQPValue::LongLongInt(RESULTS_TTL_MS),
        );
        let queue = results_queue(&b);
        let durable = QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        b.publish
            .queue_declare(queue.as_str().into(), durable, args)
            .await
            .with_context(|| format!("declaring the gateway's reply queue {queue}"))?;
        let b = Arc::new(b);
        *current = Some(b.clone());
        Ok(b)
    }

    /// Take a slot for a request from `peer`; `None` when it has too many open.
    fn open_request(self: &Arc<Self>, peer: IpAddr) -> Option<OpenRequest> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(peer).or_default();
        if *n >= self.cfg.max_requests_per_client {
            return None;
        }
        *n += 1;
        Some(OpenRequest {
            gateway: self.clone(),
            peer,
        })
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        match &self.token {
            None => true,
            Some(token) => presented_token(headers)
                .is_some_and(|presented| constant_time_eq(presented.as_bytes(), token.as_bytes())),
        }
    }

    /// Get `job` proved: answered from the ledger when it is, else enqueued (unless it is
    /// being proved already) and waited for until `gateway.wait_s`.
    async fn prove(&self, job: &JobV1) -> Reply {
        let before = match self.ledger.answer(&job.job_id).await {
            Ok(a) => a,
            Err(e) => return Reply::Unavailable(format!("{e:#}")),
        };
        // A failure recorded before this request does not answer it when the job is enqueued
        // again: only one after a further attempt does.
        let mut earlier_attempts = None;
        match before {
            Some(Answer {
                state: AnswerState::Proved(proof),
                ..
            }) => return Reply::Proved(proof),
            Some(Answer {
                state: AnswerState::Failed { kind, message },
                attempts,
                ..
            }) => {
                if is_input_failure(&kind) {
                    return Reply::Refused(format!("{kind}: {message}"));
                }
                earlier_attempts = Some(attempts);
                if let Err(e) = self.enqueue(job).await {
                    return Reply::Unavailable(format!("{e:#}"));
                }
            }
            Some(Answer {
                state: AnswerState::Pending,
                leased: true,
                ..
            }) => {}
            // Never seen, or claimed once and not held by a live worker now (handed back,
            // or its worker died): enqueue it. A second copy of a job still queued costs a
            // ledger lookup; the ledger makes sure it is proved once.
            _ => {
                if let Err(e) = self.enqueue(job).await {
                    return Reply::Unavailable(format!("{e:#}"));
                }
            }
        }
        self.wait(&job.job_id, earlier_attempts).await
    }

    /// Publish `job` to its size class's queue, confirmed.
    async fn enqueue(&self, job: &JobV1) -> Result<()> {
        let broker = self.broker().await?;
        let payload = schema::job::encode(job)?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let props = BasicProperties::default()
            .with_content_type(schema::CONTENT_TYPE.into())
            .with_delivery_mode(2)
            .with_message_id(ShortString::from(job.job_id.clone()))
            .with_reply_to(ShortString::from(results_queue(&broker)))
            .with_timestamp(now);
        let key = SizeClass::of(job)
            .map_or_else(|| crate::broker::topology::JOB_KEY.to_string(), |c| c.key());
        publish_confirmed(
            &broker.publish,
            &broker.names.jobs_exchange(),
            &key,
            &payload,
            props,
        )
        .await
        .with_context(|| format!("enqueueing job {}", job.job_id))?;
        tracing::info!(job_id = %job.job_id, class = %key, "gateway: job enqueued");
        Ok(())
    }

    async fn wait(&self, job_id: &str, earlier_attempts: Option<u32>) -> Reply {
        let deadline = Instant::now() + Duration::from_secs(self.cfg.wait_s);
        loop {
            match self.ledger.answer(job_id).await {
                Ok(Some(Answer {
                    state: AnswerState::Proved(proof),
                    ..
                })) => return Reply::Proved(proof),
                Ok(Some(Answer {
                    state: AnswerState::Failed { kind, message },
                    attempts,
                    ..
                })) if earlier_attempts.is_none_or(|n| attempts > n) => {
                    return match is_input_failure(&kind) {
                        true => Reply::Refused(format!("{kind}: {message}")),
                        false => Reply::Failed(format!("{kind}: {message}")),
                    };
                }
                // A database outage while waiting is waited out like a slow proof.
                Ok(_) | Err(_) => {}
            }
            if Instant::now() >= deadline {
                return Reply::StillProving(self.cfg.wait_s);
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = self.stop.cancelled() => return Reply::ShuttingDown,
            }
        }
    }
}

/// The gateway's reply queue: results of the jobs it enqueued (read by nobody; see
/// [`RESULTS_TTL_MS`]).
fn results_queue(broker: &Broker) -> String {
    format!("{}.gateway.results", broker.names.prefix)
}

/// Failures of the job's input, which proving again cannot change: the client is told 4xx.
/// The others (a proof that did not verify, retries exhausted by outages) are the fleet's: 5xx,
/// and a repeated request enqueues the job again.
fn is_input_failure(kind: &str) -> bool {
    let machine = [
        ErrorKind::VerificationFailed,
        ErrorKind::Unroutable,
        ErrorKind::RetriesExhausted,
        ErrorKind::Transient,
    ];
    !machine.iter().any(|k| k.as_str() == kind)
}

fn listens_on_loopback_only(addr: &str) -> bool {
    addr.parse::<std::net::SocketAddr>()
        .map(|a| a.ip().is_loopback())
        .unwrap_or(false)
}

/// The token a request presents: `Authorization: Bearer <token>`, or HTTP Basic with the
/// token as password (any user name). lotus sends no headers of its own to a remote C2
/// endpoint, but Go's HTTP client turns the credentials of a URL
/// (`https://c2q:<token>@gateway:9821/remote-commit2`) into Basic authorization.
fn presented_token(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    if let Some(token) = value.strip_prefix("Bearer ") {
        return Some(token.to_string());
    }
    let encoded = value.strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let pair = String::from_utf8(decoded).ok()?;
    pair.split_once(':').map(|(_user, token)| token.to_string())
}

/// Equal bytes, in time that depends only on the lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A request counted against its client's limit until dropped.
struct OpenRequest {
    gateway: Arc<Gateway>,
    peer: IpAddr,
}

impl Drop for OpenRequest {
    fn drop(&mut self) {
        let mut open = self.gateway.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.peer);
            }
        }
    }
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
    gateway
        .metrics
        .requests
        .with_label_values(&["lotus", outcome])
        .inc();
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
    let checked = tokio::task::spawn_blocking(move || lotus::job_of(&bytes)).await;
    let job = match checked {
        Ok(Ok(job)) => job.job,
        Ok(Err(lotus::Refusal::Malformed(why))) => return (Reply::Malformed(why), None),
        Ok(Err(lotus::Refusal::Unprovable(why))) => return (Reply::Refused(why), None),
        Err(e) => {
            return (
                Reply::Refused(format!("checking the C1 output failed: {e}")),
                None,
            )
        }
    };
    let reply = gateway.prove(&job).await;
    (reply, Some(job.job_id))
}

async fn metrics(State(gateway): State<Arc<Gateway>>) -> String {
    TextEncoder::new()
        .encode_to_string(&gateway.metrics.registry.gather())
        .unwrap_or_else(|e| format!("# encoding failed: {e}\n"))
}

struct GatewayMetrics {
    registry: Registry,
    /// Requests by door (`lotus`) and how they ended (`proved`, `refused`, `still_proving`, …).
    requests: IntCounterVec,
}

impl GatewayMetrics {
    fn new() -> Result<GatewayMetrics> {
        let registry = Registry::new_custom(Some("c2q".into()), None)?;
        let requests = IntCounterVec::new(
            Opts::new(
                "gateway_requests_total",
                "Gateway requests, by door and outcome",
            ),
            &["door", "outcome"],
        )?;
        registry.register(Box::new(requests.clone()))?;
        Ok(GatewayMetrics { registry, requests })
    }
}

fn spawn_signal_handler(stop: CancellationToken) -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        tracing::info!("gateway stopping: waiting requests are answered 503");
        stop.cancel();
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_failures_are_the_clients_and_the_rest_the_fleets() {
        for kind in [
            "malformed_c1",
            "proof_type_mismatch",
            "invalid_input",
            "oversize",
        ] {
            assert!(is_input_failure(kind), "{kind}");
        }
        for kind in [
            "retries_exhausted",
            "unroutable",
            "verification_failed",
            "transient",
        ] {
            assert!(!is_input_failure(kind), "{kind}");
        }
    }

    #[test]
    fn a_token_comes_as_bearer_or_as_the_basic_password() {
        let with = |value: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, value.parse().unwrap());
            presented_token(&h)
        };
        assert_eq!(with("Bearer abc").as_deref(), Some("abc"));
        // base64("c2q:abc")
        assert_eq!(with("Basic YzJxOmFiYw==").as_deref(), Some("abc"));
        assert_eq!(with("Basic !!!"), None);
        assert_eq!(with("Token abc"), None);
        assert_eq!(presented_token(&HeaderMap::new()), None);
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }

    #[test]
    fn only_a_loopback_address_may_go_without_a_token() {
        assert!(listens_on_loopback_only("127.0.0.1:9821"));
        assert!(listens_on_loopback_only("[::1]:9821"));
        assert!(!listens_on_loopback_only("0.0.0.0:9821"));
        assert!(!listens_on_loopback_only("10.1.2.3:9821"));
        assert!(!listens_on_loopback_only("gateway.example:9821"));
    }
}
