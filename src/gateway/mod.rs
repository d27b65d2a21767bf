//! `c2q gateway`: the doors existing pipelines already know, onto the queue.
//!
//! - gRPC ([`grpc`]): Curio's proving-engine protocol (`cuzk.v1.ProvingEngine`), so that a
//!   Curio whose `[Cuzk] Address` names the gateway sends its proofs to the fleet unchanged.
//! - HTTP ([`http`]): lotus's remote C2 (`RemoteCommit2Endpoint`).
//!
//! Every request becomes an ordinary job on RabbitMQ (same job ids, ledger, retries, dead
//! letters and verification as any other), recorded in the ledger as queued before it is
//! enqueued, and is answered when the ledger holds its proof. The gateway keeps no state of its
//! own: a restarted gateway (or another one) answers a repeated request from the ledger.
//! Requests are bearer-authenticated, size-checked before their body is read, limited per
//! client, and served over TLS when a certificate is configured.

pub mod grpc;
pub mod http;
pub mod job;
pub mod listener;
pub mod lotus;
pub mod request_id;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use axum::http::{header, HeaderMap};
use base64::Engine;
use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::BasicProperties;
use prometheus::{IntCounterVec, Opts, Registry, TextEncoder};
use tokio_util::sync::CancellationToken;

use crate::broker::{publish_confirmed, topology, Broker};
use crate::classes::SizeClass;
use crate::config::{Config, GatewayConfig};
use crate::ledger::{Answer, AnswerState, JobIdentity, Ledger, ProofTimes, Registration};
use crate::schema::{self, DecodedJob, ErrorKind, JobV1};
use request_id::RequestId;

/// How long a request waits for a broker that went away before it is refused as unavailable.
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

/// Serve both doors until `stop`. Requests still waiting then are answered as unavailable
/// (their jobs go on, and a repeated request is answered from the ledger).
pub async fn serve(config: Config, stop: CancellationToken) -> Result<()> {
    let gateway = Arc::new(Gateway::start(config, stop.clone()).await?);
    let cfg = &gateway.cfg;
    if cfg.http_listen.is_empty() && cfg.grpc_listen.is_empty() {
        bail!(
            "gateway: both gateway.http_listen and gateway.grpc_listen are empty: no door to open"
        );
    }
    let tls = |alpn| match (&cfg.tls_cert, &cfg.tls_key) {
        (Some(cert), Some(key)) => listener::tls_acceptor(cert, key, alpn).map(Some),
        (None, None) => Ok(None),
        _ => bail!("gateway.tls_cert and gateway.tls_key go together: set both or neither"),
    };
    let mut doors = tokio::task::JoinSet::new();
    if !cfg.http_listen.is_empty() {
        let tls = tls(listener::Alpn::Http1)?;
        let secure = tls.is_some();
        let incoming = listener::bind(&cfg.http_listen, tls).await?;
        doors.spawn(http::serve(gateway.clone(), incoming, secure));
    }
    if !cfg.grpc_listen.is_empty() {
        let tls = tls(listener::Alpn::H2)?;
        let secure = tls.is_some();
        let incoming = listener::bind(&cfg.grpc_listen, tls).await?;
        doors.spawn(grpc::serve(gateway.clone(), incoming, secure));
    }
    // Either door failing stops the gateway: a half-open gateway would look healthy to one
    // pipeline and refuse the other.
    while let Some(done) = doors.join_next().await {
        let served = done.context("gateway: a door's task panicked")?;
        if let Err(e) = served {
            stop.cancel();
            return Err(e);
        }
    }
    tracing::info!("gateway stopped");
    Ok(())
}

/// What both doors share: the configuration, the ledger, the broker connection, the token,
/// the per-client count of open requests and the metrics.
pub struct Gateway {
    cfg: GatewayConfig,
    config: Config,
    ledger: Ledger,
    broker: tokio::sync::Mutex<Option<Arc<Broker>>>,
    token: Option<String>,
    /// Requests open per client address, over both doors.
    open: Mutex<HashMap<IpAddr, u32>>,
    metrics: GatewayMetrics,
    stop: CancellationToken,
    started: Instant,
}

