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
