//! The worker's main paths against the real broker and database: a job proved, published,
//! acked and recorded; duplicates answered from the ledger; every bad-input class failed and
//! dead-lettered with its reason; transient failures retried, then dead-lettered; the DLQ CLI.

mod queue_support;

use std::time::Duration;

use c2q::schema::{ErrorKind, JobKind, JobV1, Status};
use queue_support::*;

const T: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread")]
async fn canary_job_is_proved_published_acked_and_recorded_with_overlapping_stages() {
    let env = Env::new("flow");
    let worker = env.spawn_worker("w1");
    let addr = worker.telemetry_addr().await;
    let b = env.broker().await;
    let job = canary_job("flow-1", 6, 42);
    publish_job(&b, &job).await;

    let r = result_for(&b, "flow-1", T).await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.proof.as_ref().map(Vec::len), Some(6 * 192));
    assert!(!r.from_ledger);
    assert_eq!(r.worker, "w1");
    assert_eq!(r.kind, "canary");

    // Stages overlap: some partition's proving start runs while a later one is synthesized
    // or an earlier one finalized.
    let t = &r.timings;
    assert_eq!(t.len(), 6);
    let overlaps = t.windows(2).any(|w| {
        let (a, b) = (&w[0], &w[1]);
        b.synth_start_ms < a.start_end_ms || b.start_start_ms < a.finish_end_ms
    });
    assert!(overlaps, "no stage overlap in {t:?}");

    let ledger = env.ledger().await;
    let row = wait_row(&ledger, "flow-1", T, |r| r.status == "published").await;
    assert_eq!(row.proofs_computed, 1);
    assert!(row.has_proof);
    assert_eq!(depth(&b, &b.names.jobs_queue()).await, 0, "job was acked");

    let (code, metrics) = http_get(&addr, "/metrics").await;
    assert_eq!(code, 200);
    assert!(
        metrics.contains("c2q_jobs_total{outcome=\"proved\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("c2q_stage_seconds_count{stage=\"synthesis\"} 6"));
    assert!(metrics.contains("c2q_stage_seconds_count{stage=\"finish\"} 6"));
    assert!(metrics.contains("c2q_gate_budget_bytes"));
    assert!(metrics.contains("c2q_queue_wait_seconds_count 1"));
    assert_eq!(http_get(&addr, "/healthz").await.0, 200);
    assert_eq!(http_get(&addr, "/readyz").await.0, 200);
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn partitions_of_two_jobs_overlap_in_one_worker() {
    let env = Env::new("overlap2");
    let worker = env.spawn_worker("w1");
    worker.wait_log("worker started", T).await;
    let b = env.broker().await;
    publish_job(&b, &canary_job("overlap-a", 8, 43)).await;
    publish_job(&b, &canary_job("overlap-b", 8, 44)).await;
    let mut results = results_of(&b, &["overlap-a", "overlap-b"], T).await;
    for r in &results {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert_eq!(r.timings.len(), 8);
        assert!(r.timings_origin_ms > 0);
    }
    // On one time line (Unix ms): the job that entered the pipeline first, and the other.
    results.sort_by_key(|r| r.timings_origin_ms);
    let at = |r: &c2q::schema::ResultV1, ms: u64| r.timings_origin_ms + ms;
    let (first, second) = (&results[0], &results[1]);
    let first_last_start_end = first
        .timings
        .iter()
        .map(|t| at(first, t.start_end_ms))
        .max()
        .unwrap();
    let second_begun = second
        .timings
        .iter()
        .map(|t| at(second, t.synth_start_ms))
        .min()
        .unwrap();
    // The second job's synthesis began while a partition of the first was still in proving
    // start, not after the first job was done.
    assert!(
        second_begun < first_last_start_end,
        "no overlap: job 2 began at {second_begun}, job 1's last proving start ended at \
         {first_last_start_end}: {results:?}"
    );
    let ledger = env.ledger().await;
    for id in ["overlap-a", "overlap-b"] {
        let row = wait_row(&ledger, id, T, |r| r.status == "published").await;
        assert_eq!(row.proofs_computed, 1);
    }
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn duplicates_are_answered_from_the_ledger_and_reused_ids_rejected() {
    let env = Env::new("dup");
    let _worker = env.spawn_worker("w1");
    let b = env.broker().await;
    publish_job(&b, &canary_job("dup-1", 2, 7)).await;
    let first = result_for(&b, "dup-1", T).await;
    assert_eq!(first.status, Status::Ok);

    // Same id, same payload: the same proof, not proved again.
    publish_job(&b, &canary_job("dup-1", 2, 7)).await;
    let second = result_for(&b, "dup-1", T).await;
    assert_eq!(second.status, Status::Ok);
    assert!(second.from_ledger);
    assert_eq!(second.proof, first.proof);
    let ledger = env.ledger().await;
    let row = wait_row(&ledger, "dup-1", T, |r| r.status == "published").await;
    assert_eq!(row.proofs_computed, 1);

    // Same id, different payload: rejected, with a result of the rejected message's own
    // identity, so that a consumer deduplicating by job_id never sees `failed` for dup-1.
    // Read as a consumer written from the schema reads it: a map of named fields.
    publish_job(&b, &canary_job("dup-1", 2, 8)).await;
    let reply = next_message(&b, &b.names.results(), T)
        .await
        .expect("the rejection's result");
    let third: serde_json::Value = rmp_serde::from_slice(&reply.data).unwrap();
    assert_eq!(third["status"], "failed", "{third}");
    assert_eq!(third["error"]["kind"], "duplicate_mismatch", "{third}");
    let rejected_id = third["job_id"].as_str().unwrap().to_string();
    assert_ne!(rejected_id, "dup-1", "{third}");
    assert!(rejected_id.starts_with("dup-1@"), "{third}");
    assert_eq!(third["reused_job_id"], "dup-1", "{third}");
    assert_eq!(
        reply
            .properties
            .correlation_id()
            .as_ref()
            .map(|s| s.as_str()),
        Some(rejected_id.as_str())
    );
    let dead = next_message(&b, &b.names.dlq(), T)
        .await
        .expect("dead letter");
    assert_eq!(
        c2q::broker::headers::get_str(&dead.properties, "x-c2q-reason").as_deref(),
        Some("duplicate_mismatch")
    );
    // The same rejected message again: the same identity (its repeats deduplicate too).
    publish_job(&b, &canary_job("dup-1", 2, 8)).await;
    let again = next_result(&b, T).await;
    assert_eq!(again.job_id, rejected_id);
    // `c2q submit --wait` reusing the id recognizes the rejection as its answer.
    let (ok, out, err) = c2q_cli(
        &env,
        &[
            "submit",
            "--canary",
            "--partitions",
            "2",
            "--seed",
            "9",
            "--miner",
            "1000",
            "--sector",
            "1",
            "--job-id",
            "dup-1",
            "--wait",
            "--timeout",
            "60",
        ],
    );
    assert!(!ok, "{out}{err}");
    assert!(out.contains("\"duplicate_mismatch\""), "{out}{err}");
    assert!(out.contains("\"reused_job_id\": \"dup-1\""), "{out}{err}");
    // The original proof is untouched.
    let row = ledger.get("dup-1").await.unwrap().unwrap();
    assert!(row.has_proof);
    assert_eq!(row.proofs_computed, 1);
    env.cleanup().await;
}

fn porep_job(id: &str, registered_proof: &str, c1: &[u8]) -> JobV1 {
    JobV1 {
        v: 1,
        job_id: id.into(),
        kind: JobKind::PorepC2,
        registered_proof: registered_proof.into(),
        miner_id: 1000,
        sector_number: 1,
        phase1_output: zstd::encode_all(c1, 3).unwrap(),
        deadline_unix_ms: None,
        canary: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_bad_input_class_fails_permanently_into_the_dead_letter_queue() {
    let env = Env::new("bad");
    let mut config = env.config.clone();
    config.limits.max_c1_bytes = 1 << 20;
    let _worker = env.spawn_worker_with("w1", &config);
    let b = env.broker().await;

    let mut cases: Vec<(String, Vec<u8>, ErrorKind)> = vec![];
    cases.push((
        "bad-garbage".into(),
        b"\xc1 not msgpack".to_vec(),
        ErrorKind::Undecodable,
    ));
    let whole = c2q::schema::job::encode(&canary_job("bad-trunc", 2, 1)).unwrap();
    cases.push((
        "bad-trunc".into(),
        whole[..whole.len() / 2].to_vec(),
        ErrorKind::Undecodable,
    ));
    let mut v2 = canary_job("bad-version", 2, 1);
    v2.v = 2;
    cases.push((
        "bad-version".into(),
        c2q::schema::job::encode(&v2).unwrap(),
        ErrorKind::UnknownVersion,
    ));
    #[derive(serde::Serialize)]
    struct OtherKind<'a> {
        v: u32,
        job_id: &'a str,
        kind: &'a str,
    }
    let other = rmp_serde::to_vec_named(&OtherKind {
        v: 1,
        job_id: "bad-kind",
        kind: "aggregate-porep",
    })
    .unwrap();
    cases.push(("bad-kind".into(), other, ErrorKind::WrongKind));
    // A real 2 KiB C1 claimed to be a 32 GiB job's.
    let sealed = c2q::porep::testdata::seal_2kib(
        filecoin_proofs_api::RegisteredSealProof::StackedDrg2KiBV1_1,
        1000,
        1,
        5,
    )
    .unwrap();
    let c1 = sealed.c1_json().unwrap();
    let mismatch = porep_job("bad-type", "StackedDrg2KiBV1", &c1);
    cases.push((
        "bad-type".into(),
        c2q::schema::job::encode(&mismatch).unwrap(),
        ErrorKind::ProofTypeMismatch,
    ));
    let mut tampered = serde_json::from_slice::<serde_json::Value>(&c1).unwrap();
    tampered["comm_r"] = serde_json::json!("garbage");
    let tampered = serde_json::to_vec(&tampered).unwrap();
    let malformed = porep_job("bad-c1", "StackedDrg2KiBV1_1", &tampered);
    cases.push((
        "bad-c1".into(),
        c2q::schema::job::encode(&malformed).unwrap(),
        ErrorKind::MalformedC1,
    ));
    // A zstd bomb: 64 MiB of zeros in a few KiB, against a 1 MiB limit.
    let bomb = porep_job("bad-bomb", "StackedDrg2KiBV1_1", &vec![0u8; 64 << 20]);
    cases.push((
        "bad-bomb".into(),
        c2q::schema::job::encode(&bomb).unwrap(),
        ErrorKind::Oversize,
    ));

    for (id, payload, _) in &cases {
        publish_raw(&b, id, payload).await;
    }
    let mut results = std::collections::HashMap::new();
    while results.len() < cases.len() {
        let r = next_result(&b, T).await;
        results.insert(r.job_id.clone(), r);
    }
    for (id, _, kind) in &cases {
        let r = results.remove(id.as_str()).expect("a result per job");
        assert_eq!(r.status, Status::Failed, "{id}");
        let err = r.error.unwrap();
        assert_eq!(err.kind, *kind, "{id}: {}", err.message);
        assert!(!err.message.is_empty());
    }
    // Every one is in the DLQ with its reason; none was retried.
    let mut reasons = std::collections::HashMap::new();
    for _ in 0..cases.len() {
        let d = next_message(&b, &b.names.dlq(), T)
            .await
            .expect("dead letter");
        let id = d.properties.message_id().as_ref().unwrap().to_string();
        let reason = c2q::broker::headers::get_str(&d.properties, "x-c2q-reason").unwrap();
        reasons.insert(id, reason);
    }
    for (id, _, kind) in &cases {
        assert_eq!(
            reasons.get(id).map(String::as_str),
            Some(kind.as_str()),
            "{id}"
        );
    }
    assert_eq!(depth(&b, &b.names.retry_queue(1)).await, 0);
    assert_eq!(depth(&b, &b.names.jobs_queue()).await, 0);
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn transient_failures_retry_with_backoff_then_dead_letter_and_replay_resets() {
    let env = Env::new("retry");
    let mut config = env.config.clone();
    config.pipeline.fault = Some("backend-error".into());
    // A backend that fails now and then, not one judged broken (that is `queue_health`).
    config.pipeline.max_backend_failures = 100;
    let mut worker = env.spawn_worker_with("faulty", &config);
    let b = env.broker().await;
    publish_job(&b, &canary_job("retry-1", 1, 3)).await;
    let r = result_for(&b, "retry-1", T).await;
    assert_eq!(r.status, Status::Failed);
    let err = r.error.unwrap();
    assert_eq!(err.kind, ErrorKind::RetriesExhausted, "{}", err.message);
    assert!(
        err.message.contains("injected backend failure"),
        "{}",
        err.message
    );
    let log = worker.log();
    assert_eq!(
        log.matches("transient failure: retrying later").count(),
        2,
        "{log}"
    );
    let ledger = env.ledger().await;
    let row = ledger.get("retry-1").await.unwrap().unwrap();
    assert_eq!(row.attempts, 3, "one try and two retries");
    assert_eq!(row.status, "failed");

    // The operator's view and replay, with a healthy worker.
    let cfg_path = env.write_config("cli", &env.config);
    let list = std::process::Command::new(c2q_bin())
        .args(["dlq", "list", "--config"])
        .arg(&cfg_path)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&list.stdout);
    assert!(
        list.status.success(),
        "{}",
        String::from_utf8_lossy(&list.stderr)
    );
    assert!(
        out.contains("retry-1") && out.contains("retries_exhausted"),
        "{out}"
    );
    let show = std::process::Command::new(c2q_bin())
        .args(["dlq", "show", "retry-1", "--config"])
        .arg(&cfg_path)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&show.stdout).contains("\"attempts\": 2"));
    assert_eq!(
        depth(&b, &b.names.dlq()).await,
        1,
        "browsing keeps the dead letters"
    );

    worker.signal(libc::SIGTERM);
    assert_eq!(worker.wait_exit(T).await, Some(0));
    let _healthy = env.spawn_worker("healthy");
    let replay = std::process::Command::new(c2q_bin())
        .args(["dlq", "replay", "retry-1", "--config"])
        .arg(&cfg_path)
        .output()
        .unwrap();
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    let r = result_for(&b, "retry-1", T).await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(depth(&b, &b.names.dlq()).await, 0);
    let row = wait_row(&ledger, "retry-1", T, |r| r.status == "published").await;
    assert_eq!(row.proofs_computed, 1);
    env.cleanup().await;
}
