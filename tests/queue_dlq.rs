//! Poison jobs and the operator's dead-letter tools: a job whose deliveries keep coming back
//! unacked reaches the job queue's delivery limit and is dead-lettered with a reason
//! `c2q dlq list/show` explain; `c2q dlq replay --all` and `c2q dlq purge`.

mod queue_support;

use std::time::Duration;

use c2q::broker::headers;
use c2q::schema::Status;
use lapin::options::{BasicGetOptions, BasicNackOptions};
use queue_support::*;

const T: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread")]
async fn a_job_returned_unacked_past_the_delivery_limit_is_dead_lettered_by_rabbitmq() {
    let mut env = Env::new("poison");
    env.config.broker.delivery_limit = 2;
    let b = env.broker().await;
    publish_job(&b, &canary_job("poison-1", 1, 80)).await;

    // A consumer that takes the job and gives it back unacked, as a worker that crashes on it
    // would, until the queue stops handing it out.
    let mut deliveries = 0;
    for _ in 0..20 {
        let got = b
            .fetch
            .basic_get(
                b.names.jobs_queue().into(),
                BasicGetOptions { no_ack: false },
            )
            .await
            .unwrap();
        let Some(m) = got else {
            if depth(&b, &b.names.dlq()).await == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        deliveries += 1;
        m.delivery
            .acker
            .nack(BasicNackOptions {
                requeue: true,
                ..Default::default()
            })
            .await
            .unwrap();
    }
    wait_depth(&b, &b.names.dlq(), 1, T).await;
    assert_eq!(depth(&b, &b.names.jobs_queue()).await, 0);
    // RabbitMQ counts returns: the limit allows that many redeliveries after the first.
    assert_eq!(
        deliveries, 3,
        "delivery_limit 2: delivered {deliveries} times"
    );

    let (ok, list, err) = c2q_cli(&env, &["dlq", "list"]);
    assert!(ok, "{err}");
    let line = list
        .lines()
        .find(|l| l.contains("poison-1"))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(line.contains("delivery_limit"), "{list}");
    assert!(line.contains("returned unacked"), "{list}");
    // RabbitMQ dead-lettered it without the worker's headers: miner and sector come from the
    // job itself.
    let columns: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&columns[4..6], ["1000", "1"], "{list}");
    let (ok, show, err) = c2q_cli(&env, &["dlq", "show", "poison-1"]);
    assert!(ok, "{err}");
    let shown: serde_json::Value = serde_json::from_str(&show).unwrap();
    assert_eq!(shown["reason"], "delivery_limit", "{show}");
    assert!(
        shown["error"]
            .as_str()
            .unwrap()
            .contains("workers died or lost their channel"),
        "{show}"
    );
    assert_eq!(shown["job"]["kind"], "canary");
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_that_kills_every_worker_ends_in_the_dead_letter_queue() {
    let mut env = Env::new("poisonk");
    env.config.broker.delivery_limit = 2;
    // Long enough that each next worker starts while its predecessor's lease is still live.
    env.config.lease.duration_s = 6;
    env.config.lease.renew_s = 2;
    let b = env.broker().await;
    publish_job(&b, &canary_job("killer-1", 30, 81)).await;
    // Each worker dies (kill -9) while proving the job, as if the job crashed it. The next
    // worker finds the dead one's lease, puts the job off until the lease lapses, then takes
    // it over: the put-off copies must not reset the count of unacked deliveries.
    for round in 0..3 {
        let w = env.spawn_worker(&format!("victim-{round}"));
        w.wait_log("partition proved", T).await;
        w.signal(libc::SIGKILL);
    }
    let last = env.spawn_worker("last");
    wait_depth(&b, &b.names.dlq(), 1, T).await;
    last.wait_log("job dead-lettered", T).await;
    assert!(!last.log().contains("\"proving\""), "{}", last.log());

    let dead = next_message(&b, &b.names.dlq(), T).await.unwrap();
    assert_eq!(
        headers::get_str(&dead.properties, headers::REASON).as_deref(),
        Some("delivery_limit")
    );
    let error = headers::get_str(&dead.properties, headers::ERROR).unwrap();
    assert!(
        error.contains("delivered 3 times without being settled"),
        "{error}"
    );
    let ledger = env.ledger().await;
    let row = ledger.get("killer-1").await.unwrap().unwrap();
    assert_eq!(row.attempts, 3, "three workers started it");
    assert_eq!(row.proofs_computed, 0);
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dlq_replay_all_resets_attempts_and_purge_reports_the_count() {
    let env = Env::new("dlqcli");
    let mut faulty = env.config.clone();
    faulty.pipeline.fault = Some("backend-error".into());
    faulty.pipeline.max_backend_failures = 100;
    faulty.retry.max_retries = 1;
    let mut w = env.spawn_worker_with("faulty", &faulty);
    let b = env.broker().await;
    let ids = ["replay-1", "replay-2", "replay-3"];
    for (i, id) in ids.iter().enumerate() {
        publish_job(&b, &canary_job(id, 1, 90 + i as u64)).await;
    }
    wait_depth(&b, &b.names.dlq(), 3, T).await;
    for r in results_of(&b, &ids, T).await {
        assert_eq!(r.status, Status::Failed, "{r:?}");
    }
    w.signal(libc::SIGTERM);
    assert_eq!(w.wait_exit(T).await, Some(0));

    let (ok, list, err) = c2q_cli(&env, &["dlq", "list"]);
    assert!(ok, "{err}");
    for id in ids {
        let line = list.lines().find(|l| l.contains(id)).unwrap();
        assert!(line.contains("retries_exhausted"), "{list}");
        let columns: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(columns[1], id, "{line}");
        assert_eq!(columns[3], "1", "one retry before dead-lettering: {line}");
    }
    assert!(list.contains("3 dead-lettered"), "{list}");

    let (ok, out, err) = c2q_cli(&env, &["dlq", "replay", "--all"]);
    assert!(ok, "{err}");
    assert!(out.contains("replayed 3 jobs"), "{out}");
    assert_eq!(depth(&b, &b.names.dlq()).await, 0);
    // Back in the job queue with their retry budgets reset (looked at, then handed back).
    let mut held = Vec::new();
    for _ in 0..3 {
        let m = b
            .fetch
            .basic_get(
                b.names.jobs_queue().into(),
                BasicGetOptions { no_ack: false },
            )
            .await
            .unwrap()
            .expect("replayed job in the job queue");
        let p = &m.delivery.properties;
        assert_eq!(headers::attempts(p), 0);
        assert_eq!(headers::get_str(p, headers::REASON), None);
        held.push(m.delivery);
    }
    for d in held {
        let requeue = BasicNackOptions {
            requeue: true,
            ..Default::default()
        };
        d.acker.nack(requeue).await.unwrap();
    }

    let _healthy = env.spawn_worker("healthy");
    for r in results_of(&b, &ids, T).await {
        assert_eq!(r.status, Status::Ok, "{r:?}");
    }

    // Purge: two undecodable messages, dead-lettered at once, then deleted.
    publish_raw(&b, "junk-1", b"not a job").await;
    publish_raw(&b, "junk-2", b"not a job either").await;
    wait_depth(&b, &b.names.dlq(), 2, T).await;
    let (ok, out, err) = c2q_cli(&env, &["dlq", "purge"]);
    assert!(ok, "{err}");
    assert!(out.contains("purged 2 dead-lettered jobs"), "{out}");
    assert_eq!(depth(&b, &b.names.dlq()).await, 0);
    let (ok, list, _) = c2q_cli(&env, &["dlq", "list"]);
    assert!(ok && list.contains("0 dead-lettered"), "{list}");
    env.cleanup().await;
}
