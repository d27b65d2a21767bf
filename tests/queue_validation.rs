//! Jobs that decode but cannot mean anything fail at once, permanently, as `invalid_input`: a
//! miner id or sector number beyond 2^63 − 1, a canary of 0 partitions, a body `job_id` that
//! contradicts the AMQP `message_id`. None is retried or reaches the ledger.

mod queue_support;

use std::time::{Duration, Instant};

use c2q::ledger::{Holder, JobIdentity};
use c2q::schema::{self, CanarySpec, ErrorKind, Status};
use queue_support::*;

/// Much less than a transient failure takes to exhaust its retries (the ledger alone keeps
/// trying for a minute before the first retry).
const AT_ONCE: Duration = Duration::from_secs(30);
const T: Duration = Duration::from_secs(60);

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
