//! Jobs that decode but cannot mean anything fail at once, permanently, as `invalid_input`:
//! a miner id or sector number beyond 2^63 − 1, a canary of 0 partitions, a body `job_id` that
//! contradicts the AMQP `message_id`. None is retried or reaches the ledger, and `c2q dlq`
//! shows what they decoded to. Every dead letter, even one without a `message_id`, has an
//! address `c2q dlq show` and `replay` accept.

mod queue_support;

use std::time::{Duration, Instant};

use c2q::broker::headers;
use c2q::ledger::{Holder, JobIdentity};
use c2q::schema::{self, CanarySpec, ErrorKind, Status};
use lapin::options::BasicGetOptions;
use queue_support::*;
use sha2::{Digest, Sha256};

/// Much less than a transient failure takes to exhaust its retries (the ledger alone keeps
/// trying for a minute before the first retry).
const AT_ONCE: Duration = Duration::from_secs(30);
const T: Duration = Duration::from_secs(60);

/// The `dlq list` line of a job id: its whitespace-separated columns (address, job id, reason,
/// attempts, miner, sector, error…).
fn dlq_columns<'a>(list: &'a str, job_id: &str) -> Vec<&'a str> {
    list.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|c| c.get(1) == Some(&job_id))
        .unwrap_or_else(|| panic!("{job_id} not in:\n{list}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_fields_fail_at_once_as_invalid_input_without_retry_or_ledger() {
    let env = Env::new("invalid");
    let worker = env.spawn_worker("w1");
    let b = env.broker().await;

    let mut huge_miner = canary_job("inv-miner", 1, 1);
    huge_miner.miner_id = u64::MAX;
    let mut huge_sector = canary_job("inv-sector", 1, 2);
    huge_sector.sector_number = u64::MAX;
    let mut no_partitions = canary_job("inv-zero", 1, 3);
    no_partitions.canary = Some(CanarySpec {
        partitions: 0,
        seed: 3,
    });
    let other_id = canary_job("inv-body", 1, 4);
    let started = Instant::now();
    for job in [&huge_miner, &huge_sector, &no_partitions] {
        publish_job(&b, job).await;
    }
    let encoded = schema::job::encode(&other_id).unwrap();
    publish_raw(&b, "inv-amqp", &encoded).await;

    let ids = ["inv-miner", "inv-sector", "inv-zero", "inv-body"];
    let results = results_of(&b, &ids, AT_ONCE).await;
    assert!(started.elapsed() < AT_ONCE);
    for r in &results {
        assert_eq!(r.status, Status::Failed, "{r:?}");
        let err = r.error.as_ref().unwrap();
        assert_eq!(err.kind, ErrorKind::InvalidInput, "{r:?}");
        assert_eq!(r.attempts, 0, "not retried: {r:?}");
        // The failed result echoes what the job decoded to.
        assert_eq!(r.kind, "canary", "{r:?}");
        let expected = match r.job_id.as_str() {
            "inv-miner" => "miner id 18446744073709551615",
            "inv-sector" => "sector number 18446744073709551615",
            "inv-zero" => "0 partitions",
            _ => "\"inv-body\" in the message body differs from the AMQP message_id \"inv-amqp\"",
        };
        assert!(err.message.contains(expected), "{}", err.message);
    }
    let miner_echo = results.iter().find(|r| r.job_id == "inv-miner").unwrap();
    assert_eq!(miner_echo.miner_id, u64::MAX);

    wait_depth(&b, &b.names.dlq(), ids.len() as u32, T).await;
    for attempt in 1..=env.config.retry.max_retries {
        assert_eq!(depth(&b, &b.names.retry_queue(attempt)).await, 0);
    }
    assert!(!worker.log().contains("retrying later"), "{}", worker.log());
    // Nothing reached the ledger, under either id of the contradictory message.
    let ledger = env.ledger().await;
    for id in ids.iter().chain(&["inv-amqp"]) {
        assert!(
            ledger.get(id).await.unwrap().is_none(),
            "{id} in the ledger"
        );
    }

    // The operator sees the miner and sector the jobs decoded to (dead letters are addressed
    // by their AMQP message_id, the id the producer published under).
    let (ok, list, err) = c2q_cli(&env, &["dlq", "list"]);
    assert!(ok, "{err}");
    for (id, miner, sector) in [
        ("inv-miner", "18446744073709551615", "1"),
        ("inv-sector", "1000", "18446744073709551615"),
        ("inv-zero", "1000", "1"),
        ("inv-amqp", "1000", "1"),
    ] {
        let c = dlq_columns(&list, id);
        assert_eq!(c[2], "invalid_input", "{list}");
        assert_eq!((c[4], c[5]), (miner, sector), "{id}: {list}");
    }
    let (ok, show, err) = c2q_cli(&env, &["dlq", "show", "inv-miner"]);
    assert!(ok, "{err}");
    let shown: serde_json::Value = serde_json::from_str(&show).unwrap();
    assert_eq!(shown["miner"], u64::MAX, "{show}");
    assert_eq!(shown["job"]["miner_id"], u64::MAX, "{show}");
    assert!(
        shown["job"]["invalid"]
            .as_str()
            .unwrap()
            .contains("invalid_input"),
        "{show}"
    );

    // The ledger itself refuses such an id at once instead of retrying it as an outage.
    let identity = JobIdentity {
        job_id: "inv-ledger".into(),
        kind: "canary".into(),
        registered_proof: "canary".into(),
        miner_id: u64::MAX,
        sector_number: 1,
        digest: [0; 32],
    };
    let holder = Holder {
        worker: "test".into(),
        token: "test".into(),
        lease: Duration::from_secs(5),
    };
    let asked = Instant::now();
    let refused = ledger.claim(&identity, &holder).await.unwrap_err();
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "retried: {refused:#}"
    );
    assert!(
        format!("{refused:#}").contains("does not fit"),
        "{refused:#}"
    );
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_dead_letter_has_an_address_that_dlq_show_and_replay_accept() {
    let env = Env::new("dlqaddr");
    let mut worker = env.spawn_worker("w1");
    let b = env.broker().await;
    // Neither a job nor addressed: no message_id, no job_id to peek.
    let junk = b"not a job, and no message_id";
    publish_raw_as(&b, None, junk).await;
    // Decodes, but asks for more canary partitions than the worker allows.
    publish_job(&b, &canary_job("addr-big", 100, 5)).await;
    wait_depth(&b, &b.names.dlq(), 2, T).await;
    worker.signal(libc::SIGTERM);
    assert_eq!(worker.wait_exit(T).await, Some(0));

    let address = hex::encode(&Sha256::digest(junk)[..6]);
    let (ok, list, err) = c2q_cli(&env, &["dlq", "list"]);
    assert!(ok, "{err}");
    let junk_line: Vec<&str> = list
        .lines()
        .find(|l| l.starts_with(&address))
        .unwrap_or_else(|| panic!("no line for {address}:\n{list}"))
        .split_whitespace()
        .collect();
    assert_eq!(&junk_line[1..3], ["-", "undecodable"], "{list}");
    assert_eq!(
        &junk_line[4..6],
        ["-", "-"],
        "no made-up miner or sector: {list}"
    );
    let oversize = dlq_columns(&list, "addr-big");
    assert_eq!(oversize[2], "oversize", "{list}");

    let (ok, show, err) = c2q_cli(&env, &["dlq", "show", &address]);
    assert!(ok, "{err}");
    let shown: serde_json::Value = serde_json::from_str(&show).unwrap();
    assert_eq!(shown["address"], address.as_str(), "{show}");
    assert_eq!(shown["reason"], "undecodable", "{show}");
    assert!(shown["miner"].is_null(), "{show}");
    assert!(shown["job"]["undecodable"].is_string(), "{show}");
    // The other one by its address too, and by its job id, alike.
    let (ok, by_id, _) = c2q_cli(&env, &["dlq", "show", "addr-big"]);
    assert!(ok);
    let by_id: serde_json::Value = serde_json::from_str(&by_id).unwrap();
    let (ok, by_address, _) = c2q_cli(&env, &["dlq", "show", oversize[0]]);
    assert!(ok);
    assert_eq!(
        by_id,
        serde_json::from_str::<serde_json::Value>(&by_address).unwrap()
    );
    let (ok, _, err) = c2q_cli(&env, &["dlq", "show", "000000000000"]);
    assert!(!ok && err.contains("no dead-lettered job"), "{err}");

    let (ok, out, err) = c2q_cli(&env, &["dlq", "replay", &address]);
    assert!(ok, "{err}");
    assert!(out.contains("replayed 1 jobs"), "{out}");
    assert_eq!(depth(&b, &b.names.dlq()).await, 1);
    let back = b
        .fetch
        .basic_get(
            b.names.jobs_queue().into(),
            BasicGetOptions { no_ack: false },
        )
        .await
        .unwrap()
        .expect("the replayed message in the job queue");
    assert_eq!(back.delivery.data, junk);
    assert_eq!(
        headers::get_str(&back.delivery.properties, headers::REASON),
        None
    );
    env.cleanup().await;
}

/// A job whose deadline has passed when a worker would begin proving it is answered failed
/// (`deadline_exceeded`) at once, without a retry, and dead-lettered; one whose deadline is
/// ahead is proved as usual.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_past_its_deadline_is_answered_failed_not_proved_late() {
    let env = Env::new("deadline");
    let _worker = env.spawn_worker("w1");
    let b = env.broker().await;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let mut late = canary_job("dl-late", 1, 11);
    late.deadline_unix_ms = Some(now_ms - 1_000);
    let mut in_time = canary_job("dl-in-time", 1, 12);
    in_time.deadline_unix_ms = Some(now_ms + 600_000);
    publish_job(&b, &late).await;
    publish_job(&b, &in_time).await;
    for r in results_of(&b, &["dl-late", "dl-in-time"], T).await {
        if r.job_id == "dl-late" {
            assert_eq!(r.status, Status::Failed, "{r:?}");
            let err = r.error.as_ref().unwrap();
            assert_eq!(err.kind, ErrorKind::DeadlineExceeded, "{r:?}");
            assert!(err.message.contains("deadline passed"), "{}", err.message);
        } else {
            assert_eq!(r.status, Status::Ok, "{r:?}");
        }
    }
    wait_depth(&b, &b.names.dlq(), 1, T).await;
    for attempt in 1..=env.config.retry.max_retries {
        assert_eq!(
            depth(&b, &b.names.retry_queue(attempt)).await,
            0,
            "not retried"
        );
    }
    env.cleanup().await;
}
