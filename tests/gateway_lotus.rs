//! `c2q gateway`'s lotus door: `POST /remote-commit2` with lotus's `RemoteCommit2Params`,
//! answered 200 with the proof once a worker proved and verified it; 401, 413, 429 and 4xx
//! with a one-line reason for what it refuses (nothing of which reaches the queue); 504 when
//! the proof takes longer than the wait, after which the job goes on and the same request is
//! answered from the ledger, by a restarted gateway too. And the same door over TLS.
//!
//! Requests are made with curl, as any HTTP client would make them.

mod common;
mod queue_support;

use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use filecoin_proofs_api::RegisteredSealProof;
use queue_support::*;
use sha2::{Digest, Sha256};

const T: Duration = Duration::from_secs(300);
const TOKEN: &str = "gateway-test-token";

/// `RemoteCommit2Params` as lotus's encoding/json writes it.
fn lotus_body(miner: u64, sector: u64, proof_type: u32, c1: &[u8]) -> Vec<u8> {
    format!(
        r#"{{"Sector":{{"Miner":{miner},"Number":{sector}}},"ProofType":{proof_type},"Commit1Out":"{}"}}"#,
        base64::engine::general_purpose::STANDARD.encode(c1)
    )
    .into_bytes()
}

/// POST `body` to `url` with curl: `(status, response body)`; status 0 when curl got none.
fn post(url: &str, token: Option<&str>, body: &[u8], extra: &[&str]) -> (u16, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in"), dir.path().join("out"));
    std::fs::write(&input, body).unwrap();
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "-o"])
        .arg(&output)
        .args(["-w", "%{http_code}", "--max-time", "600"])
        .args(["-H", "Content-Type: application/json", "--data-binary"])
        .arg(format!("@{}", input.display()))
        .args(extra);
    if let Some(token) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {token}")]);
    }
    let out = cmd.arg(url).output().expect("run curl");
    let code = String::from_utf8_lossy(&out.stdout).parse().unwrap_or(0);
    (code, std::fs::read(&output).unwrap_or_default())
}

fn text(body: &[u8]) -> String {
    String::from_utf8_lossy(body).into_owned()
}

/// A request that declares a body larger than the limit, sent without one: answered from its
/// headers alone.
fn declared_too_large(addr: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "POST /remote-commit2 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n"
    )
    .unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    text(&reply)
}

