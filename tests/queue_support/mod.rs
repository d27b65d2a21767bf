//! Fixtures for the queue integration tests: a unique prefix and ledger schema per test (so
//! tests run in parallel and rerun), worker processes, job publishing, result and dead-letter
//! reading, all against the real RabbitMQ and PostgreSQL on 127.0.0.1.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use c2q::broker::{publish_confirmed, topology::JOB_KEY, Broker};
use c2q::config::Config;
use c2q::ledger::{Ledger, LedgerRow};
use c2q::schema::{self, CanarySpec, JobKind, JobV1, ResultV1, Status};
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicGetOptions, QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::{FieldTable, ShortString};
use lapin::BasicProperties;

pub const TEST_PARAMS: &str = "/var/tmp/c2q-test-params";

/// The most retries any test configures (its retry queues are deleted by `cleanup`).
const MOST_RETRIES_IN_TESTS: u32 = 8;

/// One test's world: its own queues, ledger schema and scratch directory.
pub struct Env {
    pub prefix: String,
    pub dir: tempfile::TempDir,
    pub config: Config,
}

/// The least budget a worker with `config` accepts: its baseline and the worst case of the
/// largest job it takes, parameters not loaded.
pub fn least_budget(config: &Config) -> u64 {
    let largest = c2q::gate::estimate::largest(&c2q::kinds::worst_cases(
        config.limits.sector_size_limit(),
        u64::from(config.limits.max_canary_partitions),
        config.pipeline.partitions_in_flight(),
    ));
    config
        .gate
        .baseline_bytes
        .unwrap_or(c2q::gate::budget::DEFAULT_BASELINE)
        + largest
}

/// A config whose memory gate admits one job at a time: room for the worst case of the
/// largest job, and once a canary job holds its (small) reservation, no longer for that worst
/// case beside it.
pub fn one_job_at_a_time(config: &Config) -> Config {
    let mut c = config.clone();
    c.gate.budget_bytes = Some(least_budget(config) + (32 << 20));
    c
}

impl Env {
    /// Kill every process still running whose command line names this test's directory (its
    /// workers and gateways: their config files live there).
    fn stop_processes(&self) {
        let dir = self.dir.path().to_string_lossy().into_owned();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|p| p.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            if String::from_utf8_lossy(&cmdline).contains(&dir) {
                // SAFETY: kill(2) on a process this test started (its config is in our dir).
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }

    pub fn new(tag: &str) -> Env {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let prefix = format!(
            "t_{tag}_{}_{}_{}",
            std::process::id(),
            nanos % 100_000,
            N.fetch_add(1, Ordering::Relaxed)
        );
        let mut config = Config::default();
        config.broker.prefix = prefix.clone();
        config.broker.poll_interval_ms = 100;
        config.ledger.schema = prefix.clone();
        config.ledger.pool_size = 4;
        config.limits.max_sector_size = Some(2048);
        // Room for a few jobs of the largest kind these workers take (2 KiB PoRep: 2.75 GiB).
        config.gate.budget_bytes = Some(8 << 30);
        config.retry.base_delay_ms = 200;
        config.retry.max_delay_ms = 1_000;
        config.retry.max_retries = 2;
        config.telemetry.listen = "127.0.0.1:0".into();
        config.telemetry.log_format = c2q::config::LogFormat::Json;
        // Short leases, so that a killed worker's job is taken over within seconds.
        config.lease.duration_s = 3;
        config.lease.renew_s = 1;
        config.lease.busy_delay_ms = 300;
        Env {
            prefix,
            dir: tempfile::tempdir().unwrap(),
            config,
        }
    }

    /// Write `config` for a worker called `name`.
    pub fn write_config(&self, name: &str, config: &Config) -> PathBuf {
        let mut c = config.clone();
        c.worker_name = Some(name.to_string());
        let path = self.dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, toml::to_string(&c).unwrap()).unwrap();
        path
    }

    pub fn spawn_worker(&self, name: &str) -> WorkerProc {
        self.spawn_worker_with(name, &self.config)
    }

    pub fn spawn_worker_with(&self, name: &str, config: &Config) -> WorkerProc {
        let cfg = self.write_config(name, config);
        let log = self.dir.path().join(format!("{name}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_c2q"))
            .args(["worker", "--config"])
            .arg(&cfg)
            .env("FIL_PROOFS_PARAMETER_CACHE", TEST_PARAMS)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn c2q worker");
        WorkerProc {
            child: Some(child),
            log,
            name: name.to_string(),
        }
    }

