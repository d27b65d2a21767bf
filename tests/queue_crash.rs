//! Worker death and shutdown: `kill -9` between publish and ack, `kill -9` mid-proof, graceful
//! drain on SIGTERM, and a second SIGINT that exits at once.

mod queue_support;

use std::time::{Duration, Instant};

use c2q::schema::Status;
use queue_support::*;

const T: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_between_publish_and_ack_does_not_prove_twice() {
    let env = Env::new("kpub");
    let mut config = env.config.clone();
    config.pipeline.fault = Some("kill-after-publish".into());
    let mut doomed = env.spawn_worker_with("doomed", &config);
    let b = env.broker().await;
    publish_job(&b, &canary_job("kpub-1", 2, 11)).await;
    let first = result_for(&b, "kpub-1", T).await;
    assert_eq!(first.status, Status::Ok);
    assert_eq!(doomed.wait_exit(T).await, None, "killed by SIGKILL");
    let ledger = env.ledger().await;
    assert_eq!(
        ledger.get("kpub-1").await.unwrap().unwrap().status,
        "proved"
    );

    // The unacked job comes back; a healthy worker answers it from the ledger.
    let _w = env.spawn_worker("healthy");
    let second = result_for(&b, "kpub-1", T).await;
    assert_eq!(second.status, Status::Ok);
    assert!(second.from_ledger, "{second:?}");
    assert_eq!(second.proof, first.proof);
    let row = wait_row(&ledger, "kpub-1", T, |r| r.status == "published").await;
    assert_eq!(row.proofs_computed, 1);
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_mid_proof_loses_nothing() {
    let env = Env::new("kmid");
    let w1 = env.spawn_worker("first");
    let b = env.broker().await;
    publish_job(&b, &canary_job("kmid-1", 30, 12)).await;
    w1.wait_log("partition proved", T).await;
    w1.signal(libc::SIGKILL);
    let _w2 = env.spawn_worker("second");
    let r = result_for(&b, "kmid-1", T).await;
    assert_eq!(r.status, Status::Ok);
    assert_eq!(r.worker, "second");
    assert_eq!(r.attempts, 2);
    let ledger = env.ledger().await;
    let row = wait_row(&ledger, "kmid-1", T, |r| r.status == "published").await;
    assert_eq!(row.proofs_computed, 1);
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_drains_in_flight_jobs_and_exits_zero() {
    let env = Env::new("drain");
    let mut w = env.spawn_worker("w");
    let b = env.broker().await;
    publish_job(&b, &canary_job("drain-1", 12, 13)).await;
    w.wait_log("\"proving\"", T).await;
    w.signal(libc::SIGTERM);
    w.wait_log("SIGTERM: draining", T).await;
    // Published after the signal: must stay in the queue for another worker.
    publish_job(&b, &canary_job("drain-2", 1, 14)).await;
    assert_eq!(w.wait_exit(T).await, Some(0), "{}", w.log());
    let r = result_for(&b, "drain-1", T).await;
    assert_eq!(r.status, Status::Ok);
    let ledger = env.ledger().await;
    assert_eq!(
        ledger.get("drain-1").await.unwrap().unwrap().status,
        "published"
    );
    assert!(ledger.get("drain-2").await.unwrap().is_none());
    assert_eq!(
        depth(&b, &b.names.jobs_queue()).await,
        1,
        "drain-1 acked, drain-2 untouched"
    );
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn second_sigint_exits_at_once_and_the_job_is_redelivered() {
    let env = Env::new("sigint");
    let mut w = env.spawn_worker("w");
    let b = env.broker().await;
    publish_job(&b, &canary_job("sigint-1", 40, 15)).await;
    w.wait_log("\"proving\"", T).await;
    let t = Instant::now();
    w.signal(libc::SIGINT);
    w.wait_log("SIGINT: draining", T).await;
    w.signal(libc::SIGINT);
    assert_eq!(w.wait_exit(T).await, Some(130));
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "exit took {:?}",
        t.elapsed()
    );
    // Back in the queue (the connection died with the process).
    let deadline = Instant::now() + T;
    while depth(&b, &b.names.jobs_queue()).await != 1 {
        assert!(Instant::now() < deadline, "job not returned to the queue");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    env.cleanup().await;
}
