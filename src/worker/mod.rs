//! `c2q worker`: fetch jobs of the size classes it serves (`crate::classes`, largest first,
//! then the unsorted queue) that the memory gate can admit, no more than `pipeline.prefetch`
//! ahead of what the pipeline has begun, prove them in the pipeline, publish the verified result with
//! a broker confirm, and only then ack.
//!
//! Shutdown (`shutdown`): SIGTERM (or a first SIGINT) stops fetching, lets in-flight jobs
//! finish, publish and ack, and exits 0. A second SIGINT exits at once (130); the broker
//! redelivers what was unacked.
//!
//! A worker whose proving backend is broken (`health`) stops fetching, hands its jobs back,
//! and exits non-zero once they are settled (`pipeline.on_unhealthy = "exit"`, the default:
//! systemd starts it again with a fresh GPU context), or stays up and not ready (`"stay"`).

mod delivery;
mod disposition;
mod fault;
mod fleet;
mod handle;
mod health;
mod lease;
mod settle;
mod shutdown;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use lapin::message::Delivery;
use lapin::options::{BasicGetOptions, BasicNackOptions};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::broker::Broker;
use crate::classes::SizeClass;
use crate::config::{Config, OnUnhealthy};
use crate::gate::{
    self, FetchClass, Gate, JobHold, KeptParams, OpenQueues, PoolShare, Reservation,
};
use crate::gpu::select_backends;
use crate::ledger::{Holder, KeptCircuit, Ledger};
use crate::pipeline::Pipeline;
use crate::telemetry::{self, http::Health, Metrics};
use shutdown::Shutdown;

/// How long the worker keeps trying to reach a broker that went away before it gives up.
const BROKER_PATIENCE: Duration = Duration::from_secs(300);

#[derive(clap::Args, Debug)]
pub struct WorkerArgs {
    /// TOML configuration file (environment overrides: `C2Q__SECTION__KEY`).
    #[arg(long, env = "C2Q_CONFIG")]
    pub config: Option<PathBuf>,
}