    /// Start `c2q gateway` with `config`, its bearer token (if any) in the environment.
    pub fn spawn_gateway(&self, name: &str, config: &Config, token: Option<&str>) -> WorkerProc {
        let cfg = self.write_config(name, config);
        let log = self.dir.path().join(format!("{name}.log"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_c2q"));
        cmd.args(["gateway", "--config"])
            .arg(&cfg)
            .env("FIL_PROOFS_PARAMETER_CACHE", TEST_PARAMS)
            .env("RUST_LOG", "info")
            .env_remove("C2Q_GATEWAY_TOKEN")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(token) = token {
            cmd.env("C2Q_GATEWAY_TOKEN", token);
        }
        WorkerProc {
            child: Some(cmd.spawn().expect("spawn c2q gateway")),
            log,
            name: name.to_string(),
        }
    }

    pub async fn broker(&self) -> Broker {
        Broker::connect(
            &self.config.broker,
            self.config.retry.max_retries,
            "c2q-test",
        )
        .await
        .expect("connect to RabbitMQ on 127.0.0.1")
    }

    pub async fn ledger(&self) -> Ledger {
        Ledger::connect(&self.config.ledger)
            .await
            .expect("connect to PostgreSQL on 127.0.0.1")
    }

    /// Delete this test's queues, exchanges and schema. Its workers and gateways are stopped
    /// first: a live worker whose queue is deleted reconnects and declares its topology again,
    /// and quorum queues left behind by one test after another slow the broker down for all.
    pub async fn cleanup(&self) {
        self.stop_processes();
        let b = self.broker().await;
        let n = &b.names;
        let gateway_results = format!("{}.gateway.results", self.prefix);
        for q in n
            // Some tests give their workers more retries than `config` has: delete every retry
            // level a test may use (deleting a queue that does not exist is not an error).
            .all_queues(self.config.retry.max_retries.max(MOST_RETRIES_IN_TESTS))
            .into_iter()
            .chain([gateway_results])
        {
            let _ = b
                .publish
                .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
                .await;
        }
        for e in [n.jobs_exchange(), n.dlx()] {
            let _ = b
                .publish
                .exchange_delete(e.as_str().into(), Default::default())
                .await;
        }
        b.close().await;
        let _ = Command::new("psql")
            .args(["-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-qc"])
            .arg(format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.prefix))
            .output();
    }
}

pub fn canary_job(id: &str, partitions: u32, seed: u64) -> JobV1 {
    JobV1 {
        v: schema::VERSION,
        job_id: id.to_string(),
        kind: JobKind::Canary,
        registered_proof: "canary".into(),
        miner_id: 1000,
        sector_number: 1,
        phase1_output: vec![],
        deadline_unix_ms: None,
        canary: Some(CanarySpec { partitions, seed }),
    }
}

/// Publish raw bytes as a job (confirmed), with `message_id`.
pub async fn publish_raw(b: &Broker, message_id: &str, payload: &[u8]) {
    publish_raw_as(b, Some(message_id), payload).await;
}

/// Publish raw bytes as a job (confirmed), with `message_id` if given.
pub async fn publish_raw_as(b: &Broker, message_id: Option<&str>, payload: &[u8]) {
    let mut props = BasicProperties::default()
        .with_content_type(schema::CONTENT_TYPE.into())
        .with_delivery_mode(2)
        .with_timestamp(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs(),
        );
    if let Some(id) = message_id {
        props = props.with_message_id(ShortString::from(id.to_string()));
    }
    publish_confirmed(
        &b.publish,
        &b.names.jobs_exchange(),
        JOB_KEY,
        payload,
        props,
    )
    .await
    .expect("publish job");
}

pub async fn publish_job(b: &Broker, job: &JobV1) {
    publish_raw(b, &job.job_id, &schema::job::encode(job).unwrap()).await;
}

/// The next result on the shared results queue (acked), or panic after `timeout`.
pub async fn next_result(b: &Broker, timeout: Duration) -> ResultV1 {
    let d = next_message(b, &b.names.results(), timeout)
        .await
        .expect("no result arrived in time");
    ResultV1::decode(&d.data).expect("result decodes")
}

/// Results until one for `job_id` arrives.
pub async fn result_for(b: &Broker, job_id: &str, timeout: Duration) -> ResultV1 {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let r = next_result(b, left).await;
        if r.job_id == job_id {
            return r;
        }
    }
}

