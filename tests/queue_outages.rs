//! Outages of the services around the worker: a RabbitMQ restart, a PostgreSQL restart, and a
//! channel closed by the broker's consumer timeout. These tests change shared services, so they
//! run one at a time and restore what they changed, waiting until the service answers again.

mod queue_support;

use std::process::Command;
use std::time::{Duration, Instant};

use c2q::schema::Status;
use queue_support::*;

const T: Duration = Duration::from_secs(180);

/// One outage at a time within this binary.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().expect(cmd);
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn wait_until(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !f() {
        assert!(Instant::now() < deadline, "{what} did not come back");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn rabbit_up() -> bool {
    std::net::TcpStream::connect("127.0.0.1:5672").is_ok()
        && Command::new("rabbitmqctl")
            .args(["-q", "list_queues", "name"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
}

fn postgres_up() -> bool {
    Command::new("pg_isready")
        .args(["-h", "127.0.0.1", "-p", "5432"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Restores RabbitMQ even when the test fails half-way.
struct RabbitGuard;
impl Drop for RabbitGuard {
    fn drop(&mut self) {
        let _ = Command::new("rabbitmqctl").arg("start_app").output();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn rabbitmq_restart_mid_proof_loses_nothing() {
    let _serial = SERIAL.lock().await;
    let env = Env::new("rmq");
    let w = env.spawn_worker("w");
    let b = env.broker().await;
    publish_job(&b, &canary_job("rmq-1", 20, 41)).await;
    w.wait_log("partition proved", T).await;
    b.close().await;
    {
        let _guard = RabbitGuard;
        run("rabbitmqctl", &["stop_app"]);
        tokio::time::sleep(Duration::from_secs(3)).await;
        run("rabbitmqctl", &["start_app"]);
    }
    wait_until("RabbitMQ", rabbit_up).await;
    let b = env.broker().await;
    let r = result_for(&b, "rmq-1", T).await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    // A job submitted after the restart is proved by the reconnected worker.
    publish_job(&b, &canary_job("rmq-2", 1, 42)).await;
    assert_eq!(result_for(&b, "rmq-2", T).await.status, Status::Ok);
    let ledger = env.ledger().await;
    let row = wait_row(&ledger, "rmq-1", T, |r| r.status == "published").await;
    assert_eq!(row.proofs_computed, 1, "proved once");
    assert!(w.log().contains("reconnecting") || w.log().contains("RabbitMQ unavailable"));
    env.cleanup().await;
}

/// The worker's `c2q_jobs_in_flight` gauge, read from `/metrics`.
async fn jobs_in_flight(addr: &str) -> Option<i64> {
    let (_, metrics) = http_get(addr, "/metrics").await;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("c2q_jobs_in_flight "))
        .and_then(|v| v.trim().parse().ok())
}

/// A broker blip while a job proves: the job is still published and recorded, its delivery
/// (whose channel died with the old connection) is settled by the redelivery the ledger
/// answers, the in-flight gauge comes back to 0, and SIGTERM then drains at once instead of
/// waiting on an ack that the dead connection will never send.
#[tokio::test(flavor = "multi_thread")]
async fn drain_after_a_broker_blip_mid_proof_is_prompt() {
    let _serial = SERIAL.lock().await;
    let env = Env::new("blip");
    let mut w = env.spawn_worker("w");
    let addr = w.telemetry_addr().await;
    let b = env.broker().await;
    publish_job(&b, &canary_job("blip-1", 64, 71)).await;
    w.wait_log("partition proved", T).await;
    b.close().await;
    {
        let _guard = RabbitGuard;
        run("rabbitmqctl", &["stop_app"]);
        tokio::time::sleep(Duration::from_secs(10)).await;
        run("rabbitmqctl", &["start_app"]);
    }
    wait_until("RabbitMQ", rabbit_up).await;
    let b = env.broker().await;
    // The proof, and the answer to the redelivery of the job the broker took back when the
    // connection closed (from the ledger, or put off while the first was still publishing).
    let results = results_for(&b, "blip-1", 2, T).await;
    for r in &results {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert_eq!(r.proof, results[0].proof);
    }
    let ledger = env.ledger().await;
    let row = wait_row(&ledger, "blip-1", T, |r| r.status == "published").await;
    assert_eq!(row.proofs_computed, 1, "proved once");

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = jobs_in_flight(&addr).await;
        if n == Some(0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "c2q_jobs_in_flight stayed at {n:?}; log:\n{}",
            w.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stopping = Instant::now();
    w.signal(libc::SIGTERM);
    assert_eq!(w.wait_exit(Duration::from_secs(30)).await, Some(0));
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "drained slowly"
    );
    env.cleanup().await;
}

/// A client process whose stdout and stderr go to files in the test's directory.
struct Client {
    child: std::process::Child,
    name: &'static str,
    out: std::path::PathBuf,
    err: std::path::PathBuf,
}

impl Client {
    fn spawn(env: &Env, name: &'static str, mut cmd: Command) -> Client {
        let out = env.dir.path().join(format!("{name}.out"));
        let err = env.dir.path().join(format!("{name}.err"));
        let child = cmd
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        Client {
            child,
            name,
            out,
            err,
        }
    }

    /// Wait for exit: `(success, stdout, stderr)`.
    async fn finish(mut self, timeout: Duration) -> (bool, String, String) {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "{} still waiting after {timeout:?}: {}",
                    self.name,
                    std::fs::read_to_string(&self.err).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        (
            status.success(),
            std::fs::read_to_string(&self.out).unwrap_or_default(),
            std::fs::read_to_string(&self.err).unwrap_or_default(),
        )
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `c2q submit --wait` and the Python example producer keep waiting through a broker restart:
/// they reconnect, and their reply queues (durable, unlike an exclusive one) keep the results
/// published to them. Both delete their reply queue once they have their result.
#[tokio::test(flavor = "multi_thread")]
async fn waiting_clients_get_their_results_through_a_broker_restart() {
    let _serial = SERIAL.lock().await;
    let env = Env::new("waitrmq");
    let w = env.spawn_worker("w");
    let cfg = env.write_config("cli", &env.config);
    let mut submit = Command::new(c2q_bin());
    submit
        .args(["submit", "--canary", "--partitions", "64", "--seed", "81"])
        .args(["--miner", "1000", "--sector", "1", "--job-id", "wait-cli"])
        .args(["--wait", "--timeout", "170", "--config"])
        .arg(&cfg)
        .arg("--out")
        .arg(env.dir.path().join("cli.proof"));
    let cli = Client::spawn(&env, "c2q-submit", submit);
    let mut producer = Command::new("python3");
    producer
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/ops/examples/producer.py"
        ))
        .args([
            "--canary", "64", "--seed", "82", "--miner", "1000", "--sector", "2",
        ])
        .args([
            "--job-id",
            "wait-py",
            "--wait",
            "--timeout",
            "170",
            "--prefix",
        ])
        .arg(&env.prefix)
        .arg("--out")
        .arg(env.dir.path().join("py.proof"));
    let py = Client::spawn(&env, "producer.py", producer);
    w.wait_log("partition proved", T).await;
    {
        let _guard = RabbitGuard;
        run("rabbitmqctl", &["stop_app"]);
        tokio::time::sleep(Duration::from_secs(5)).await;
        run("rabbitmqctl", &["start_app"]);
    }
    wait_until("RabbitMQ", rabbit_up).await;
    for (client, id) in [(cli, "wait-cli"), (py, "wait-py")] {
        let name = client.name;
        let (ok, out, err) = client.finish(T).await;
        assert!(ok, "{name}: {out}{err}");
        assert!(out.contains(id), "{name}: {out}");
        assert!(
            out.contains("\"status\": \"ok\"") || out.contains("\"status\":\"ok\""),
            "{name}: {out}"
        );
        assert!(
            err.contains("reconnecting"),
            "{name} never lost its broker: {err}"
        );
    }
    let queues = run("rabbitmqctl", &["-q", "list_queues", "name"]);
    let reply = format!("{}.reply.", env.prefix);
    assert!(
        !queues.lines().any(|q| q.starts_with(&reply)),
        "a reply queue was left behind: {queues}"
    );
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_restart_mid_proof_loses_nothing() {
    let _serial = SERIAL.lock().await;
    let env = Env::new("pg");
    let w = env.spawn_worker("w");
    let b = env.broker().await;
    publish_job(&b, &canary_job("pg-1", 20, 51)).await;
    w.wait_log("partition proved", T).await;
    let restarted = Command::new("pg_ctlcluster")
        .args(["15", "main", "restart"])
        .status()
        .unwrap();
    assert!(restarted.success());
    wait_until("PostgreSQL", postgres_up).await;
    let r = result_for(&b, "pg-1", T).await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    publish_job(&b, &canary_job("pg-2", 1, 52)).await;
    assert_eq!(result_for(&b, "pg-2", T).await.status, Status::Ok);
    let ledger = env.ledger().await;
    let row = wait_row(&ledger, "pg-1", T, |r| r.status == "published").await;
    assert_eq!(row.proofs_computed, 1);
    env.cleanup().await;
}

/// Restores the broker's consumer timeout and channel tick.
struct TimeoutGuard {
    consumer_timeout: String,
    tick: String,
}

fn get_env(key: &str) -> String {
    run(
        "rabbitmqctl",
        &["eval", &format!("application:get_env(rabbit, {key}).")],
    )
    .trim()
    .to_string()
}

fn restore_expr(key: &str, saved: &str) -> String {
    match saved.strip_prefix("{ok,").and_then(|s| s.strip_suffix('}')) {
        Some(v) => format!("application:set_env(rabbit, {key}, {v})."),
        None => format!("application:unset_env(rabbit, {key})."),
    }
}

impl Drop for TimeoutGuard {
    fn drop(&mut self) {
        for (k, v) in [
            ("consumer_timeout", &self.consumer_timeout),
            ("channel_tick_interval", &self.tick),
        ] {
            let _ = Command::new("rabbitmqctl")
                .args(["eval", &restore_expr(k, v)])
                .output();
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn channel_closed_by_consumer_timeout_is_survived() {
    let _serial = SERIAL.lock().await;
    let env = Env::new("ctmo");
    let saved = (
        get_env("consumer_timeout"),
        get_env("channel_tick_interval"),
    );
    let guard = TimeoutGuard {
        consumer_timeout: saved.0.clone(),
        tick: saved.1.clone(),
    };
    // Channels read the tick interval when they open: set both before the worker starts.
    run(
        "rabbitmqctl",
        &[
            "eval",
            "application:set_env(rabbit, consumer_timeout, 3000).",
        ],
    );
    run(
        "rabbitmqctl",
        &[
            "eval",
            "application:set_env(rabbit, channel_tick_interval, 500).",
        ],
    );
    let w = env.spawn_worker("w");
    let b = env.broker().await;
    // The job must outlast the 3 s consumer timeout clearly: 64 partitions take ~5 s here
    // (40, ~3 s, sometimes finished before the broker's check came round).
    publish_job(&b, &canary_job("ctmo-1", 64, 61)).await;
    let first = result_for(&b, "ctmo-1", T).await;
    assert_eq!(first.status, Status::Ok);
    drop(guard);
    assert_eq!(get_env("consumer_timeout"), saved.0, "restored");
    assert_eq!(get_env("channel_tick_interval"), saved.1, "restored");
    let ledger = env.ledger().await;
    let row = wait_row(&ledger, "ctmo-1", T, |r| r.status == "published").await;
    assert_eq!(row.proofs_computed, 1, "proved once despite the redelivery");
    assert!(
        w.log().contains("channel lost") || w.log().contains("ack failed"),
        "the channel was not closed: {}",
        w.log()
    );
    // The redelivery waited for the proof instead of proving again, and was answered from the
    // ledger.
    let second = result_for(&b, "ctmo-1", T).await;
    assert!(second.from_ledger, "{second:?}");
    assert_eq!(second.proof, first.proof);
    assert_eq!(depth(&b, &b.names.jobs_queue()).await, 0);
    assert_eq!(depth(&b, &b.names.wait_queue()).await, 0);
    env.cleanup().await;
}
