//! `c2q verify`: a real 2 KiB sector proved once by `c2q prove`, then checked as a raw proof
//! file and as a result message, altered, attributed to another miner or sector, paired with
//! the wrong C1; canary proofs against their seed, including a result as the worker publishes
//! it. Exit codes: 0 valid, 1 invalid, 2 bad input, 3 parameters.

mod common;
mod queue_support;

use std::ffi::OsStr;
use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use c2q::canary::CanaryJob;
use c2q::schema::{result::ErrorInfo, ErrorKind, ResultV1, Status};
use common::*;
use filecoin_proofs_api::RegisteredSealProof;

const MINER: u64 = 4321;
const SECTOR: u64 = 12;

fn verify_with_params(params: &str, args: &[&OsStr]) -> Output {
    c2q()
        .env("FIL_PROOFS_PARAMETER_CACHE", params)
        .arg("verify")
        .args(args)
        .output()
        .expect("run c2q verify")
}

/// `c2q verify C1 PROOF --miner M --sector S` with the test parameters.
fn verify(c1: &Path, proof: &Path, miner: u64, sector: u64) -> Output {
    let (m, s) = (miner.to_string(), sector.to_string());
    verify_with_params(
        TEST_PARAMS,
        &[
            c1.as_os_str(),
            proof.as_os_str(),
            "--miner".as_ref(),
            m.as_ref(),
            "--sector".as_ref(),
            s.as_ref(),
        ],
    )
}