pub async fn next_message(b: &Broker, queue: &str, timeout: Duration) -> Option<Delivery> {
    let deadline = Instant::now() + timeout;
    loop {
        let got = b
            .fetch
            .basic_get(queue.into(), BasicGetOptions { no_ack: false })
            .await
            .expect("basic_get");
        if let Some(m) = got {
            m.delivery
                .acker
                .ack(BasicAckOptions::default())
                .await
                .unwrap();
            return Some(m.delivery);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn depth(b: &Broker, queue: &str) -> u32 {
    let q = b
        .fetch
        .queue_declare(
            queue.into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("queue exists");
    q.message_count()
}

/// Poll the ledger until `pred` holds for the job's row.
pub async fn wait_row(
    ledger: &Ledger,
    job_id: &str,
    timeout: Duration,
    pred: impl Fn(&LedgerRow) -> bool,
) -> LedgerRow {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(row) = ledger.get(job_id).await.unwrap() {
            if pred(&row) {
                return row;
            }
        }
        assert!(
            Instant::now() < deadline,
            "ledger row for {job_id} never matched"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A worker process; killed (SIGKILL) if still running when dropped.
pub struct WorkerProc {
    pub child: Option<Child>,
    pub log: PathBuf,
    pub name: String,
}

impl WorkerProc {
    pub fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.pid(), sig);
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait for the log to contain `needle`.
    pub async fn wait_log(&self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.log().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "worker {} never logged {needle:?}; log:\n{}",
                self.name,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The telemetry address the worker bound.
    pub async fn telemetry_addr(&self) -> String {
        self.logged_addr("telemetry endpoint listening").await
    }

    /// The `addr` field of the first JSON log line containing `message`, once there is one.
    pub async fn logged_addr(&self, message: &str) -> String {
        self.wait_log(message, Duration::from_secs(20)).await;
        let log = self.log();
        let line = log.lines().find(|l| l.contains(message)).unwrap();
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        v["fields"]["addr"].as_str().unwrap().to_string()
    }

    /// Wait for exit; the exit status code (None: killed by a signal).
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "worker {} did not exit; log:\n{}",
                self.name,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Peak resident set size (VmHWM) of the running worker.
    pub fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            * 1024
    }
}

impl Drop for WorkerProc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            if c.try_wait().ok().flatten().is_none() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// A plain HTTP GET on the telemetry endpoint: `(status code, body)`.
pub async fn http_get(addr: &str, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.unwrap();
    let code = buf
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = buf.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (code, body)
}

/// Run the c2q binary with `args` and `--config` for this test's queues and ledger:
/// `(success, stdout, stderr)`.
pub fn c2q_cli(env: &Env, args: &[&str]) -> (bool, String, String) {
    let cfg = env.write_config("cli", &env.config);
    let out = Command::new(c2q_bin())
        .args(args)
        .arg("--config")
        .arg(&cfg)
        .output()
        .expect("run c2q");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Results until `n` have arrived for `job_id`.
pub async fn results_for(b: &Broker, job_id: &str, n: usize, timeout: Duration) -> Vec<ResultV1> {
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    while got.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        got.push(result_for(b, job_id, left).await);
    }
    got
}

/// The next result of each of `ids`, in any order (unlike `result_for`, nothing is skipped but
/// what the result contract allows a consumer to see again: a job answered before, its proof
/// re-published from the ledger after a redelivery).
pub async fn results_of(b: &Broker, ids: &[&str], timeout: Duration) -> Vec<ResultV1> {
    let deadline = Instant::now() + timeout;
    let mut got = std::collections::HashMap::new();
    while got.len() < ids.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let r = next_result(b, left).await;
        if !ids.contains(&r.job_id.as_str()) && r.from_ledger && r.status == Status::Ok {
            eprintln!("a result seen again (at-least-once delivery): {}", r.job_id);
            continue;
        }
        assert!(ids.contains(&r.job_id.as_str()), "unexpected result {r:?}");
        got.entry(r.job_id.clone()).or_insert(r);
    }
    got.into_values().collect()
}

/// Poll until `depth(queue) == n`.
pub async fn wait_depth(b: &Broker, queue: &str, n: u32, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let d = depth(b, queue).await;
        if d == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{queue} holds {d} messages, expected {n}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Path of the c2q binary, for CLI tests.
pub fn c2q_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_c2q"))
}

/// A certificate for 127.0.0.1, self-signed, written into `dir`: `(cert, key)`.
pub fn self_signed(dir: &Path) -> (PathBuf, PathBuf) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            "gw.key",
            "-out",
            "gw.pem",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir.join("gw.pem"), dir.join("gw.key"))
}