/// Entry point of `c2q worker`.
pub fn run(args: WorkerArgs) -> Result<()> {
    let config = Config::load(args.config.as_deref())?;
    telemetry::init_logging(&config.telemetry.log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("c2q-rt")
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(run_async(config))
}

pub(crate) struct Worker {
    cfg: Config,
    name: String,
    ledger: Ledger,
    broker: tokio::sync::Mutex<Option<Arc<Broker>>>,
    gate: Arc<Gate>,
    pipeline: Arc<Pipeline>,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    /// Parameters kept loaded between jobs, and the jobs held (`gate::kept`).
    kept: Arc<KeptParams>,
    /// One lock per job id being processed here (see `handle`).
    job_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// This process as a lease holder in the ledger.
    holder: Holder,
    backend_name: String,
    backend_health: health::BackendHealth,
    /// One permit per job fetched and not yet begun (`pipeline.prefetch`).
    not_begun: Arc<Semaphore>,
    /// One urgent job fetched beyond `not_begun`'s places (`fetch_loop`).
    urgent_not_begun: Arc<Semaphore>,
    /// The room a busy worker keeps for urgent jobs.
    urgent_reserve: gate::UrgentReserve,
    /// The size classes this worker fetches, largest first.
    classes: Vec<SizeClass>,
    /// The same as the fetch rule sees them: worst cases, urgency.
    fetch_classes: Vec<FetchClass>,
    /// When this worker last took a job (or started): what tells a stall (`fleet`).
    last_taken: Mutex<Instant>,
    /// The last release of kept parameters counted in the metrics (`gate::Eviction::seq`).
    evictions_counted: Mutex<u64>,
}

/// What a job taken from the broker holds while it is handled.
pub(crate) struct Fetched {
    pub delivery: Delivery,
    /// Memory for its worst case, shrunk once it is built: its SRS unless kept, and an urgent
    /// or unsorted job's working memory.
    pub reservation: Reservation,
    /// A normal job's partitions in flight, reserved with the other jobs' in the pipeline.
    pub share: Option<PoolShare>,
    /// Counts it in flight and keeps its parameters loaded.
    pub hold: JobHold,
    /// The class queue it came from (`None`: the unsorted queue).
    pub class: Option<SizeClass>,
}

/// Where a fetch found its job.
enum Source {
    Class(usize),
    Unsorted,
}

/// A job fetched and not yet handed to the pipeline, counted against `pipeline.prefetch` until
/// dropped: when the pipeline takes the job, or when it ends without being proved (answered
/// from the ledger, put off, failed).
pub(crate) struct NotBegun {
    _permit: OwnedSemaphorePermit,
}

async fn run_async(mut cfg: Config) -> Result<()> {
    cfg.lease.check()?;
    cfg.limits.check()?;
    crate::params::startup_check(&cfg.params.proofs, &crate::porep::params::params_dir())?;
    let prefetch = cfg.pipeline.prefetch_jobs()?;
    let name = cfg.worker_name();
    let metrics = Arc::new(Metrics::new()?);
    let health = Arc::new(Health::default());
    let backend_health = health::BackendHealth::new(cfg.pipeline.max_backend_failures);
    let shutdown = Shutdown::new(health.clone(), backend_health.broken().clone());
    if !cfg.telemetry.listen.is_empty() {
        let addr = telemetry::http::serve(
            &cfg.telemetry.listen,
            metrics.clone(),
            health.clone(),
            shutdown.telemetry_stop(),
        )
        .await?;
        tracing::info!(%addr, "telemetry endpoint listening");
    }
    shutdown.on_signals()?;

    // The backends first: the budget's baseline counts the host memory they pin, and only
    // backends actually opened pin any (`auto` on a machine without a GPU opens the CPU's).
    let backends: Vec<_> = select_backends(
        cfg.pipeline.backend,
        &cfg.pipeline.devices,
        cfg.pipeline.gpu_memory_limit()?,
    )?;
    let pinned = backends.iter().map(|b| b.pinned_host_bytes()).sum();
    let backends: Vec<_> = backends
        .into_iter()
        .map(|b| fault::wrap_backend(cfg.pipeline.fault.as_deref(), b))
        .collect();
    let budget = gate::detect_budget(&cfg.gate, pinned)?;
    cfg.limits.max_sector_size = Some(sector_limit(&cfg, budget.jobs)?);
    let gate = Gate::new(budget.jobs);
    metrics.gate_budget_bytes.set(budget.jobs as i64);
    let backend_name = backends
        .iter()
        .map(|b| b.name())
        .collect::<Vec<_>>()
        .join(", ");
    let pipeline = Pipeline::start(
        backends,
        cfg.pipeline.synthesizers(),
        cfg.pipeline.finalizer_threads,
        cfg.pipeline.max_backend_failures,
    )?;
    let ledger = Ledger::connect(&cfg.ledger).await?;
    health.ledger_up.store(true, Ordering::Relaxed);

    let classes = SizeClass::served(
        &cfg.limits,
        cfg.pipeline.partitions_in_flight(),
        budget.jobs,
    )?;
    let fetch_classes = classes
        .iter()
        .map(|c| FetchClass {
            worst: c.worst_case(cfg.pipeline.partitions_in_flight()),
            urgent: c.always_urgent(),
        })
        .collect();
    let kept = KeptParams::new(gate.clone(), Box::new(crate::groth16::unload_params));
    let worker = Arc::new(Worker {
        name: name.clone(),
        ledger,
        broker: tokio::sync::Mutex::new(None),
        gate,
        pipeline: Arc::new(pipeline),
        metrics,
        health,
        kept,
        job_locks: Mutex::new(HashMap::new()),
        holder: Holder {
            worker: name.clone(),
            token: format!("{name}/{}", uuid::Uuid::new_v4()),
            lease: Duration::from_secs(cfg.lease.duration_s),
        },
        backend_name,
        backend_health,
        not_begun: Arc::new(Semaphore::new(prefetch)),
        urgent_not_begun: Arc::new(Semaphore::new(1)),
        urgent_reserve: gate::UrgentReserve::configured(&cfg.gate),
        classes,
        fetch_classes,
        last_taken: Mutex::new(Instant::now()),
        evictions_counted: Mutex::new(0),
        cfg,
    });
    worker.broker().await?;
    tracing::info!(worker = %name, budget = budget.total, job_budget = budget.jobs,
        max_sector_size = worker.cfg.limits.sector_size_limit(),
        classes = %worker.class_keys().join(","),
        prefix = %worker.cfg.broker.prefix, "worker started");
    spawn_ledger_probe(worker.clone(), shutdown.clone());
    let fleet = fleet::spawn(worker.clone());

    let fetched = worker.fetch_loop(&shutdown).await;
    // No longer fetching: the fleet stops counting this worker for its classes.
    fleet.stop().await;
    let broken = worker.backend_health.is_broken();
    let stay = worker.cfg.pipeline.on_unhealthy == OnUnhealthy::Stay;
    if broken && stay && !shutdown.is_requested() {
        tracing::error!(
            "not taking jobs: the proving backend is broken; staying up and not ready until \
             restarted (pipeline.on_unhealthy = \"stay\")"
        );
        shutdown.requested().await;
    }
    shutdown.drain().await;
    if let Some(b) = worker.broker.lock().await.take() {
        b.close().await;
    }
    shutdown.done();
    tracing::info!("worker stopped");
    fetched?;
    if broken {
        // Non-zero, so that systemd (`Restart=on-failure`) starts it again with a fresh
        // backend, and so that the stop shows as a failure.
        let why = worker
            .health
            .backend_broken
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_default();
        return Err(anyhow!(
            "stopped because the proving backend is broken: {why}"
        ));
    }
    Ok(())
}

impl Worker {
    /// Fetch and hand off, until a stop is requested or the backend is judged broken: take a
    /// job from the first open queue that has one (`gate::admission` says which are open),
    /// reserve its memory, and let `handle` prove it.
    async fn fetch_loop(self: &Arc<Self>, shutdown: &Shutdown) -> Result<()> {
        let poll = Duration::from_millis(self.cfg.broker.poll_interval_ms.max(10));
        loop {
            // Fetch only while fewer than `pipeline.prefetch` fetched jobs wait to begin: what
            // the pipeline cannot start soon is left in the queue for other workers. An urgent
            // job begins at once (the pipeline's urgent lane), so one more may be fetched
            // while the others wait: from the urgent queues only.
            let (not_begun, urgent_only) = tokio::select! {
                biased;
                p = self.not_begun.clone().acquire_owned() => {
                    (NotBegun {
                        _permit: p.context("the prefetch semaphore is never closed")?,
                    }, false)
                }
                p = self.urgent_not_begun.clone().acquire_owned(), if self.serves_urgent() => {
                    (NotBegun {
                        _permit: p.context("the urgent prefetch semaphore is never closed")?,
                    }, true)
                }
                _ = shutdown.fetching_stopped() => return Ok(()),
            };
            // Wait for an open queue. A worker holding nothing always has one (it never waits
            // for memory only its own kept parameters hold: those are released for the job
            // it takes); a busy one waits for its jobs to free memory.
            let open = loop {
                let changed = self.gate.changed();
                let mut open =
                    gate::open_queues(&self.kept, &self.fetch_classes, self.urgent_reserve);
                if urgent_only {
                    open = open.urgent_only(&self.fetch_classes);
                }
                if open.any() {
                    break Some(open);
                }
                // Holding the urgent place only: start again once a prefetch place frees, so
                // that the other queues are looked at too.
                if urgent_only && self.not_begun.available_permits() > 0 {
                    break None;
                }
                tokio::select! {
                    _ = changed => {}
                    _ = tokio::time::sleep(poll) => {}
                    _ = shutdown.fetching_stopped() => return Ok(()),
                }
            };
            let Some(open) = open else {
                continue;
            };
            if shutdown.is_fetching_stopped() {
                return Ok(());
            }
            // A broker that went away is waited for with backoff (`BROKER_PATIENCE`); a SIGTERM
            // meanwhile must still stop the loop, or the drain would wait out that patience.
            let broker = tokio::select! {
                b = self.broker() => b?,
                _ = shutdown.requested() => return Ok(()),
            };
            match self.fetch_one(&broker, &open).await {
                Ok(Some((delivery, _))) if shutdown.is_fetching_stopped() => {
                    // The stop came while the queues were polled: the job is not begun here.
                    return_to_queue(delivery, "fetched as the worker began to drain").await;
                    return Ok(());
                }
                Ok(Some((delivery, source))) => {
                    let Some(fetched) = self.admit(delivery, source).await else {
                        continue;
                    };
                    *self.last_taken.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
                    self.metrics
                        .gate_reserved_bytes
                        .set(self.gate.used() as i64);
                    let worker = self.clone();
                    shutdown.track(async move { worker.handle(broker, fetched, not_begun).await });
                }
                Ok(None) => {
                    tokio::select! {
                        _ = tokio::time::sleep(poll) => {}
                        _ = shutdown.fetching_stopped() => return Ok(()),
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        error = format!("{e:#}"),
                        "fetching a job failed; reconnecting"
                    );
                    tokio::time::sleep(poll).await;
                }
            }
        }
    }

    /// Reserve memory for a job just taken from `source`, releasing kept parameters no job
    /// uses where it is short. The fetch rule found the queue open and memory has only been
    /// freed since, so this does not fail; if it ever did, the job is handed back rather than
    /// proved without its memory.
    async fn admit(&self, delivery: Delivery, source: Source) -> Option<Fetched> {
        let (admitted, class) = match source {
            Source::Class(i) => {
                let class = self.classes[i];
                let why = format!("a {} job", class.key());
                (
                    gate::admit(&self.kept, &self.fetch_classes[i], &why),
                    Some(class),
                )
            }
            Source::Unsorted => (gate::admit_unsorted(&self.kept, &self.fetch_classes), None),
        };
        self.export_kept();
        match admitted {
            Some(admitted) => Some(Fetched {
                delivery,
                reservation: admitted.reservation,
                share: admitted.share,
                hold: admitted.hold,
                class,
            }),
            None => {
                tracing::error!(
                    class = class.map(|c| c.key()).unwrap_or_else(|| "unsorted".into()),
                    free = self.gate.free(),
                    "a job was taken from an open queue and its memory is not free: handing it back"
                );
                return_to_queue(delivery, "its memory is not free").await;
                None
            }
        }
    }

    /// One job from the first open queue that has one: the urgent queues of the classes this
    /// worker serves, then their other queues (largest class first), then the unsorted queue.
    /// `None` when all open queues are empty.
    async fn fetch_one(
        &self,
        broker: &Broker,
        open: &OpenQueues,
    ) -> Result<Option<(Delivery, Source)>> {
        let open_classes = || {
            self.classes
                .iter()
                .enumerate()
                .filter(|&(i, _)| open.classes[i])
        };
        let urgent = open_classes().map(|(i, &c)| (broker.names.urgent_queue(c), Source::Class(i)));
        // A class whose jobs are all urgent has no other queue.
        let normal = open_classes()
            .filter(|&(_, c)| !c.always_urgent())
            .map(|(i, &c)| (broker.names.class_queue(c), Source::Class(i)));
        let unsorted = open
            .unsorted
            .then(|| (broker.names.jobs_queue(), Source::Unsorted));
        for (queue, source) in urgent.chain(normal).chain(unsorted) {
            let got = broker
                .fetch
                .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: false })
                .await
                .with_context(|| format!("fetching from {queue}"))?;
            if let Some(message) = got {
                return Ok(Some((message.delivery, source)));
            }
        }
        Ok(None)
    }

    /// The current broker connection, replaced (with backoff) when it or a channel died, e.g.
    /// after a broker restart or a consumer-timeout channel closure.
    pub(crate) async fn broker(&self) -> Result<Arc<Broker>> {
        let mut current = self.broker.lock().await;
        if let Some(b) = current.as_ref() {
            if b.is_healthy() {
                return Ok(b.clone());
            }
            self.metrics.broker_reconnects.inc();
            tracing::warn!("broker connection or channel lost; reconnecting");
        }
        self.health.broker_up.store(false, Ordering::Relaxed);
        *current = None;
        let b = Arc::new(
            Broker::connect_with_backoff(
                &self.cfg.broker,
                self.cfg.retry.max_retries,
                &self.name,
                BROKER_PATIENCE,
            )
            .await
            .context("RabbitMQ stayed unreachable")?,
        );
        *current = Some(b.clone());
        self.health.broker_up.store(true, Ordering::Relaxed);
        Ok(b)
    }

    /// The keys of the classes this worker fetches, largest first.
    fn class_keys(&self) -> Vec<String> {
        self.classes.iter().map(|c| c.key()).collect()
    }

    /// The circuits whose parameters this worker keeps loaded, most recently used first, by
    /// the id the fleet reports them under: the size class key of a PoRep or SnapDeals sector
    /// size (`porep-32g`, `snap-32g`), else the parameters' own name.
    fn kept_circuits(&self) -> Vec<KeptCircuit> {
        self.kept
            .status()
            .into_iter()
            .map(|k| KeptCircuit {
                circuit: circuit_id(k.key.as_str()),
                bytes: k.bytes,
                users: k.users,
                idle_s: k.idle_s,
            })
            .collect()
    }

    /// Kept parameters and releases as metrics (after a fetch, and when a job keeps its
    /// parameters).
    /// Whether any class this worker serves is urgent (PoSt).
    fn serves_urgent(&self) -> bool {
        self.fetch_classes.iter().any(|c| c.urgent)
    }

    fn export_kept(&self) {
        let kept = self.kept_circuits();
        self.metrics.params_kept_bytes.reset();
        for k in &kept {
            self.metrics
                .params_kept_bytes
                .with_label_values(&[&k.circuit])
                .set(k.bytes as i64);
        }
        let released = self.kept.recent_evictions();
        let mut counted = self
            .evictions_counted
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for _ in released.iter().filter(|e| e.seq > *counted) {
            self.metrics.params_evictions.inc();
        }
        if let Some(last) = released.last() {
            *counted = (*counted).max(last.seq);
        }
    }
}

