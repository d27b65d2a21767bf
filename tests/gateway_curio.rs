//! `c2q gateway`'s gRPC door, driven by a client generated from `proto/cuzk/v1/proving.proto`
//! in another language (Python, grpcio-tools: `tests/curio_client.py`), against a real worker,
//! RabbitMQ and PostgreSQL:
//!
//! - every bad input is refused with its status code, and nothing of it is enqueued;
//! - a job submitted while no worker runs is cancelled: the worker that starts later does not
//!   prove it, the ledger and `c2q status` say cancelled;
//! - a job is submitted, the gateway killed while a client awaits it and started again, and
//!   the job is proved all the same and answered to `AwaitProof`;
//! - a `HIGH` job submitted after a `NORMAL` one is proved first;
//! - `Prove` proves a sector in one call, as Curio calls it (the cancelled job, asked for
//!   again), and answers a proved one from the ledger;
//! - Curio's own request ids and C1 wrapper, rendered by Go (`tests/curio_requests.go`):
//!   PoRep, proof-share PoRep, SnapDeals and proof-share SnapDeals, two WindowPoSt partitions
//!   under one id (`wdpost-1000-0-[…]`, not a job id), the first again on a second gateway,
//!   awaited and cancelled by the request id, WinningPoSt; every proof's reply with its
//!   timings;
//! - `GetStatus`, `GetMetrics` and `PreloadSRS` answer for the fleet;
//! - the door speaks TLS with the configured certificate.

mod common;
mod queue_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use filecoin_proofs_api::RegisteredSealProof;
use queue_support::*;
use serde_json::Value;

const T: Duration = Duration::from_secs(300);
const TOKEN: &str = "grpc-test-token";
const MINER: u64 = 1000;

/// Run one step of the Python client; its JSON report.
fn client(step: &str, addr: &str, args: &[&str]) -> Value {
    let out = client_command(step, addr, args)
        .output()
        .expect("run python3 tests/curio_client.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client step {step} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{step}: {e}: {stdout}"))
}

fn client_command(step: &str, addr: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("python3");
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/curio_client.py"
    ))
    .args([step, "--addr", addr, "--token", TOKEN])
    .args(args);
    cmd
}

/// A sealed 2 KiB sector and its C1 in a file.
struct Sector {
    number: u64,
    sealed: c2q::porep::testdata::Sealed,
    c1: PathBuf,
}

fn sector(dir: &Path, number: u64) -> Sector {
    let sealed = common::seal(RegisteredSealProof::StackedDrg2KiBV1_1, MINER, number, 31);
    let c1 = dir.join(format!("c1-{number}.json"));
    std::fs::write(&c1, sealed.c1_json().unwrap()).unwrap();
    Sector { number, sealed, c1 }
}

/// What Curio sends for these sectors and randomness, as Curio's Go code renders it.
#[derive(Debug, PartialEq, Eq, serde::Deserialize)]
struct CurioRequests {
    porep: Vec<String>,
    snap: Vec<String>,
    ps_porep: Vec<String>,
    ps_snap: Vec<String>,
    wdpost: Option<String>,
    winpost: Option<String>,
}

