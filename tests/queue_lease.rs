//! Leases: one job is never proved by two workers at once. A second delivery of a job that is
//! being proved (a duplicate message, a redelivery) waits and is then answered from the
//! ledger with the same proof; a dead worker's lease lapses and the job is taken over.

mod queue_support;

use std::time::{Duration, Instant};

use c2q::ledger::{Claim, Holder, JobIdentity};
use c2q::schema::Status;
use queue_support::*;

const T: Duration = Duration::from_secs(90);

async fn stop(w: &mut WorkerProc) {
    w.signal(libc::SIGTERM);
    assert_eq!(w.wait_exit(T).await, Some(0), "{}", w.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_published_twice_is_proved_once_by_two_workers() {
    let env = Env::new("lease2");
    let config = one_job_at_a_time(&env.config);
    let mut a = env.spawn_worker_with("A", &config);
    let mut b_worker = env.spawn_worker_with("B", &config);
    a.wait_log("worker started", T).await;
    b_worker.wait_log("worker started", T).await;
    let b = env.broker().await;
    let ledger = env.ledger().await;

    let job = canary_job("twice-1", 24, 31);
    publish_job(&b, &job).await;
    // Whoever took it holds the lease; the same message again must go to the other worker.
    let row = wait_row(&ledger, "twice-1", T, |r| r.lease_holder.is_some()).await;
    let prover = row.worker.clone().expect("the lease names a worker");
    publish_job(&b, &job).await;

    let results = results_for(&b, "twice-1", 2, T).await;
    for r in &results {
        assert_eq!(r.status, Status::Ok, "{r:?}");
    }
    assert_eq!(
        results[0].proof, results[1].proof,
        "both answers carry the same proof"
    );
    let fresh: Vec<_> = results.iter().filter(|r| !r.from_ledger).collect();
    assert_eq!(fresh.len(), 1, "exactly one computed proof: {results:?}");
    assert_eq!(fresh[0].worker, prover);
    let row = wait_row(&ledger, "twice-1", T, |r| r.status == "published").await;
    assert_eq!(row.proofs_computed, 1);
    assert_eq!(row.lease_holder, None, "the lease ended with the proof");

    let waiter = if prover == "A" { &b_worker } else { &a };
    assert!(
        waiter
            .log()
            .contains("job is being proved by another worker (its lease is live)"),
        "the second delivery did not meet the lease: {}",
        waiter.log()
    );
    assert!(
        !waiter.log().contains("\"proving\""),
        "the second worker started proving: {}",
        waiter.log()
    );
    // Both deliveries were acked: nothing returns to the queues when the workers stop.
    stop(&mut a).await;
    stop(&mut b_worker).await;
    for q in [b.names.jobs_queue(), b.names.wait_queue(), b.names.dlq()] {
        assert_eq!(depth(&b, &q).await, 0, "{q}");
    }
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_delivered_twice_to_one_worker_is_proved_once() {
    let env = Env::new("lease1");
    let mut w = env.spawn_worker("w");
    w.wait_log("worker started", T).await;
    let b = env.broker().await;
    let job = canary_job("twice-local", 12, 32);
    publish_job(&b, &job).await;
    publish_job(&b, &job).await;

    let results = results_for(&b, "twice-local", 2, T).await;
    assert!(
        results.iter().all(|r| r.status == Status::Ok),
        "{results:?}"
    );
    assert_eq!(results[0].proof, results[1].proof);
    assert_eq!(results.iter().filter(|r| r.from_ledger).count(), 1);
    let ledger = env.ledger().await;
    let row = wait_row(&ledger, "twice-local", T, |r| r.status == "published").await;
    assert_eq!(row.proofs_computed, 1);
    assert!(
        w.log().contains("(this worker)"),
        "the second delivery was not put off: {}",
        w.log()
    );
    stop(&mut w).await;
    assert_eq!(depth(&b, &b.names.jobs_queue()).await, 0);
    assert_eq!(depth(&b, &b.names.wait_queue()).await, 0);
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_workers_lease_lapses_and_another_worker_takes_the_job_over() {
    let env = Env::new("leasex");
    let mut config = env.config.clone();
    // Long enough that the second worker surely starts while the lease is still live.
    config.lease.duration_s = 8;
    config.lease.renew_s = 2;
    let first = env.spawn_worker_with("first", &config);
    let b = env.broker().await;
    publish_job(&b, &canary_job("lapse-1", 30, 33)).await;
    first.wait_log("partition proved", T).await;
    first.signal(libc::SIGKILL);
    let killed = Instant::now();

    let second = env.spawn_worker_with("second", &config);
    let r = result_for(&b, "lapse-1", T).await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.worker, "second");
    assert!(!r.from_ledger);
    assert_eq!(r.attempts, 2, "taken over: a second start");
    let log = second.log();
    let waited = log
        .find("job is being proved by another worker")
        .expect("the second worker first found the dead worker's live lease");
    let proving = log.find("\"proving\"").expect("then proved it");
    assert!(waited < proving, "{log}");
    // It did not take the job before the lease (renewed at most `renew_s` before the kill)
    // could have lapsed.
    let took = killed.elapsed();
    assert!(took >= Duration::from_secs(5), "taken over after {took:?}");
    let ledger = env.ledger().await;
    let row = wait_row(&ledger, "lapse-1", T, |r| r.status == "published").await;
    assert_eq!(row.proofs_computed, 1);
    env.cleanup().await;
}

fn identity(job_id: &str, digest: u8) -> JobIdentity {
    JobIdentity {
        job_id: job_id.into(),
        kind: "canary".into(),
        registered_proof: "canary".into(),
        miner_id: 1000,
        sector_number: 1,
        digest: [digest; 32],
    }
}

fn holder(name: &str, lease: Duration) -> Holder {
    Holder {
        worker: name.into(),
        token: format!("{name}/token"),
        lease,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn ledger_leases_exclude_others_until_released_or_lapsed() {
    let env = Env::new("leasedb");
    let ledger = env.ledger().await;
    let lease = Duration::from_millis(1500);
    let (h1, h2) = (holder("h1", lease), holder("h2", lease));
    let job = identity("lease-db-1", 1);

    assert_eq!(
        ledger.claim(&job, &h1).await.unwrap(),
        Claim::Prove { attempts: 1 }
    );
    match ledger.claim(&job, &h2).await.unwrap() {
        Claim::Busy { worker, lease_left } => {
            assert_eq!(worker, "h1");
            assert!(lease_left > Duration::ZERO && lease_left <= lease);
        }
        other => panic!("expected Busy, got {other:?}"),
    }
    // Renewal keeps it; only the holder can renew.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(ledger.renew_lease("lease-db-1", &h1).await.unwrap());
    assert!(!ledger.renew_lease("lease-db-1", &h2).await.unwrap());
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(matches!(
        ledger.claim(&job, &h2).await.unwrap(),
        Claim::Busy { .. }
    ));
    // Unrenewed, it lapses and is taken over.
    tokio::time::sleep(lease).await;
    assert_eq!(
        ledger.claim(&job, &h2).await.unwrap(),
        Claim::Prove { attempts: 2 }
    );
    assert!(!ledger.renew_lease("lease-db-1", &h1).await.unwrap());
    // Both proved: the proof recorded first is the proof of record.
    let first = ledger
        .record_proof("lease-db-1", b"first", "[]", &Default::default())
        .await
        .unwrap();
    let second = ledger
        .record_proof("lease-db-1", b"second", "[]", &Default::default())
        .await
        .unwrap();
    assert_eq!(
        (first.proof.as_slice(), first.cancelled),
        (&b"first"[..], false)
    );
    assert_eq!(
        (second.proof.as_slice(), second.cancelled),
        (&b"first"[..], false)
    );
    let row = ledger.get("lease-db-1").await.unwrap().unwrap();
    assert_eq!(row.proofs_computed, 2);
    assert_eq!(row.lease_holder, None);
    assert!(matches!(
        ledger.claim(&job, &h1).await.unwrap(),
        Claim::Proved { .. }
    ));

    // A released lease is free at once.
    let other = identity("lease-db-2", 2);
    assert!(matches!(
        ledger.claim(&other, &h1).await.unwrap(),
        Claim::Prove { .. }
    ));
    ledger.release_lease("lease-db-2", &h1).await.unwrap();
    assert_eq!(
        ledger.claim(&other, &h2).await.unwrap(),
        Claim::Prove { attempts: 2 }
    );
    env.cleanup().await;
}