/// Returns a fetched job that nothing has begun to its queue at once (a requeueing nack), for
/// another worker or this one later; `why` goes to the log. A job already claimed and begun is
/// handed back by `settle` instead, republished with its headers.
async fn return_to_queue(delivery: Delivery, why: &str) {
    let requeue = BasicNackOptions {
        requeue: true,
        ..Default::default()
    };
    match delivery.acker.nack(requeue).await {
        Ok(_) => tracing::info!(why, "a fetched job was handed back to its queue"),
        Err(e) => {
            tracing::warn!(why, error = %e, "hand-back failed; the broker returns the job when the channel closes")
        }
    }
}

/// The fleet's name for parameters kept under `key`: the size class key of a PoRep, SnapDeals
/// or PoSt sector size (`porep-32g` for `porep-34359738368`), else the key itself.
fn circuit_id(key: &str) -> String {
    let size = |prefix: &str| key.strip_prefix(prefix).and_then(|s| s.parse().ok());
    size("porep-")
        .map(|sector_size| SizeClass::Porep { sector_size })
        .or_else(|| size("snap-").map(|sector_size| SizeClass::Snap { sector_size }))
        .or_else(|| size("window-post-").map(|sector_size| SizeClass::WindowPost { sector_size }))
        .or_else(|| size("winning-post-").map(|sector_size| SizeClass::WinningPost { sector_size }))
        .map(|class| class.key())
        .unwrap_or_else(|| key.to_string())
}

