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
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use lapin::message::Delivery;
use lapin::options::BasicGetOptions;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::broker::Broker;
use crate::classes::SizeClass;
use crate::config::{Config, OnUnhealthy};
use crate::gate::{self, estimate, Gate, Reservation};
use crate::gpu::select_backends;
use crate::groth16::SrsKey;
use crate::ledger::{Holder, Ledger};
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
    /// SRS memory held while an SRS stays loaded.
    resident: Mutex<HashMap<SrsKey, Reservation>>,
    /// One lock per job id being processed here (see `handle`).
    job_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// This process as a lease holder in the ledger.
    holder: Holder,
    backend_name: String,
    backend_health: health::BackendHealth,
    /// One permit per job fetched and not yet begun (`pipeline.prefetch`).
    not_begun: Arc<Semaphore>,
    /// The size classes this worker fetches, largest first.
    classes: Vec<SizeClass>,
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

    let budget = gate::detect_budget(&cfg.gate)?;
    cfg.limits.max_sector_size = Some(sector_limit(&cfg, budget.jobs)?);
    let gate = Gate::new(budget.jobs);
    metrics.gate_budget_bytes.set(budget.jobs as i64);
    let backends: Vec<_> = select_backends(
        cfg.pipeline.backend,
        &cfg.pipeline.devices,
        cfg.pipeline.gpu_memory_limit()?,
    )?
    .into_iter()
    .map(|b| fault::wrap_backend(cfg.pipeline.fault.as_deref(), b))
    .collect();
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
    let worker = Arc::new(Worker {
        name: name.clone(),
        ledger,
        broker: tokio::sync::Mutex::new(None),
        gate,
        pipeline: Arc::new(pipeline),
        metrics,
        health,
        resident: Mutex::new(HashMap::new()),
        job_locks: Mutex::new(HashMap::new()),
        holder: Holder {
            worker: name.clone(),
            token: format!("{name}/{}", uuid::Uuid::new_v4()),
            lease: Duration::from_secs(cfg.lease.duration_s),
        },
        backend_name,
        backend_health,
        not_begun: Arc::new(Semaphore::new(prefetch)),
        classes,
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
    /// Reserve, fetch, hand off; until a stop is requested, or until the backend is judged
    /// broken.
    async fn fetch_loop(self: &Arc<Self>, shutdown: &Shutdown) -> Result<()> {
        let poll = Duration::from_millis(self.cfg.broker.poll_interval_ms.max(10));
        loop {
            // Fetch only while fewer than `pipeline.prefetch` fetched jobs wait to begin: what
            // the pipeline cannot start soon is left in the queue for other workers.
            let not_begun = tokio::select! {
                p = self.not_begun.clone().acquire_owned() => {
                    NotBegun {
                        _permit: p.context("the prefetch semaphore is never closed")?,
                    }
                }
                _ = shutdown.fetching_stopped() => return Ok(()),
            };
            // Memory for the worst case of any job this worker fetches, whichever queue it
            // comes from: a worker busy with a large job takes no small one it would only
            // hold behind it, and a large job never waits for memory that small ones took.
            let reservation = tokio::select! {
                r = self.gate.reserve(self.fetch_bytes()) => r,
                _ = shutdown.fetching_stopped() => return Ok(()),
            };
            self.metrics
                .gate_reserved_bytes
                .set(self.gate.used() as i64);
            if shutdown.is_fetching_stopped() {
                return Ok(());
            }
            // A broker that went away is waited for with backoff (`BROKER_PATIENCE`); a SIGTERM
            // meanwhile must still stop the loop, or the drain would wait out that patience.
            let broker = tokio::select! {
                b = self.broker() => b?,
                _ = shutdown.requested() => return Ok(()),
            };
            match self.fetch_one(&broker).await {
                Ok(Some(delivery)) => {
                    let worker = self.clone();
                    shutdown.track(async move {
                        worker
                            .handle(broker, delivery, reservation, not_begun)
                            .await
                    });
                }
                Ok(None) => {
                    drop(reservation);
                    tokio::select! {
                        _ = tokio::time::sleep(poll) => {}
                        _ = shutdown.fetching_stopped() => return Ok(()),
                    }
                }
                Err(e) => {
                    drop(reservation);
                    tracing::warn!(
                        error = format!("{e:#}"),
                        "fetching a job failed; reconnecting"
                    );
                    tokio::time::sleep(poll).await;
                }
            }
        }
    }

    /// One job from the first queue that has one: the urgent queues of the classes this
    /// worker serves, then their other queues (largest class first), then the unsorted queue.
    /// `None` when all are empty.
    async fn fetch_one(&self, broker: &Broker) -> Result<Option<Delivery>> {
        let urgent = self.classes.iter().map(|&c| broker.names.urgent_queue(c));
        let queues = urgent
            .chain(self.classes.iter().map(|&c| broker.names.class_queue(c)))
            .chain([broker.names.jobs_queue()]);
        for queue in queues {
            let got = broker
                .fetch
                .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: false })
                .await
                .with_context(|| format!("fetching from {queue}"))?;
            if let Some(message) = got {
                return Ok(Some(message.delivery));
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

    /// What must be free before a message is taken: the worst case of the largest class this
    /// worker fetches, with the SRS counted only if it is not already resident. A job that
    /// turns out smaller shrinks it once it is built.
    fn fetch_bytes(&self) -> u64 {
        let in_flight = self.cfg.pipeline.partitions_in_flight();
        self.classes
            .iter()
            .map(|class| {
                let worst = class.worst_case(in_flight);
                worst.work(worst.partitions) + self.srs_needed(&worst)
            })
            .max()
            .unwrap_or(0)
    }

    /// The keys of the classes this worker fetches, largest first.
    fn class_keys(&self) -> Vec<String> {
        self.classes.iter().map(|c| c.key()).collect()
    }

    fn srs_needed(&self, e: &estimate::Estimate) -> u64 {
        let resident = self.resident.lock().unwrap_or_else(|p| p.into_inner());
        if resident.contains_key(&e.srs_key) {
            0
        } else {
            e.srs_bytes
        }
    }

    /// The circuits whose parameters this worker holds loaded, by the id the fleet reports
    /// them under: the size class key of a PoRep or SnapDeals sector size (`porep-32g`,
    /// `snap-32g`), else the gate's key.
    fn resident_circuits(&self) -> Vec<String> {
        let resident = self.resident.lock().unwrap_or_else(|p| p.into_inner());
        let size_class = |key: &str| {
            let size = |prefix: &str| key.strip_prefix(prefix).and_then(|s| s.parse().ok());
            size("porep-")
                .map(|sector_size| SizeClass::Porep { sector_size })
                .or_else(|| size("snap-").map(|sector_size| SizeClass::Snap { sector_size }))
        };
        let mut ids: Vec<String> = resident
            .keys()
            .map(|key| {
                size_class(key.as_str())
                    .map(|class| class.key())
                    .unwrap_or_else(|| key.to_string())
            })
            .collect();
        ids.sort();
        ids
    }

    /// Keep the SRS part of a finished job's reservation while the SRS stays loaded.
    fn keep_resident(&self, key: &SrsKey, reservation: Reservation) {
        let mut resident = self.resident.lock().unwrap_or_else(|p| p.into_inner());
        resident.entry(key.clone()).or_insert(reservation);
    }
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