fn verify_canary(proof: &Path, seed: u64, extra: &[&str]) -> Output {
    let seed = seed.to_string();
    let mut args: Vec<&OsStr> = vec![proof.as_os_str(), "--canary".as_ref()];
    args.extend(["--seed", seed.as_str()].map(OsStr::new));
    args.extend(extra.iter().map(OsStr::new));
    verify_with_params(TEST_PARAMS, &args)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// Exit code `code`, stdout `said` ("valid", "invalid" or nothing), one line on stderr
/// containing `reason`.
#[track_caller]
fn expect(o: &Output, code: i32, said: &str, reason: &str, case: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{case}: {err}");
    assert_eq!(stdout(o), said, "{case}: {err}");
    assert!(
        err.contains(reason),
        "{case}: expected `{reason}` in: {err}"
    );
    assert!(
        err.trim().lines().count() <= 1,
        "{case}: not one line: {err}"
    );
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A result as the worker publishes it for this proof.
fn porep_result(proof: &[u8], sector: u64) -> ResultV1 {
    ResultV1 {
        v: 1,
        job_id: format!("{MINER}-{sector}-test"),
        status: Status::Ok,
        proof: Some(proof.to_vec()),
        error: None,
        reused_job_id: None,
        kind: "porep-c2".into(),
        registered_proof: "StackedDrg2KiBV1_1".into(),
        miner_id: MINER,
        sector_number: sector,
        worker: "w".into(),
        attempts: 1,
        from_ledger: false,
        timings: vec![],
        timings_origin_ms: 0,
        stages: Default::default(),
    }
}

#[test]
fn verify_accepts_a_c2q_proof_and_rejects_altered_or_misattributed_ones() {
    ensure_2kib_params();
    let sealed = seal(RegisteredSealProof::StackedDrg2KiBV1_1, MINER, SECTOR, 6);
    let dir = tempfile::tempdir().unwrap();
    let c1 = write_c1(&sealed, dir.path(), false);
    let c2in_dir = dir.path().join("c2in");
    std::fs::create_dir(&c2in_dir).unwrap();
    let c2in = write_c1(&sealed, &c2in_dir, true);
    let proof_path = dir.path().join("sector.proof");
    // The one proof of this test.
    let proved = c2q()
        .env("FIL_PROOFS_PARAMETER_CACHE", TEST_PARAMS)
        .arg("prove")
        .arg(&c1)
        .args([
            "--miner",
            &MINER.to_string(),
            "--sector",
            &SECTOR.to_string(),
        ])
        .arg("--out")
        .arg(&proof_path)
        .output()
        .unwrap();
    assert!(proved.status.success(), "{}", stderr(&proved));
    let proof = std::fs::read(&proof_path).unwrap();
    assert!(
        verify_seal(&sealed, &proof),
        "the reference verifier rejects it"
    );

    // Valid: the raw proof with either C1 form, and the result message in either encoding.
    let msgpack = write(
        dir.path(),
        "result.msgpack",
        &porep_result(&proof, SECTOR).encode().unwrap(),
    );
    let mut json = serde_json::to_value(porep_result(&proof, SECTOR)).unwrap();
    json["proof"] = base64::engine::general_purpose::STANDARD
        .encode(&proof)
        .into();
    let json = write(
        dir.path(),
        "result.json",
        &serde_json::to_vec_pretty(&json).unwrap(),
    );
    for (case, c1_file, proof_file) in [
        ("raw", &c1, &proof_path),
        ("commit2in", &c2in, &proof_path),
        ("msgpack result", &c1, &msgpack),
        ("json result", &c1, &json),
    ] {
        let out = verify(c1_file, proof_file, MINER, SECTOR);
        expect(&out, 0, "valid", "", case);
    }

    // Invalid: any changed byte, whether the result is no curve point or a wrong one.
    for at in [0, 47, 48, 100, 143, 150, 191] {
        let mut bad = proof.clone();
        bad[at] ^= 0x04;
        assert!(!verify_seal(&sealed, &bad), "byte {at}: reference accepts");
        let p = write(dir.path(), &format!("flipped-{at}.proof"), &bad);
        let out = verify(&c1, &p, MINER, SECTOR);
        expect(&out, 1, "invalid", "c2q: invalid: ", &format!("byte {at}"));
    }
    // Invalid: a sound proof of this miner and sector number, for other sector data.
    let other = seal(RegisteredSealProof::StackedDrg2KiBV1_1, MINER, SECTOR, 7);
    let other_dir = dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let other_c1 = write_c1(&other, &other_dir, false);
    let out = verify(&other_c1, &proof_path, MINER, SECTOR);
    expect(
        &out,
        1,
        "invalid",
        "does not verify against the C1's",
        "other data",
    );

    // Bad input: misattributed, the wrong shape, unreadable.
    let truncated = write(dir.path(), "truncated.proof", &proof[..100]);
    let doubled = write(
        dir.path(),
        "doubled.proof",
        &[&proof[..], &proof[..]].concat(),
    );
    let other_sector_result = write(
        dir.path(),
        "other-sector.msgpack",
        &porep_result(&proof, SECTOR + 1).encode().unwrap(),
    );
    let mut failed = porep_result(&proof, SECTOR);
    failed.status = Status::Failed;
    failed.proof = None;
    failed.error = Some(ErrorInfo {
        kind: ErrorKind::MalformedC1,
        message: "C1 vanilla proofs do not verify".into(),
    });
    let failed = write(dir.path(), "failed.msgpack", &failed.encode().unwrap());
    let missing = dir.path().join("missing.proof");
    let cases: Vec<(&str, &Path, &Path, u64, u64, &str)> = vec![
        (
            "other sector",
            &c1,
            &proof_path,
            MINER,
            SECTOR + 1,
            "not made for miner 4321 sector 13",
        ),
        (
            "other miner",
            &c1,
            &proof_path,
            MINER + 1,
            SECTOR,
            "not made for miner 4322 sector 12",
        ),
        (
            "commit2in of another sector",
            &c2in,
            &proof_path,
            MINER,
            SECTOR + 1,
            "the input is for sector 12",
        ),
        (
            "no actor id",
            &c1,
            &proof_path,
            u64::MAX,
            SECTOR,
            "is not a Filecoin actor id",
        ),
        (
            "result of another sector",
            &c1,
            &other_sector_result,
            MINER,
            SECTOR,
            "is for miner 4321 sector 13, not miner 4321 sector 12",
        ),
        (
            "failed result",
            &c1,
            &failed,
            MINER,
            SECTOR,
            "is a failure (malformed_c1",
        ),
        (
            "truncated",
            &c1,
            &truncated,
            MINER,
            SECTOR,
            "100 bytes are neither raw proof bytes",
        ),
        (
            "two partitions",
            &c1,
            &doubled,
            MINER,
            SECTOR,
            "is 1 partition(s) of 192 bytes",
        ),
        ("missing proof", &c1, &missing, MINER, SECTOR, "cannot read"),
        (
            "missing C1",
            &missing,
            &proof_path,
            MINER,
            SECTOR,
            "cannot read",
        ),
        (
            "proof as C1",
            &proof_path,
            &proof_path,
            MINER,
            SECTOR,
            "not JSON",
        ),
    ];
    for (case, c1_file, proof_file, miner, sector, reason) in cases {
        let out = verify(c1_file, proof_file, miner, sector);
        expect(&out, 2, "", reason, case);
    }

    // Parameters: no verifying key where FIL_PROOFS_PARAMETER_CACHE points.
    let empty = tempfile::tempdir().unwrap();
    let (m, s) = (MINER.to_string(), SECTOR.to_string());
    let out = verify_with_params(
        empty.path().to_str().unwrap(),
        &[
            c1.as_os_str(),
            proof_path.as_os_str(),
            "--miner".as_ref(),
            m.as_ref(),
            "--sector".as_ref(),
            s.as_ref(),
        ],
    );
    expect(&out, 3, "", "missing parameters", "no parameters");
    assert_eq!(
        std::fs::read_dir(empty.path()).unwrap().count(),
        0,
        "verify wrote into the parameter directory"
    );
}

/// A shape-only C1 has random values: nothing can be verified against it.
#[test]
fn verify_refuses_a_shape_only_c1_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let shape = dir.path().join("shape.json");
    let made = c2q()
        .args([
            "testdata",
            "c1",
            "--shape-only",
            "--proof",
            "StackedDrg2KiBV1_1",
        ])
        .args(["--miner", &MINER.to_string(), "--sector", "3", "--out"])
        .arg(&shape)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    let proof = write(dir.path(), "any.proof", &[0x80; 192]);
    let out = verify(&shape, &proof, MINER, 3);
    expect(&out, 2, "", "--shape-only", "shape-only");
    assert!(
        stderr(&out).contains("cannot be proved"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn canary_proofs_verify_against_their_seed() {
    let dir = tempfile::tempdir().unwrap();
    let job = CanaryJob::new(3, 99).unwrap();
    let backend: Arc<dyn c2q::groth16::Backend> = Arc::new(c2q::groth16::CpuBackend);
    let (proof, _) = c2q::prove::prove_job(Arc::new(job), vec![backend], None).unwrap();
    assert_eq!(proof.len(), 3 * 192);
    let raw = write(dir.path(), "canary.proof", &proof);

    expect(&verify_canary(&raw, 99, &[]), 0, "valid", "", "raw");
    let exact = verify_canary(&raw, 99, &["--partitions", "3"]);
    expect(&exact, 0, "valid", "", "--partitions 3");
    let other_seed = verify_canary(&raw, 98, &[]);
    expect(&other_seed, 1, "invalid", "with seed 98", "other seed");
    let mut bad = proof.clone();
    bad[200] ^= 0x04;
    let flipped = write(dir.path(), "flipped.proof", &bad);
    expect(
        &verify_canary(&flipped, 99, &[]),
        1,
        "invalid",
        "",
        "flipped",
    );
    let fewer = verify_canary(&raw, 99, &["--partitions", "2"]);
    expect(
        &fewer,
        2,
        "",
        "the proof has 3 partition(s), 2 were asked for",
        "fewer",
    );
    // A PoRep result is not a canary's, and a canary needs its seed.
    let porep = write(
        dir.path(),
        "porep.msgpack",
        &porep_result(&proof[..192], SECTOR).encode().unwrap(),
    );
    expect(
        &verify_canary(&porep, 99, &[]),
        2,
        "",
        "not a canary",
        "porep result",
    );
    let no_seed = verify_with_params(TEST_PARAMS, &[raw.as_os_str(), "--canary".as_ref()]);
    assert_eq!(no_seed.status.code(), Some(2), "{}", stderr(&no_seed));
    assert!(stderr(&no_seed).contains("--seed"), "{}", stderr(&no_seed));
}

/// What a fleet does with its canaries: the result message exactly as the worker published
/// it, and the proof `c2q submit --canary --wait` saved, both checked against the job's seed.
#[tokio::test(flavor = "multi_thread")]
async fn canary_results_from_the_worker_verify_with_the_jobs_seed() {
    use queue_support::*;
    const T: Duration = Duration::from_secs(60);
    let env = Env::new("verifycanary");
    let _worker = env.spawn_worker("w1");
    let b = env.broker().await;
    publish_job(&b, &canary_job("vc-1", 4, 77)).await;
    let published = next_message(&b, &b.names.results(), T)
        .await
        .expect("a result");
    let result = write(env.dir.path(), "vc-1.result", &published.data);
    expect(
        &verify_canary(&result, 77, &[]),
        0,
        "valid",
        "",
        "published result",
    );
    let wrong = verify_canary(&result, 78, &[]);
    expect(
        &wrong,
        1,
        "invalid",
        "with seed 78",
        "published result, other seed",
    );

    let saved = env.dir.path().join("submitted.proof");
    let (ok, out, err) = c2q_cli(
        &env,
        &[
            "submit",
            "--canary",
            "--partitions",
            "2",
            "--seed",
            "5",
            "--miner",
            "1000",
            "--sector",
            "1",
            "--wait",
            "--timeout",
            "60",
            "--out",
            saved.to_str().unwrap(),
        ],
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("seed 5"),
        "submit does not say the seed: {err}"
    );
    let summary: serde_json::Value = serde_json::from_str(out.split_once('\n').unwrap().1).unwrap();
    assert_eq!(summary["seed"], 5, "{out}");
    expect(&verify_canary(&saved, 5, &[]), 0, "valid", "", "submitted");
    env.cleanup().await;
}