/// The sector size limit this worker runs with: the configured one, or, unset, the largest
/// size whose worst case the job budget holds (so a small machine proves small sectors instead
/// of refusing to start).
fn sector_limit(cfg: &Config, job_budget: u64) -> Result<u64> {
    if let Some(limit) = cfg.limits.max_sector_size {
        return Ok(limit);
    }
    let largest = crate::schema::Limits::LARGEST_SECTOR;
    let Some(fits) = crate::kinds::largest_sector_within(
        job_budget,
        largest,
        u64::from(cfg.limits.max_canary_partitions),
        cfg.pipeline.partitions_in_flight(),
    ) else {
        bail!(
            "memory budget for jobs ({job_budget} bytes) cannot admit a job of even the \
             smallest sector size: raise gate.budget_bytes, or give the worker more memory"
        );
    };
    if fits < largest {
        tracing::warn!(
            max_sector_size = fits,
            job_budget,
            "limits.max_sector_size is not set and the memory budget does not hold the largest \
             sectors: this worker takes sectors up to {fits} bytes (give it more memory, or set \
             limits.max_sector_size, to change that)"
        );
    }
    Ok(fits)
}

/// Keep `/readyz` honest about the database.
fn spawn_ledger_probe(worker: Arc<Worker>, shutdown: Shutdown) {
    tokio::spawn(async move {
        while !shutdown.is_requested() {
            let up = worker.ledger.ping().await;
            worker.health.ledger_up.store(up, Ordering::Relaxed);
            if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
                if let Some(rss) = gate::budget::rss_bytes(&status) {
                    worker.metrics.rss_bytes.set(rss as i64);
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                _ = shutdown.requested() => {}
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_parameters_are_named_as_their_size_classes() {
        let id = |key: crate::groth16::SrsKey| circuit_id(key.as_str());
        assert_eq!(id(crate::porep::srs_key(32 << 30)), "porep-32g");
        assert_eq!(id(crate::snap::srs_key(2048)), "snap-2k");
        assert_eq!(id(crate::post::srs_key(true, 2048)), "window-post-2k");
        assert_eq!(
            id(crate::post::srs_key(false, 64 << 30)),
            "winning-post-64g"
        );
        assert_eq!(id(crate::canary::srs_key()), "canary");
    }
}
