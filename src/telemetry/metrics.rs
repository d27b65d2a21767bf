//! The worker's Prometheus metrics.

use anyhow::Result;
use prometheus::{
    exponential_buckets, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec,
    IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

pub struct Metrics {
    pub registry: Registry,
    /// Jobs by outcome: `proved`, `from_ledger`, `failed`, `retried`, `dead_lettered`,
    /// `deferred` (another worker holds the job's lease), `handed_back` (this worker stopped
    /// taking work), `rerouted` (fetched unsorted, sent to its size class's queue), `cancelled`
    /// (cancelled through a gateway: not proved, or its proof not published).
    pub jobs: IntCounterVec,
    /// Per-partition stage latency (`synthesis`, `start`, `finish`) and per-job `verify`,
    /// `publish` and `total`.
    pub stage_seconds: HistogramVec,
    /// Time from a job's publication (AMQP timestamp) to its fetch by a worker; copies the
    /// worker republished itself (retries, put-off or handed-back jobs) are not counted again.
    pub queue_wait_seconds: Histogram,
    pub retries: IntCounter,
    pub gate_budget_bytes: IntGauge,
    pub gate_reserved_bytes: IntGauge,
    pub jobs_in_flight: IntGauge,
    pub rss_bytes: IntGauge,
    pub broker_reconnects: IntCounter,
    /// 1 while the proving backend works; 0 once it is judged broken (the worker then takes
    /// no more jobs).
    pub backend_healthy: IntGauge,
    pub backend_failures: IntCounter,
    /// GPUs taken out of service after repeated failures while others carry on.
    pub backends_out_of_service: IntGauge,
    /// Jobs ready in each size class's queue (and `unsorted`), as the broker counts them.
    pub class_queue_jobs: IntGaugeVec,
    /// Workers seen recently that fetch each size class: 0 beside waiting jobs means they wait
    /// for a worker that can hold them.
    pub class_workers: IntGaugeVec,
    /// Bytes of the gate held by parameters kept loaded between jobs, by circuit.
    pub params_kept_bytes: IntGaugeVec,
    /// Kept parameters released because a fetch needed their memory (which ones: the log and
    /// `c2q status`).
    pub params_evictions: IntCounter,
    /// Seconds this worker has held no job while jobs of its classes were ready (0 when it
    /// does not): a stall (see `worker::fleet`).
    pub stalled_seconds: IntGauge,
}

impl Metrics {
    pub fn new() -> Result<Metrics> {
        let registry = Registry::new_custom(Some("c2q".into()), None)?;
        let jobs = IntCounterVec::new(
            Opts::new("jobs_total", "Jobs finished, by outcome"),
            &["outcome"],
        )?;
        let stage_seconds = HistogramVec::new(
            HistogramOpts::new("stage_seconds", "Latency of pipeline stages")
                .buckets(exponential_buckets(0.001, 2.5, 18)?),
            &["stage"],
        )?;
        let queue_wait_seconds = Histogram::with_opts(
            HistogramOpts::new("queue_wait_seconds", "Time jobs waited in the queue")
                .buckets(exponential_buckets(0.01, 3.0, 14)?),
        )?;
        let retries = IntCounter::new("retries_total", "Jobs sent to a retry delay queue")?;
        let gate_budget_bytes = IntGauge::new("gate_budget_bytes", "Memory budget for jobs")?;
        let gate_reserved_bytes =
            IntGauge::new("gate_reserved_bytes", "Memory reserved by admitted jobs")?;
        let jobs_in_flight = IntGauge::new("jobs_in_flight", "Jobs taken and not yet acked")?;
        let rss_bytes = IntGauge::new("rss_bytes", "Resident set size of the worker")?;
        let broker_reconnects =
            IntCounter::new("broker_reconnects_total", "Broker connections replaced")?;
        registry.register(Box::new(jobs.clone()))?;
        registry.register(Box::new(stage_seconds.clone()))?;
        registry.register(Box::new(queue_wait_seconds.clone()))?;
        registry.register(Box::new(retries.clone()))?;
        registry.register(Box::new(gate_budget_bytes.clone()))?;
        registry.register(Box::new(gate_reserved_bytes.clone()))?;
        registry.register(Box::new(jobs_in_flight.clone()))?;
        registry.register(Box::new(rss_bytes.clone()))?;
        let backend_healthy = IntGauge::new(
            "backend_healthy",
            "1 while the proving backend works, 0 once the worker stopped taking jobs because of it",
        )?;
        backend_healthy.set(1);
        let backend_failures =
            IntCounter::new("backend_failures_total", "Proving starts that failed")?;
        registry.register(Box::new(broker_reconnects.clone()))?;
        registry.register(Box::new(backend_healthy.clone()))?;
        registry.register(Box::new(backend_failures.clone()))?;
        let backends_out_of_service = IntGauge::new(
            "backends_out_of_service",
            "GPUs taken out of service after repeated failed proving starts (the others carry on)",
        )?;
        registry.register(Box::new(backends_out_of_service.clone()))?;
        let class_queue_jobs = IntGaugeVec::new(
            Opts::new(
                "class_queue_jobs",
                "Jobs ready in each size class's queue (unsorted: not yet routed by class)",
            ),
            &["class"],
        )?;
        let class_workers = IntGaugeVec::new(
            Opts::new(
                "class_workers",
                "Workers seen in the last minute that fetch each size class",
            ),
            &["class"],
        )?;
        registry.register(Box::new(class_queue_jobs.clone()))?;
        registry.register(Box::new(class_workers.clone()))?;
        let params_kept_bytes = IntGaugeVec::new(
            Opts::new(
                "params_kept_bytes",
                "Memory held by parameters kept loaded between jobs, by circuit",
            ),
            &["circuit"],
        )?;
        let params_evictions = IntCounter::new(
            "params_evictions_total",
            "Kept parameters released because a fetch needed their memory",
        )?;
        let stalled_seconds = IntGauge::new(
            "stalled_seconds",
            "Seconds the worker has held no job while jobs of its classes were ready (0: not stalled)",
        )?;
        registry.register(Box::new(params_kept_bytes.clone()))?;
        registry.register(Box::new(params_evictions.clone()))?;
        registry.register(Box::new(stalled_seconds.clone()))?;
        Ok(Metrics {
            registry,
            jobs,
            stage_seconds,
            queue_wait_seconds,
            retries,
            gate_budget_bytes,
            gate_reserved_bytes,
            jobs_in_flight,
            rss_bytes,
            broker_reconnects,
            backend_healthy,
            backend_failures,
            backends_out_of_service,
            class_queue_jobs,
            class_workers,
            params_kept_bytes,
            params_evictions,
            stalled_seconds,
        })
    }

    pub fn observe_ms(&self, stage: &str, ms: u64) {
        self.stage_seconds
            .with_label_values(&[stage])
            .observe(ms as f64 / 1000.0);
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        if let Some(rss) = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| crate::gate::budget::rss_bytes(&s))
        {
            self.rss_bytes.set(rss as i64);
        }
        TextEncoder::new()
            .encode_to_string(&self.registry.gather())
            .unwrap_or_else(|e| format!("# encoding failed: {e}\n"))
    }
}
