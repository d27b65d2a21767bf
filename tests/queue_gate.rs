//! The memory gate and the runtime's responsiveness: a saturated worker takes nothing while a
//! free one does; peak RSS stays under the budget; health checks and ledger answers keep
//! flowing in well under a second while proofs compute.

mod common;
mod queue_support;

use std::time::{Duration, Instant};

use c2q::schema::{JobKind, JobV1, Status};
use filecoin_proofs_api::RegisteredSealProof;
use queue_support::*;

const T: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread")]
async fn a_new_job_goes_to_the_free_worker_and_rss_stays_under_budget() {
    let env = Env::new("gate");
    // Worker A's budget admits one canary job at a time: after one is admitted (64 MiB: 16 of
    // parameters and 16 for each of the 3 partitions the default pipeline keeps alive, 2 for
    // its one GPU and 1 for the finalizer), the worst-case reservation for the next (a 2 KiB
    // PoRep job, its parameters not loaded) no longer fits beside it.
    let small = one_job_at_a_time(&env.config);
    let budget = small.gate.budget_bytes.expect("a set budget");
    let a = env.spawn_worker_with("A", &small);
    a.wait_log("worker started", T).await;
    let b = env.broker().await;
    publish_job(&b, &canary_job("gate-long", 40, 21)).await;
    let ledger = env.ledger().await;
    wait_row(&ledger, "gate-long", T, |r| {
        r.worker.as_deref() == Some("A")
    })
    .await;

    let free = env.spawn_worker("B");
    free.wait_log("worker started", T).await;
    let t = Instant::now();
    publish_job(&b, &canary_job("gate-short", 1, 22)).await;
    let r = result_for(&b, "gate-short", T).await;
    let took = t.elapsed();
    assert_eq!(r.status, Status::Ok);
    assert_eq!(r.worker, "B", "the saturated worker took the job");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let row = ledger.get("gate-long").await.unwrap().unwrap();
    assert_eq!(row.status, "running", "the long job was still proving on A");

    let long = result_for(&b, "gate-long", T).await;
    assert_eq!(long.status, Status::Ok);
    assert_eq!(long.worker, "A");
    let peak = a.peak_rss();
    assert!(peak < budget, "peak RSS {peak} over budget {budget}");
    assert!(!a.log().contains("gate-short"));
    env.cleanup().await;
}

/// A worker whose budget is the least it accepts (its baseline and the worst case of the
/// largest job it takes, parameters not loaded) proves a 2 KiB PoRep job, then canaries and a
/// SnapDeals update published together, with nothing else to wait for. After the PoRep job its
/// parameters stay loaded, and the worst case of a SnapDeals job no longer fits beside them:
/// the worker must release them to take it, never wait for memory only it holds. The process
/// as a whole (parameters, recorded constraints, caches, each partition's peak) stays under the
/// budget throughout, which also shows that released parameters give their memory back.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_on_the_least_budget_proves_porep_then_canaries_and_snapdeals_without_stalling() {
    common::ensure_2kib_params();
    common::ensure_snap_params();
    let env = Env::new("gateporep");
    let mut config = env.config.clone();
    let budget = least_budget(&config);
    config.gate.budget_bytes = Some(budget);
    let w = env.spawn_worker_with("w", &config);
    w.wait_log("worker started", T).await;
    let log = w.log();
    assert!(
        log.contains("snap-2k"),
        "the worker serves SnapDeals too: {log}"
    );

    let sealed = common::seal(RegisteredSealProof::StackedDrg2KiBV1_1, 1000, 11, 23);
    let c1 = sealed.c1_json().unwrap();
    let job = JobV1 {
        v: 1,
        job_id: "gate-porep".into(),
        kind: JobKind::PorepC2,
        registered_proof: "StackedDrg2KiBV1_1".into(),
        miner_id: 1000,
        sector_number: 11,
        phase1_output: zstd::encode_all(&c1[..], 3).unwrap(),
        deadline_unix_ms: None,
        canary: None,
    };
    let b = env.broker().await;
    publish_job(&b, &job).await;
    let r = result_for(&b, "gate-porep", Duration::from_secs(600)).await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(common::verify_seal(&sealed, r.proof.as_deref().unwrap()));

    // The PoRep parameters are kept; then everything at once, from an independent client's
    // point of view: canaries of one and two partitions and a SnapDeals update.
    let (update, update_path) = common::write_snap_input(env.dir.path(), "update.json", 73);
    let snap = JobV1 {
        v: 1,
        job_id: "gate-snap".into(),
        kind: JobKind::SnapProve,
        registered_proof: c2q::snap::update_proof_name(update.registered_proof),
        miner_id: 1000,
        sector_number: 1,
        phase1_output: zstd::encode_all(&std::fs::read(&update_path).unwrap()[..], 3).unwrap(),
        deadline_unix_ms: None,
        canary: None,
    };
    let canaries: Vec<String> = (0..6).map(|i| format!("gate-canary-{i}")).collect();
    for (i, id) in canaries.iter().enumerate() {
        publish_job(&b, &canary_job(id, 1 + i as u32 % 2, 60 + i as u64)).await;
    }
    publish_job(&b, &snap).await;
    let mut ids: Vec<&str> = canaries.iter().map(String::as_str).collect();
    ids.push("gate-snap");
    for r in results_of(&b, &ids, Duration::from_secs(600)).await {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        if r.job_id == "gate-snap" {
            assert!(common::verify_update(&update, r.proof.as_deref().unwrap()));
        }
    }
    let log = w.log();
    assert!(
        log.contains("releasing kept parameters") && log.contains("porep-2048"),
        "the PoRep parameters were released for the SnapDeals job: {log}"
    );
    assert!(!log.contains("stalled"), "{log}");
    let peak = w.peak_rss();
    assert!(
        peak < budget,
        "peak RSS {peak} over the budget {budget} the worker accepted"
    );
    env.cleanup().await;
}