/// Where a submitted job stands.
#[derive(Debug)]
enum Submitted {
    /// Proved before: the proof of record.
    Proved(Vec<u8>),
    /// Enqueued now, or being proved already: wait for it.
    Waiting,
    /// It failed on its input before, which proving again cannot change.
    Refused(String),
    /// The job id is known with another payload.
    Mismatch,
}

/// How waiting for a job ended.
#[derive(Debug)]
enum Waited {
    /// The proof, and how long the job took.
    Proved(Vec<u8>, ProofTimes),
    /// It failed on its input (the client's to fix).
    Refused(String),
    /// The fleet failed to prove it (a repeated request enqueues it again).
    Failed(String),
    Cancelled,
    /// Still pending at the deadline: the job goes on.
    TimedOut,
    /// The gateway is stopping: the job goes on.
    ShuttingDown,
}

/// How urgently a job is wanted: urgent jobs go to their class's urgent queue, which workers
/// empty first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Urgency {
    Normal,
    Urgent,
}

impl Gateway {
    async fn start(config: Config, stop: CancellationToken) -> Result<Gateway> {
        let cfg = config.gateway.clone();
        let token = cfg.token()?;
        for (key, addr) in [
            ("http_listen", &cfg.http_listen),
            ("grpc_listen", &cfg.grpc_listen),
        ] {
            if token.is_none() && !addr.is_empty() && !listens_on_loopback_only(addr) {
                bail!(
                    "gateway: no bearer token (C2Q_GATEWAY_TOKEN, C2Q_GATEWAY_TOKEN_FILE or \
                     gateway.token_file) and gateway.{key} {addr} is reachable from other \
                     machines: set a token, or listen on 127.0.0.1"
                );
            }
        }
        if cfg.grpc_allow_no_token && !listens_on_loopback_only(&cfg.grpc_listen) {
            bail!(
                "gateway: grpc_allow_no_token takes calls from anyone who reaches \
                 gateway.grpc_listen {}: it is allowed on a loopback address only (run the \
                 gateway on Curio's host, listening on 127.0.0.1)",
                cfg.grpc_listen
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
            started: Instant::now(),
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

    /// Record `job` in the ledger (under the client's `request_id`, where it gave one) and
    /// enqueue it, unless the ledger answers it already (its proof, or an input failure) or a
    /// live worker is proving it now.
    async fn submit(
        &self,
        job: &DecodedJob,
        urgency: Urgency,
        request_id: Option<&RequestId>,
    ) -> Result<Submitted> {
        let identity = JobIdentity {
            job_id: job.job.job_id.clone(),
            kind: job.job.kind.as_str().to_string(),
            registered_proof: job.job.registered_proof.clone(),
            miner_id: job.job.miner_id,
            sector_number: job.job.sector_number,
            digest: job.digest,
        };
        let request_id = request_id.map(RequestId::as_str);
        match self.ledger.register(&identity, request_id).await? {
            Registration::Mismatch => return Ok(Submitted::Mismatch),
            Registration::New => {}
            Registration::Known(Answer { state, leased, .. }) => match state {
                AnswerState::Proved(proof) => return Ok(Submitted::Proved(proof)),
                AnswerState::Failed { kind, message } if is_input_failure(&kind) => {
                    return Ok(Submitted::Refused(format!("{kind}: {message}")));
                }
                // A failure of the fleet's (retries exhausted by outages, a proof that did not
                // verify): asked again, it is proved again.
                AnswerState::Failed { .. } => self.ledger.requeue(&identity.job_id).await?,
                AnswerState::Pending if leased => return Ok(Submitted::Waiting),
                // Queued, or claimed once and not held by a live worker now (handed back, or
                // its worker died): enqueued again. A second copy of a job still queued costs
                // a ledger lookup; the ledger makes sure it is proved once.
                AnswerState::Pending | AnswerState::Cancelled => {}
            },
        }
        self.enqueue(&job.job, urgency).await?;
        Ok(Submitted::Waiting)
    }

    /// Publish `job` to its size class's queue (its urgent queue if `urgency` says so),
    /// confirmed.
    async fn enqueue(&self, job: &JobV1, urgency: Urgency) -> Result<()> {
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
        let key = match (SizeClass::of(job), urgency) {
            (Some(class), Urgency::Urgent) => topology::urgent_key(class),
            (Some(class), Urgency::Normal) => class.key(),
            (None, _) => topology::JOB_KEY.to_string(),
        };
        publish_confirmed(
            &broker.publish,
            &broker.names.jobs_exchange(),
            &key,
            &payload,
            props,
        )
        .await
        .with_context(|| format!("enqueueing job {}", job.job_id))?;
        tracing::info!(job_id = %job.job_id, routing_key = %key, "gateway: job enqueued");
        Ok(())
    }

    /// Wait for `job_id` to end, until `deadline` (`None`: until it ends or the gateway stops).
    async fn wait(&self, job_id: &str, deadline: Option<Instant>) -> Waited {
        loop {
            // A database outage while waiting is waited out like a slow proof.
            if let Ok(Some(Answer { state, .. })) = self.ledger.answer(job_id).await {
                match state {
                    AnswerState::Proved(proof) => {
                        let times = self.proof_times(job_id).await;
                        return Waited::Proved(proof, times);
                    }
                    AnswerState::Failed { kind, message } if is_input_failure(&kind) => {
                        return Waited::Refused(format!("{kind}: {message}"))
                    }
                    AnswerState::Failed { kind, message } => {
                        return Waited::Failed(format!("{kind}: {message}"))
                    }
                    AnswerState::Cancelled => return Waited::Cancelled,
                    AnswerState::Pending => {}
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Waited::TimedOut;
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = self.stop.cancelled() => return Waited::ShuttingDown,
            }
        }
    }

    /// How long a proved job took. The figures only inform the client: a database that
    /// fails to give them now costs the reply its timings (zeros, logged), not its proof.
    async fn proof_times(&self, job_id: &str) -> ProofTimes {
        match self.ledger.proof_times(job_id).await {
            Ok(Some(times)) => times,
            Ok(None) => ProofTimes::default(),
            Err(e) => {
                tracing::warn!(job_id, error = %format!("{e:#}"),
                    "gateway: the proof's times could not be read; answered without them");
                ProofTimes::default()
            }
        }
    }

    /// The deadline of a wait of `gateway.wait_s` from now.
    fn default_deadline(&self) -> Instant {
        Instant::now() + Duration::from_secs(self.cfg.wait_s)
    }

    /// The Prometheus text of the gateway's metrics.
    fn metrics_text(&self) -> String {
        TextEncoder::new()
            .encode_to_string(&self.metrics.registry.gather())
            .unwrap_or_else(|e| format!("# encoding failed: {e}\n"))
    }

    /// Count a request by door and outcome.
    fn count(&self, door: &str, outcome: &str) {
        self.metrics
            .requests
            .with_label_values(&[door, outcome])
            .inc();
    }
}

/// The gateway's reply queue: results of the jobs it enqueued (read by nobody; see
/// [`RESULTS_TTL_MS`]).
fn results_queue(broker: &Broker) -> String {
    format!("{}.gateway.results", broker.names.prefix)
}

/// Failures of the job's input, which proving again cannot change: the client is told it is
/// at fault. The others (a proof that did not verify, retries exhausted by outages) are the
/// fleet's, and a repeated request enqueues the job again.
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

/// The token a request presents: `Authorization: Bearer <token>` (HTTP header or gRPC
/// metadata), or HTTP Basic with the token as password (any user name). lotus sends no headers
/// of its own to a remote C2 endpoint, but Go's HTTP client turns the credentials of a URL
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

struct GatewayMetrics {
    registry: Registry,
    /// Requests by door (`lotus`, `grpc`) and how they ended (`proved`, `refused`,
    /// `still_proving`, `unauthorized`, `too_large`, …).
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
        tracing::info!("gateway stopping: waiting requests are answered as unavailable");
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
