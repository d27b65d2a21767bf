//! A worker whose proving backend is broken stops taking jobs and hands back the ones it holds
//! without charging their retry budgets; a healthy worker proves them. With
//! `pipeline.on_unhealthy = "stay"` the broken worker stays up and not ready; with the default
//! (`exit`) it exits non-zero once its jobs are handed back.

mod queue_support;

use std::time::{Duration, Instant};

use c2q::schema::Status;
use queue_support::*;

const T: Duration = Duration::from_secs(90);

/// Poll `/readyz` until it answers 503; its body.
async fn wait_not_ready(addr: &str) -> String {
    let deadline = Instant::now() + T;
    loop {
        let (code, body) = http_get(addr, "/readyz").await;
        if code == 503 {
            return body;
        }
        assert!(Instant::now() < deadline, "/readyz stayed {code}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_backend_stops_the_worker_and_its_jobs_go_to_a_healthy_one() {
    let env = Env::new("health");
    let mut faulty = env.config.clone();
    faulty.pipeline.fault = Some("backend-error".into());
    faulty.pipeline.max_backend_failures = 3;
    // Two broken workers charge at most (3 - 1) retries each (the failure that crosses the
    // threshold is handed back uncharged): within this budget no job may be dead-lettered.
    faulty.retry.max_retries = 5;
    let mut stay_cfg = faulty.clone();
    stay_cfg.pipeline.on_unhealthy = c2q::config::OnUnhealthy::Stay;

    // A broken worker that stays up.
    let mut stays = env.spawn_worker_with("broken-stays", &stay_cfg);
    let addr = stays.telemetry_addr().await;
    stays.wait_log("worker started", T).await;
    assert_eq!(http_get(&addr, "/readyz").await.0, 200);
    let b = env.broker().await;
    let ids = ["health-1", "health-2", "health-3"];
    for (i, id) in ids.iter().enumerate() {
        publish_job(&b, &canary_job(id, 2, 70 + i as u64)).await;
    }
    let body = wait_not_ready(&addr).await;
    assert!(
        body.contains("proving backend broken: 3 consecutive proving starts failed")
            && body.contains("injected backend failure"),
        "{body}"
    );
    stays.wait_log("job handed back to the queue", T).await;
    let (_, metrics) = http_get(&addr, "/metrics").await;
    assert!(metrics.contains("c2q_backend_healthy 0"), "{metrics}");
    assert!(
        metrics.contains("c2q_backend_failures_total 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains("c2q_jobs_total{outcome=\"handed_back\"}"),
        "{metrics}"
    );
    stays
        .wait_log(
            "the proving backend is broken: this worker takes no more jobs",
            T,
        )
        .await;
    stays.wait_log("staying up and not ready", T).await;

    // A broken worker with the default: exits non-zero once its jobs are handed back.
    let mut exits = env.spawn_worker_with("broken-exits", &faulty);
    assert_eq!(exits.wait_exit(T).await, Some(1), "{}", exits.log());
    assert!(
        exits
            .log()
            .contains("stopped because the proving backend is broken"),
        "{}",
        exits.log()
    );

    // Every job ends up proved by the healthy worker; none was dead-lettered.
    let _healthy = env.spawn_worker("healthy");
    for r in results_of(&b, &ids, T).await {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert_eq!(r.worker, "healthy");
    }
    assert_eq!(depth(&b, &b.names.dlq()).await, 0, "nothing dead-lettered");
    let ledger = env.ledger().await;
    for id in ids {
        let row = wait_row(&ledger, id, T, |r| r.status == "published").await;
        assert_eq!(row.proofs_computed, 1);
    }

    // The worker that stayed took nothing more, is still not ready, and stops non-zero.
    assert_eq!(http_get(&addr, "/readyz").await.0, 503);
    assert!(!stays.log().contains("proof verified"));
    stays.signal(libc::SIGTERM);
    assert_eq!(stays.wait_exit(T).await, Some(1), "{}", stays.log());
    env.cleanup().await;
}