/// A worker without a configured sector limit on a machine too small for the largest sectors
/// takes what its budget holds and says so, instead of refusing to start.
#[tokio::test(flavor = "multi_thread")]
async fn an_unset_sector_limit_takes_what_the_budget_holds() {
    let env = Env::new("gatefit");
    let mut config = env.config.clone();
    config.limits.max_sector_size = None;
    let mut two_kib = config.clone();
    two_kib.limits.max_sector_size = Some(2048);
    // Enough for 2 KiB sectors, not for 8 MiB ones.
    config.gate.budget_bytes = Some(least_budget(&two_kib));
    let w = env.spawn_worker_with("w", &config);
    w.wait_log("worker started", T).await;
    let log = w.log();
    assert!(log.contains("\"max_sector_size\":2048"), "{log}");
    assert!(log.contains("limits.max_sector_size is not set"), "{log}");
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn health_and_ledger_answers_flow_while_proofs_compute() {
    let env = Env::new("resp");
    let w = env.spawn_worker("w");
    let addr = w.telemetry_addr().await;
    let b = env.broker().await;
    publish_job(&b, &canary_job("resp-small", 1, 31)).await;
    assert_eq!(result_for(&b, "resp-small", T).await.status, Status::Ok);

    publish_job(&b, &canary_job("resp-long", 40, 32)).await;
    w.wait_log("partition proved\",\"job_id\":\"resp-long", T)
        .await;
    let mut worst = Duration::ZERO;
    for _ in 0..20 {
        let t = Instant::now();
        assert_eq!(http_get(&addr, "/healthz").await.0, 200);
        worst = worst.max(t.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A duplicate is fetched, answered from the ledger, published, confirmed and acked.
    let t = Instant::now();
    publish_job(&b, &canary_job("resp-small", 1, 31)).await;
    let dup = result_for(&b, "resp-small", T).await;
    let round_trip = t.elapsed();
    assert!(dup.from_ledger);
    let ledger = env.ledger().await;
    assert_eq!(
        ledger.get("resp-long").await.unwrap().unwrap().status,
        "running",
        "measurements must happen while the long proof computes"
    );
    assert!(worst < Duration::from_secs(1), "healthz took {worst:?}");
    assert!(
        round_trip < Duration::from_secs(1),
        "ledger answer took {round_trip:?}"
    );
    wait_row(&ledger, "resp-long", T, |r| r.status == "published").await;
    env.cleanup().await;
}

/// A worker holds at most `pipeline.prefetch` jobs it fetched and has not begun: while one long
/// job proves, the jobs queued after it stay in the queue for other workers (and would not be
/// stranded by this worker's death), however many its memory budget would admit.
#[tokio::test(flavor = "multi_thread")]
async fn jobs_the_pipeline_cannot_begin_soon_stay_in_the_queue() {
    let env = Env::new("prefetch");
    let mut cfg = env.config.clone();
    // Room for dozens of canaries: only the prefetch bound (its default, 3 with one GPU)
    // holds them back.
    cfg.gate.budget_bytes = Some(16 << 30);
    let w = env.spawn_worker_with("w", &cfg);
    let b = env.broker().await;
    publish_job(&b, &canary_job("pf-long", 64, 41)).await;
    w.wait_log("partition proved\",\"job_id\":\"pf-long", T)
        .await;
    let ids: Vec<String> = (0..12).map(|i| format!("pf-{i}")).collect();
    for (seed, id) in (50..).zip(&ids) {
        publish_job(&b, &canary_job(id, 1, seed)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let left = depth(&b, &b.names.jobs_queue()).await;
    let ledger = env.ledger().await;
    assert_eq!(
        ledger.get("pf-long").await.unwrap().unwrap().status,
        "running",
        "measured while the long job proves"
    );
    // Taken behind the long job: one the pipeline has queued (begun) and the 3 fetched that
    // wait to begin; one more of slack for a job handed on in the meantime.
    assert!(
        left >= ids.len() as u32 - 5,
        "the worker took {} of {} queued jobs",
        ids.len() as u32 - left,
        ids.len()
    );
    let mut all: Vec<&str> = ids.iter().map(String::as_str).collect();
    all.push("pf-long");
    for r in results_of(&b, &all, T).await {
        assert_eq!(r.status, Status::Ok, "{r:?}");
    }
    env.cleanup().await;
}

/// Size classes: a worker fetches only the classes it can hold. A job too large for the only
/// running worker is sent to its class's queue (from the unsorted queue, where producers that
/// do not route by class put it) and waits there, flagged by `c2q status` and the metrics,
/// until a worker that holds it starts and proves it. Canary classes stand in for sizes.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_too_large_for_a_worker_waits_in_its_class_for_one_that_holds_it() {
    let env = Env::new("classes");
    let mut small = env.config.clone();
    small.limits.max_canary_partitions = 4;
    let s = env.spawn_worker_with("small", &small);
    s.wait_log("worker started", T).await;
    assert!(
        s.log().contains(
            "\"classes\":\"winning-post-2k,window-post-2k,porep-2k,snap-2k,canary-4,canary-1\""
        ),
        "{}",
        s.log()
    );
    let b = env.broker().await;

    // Unsorted: the small worker sorts it into its class instead of failing it as oversize.
    publish_job(&b, &canary_job("class-big", 16, 61)).await;
    let big_queue = format!("{}.jobs.canary-16", env.prefix);
    wait_depth(&b, &big_queue, 1, T).await;
    s.wait_log("sent to that class's queue", T).await;
    // A small job still goes to the small worker meanwhile.
    publish_job(&b, &canary_job("class-small", 2, 62)).await;
    let r = result_for(&b, "class-small", T).await;
    assert_eq!((r.status, r.worker.as_str()), (Status::Ok, "small"));

    // The wait is visible: `c2q status` and the small worker's metrics.
    let (ok, out, err) = c2q_cli(&env, &["status"]);
    assert!(ok, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("canary-16 "))
        .unwrap_or_else(|| panic!("no canary-16 row:\n{out}"));
    assert!(
        line.contains("waiting: no running worker fetches this class"),
        "{out}"
    );
    assert!(
        out.contains(
            "small  cpu  classes winning-post-2k,window-post-2k,porep-2k,snap-2k,canary-4,canary-1"
        ),
        "{out}"
    );
    let addr = s.telemetry_addr().await;
    let deadline = Instant::now() + T;
    loop {
        let metrics = http_get(&addr, "/metrics").await.1;
        if metrics.contains("c2q_class_queue_jobs{class=\"canary-16\"} 1")
            && metrics.contains("c2q_class_workers{class=\"canary-16\"} 0")
            && metrics.contains("c2q_class_workers{class=\"canary-4\"} 1")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "class metrics never showed the wait:\n{metrics}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // A worker that holds it proves it; nothing was failed or dead-lettered on the way.
    let large = env.spawn_worker("large");
    let r = result_for(&b, "class-big", T).await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.worker, "large");
    assert_eq!(r.attempts, 1);
    assert_eq!(depth(&b, &b.names.dlq()).await, 0);
    assert!(
        !s.log().contains("\"job_id\":\"class-big\",\"error\""),
        "{}",
        s.log()
    );
    drop(large);
    env.cleanup().await;
}