/// Curio's inputs for one test: its request ids for `sectors` (proof-share task 7, WindowPoSt
/// partition 0) and the given randomness, and each `(c1, sector, out)` wrapped as Curio wraps
/// a C1 output. Rendered by Go itself (`tests/curio_requests.go`) where `go` is installed
/// (CI installs it), and always by [`render_curio_requests`] too, which must agree.
fn curio_requests(
    sectors: &[u64],
    window: Option<&str>,
    winning: Option<&str>,
    wrap: &[(&Path, u64, &Path)],
) -> CurioRequests {
    let rendered = render_curio_requests(sectors, window, winning, wrap);
    let Ok(go) = Command::new("go").arg("version").output() else {
        eprintln!("no Go toolchain: Curio's request ids are rendered in Rust only");
        return rendered;
    };
    assert!(go.status.success());
    let join = |v: Vec<String>| v.join(",");
    let out = Command::new("go")
        .arg("run")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/curio_requests.go"
        ))
        .arg(format!("-miner={MINER}"))
        .arg(format!(
            "-sectors={}",
            join(sectors.iter().map(u64::to_string).collect())
        ))
        .arg(format!("-window-randomness={}", window.unwrap_or("")))
        .arg(format!("-winning-randomness={}", winning.unwrap_or("")))
        .arg(format!(
            "-wrap={}",
            join(
                wrap.iter()
                    .map(|(c1, n, out)| format!("{}:{n}:2048:{}.go", c1.display(), out.display()))
                    .collect()
            )
        ))
        .output()
        .expect("go run tests/curio_requests.go");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let from_go: CurioRequests = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(from_go, rendered, "Go renders Curio's requests otherwise");
    for (_, _, out) in wrap {
        let go_path = format!("{}.go", out.display());
        assert_eq!(
            std::fs::read(&go_path).unwrap(),
            std::fs::read(out).unwrap(),
            "Go wraps the C1 output otherwise"
        );
    }
    from_go
}

