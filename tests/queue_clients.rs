//! Real 2 KiB PoRep jobs through the queue, from clients: the Python producer in
//! `ops/examples/` (pika, msgpack, zstandard; written from the schema alone) and `c2q submit`
//! with lotus-bench's Commit2In. Both proofs must pass filecoin-proofs' own `verify_seal`. A
//! SnapDeals update through `c2q submit` must pass its update verifier.

mod common;
mod queue_support;

use std::process::Command;

use filecoin_proofs_api::RegisteredSealProof;
use queue_support::*;

#[tokio::test(flavor = "multi_thread")]
async fn python_producer_and_c2q_submit_get_proofs_that_filecoin_proofs_accepts() {
    common::ensure_2kib_params();
    let env = Env::new("clients");
    // The queues exist before a client publishes (as once any worker has started): the
    // producer publishes with `mandatory`, so a job with no queue bound yet is refused.
    let _topology = env.broker().await;
    let _w = env.spawn_worker("w");
    let sealed = common::seal(RegisteredSealProof::StackedDrg2KiBV1_1, 1000, 7, 99);
    let raw = common::write_c1(&sealed, env.dir.path(), false);

    let proof_py = env.dir.path().join("py.proof");
    let out = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/ops/examples/producer.py"
        ))
        .args([
            "--miner",
            "1000",
            "--sector",
            "7",
            "--wait",
            "--timeout",
            "300",
        ])
        .arg("--c1")
        .arg(&raw)
        .arg("--prefix")
        .arg(&env.prefix)
        .arg("--out")
        .arg(&proof_py)
        .output()
        .expect("python3 (pip install -r ops/examples/requirements.txt)");
    assert!(
        out.status.success(),
        "producer failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["status"], "ok");
    let proof = std::fs::read(&proof_py).unwrap();
    assert!(
        common::verify_seal(&sealed, &proof),
        "verify_seal rejected the proof"
    );
    // Its reply queue is durable (to outlive a broker restart): it deletes it once it has
    // the result.
    let queues = Command::new("rabbitmqctl")
        .args(["-q", "list_queues", "name"])
        .output()
        .expect("rabbitmqctl");
    let queues = String::from_utf8_lossy(&queues.stdout);
    let reply = format!("{}.reply.", env.prefix);
    assert!(
        !queues.lines().any(|q| q.starts_with(&reply)),
        "the producer left its reply queue behind: {queues}"
    );

    // The same sector through `c2q submit` in the Commit2In envelope: the default job id is
    // derived from the C1 as the Python producer derives it, so it is answered from the ledger.
    let c2in = common::write_c1(&sealed, &env.dir.path().join(".."), true);
    let cfg = env.write_config("cli", &env.config);
    let proof_cli = env.dir.path().join("cli.proof");
    let out = Command::new(c2q_bin())
        .args([
            "submit", "--miner", "1000", "--sector", "7", "--wait", "--config",
        ])
        .arg(&cfg)
        .arg("--out")
        .arg(&proof_cli)
        .arg(&c2in)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&out.stdout[out.stdout.iter().position(|&c| c == b'{').unwrap()..])
            .unwrap();
    assert_eq!(summary["status"], "ok");
    assert_eq!(summary["from_ledger"], true, "{summary}");
    assert!(common::verify_seal(
        &sealed,
        &std::fs::read(&proof_cli).unwrap()
    ));

    // A SnapDeals input through `c2q submit`: a `snap-prove` job in the snap-2k class,
    // proved by the same worker.
    common::ensure_snap_params();
    let (update, update_path) = common::write_snap_input(env.dir.path(), "update.json", 71);
    let proof_snap = env.dir.path().join("snap.proof");
    let out = Command::new(c2q_bin())
        .args([
            "submit", "--miner", "1000", "--sector", "7", "--wait", "--config",
        ])
        .arg(&cfg)
        .arg("--out")
        .arg(&proof_snap)
        .arg(&update_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(common::verify_update(
        &update,
        &std::fs::read(&proof_snap).unwrap()
    ));

    // A WindowPoSt partition through `c2q submit`: the input names its own miner, the job
    // waits in the window-post-2k class's urgent queue, and the same worker proves it.
    common::ensure_post_params();
    let post_input = env.dir.path().join("window.json");
    let made = Command::new(c2q_bin())
        .args(["testdata", "post", "--seed", "5", "--out"])
        .arg(&post_input)
        .env("FIL_PROOFS_PARAMETER_CACHE", common::TEST_PARAMS)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let proof_post = env.dir.path().join("window.proof");
    let out = Command::new(c2q_bin())
        .args(["submit", "--wait", "--config"])
        .arg(&cfg)
        .arg("--out")
        .arg(&proof_post)
        .arg(&post_input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&proof_post).unwrap().len(), 192);
    let verified = Command::new(c2q_bin())
        .arg("verify")
        .arg(&post_input)
        .arg(&proof_post)
        .env("FIL_PROOFS_PARAMETER_CACHE", common::TEST_PARAMS)
        .output()
        .unwrap();
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stderr)
    );

    let status = Command::new(c2q_bin())
        .args(["status", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(
        text.contains(&format!("{}.jobs", env.prefix)) && text.contains("published"),
        "{text}"
    );
    env.cleanup().await;
}