#[tokio::test(flavor = "multi_thread")]
async fn lotus_remote_c2_is_proved_refused_or_answered_from_the_ledger() {
    common::ensure_2kib_params();
    let env = Env::new("gwlotus");
    let sealed = common::seal(RegisteredSealProof::StackedDrg2KiBV1_1, 1000, 21, 77);
    let c1 = sealed.c1_json().unwrap();
    let job_id = format!("1000-21-{}", hex::encode(&Sha256::digest(&c1)[..6]));

    let mut cfg = env.config.clone();
    cfg.gateway.http_listen = "127.0.0.1:0".into();
    cfg.gateway.grpc_listen = "127.0.0.1:0".into();
    cfg.gateway.wait_s = 3;
    cfg.gateway.max_requests_per_client = 1;
    cfg.gateway.max_body_bytes = 8 << 20;
    let gw = env.spawn_gateway("gw", &cfg, Some(TOKEN));
    let addr = gw.logged_addr("gateway listening").await;
    let url = format!("http://{addr}/remote-commit2");
    let body = lotus_body(1000, 21, 5, &c1);

    // Refused before anything reaches the queue, each with its reason.
    assert_eq!(post(&url, None, &body, &[]).0, 401);
    assert_eq!(post(&url, Some("not-the-token"), &body, &[]).0, 401);
    // lotus's form: the token as the password of the endpoint URL (HTTP Basic).
    let basic = format!("c2q:{TOKEN}");
    assert_eq!(post(&url, None, b"{}", &["-u", &basic]).0, 400);
    assert_eq!(post(&url, None, b"{}", &["-u", "c2q:wrong"]).0, 401);
    let reply = declared_too_large(&addr);
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    let (code, why) = post(&url, Some(TOKEN), b"{\"not\": \"lotus\"}", &[]);
    assert_eq!(code, 400, "{}", text(&why));
    assert!(text(&why).contains("RemoteCommit2Params"), "{}", text(&why));
    let (code, why) = post(&url, Some(TOKEN), &lotus_body(1000, 21, 8, &c1), &[]);
    assert_eq!(code, 422, "{}", text(&why));
    assert!(
        text(&why).contains("ProofType says StackedDrg32GiBV1_1"),
        "{}",
        text(&why)
    );
    let (code, why) = post(&url, Some(TOKEN), &lotus_body(1000, 22, 5, &c1), &[]);
    assert_eq!(code, 422, "a C1 of another sector: {}", text(&why));
    let mut tampered: serde_json::Value = serde_json::from_slice(&c1).unwrap();
    let seed = tampered["seed"][0].as_u64().unwrap();
    tampered["seed"][0] = ((seed + 1) % 256).into();
    let tampered = serde_json::to_vec(&tampered).unwrap();
    let (code, why) = post(&url, Some(TOKEN), &lotus_body(1000, 21, 5, &tampered), &[]);
    assert_eq!(code, 422, "a tampered C1: {}", text(&why));
    assert_eq!(text(&why).lines().count(), 1, "one line: {}", text(&why));
    let b = env.broker().await;
    let class_queue = format!("{}.jobs.porep-2k", env.prefix);
    assert_eq!(
        depth(&b, &class_queue).await,
        0,
        "a refused request was enqueued"
    );

    // No worker yet: the request waits `wait_s` and is answered 504, the job staying queued;
    // meanwhile a second request from the same client is over its limit of one.
    let waiting = {
        let (url, body) = (url.clone(), body.clone());
        std::thread::spawn(move || post(&url, Some(TOKEN), &body, &[]))
    };
    wait_depth(&b, &class_queue, 1, T).await;
    let (code, why) = post(&url, Some(TOKEN), &body, &[]);
    assert_eq!(code, 429, "{}", text(&why));
    let (code, why) = waiting.join().unwrap();
    assert_eq!(code, 504, "{}", text(&why));

    // Refusals are counted.
    let (_, metrics) = http_get(&addr, "/metrics").await;
    for outcome in [
        "still_proving",
        "refused",
        "malformed",
        "unauthorized",
        "too_large",
        "too_many_requests",
    ] {
        assert!(
            metrics.contains(&format!(
                "c2q_gateway_requests_total{{door=\"lotus\",outcome=\"{outcome}\"}}"
            )),
            "{outcome}: {metrics}"
        );
    }

    // The gateway killed while a request waits, and started again: nothing is lost, the job
    // is still queued and the repeated request is answered by the new gateway.
    let cut = {
        let (url, body) = (url.clone(), body.clone());
        std::thread::spawn(move || post(&url, Some(TOKEN), &body, &[]))
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    gw.signal(libc::SIGKILL);
    assert_eq!(cut.join().unwrap().0, 0, "a killed gateway answered");
    drop(gw);
    let gw = env.spawn_gateway("gw2", &cfg, Some(TOKEN));
    let addr = gw.logged_addr("gateway listening").await;
    let url = format!("http://{addr}/remote-commit2");

    // A worker proves the queued job; the repeated request is answered from the ledger with
    // the proof, which verifies.
    let _worker = env.spawn_worker("w");
    let ledger = env.ledger().await;
    wait_row(&ledger, &job_id, T, |r| r.status == "published").await;
    let (code, proof) = post(&url, Some(TOKEN), &body, &[]);
    assert_eq!(code, 200, "{}", text(&proof));
    assert!(
        common::verify_seal(&sealed, &proof),
        "the proof does not verify"
    );
    let row = ledger.get(&job_id).await.unwrap().unwrap();
    assert_eq!(row.proofs_computed, 1);

    let (_, metrics) = http_get(&addr, "/metrics").await;
    assert!(
        metrics.contains("c2q_gateway_requests_total{door=\"lotus\",outcome=\"proved\"} 1"),
        "{metrics}"
    );
    drop(gw);
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_lotus_door_speaks_tls_with_its_certificate() {
    let env = Env::new("gwtls");
    let (cert, key) = self_signed(env.dir.path());
    let mut cfg = env.config.clone();
    cfg.gateway.http_listen = "127.0.0.1:0".into();
    cfg.gateway.grpc_listen = "127.0.0.1:0".into();

    // A certificate without its key is a configuration error, said at start.
    let mut half = cfg.clone();
    half.gateway.tls_cert = Some(cert.clone());
    let mut lone = env.spawn_gateway("half", &half, Some(TOKEN));
    assert_ne!(lone.wait_exit(T).await, Some(0));
    assert!(
        lone.log()
            .contains("tls_cert and gateway.tls_key go together"),
        "{}",
        lone.log()
    );

    cfg.gateway.tls_cert = Some(cert.clone());
    cfg.gateway.tls_key = Some(key);
    let gw = env.spawn_gateway("gw", &cfg, Some(TOKEN));
    let addr = gw.logged_addr("gateway listening").await;
    let port = addr.rsplit(':').next().unwrap();
    let url = format!("https://127.0.0.1:{port}/remote-commit2");
    let ca = cert.display().to_string();

    // Over TLS, checked against the gateway's certificate: the door answers (401 without a
    // token, 400 for a body that is not lotus's).
    assert_eq!(post(&url, None, b"{}", &["--cacert", &ca]).0, 401);
    assert_eq!(post(&url, Some(TOKEN), b"{}", &["--cacert", &ca]).0, 400);
    // A client that does not trust the certificate, or speaks plain HTTP, gets nothing.
    assert_eq!(post(&url, Some(TOKEN), b"{}", &[]).0, 0);
    let plain = format!("http://127.0.0.1:{port}/remote-commit2");
    assert_eq!(post(&plain, Some(TOKEN), b"{}", &[]).0, 0);
    drop(gw);
    env.cleanup().await;
}