/// The same as Go renders it: `%d` of an integer is its decimal digits; `%d` of the byte slice
/// `randomness[:8]` its bytes in decimal, space-separated in brackets; `%x` of it lower-case
/// hex (Curio's `lib/ffi/cuzk_funcs.go`: PoRepSnarkCuzk, ProveUpdateCuzk, WindowPoStCuzk,
/// WinningPoStCuzk; `tasks/proofshare/task_prove.go`: computePoRep, computeSnap). A C1 output
/// is wrapped as `wrapC1Output` marshals `c1OutputWrapper`: `SectorNum`, `Phase1Out` in
/// base64, `SectorSize`, in that order, no spaces.
fn render_curio_requests(
    sectors: &[u64],
    window: Option<&str>,
    winning: Option<&str>,
    wrap: &[(&Path, u64, &Path)],
) -> CurioRequests {
    let first8 = |hex_text: &str| hex::decode(hex_text).unwrap()[..8].to_vec();
    let each = |f: &dyn Fn(u64) -> String| sectors.iter().map(|&n| f(n)).collect();
    for (c1, sector, out) in wrap {
        let c1 = std::fs::read(c1).unwrap();
        let phase1 = base64::engine::general_purpose::STANDARD.encode(c1);
        let wrapped =
            format!(r#"{{"SectorNum":{sector},"Phase1Out":"{phase1}","SectorSize":2048}}"#);
        std::fs::write(out, wrapped).unwrap();
    }
    CurioRequests {
        porep: each(&|n| format!("porep-{MINER}-{n}")),
        snap: each(&|n| format!("snap-{MINER}-{n}")),
        ps_porep: each(&|n| format!("ps-porep-{MINER}-{n}-7")),
        ps_snap: each(&|n| format!("ps-snap-{MINER}-{n}-7")),
        wdpost: window.map(|r| {
            let bytes: Vec<String> = first8(r).iter().map(u8::to_string).collect();
            format!("wdpost-{MINER}-0-[{}]", bytes.join(" "))
        }),
        winpost: winning.map(|r| format!("winpost-{MINER}-{}", hex::encode(first8(r)))),
    }
}

/// The timings of a proof's reply: filled, and no part over the total.
fn assert_times(what: &str, report: &Value) {
    let t = &report["times"];
    eprintln!("{what}: {t}");
    let ms = |field: &str| {
        t[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{what}: {field}: {t}"))
    };
    let total = ms("total_ms");
    assert!(total > 0, "{what}: {t}");
    assert!(ms("synthesis_ms") > 0, "{what}: {t}");
    assert!(ms("gpu_compute_ms") > 0, "{what}: {t}");
    for part in [
        "queue_wait_ms",
        "srs_load_ms",
        "synthesis_ms",
        "gpu_compute_ms",
    ] {
        assert!(ms(part) <= total, "{what}: {part} over total_ms: {t}");
    }
    assert!(
        ms("queue_wait_ms") + ms("srs_load_ms") <= total,
        "{what}: the wait and the load add up to more than the total: {t}"
    );
}

fn proof_of(report: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(report["proof"].as_str().unwrap())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn curio_proving_engine_calls_reach_the_fleet() {
    common::ensure_2kib_params();
    common::ensure_snap_params();
    let env = Env::new("gwcurio");
    let dir = env.dir.path();
    let (a, b, c) = (sector(dir, 41), sector(dir, 42), sector(dir, 43));
    let mut tampered: Value = serde_json::from_slice(&a.sealed.c1_json().unwrap()).unwrap();
    let seed = tampered["seed"][0].as_u64().unwrap();
    tampered["seed"][0] = ((seed + 1) % 256).into();
    let tampered_path = dir.join("tampered.json");
    std::fs::write(&tampered_path, serde_json::to_vec(&tampered).unwrap()).unwrap();
    // Curio's PoRep requests: its ids for sectors 41..=44 and each C1 wrapped as it wraps one.
    let wrapped = |s: &Sector| dir.join(format!("curio-c1-{}.json", s.number));
    let (wa, wb, wc) = (wrapped(&a), wrapped(&b), wrapped(&c));
    let curio = curio_requests(
        &[41, 42, 43, 44],
        None,
        None,
        &[(&a.c1, 41, &wa), (&b.c1, 42, &wb), (&c.c1, 43, &wc)],
    );
    let (porep_a, porep_c) = (curio.porep[0].clone(), curio.porep[2].clone());
    // Sector 42 comes as a proof-share request.
    let share_b = curio.ps_porep[1].clone();

    let mut cfg = env.config.clone();
    cfg.gateway.http_listen = "127.0.0.1:0".into();
    cfg.gateway.grpc_listen = "127.0.0.1:0".into();
    cfg.gateway.max_body_bytes = 8 << 20;
    let gw = env.spawn_gateway("gw", &cfg, Some(TOKEN));
    let addr = gw.logged_addr("gateway grpc listening").await;
    let sector_args = |s: &Sector| {
        vec![
            "--c1".to_string(),
            s.c1.display().to_string(),
            "--sector".to_string(),
            s.number.to_string(),
        ]
    };
    let with = |s: &Sector, extra: &[&str]| {
        let mut v = sector_args(s);
        v.extend(extra.iter().map(|x| x.to_string()));
        v
    };
    // A sector's C1 as Curio sends it, under a request id of Curio's.
    let as_curio = |s: &Sector, wrapped: &Path, request_id: &str, extra: &[&str]| {
        let mut v = vec![
            "--c1".to_string(),
            wrapped.display().to_string(),
            "--sector".to_string(),
            s.number.to_string(),
            "--request-id".to_string(),
            request_id.to_string(),
        ];
        v.extend(extra.iter().map(|x| x.to_string()));
        v
    };
    let run = |step: &str, args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        client(step, &addr, &args)
    };

    // Refused, each with its code, before anything reaches the queue.
    let tampered_arg = tampered_path.display().to_string();
    let seen = run("refusals", with(&a, &["--tampered", &tampered_arg]));
    let expect = [
        ("no_token", "UNAUTHENTICATED"),
        ("wrong_token", "UNAUTHENTICATED"),
        ("snap", "INVALID_ARGUMENT"),
        // WinningPoSt is served: a C1 output where its vanilla proofs belong is refused.
        ("winning", "INVALID_ARGUMENT"),
        ("unset_kind", "INVALID_ARGUMENT"),
        ("wrong_proof", "INVALID_ARGUMENT"),
        ("wrong_size", "INVALID_ARGUMENT"),
        ("not_json", "INVALID_ARGUMENT"),
        ("other_sector", "INVALID_ARGUMENT"),
        ("tampered", "INVALID_ARGUMENT"),
        ("empty_request_id", "INVALID_ARGUMENT"),
        ("long_request_id", "INVALID_ARGUMENT"),
        ("too_large", "OUT_OF_RANGE"),
        ("await_unknown", "NOT_FOUND"),
        ("cancel_unknown", "NOT_FOUND"),
        ("evict", "FAILED_PRECONDITION"),
        ("preload_unknown_circuit", "INVALID_ARGUMENT"),
    ];
    for (what, code) in expect {
        assert_eq!(seen[what], code, "{what}: {seen}");
    }
    // A SnapDeals request with a PoRep proof number (and a C1 output for vanilla proofs).
    assert!(
        seen["snap_detail"]
            .as_str()
            .unwrap()
            .contains("registered_proof 5 is not a registered update proof"),
        "{seen}"
    );
    assert!(
        seen["wrong_proof_detail"]
            .as_str()
            .unwrap()
            .contains("registered_proof says StackedDrg32GiBV1_1"),
        "{seen}"
    );
    assert!(
        seen["empty_request_id_detail"]
            .as_str()
            .unwrap()
            .starts_with("request_id is empty"),
        "{seen}"
    );
    assert!(
        seen["long_request_id_detail"]
            .as_str()
            .unwrap()
            .contains("request_id is 514 bytes: at most 512"),
        "{seen}"
    );
    let broker = env.broker().await;
    let class_queue = format!("{}.jobs.porep-2k", env.prefix);
    let urgent_queue = format!("{class_queue}.urgent");
    assert_eq!(
        depth(&broker, &class_queue).await,
        0,
        "a refusal was enqueued"
    );

    // No worker yet. Job B (a proof-share request) is submitted and cancelled; its id cannot
    // be reused for another payload.
    let report = run(
        "submit-cancel",
        as_curio(
            &b,
            &wb,
            &share_b,
            &[
                "--other-c1",
                &wa.display().to_string(),
                "--other-sector",
                &a.number.to_string(),
            ],
        ),
    );
    assert_eq!(report["job_id"], share_b.as_str(), "{report}");
    assert_eq!(report["reused_id"], "ALREADY_EXISTS", "{report}");
    assert_eq!(
        report["status_before_cancel"]["queues"]["porep-2k"][0], 1,
        "GetStatus counts the queued job: {report}"
    );
    assert_eq!(report["was_running"], false, "{report}");
    assert_eq!(report["await"], "CANCELLED", "{report}");

    // Job A (NORMAL) and then job C (HIGH) are submitted; awaited briefly, they time out.
    let report = run("submit", as_curio(&a, &wa, &porep_a, &[]));
    assert_eq!(report["await"], "TIMEOUT", "{report}");
    let report = run(
        "submit",
        as_curio(&c, &wc, &porep_c, &["--priority", "HIGH"]),
    );
    assert_eq!(report["await"], "TIMEOUT", "{report}");
    assert_eq!(depth(&broker, &class_queue).await, 2, "B and A wait");
    assert_eq!(depth(&broker, &urgent_queue).await, 1, "C waits apart");

    // A client awaits A with no timeout; the gateway is killed under it and started again.
    let args = sector_args(&a);
    let waiting = client_command(
        "await",
        &addr,
        &[&args[0], &args[1], "--request-id", &porep_a],
    )
    .stdout(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    gw.signal(libc::SIGKILL);
    let cut = waiting.wait_with_output().unwrap();
    let cut: Value = serde_json::from_slice(&cut.stdout).unwrap();
    assert_eq!(cut["code"], "UNAVAILABLE", "{cut}");
    drop(gw);
    let gw = env.spawn_gateway("gw2", &cfg, Some(TOKEN));
    let addr = gw.logged_addr("gateway grpc listening").await;
    let run = |step: &str, args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        client(step, &addr, &args)
    };

    // A worker starts: it takes C (urgent) first, passes over the cancelled B, proves A.
    // With one job fetched ahead (`pipeline.prefetch = 1`) it takes the next only once C
    // has begun, so the order it says "proving" in is the order it took them; with more,
    // the jobs it took together would race to their ledger claims.
    let mut one_ahead = env.config.clone();
    one_ahead.pipeline.prefetch = Some(1);
    let worker = env.spawn_worker_with("w", &one_ahead);
    let report = run("await", with(&a, &["--request-id", &porep_a]));
    assert_eq!(report["status"], "COMPLETED", "{report}");
    assert_times("A", &report);
    assert!(
        common::verify_seal(&a.sealed, &proof_of(&report)),
        "A's proof does not verify"
    );
    let report = run("await", with(&c, &["--request-id", &porep_c]));
    assert_eq!(report["status"], "COMPLETED", "{report}");
    assert!(
        common::verify_seal(&c.sealed, &proof_of(&report)),
        "C's proof does not verify"
    );
    worker.wait_log("cancelled: not proving it", T).await;
    let log = worker.log();
    let proving: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"proving\""))
        .filter_map(|l| l.split("\"job_id\":\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(
        proving,
        [porep_c.as_str(), porep_a.as_str()],
        "the urgent job first, B not at all"
    );
    let ledger = env.ledger().await;
    let row = ledger.get(&share_b).await.unwrap().unwrap();
    assert_eq!((row.status.as_str(), row.proofs_computed), ("cancelled", 0));

    // `c2q status` shows the cancellation.
    let status = Command::new(env!("CARGO_BIN_EXE_c2q"))
        .args(["status", "--config"])
        .arg(env.write_config("status", &env.config))
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("cancelled"), "{status}");

    // Prove in one call, as Curio does: the cancelled B, asked for again, is proved; A again
    // is answered from the ledger, with the times of its proof.
    let report = run("prove", as_curio(&b, &wb, &share_b, &[]));
    assert_eq!(report["status"], "COMPLETED", "{report}");
    assert!(
        common::verify_seal(&b.sealed, &proof_of(&report)),
        "B's proof does not verify"
    );
    assert_times("B", &report);
    let report = run("prove", as_curio(&a, &wa, &porep_a, &[]));
    assert_eq!(report["status"], "COMPLETED", "{report}");
    assert_times("A again", &report);
    assert_eq!(
        ledger.get(&porep_a).await.unwrap().unwrap().proofs_computed,
        1
    );

    // A SnapDeals update as Curio sends one (a partition proof per entry of vanilla_proofs),
    // proved by the same worker; the same update with its partition proofs in one JSON
    // document is the same job; with its sealed CIDs swapped, or its partition proofs in both
    // fields, it is refused before it reaches the queue.
    let (update, update_path) = common::write_snap_input(dir, "update.json", 61);
    let report = run(
        "prove-snap",
        vec![
            "--snap".into(),
            update_path.display().to_string(),
            "--sector".into(),
            "44".into(),
            "--request-id".into(),
            curio.snap[3].clone(),
            "--share-request-id".into(),
            curio.ps_snap[3].clone(),
        ],
    );
    assert_eq!(report["status"], "COMPLETED", "{report}");
    assert_eq!(report["job_id"], curio.snap[3].as_str(), "{report}");
    assert!(
        common::verify_update(&update, &proof_of(&report)),
        "the SnapDeals proof does not verify"
    );
    assert_times("SnapDeals", &report);
    // The same update as Curio's proof share sends it (no sector size, the commitments as
    // their 32 bytes) is a job of its own.
    let share = &report["share"];
    assert_eq!(share["status"], "COMPLETED", "{report}");
    assert_eq!(share["job_id"], curio.ps_snap[3].as_str(), "{report}");
    assert!(
        common::verify_update(&update, &proof_of(share)),
        "the proof-share SnapDeals proof does not verify"
    );
    assert_times("proof-share SnapDeals", share);
    assert_eq!(report["json_form_job_id"], report["job_id"], "{report}");
    assert_eq!(report["swapped"], "INVALID_ARGUMENT", "{report}");
    assert!(
        report["swapped_detail"]
            .as_str()
            .unwrap()
            .contains("do not verify against comm_r_old"),
        "{report}"
    );
    assert_eq!(report["both"], "INVALID_ARGUMENT", "{report}");
    assert!(
        report["both_detail"]
            .as_str()
            .unwrap()
            .contains("both vanilla_proofs and vanilla_proof are set"),
        "{report}"
    );

    // WindowPoSt and WinningPoSt as Curio sends them: two partitions of one deadline under one
    // request id are two jobs, each proved and verified; the first sent again is the same job;
    // a truncated vanilla proof is refused before it reaches the queue.
    common::ensure_post_params();
    common::ensure_winning_params();
    let post_input = |name: &str, extra: &[&str]| {
        let path = dir.join(name);
        let made = std::process::Command::new(env!("CARGO_BIN_EXE_c2q"))
            .args(["testdata", "post", "--out"])
            .arg(&path)
            .args(extra)
            .env("FIL_PROOFS_PARAMETER_CACHE", common::TEST_PARAMS)
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
        path
    };
    let inputs = [
        post_input("window-a.json", &["--seed", "81"]),
        post_input("window-b.json", &["--seed", "82", "--sectors", "1"]),
        post_input("winning.json", &["--seed", "83", "--winning"]),
    ];
    let joined = inputs
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(",");
    let randomness = |input: &Path| -> String {
        let json: Value = serde_json::from_slice(&std::fs::read(input).unwrap()).unwrap();
        json["randomness"].as_str().unwrap().to_string()
    };
    let post_ids = curio_requests(
        &[],
        Some(&randomness(&inputs[0])),
        Some(&randomness(&inputs[2])),
        &[],
    );
    let (wdpost, winpost) = (post_ids.wdpost.unwrap(), post_ids.winpost.unwrap());
    assert!(wdpost.contains(" ") && wdpost.ends_with(']'), "{wdpost}");
    // A second gateway, to which the first partition is sent again: the same job.
    let gw3 = env.spawn_gateway("gw3", &cfg, Some(TOKEN));
    let addr3 = gw3.logged_addr("gateway grpc listening").await;
    let report = run(
        "prove-post",
        vec![
            "--post".into(),
            joined,
            "--request-id".into(),
            wdpost.clone(),
            "--winning-request-id".into(),
            winpost.clone(),
            "--addr2".into(),
            addr3,
        ],
    );
    drop(gw3);
    let partitions = report["partitions"].as_array().unwrap();
    assert_eq!(partitions.len(), 2, "{report}");
    assert_ne!(partitions[0]["job_id"], partitions[1]["job_id"], "{report}");
    for p in partitions {
        let job_id = p["job_id"].as_str().unwrap();
        assert!(
            job_id.starts_with("wdpost-1000-0-_") && job_id.len() <= 128,
            "{report}"
        );
        assert_times("WindowPoSt", p);
    }
    assert_eq!(report["again_job_id"], partitions[0]["job_id"], "{report}");
    // Awaited and cancelled by Curio's request id: the partition asked for last, which has
    // ended.
    let awaited = &report["awaited_by_request_id"];
    assert_eq!(awaited["job_id"], partitions[0]["job_id"], "{report}");
    assert_eq!(awaited["status"], "COMPLETED", "{report}");
    assert_times("WindowPoSt awaited by request id", awaited);
    assert_eq!(
        report["cancelled_by_request_id"], "FAILED_PRECONDITION",
        "{report}"
    );
    assert!(
        report["winning"]["job_id"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{winpost}-")),
        "{report}"
    );
    assert_times("WinningPoSt", &report["winning"]);
    let verify = |input: &Path, proof: &Value| {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(proof.as_str().unwrap())
            .unwrap();
        assert_eq!(bytes.len(), 192);
        let path = input.with_extension("proof");
        std::fs::write(&path, bytes).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_c2q"))
            .arg("verify")
            .arg(input)
            .arg(&path)
            .env("FIL_PROOFS_PARAMETER_CACHE", common::TEST_PARAMS)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    for (p, input) in partitions.iter().zip(&inputs) {
        assert_eq!(p["status"], "COMPLETED", "{report}");
        verify(input, &p["proof"]);
    }
    assert_eq!(report["winning"]["status"], "COMPLETED", "{report}");
    verify(&inputs[2], &report["winning"]["proof"]);
    assert_eq!(report["truncated"][0], "INVALID_ARGUMENT", "{report}");

    // The fleet as GetStatus sees it, within the worker's announcement period: every circuit's
    // parameters kept loaded by the one worker.
    let both = serde_json::json!(["porep-2k", "snap-2k", "window-post-2k", "winning-post-2k"]);
    let mut status = Value::Null;
    for _ in 0..30 {
        status = run("status", vec![]);
        if status["loaded_srs"] == both {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(status["loaded_srs"], both, "{status}");
    assert_eq!(
        status["preload"],
        serde_json::json!(["OK", true]),
        "{status}"
    );
    assert!(status["completed"].as_u64().unwrap() >= 3, "{status}");
    assert_eq!(status["metrics_has_grpc"], true, "{status}");
    drop(worker);
    drop(gw);
    env.cleanup().await;
}

/// Curio's client sends no token: `grpc_allow_no_token` takes its calls, on a loopback address
/// only.
#[tokio::test(flavor = "multi_thread")]
async fn a_tokenless_grpc_door_listens_on_loopback_only() {
    let env = Env::new("gwnotoken");
    let mut cfg = env.config.clone();
    cfg.gateway.http_listen = String::new();
    cfg.gateway.grpc_listen = "0.0.0.0:0".into();
    cfg.gateway.grpc_allow_no_token = true;
    let mut exposed = env.spawn_gateway("exposed", &cfg, Some(TOKEN));
    assert_ne!(exposed.wait_exit(T).await, Some(0));
    assert!(
        exposed.log().contains("loopback address only"),
        "{}",
        exposed.log()
    );

    cfg.gateway.grpc_listen = "127.0.0.1:0".into();
    let gw = env.spawn_gateway("gw", &cfg, Some(TOKEN));
    let addr = gw.logged_addr("gateway grpc listening").await;
    let out = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/curio_client.py"
        ))
        .args(["status", "--addr", &addr])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(gw);
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_grpc_door_speaks_tls_with_its_certificate() {
    let env = Env::new("gwgrpctls");
    let (cert, key) = self_signed(env.dir.path());
    let mut cfg = env.config.clone();
    cfg.gateway.http_listen = String::new();
    cfg.gateway.grpc_listen = "127.0.0.1:0".into();
    cfg.gateway.tls_cert = Some(cert.clone());
    cfg.gateway.tls_key = Some(key);
    let gw = env.spawn_gateway("gw", &cfg, Some(TOKEN));
    let addr = gw.logged_addr("gateway grpc listening").await;
    let port = addr.rsplit(':').next().unwrap();
    let addr = format!("127.0.0.1:{port}");
    let ca = cert.display().to_string();

    let status = client("status", &addr, &["--ca", &ca]);
    assert_eq!(status["completed"], 0, "{status}");
    // Plain text to a TLS door gets nothing.
    let out = client_command("status", &addr, &[]).output().unwrap();
    assert!(!out.status.success());
    drop(gw);
    env.cleanup().await;
}

/// What the gateway's calls do in the ledger, one state at a time: a queued job cancelled
/// before any claim, submitted again and claimed, cancelled while it is proved (its lease still
/// renewed, its proof kept and answered as cancelled), submitted again and answered with that
/// proof.
#[tokio::test(flavor = "multi_thread")]
async fn the_ledger_cancels_queued_and_running_jobs_and_revives_them_when_submitted_again() {
    use c2q::ledger::{AnswerState, Cancellation, Claim, Holder, JobIdentity, Registration};
    use c2q::schema::StageTimes;

    let env = Env::new("gwledger");
    let ledger = env.ledger().await;
    let id = |digest: u8| JobIdentity {
        job_id: "q-1".into(),
        kind: "porep-c2".into(),
        registered_proof: "StackedDrg2KiBV1_1".into(),
        miner_id: MINER,
        sector_number: 1,
        digest: [digest; 32],
    };
    let holder = Holder {
        worker: "w".into(),
        token: "w-token".into(),
        lease: Duration::from_secs(60),
    };
    let state = |r: Registration| match r {
        Registration::Known(answer) => answer.state,
        other => panic!("{other:?}"),
    };

    assert_eq!(
        ledger
            .register(&id(1), Some("the client's q 1"))
            .await
            .unwrap(),
        Registration::New
    );
    assert_eq!(
        ledger
            .register(&id(2), Some("the client's q 1"))
            .await
            .unwrap(),
        Registration::Mismatch
    );
    assert_eq!(
        ledger.cancel("q-1").await.unwrap(),
        Cancellation::Cancelled { was_running: false }
    );
    assert_eq!(
        ledger.cancel("q-1").await.unwrap(),
        Cancellation::AlreadyCancelled
    );
    assert_eq!(
        ledger.claim(&id(1), &holder).await.unwrap(),
        Claim::Cancelled
    );
    let answer = ledger.answer("q-1").await.unwrap().unwrap();
    assert_eq!(answer.state, AnswerState::Cancelled);

    assert_eq!(
        state(
            ledger
                .register(&id(1), Some("the client's q 1"))
                .await
                .unwrap()
        ),
        AnswerState::Pending
    );
    assert_eq!(
        ledger.claim(&id(1), &holder).await.unwrap(),
        Claim::Prove { attempts: 1 }
    );
    assert_eq!(
        ledger.cancel("q-1").await.unwrap(),
        Cancellation::Cancelled { was_running: true }
    );
    assert!(ledger.renew_lease("q-1", &holder).await.unwrap());
    let stages = StageTimes {
        proving_ms: 900,
        srs_load_ms: 100,
        synthesis_ms: 500,
        start_ms: 300,
    };
    let recorded = ledger
        .record_proof("q-1", b"proof", "[]", &stages)
        .await
        .unwrap();
    assert!(recorded.cancelled);
    let answer = ledger.answer("q-1").await.unwrap().unwrap();
    assert_eq!(answer.state, AnswerState::Cancelled);

    assert_eq!(
        state(
            ledger
                .register(&id(1), Some("the client's q 1"))
                .await
                .unwrap()
        ),
        AnswerState::Proved(b"proof".to_vec())
    );
    assert_eq!(
        ledger.cancel("q-1").await.unwrap(),
        Cancellation::Ended {
            status: "proved".into()
        }
    );
    assert_eq!(ledger.cancel("never").await.unwrap(), Cancellation::Unknown);
    let totals = ledger.totals().await.unwrap();
    assert_eq!((totals.proved, totals.cancelled), (1, 0));

    // The proof's times: the worker's stages, and the total on the ledger's clock, never less
    // than the worker's part; the wait is the rest.
    let times = ledger.proof_times("q-1").await.unwrap().unwrap();
    assert_eq!(times.stages, stages);
    assert!(times.total_ms >= stages.proving_ms, "{times:?}");
    assert_eq!(times.queue_wait_ms, times.total_ms - stages.proving_ms);
    assert_eq!(ledger.proof_times("never").await.unwrap(), None);

    // A request id names the job asked for last under it: a second job registered under the
    // same request id (another PoSt partition) is the one it names, until the first is asked
    // for again.
    let mut other = id(3);
    other.job_id = "q-2".into();
    assert_eq!(
        ledger
            .register(&other, Some("the client's q 1"))
            .await
            .unwrap(),
        Registration::New
    );
    let named = || async { ledger.job_for_request("the client's q 1").await.unwrap() };
    assert_eq!(named().await.as_deref(), Some("q-2"));
    ledger
        .register(&id(1), Some("the client's q 1"))
        .await
        .unwrap();
    assert_eq!(named().await.as_deref(), Some("q-1"));
    assert_eq!(ledger.job_for_request("q-1").await.unwrap(), None);
    // Any text is a request id, a NUL and brackets too.
    let mut third = id(4);
    third.job_id = "q-3".into();
    let odd = "wdpost-1-0-[1 2]\u{0}é";
    ledger.register(&third, Some(odd)).await.unwrap();
    assert_eq!(
        ledger.job_for_request(odd).await.unwrap().as_deref(),
        Some("q-3")
    );
    assert_eq!(ledger.proof_times("q-2").await.unwrap(), None, "not proved");
    env.cleanup().await;
}
