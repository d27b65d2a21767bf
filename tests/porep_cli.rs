//! `c2q prove` end to end on real 2 KiB PoRep sectors sealed in the test, checked by
//! filecoin-proofs' own verifier; and every kind of bad input, with its error and exit code.

mod common;

use std::process::Output;

use common::*;
use filecoin_proofs_api::RegisteredSealProof;

const MINER: u64 = 1234;

fn run_prove(c1: &std::path::Path, miner: u64, sector: u64, extra: &[&str]) -> Output {
    c2q()
        .env("FIL_PROOFS_PARAMETER_CACHE", TEST_PARAMS)
        .arg("prove")
        .arg(c1)
        .args([
            "--miner",
            &miner.to_string(),
            "--sector",
            &sector.to_string(),
        ])
        .args(extra)
        .output()
        .expect("run c2q prove")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

#[test]
fn proves_a_2kib_sector_that_filecoin_proofs_accepts() {
    ensure_2kib_params();
    let sealed = seal(RegisteredSealProof::StackedDrg2KiBV1_1, MINER, 7, 1);
    let dir = tempfile::tempdir().unwrap();
    let c1 = write_c1(&sealed, dir.path(), false);
    let out_path = dir.path().join("proof.bin");
    let out = run_prove(
        &c1,
        MINER,
        7,
        &["--json", "--out", out_path.to_str().unwrap()],
    );
    assert!(out.status.success(), "c2q prove failed: {}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json output");
    assert_eq!(report["partitions"], 1);
    assert_eq!(report["verified"], true);
    assert!(report["timings"]["synthesis_s"].as_f64().unwrap() > 0.0);
    let proof = std::fs::read(&out_path).unwrap();
    assert_eq!(proof.len(), 192);
    assert!(
        verify_seal(&sealed, &proof),
        "filecoin-proofs rejects c2q's proof"
    );

    // A flipped bit anywhere in the proof must be rejected by the reference verifier too.
    let mut bad = proof.clone();
    bad[100] ^= 1;
    assert!(!verify_seal(&sealed, &bad));
}

/// The other 2 KiB interactive proof kinds a sealing pipeline may send: synthetic PoRep (Commit1
/// draws its challenges from synthetic proofs made after pre-commit) and the original V1. Both
/// use the same circuit, and so the same parameters, as V1_1.
#[test]
fn proves_synthetic_and_v1_sectors_that_filecoin_proofs_accepts() {
    ensure_2kib_params();
    let kinds = [
        (
            RegisteredSealProof::StackedDrg2KiBV1_1_Feat_SyntheticPoRep,
            21,
        ),
        (RegisteredSealProof::StackedDrg2KiBV1, 22),
    ];
    for (kind, sector) in kinds {
        let sealed = seal(kind, MINER, sector, sector);
        let dir = tempfile::tempdir().unwrap();
        let c1 = write_c1(&sealed, dir.path(), false);
        let out = run_prove(&c1, MINER, sector, &["--json"]);
        assert!(
            out.status.success(),
            "{kind:?}: c2q prove failed: {}",
            stderr(&out)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json");
        assert_eq!(report["verified"], true, "{kind:?}");
        let proof = std::fs::read(dir.path().join(format!("c1-{sector}.json.proof"))).unwrap();
        assert_eq!(proof.len(), 192, "{kind:?}");
        assert!(
            verify_seal(&sealed, &proof),
            "{kind:?}: filecoin-proofs rejects c2q's proof"
        );
        // The same proof does not pass as the other kind of sector.
        let other = if sealed.proof == kinds[0].0 {
            RegisteredSealProof::StackedDrg2KiBV1_1
        } else {
            kinds[0].0
        };
        let mut relabeled = sealed;
        relabeled.proof = other;
        assert!(
            !verify_seal(&relabeled, &proof),
            "{kind:?} proof accepted as {other:?}"
        );
    }
}

#[test]
fn accepts_lotus_bench_commit2in() {
    ensure_2kib_params();
    let sealed = seal(RegisteredSealProof::StackedDrg2KiBV1_1, MINER, 8, 2);
    let dir = tempfile::tempdir().unwrap();
    let c1 = write_c1(&sealed, dir.path(), true);
    let out = run_prove(&c1, MINER, 8, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let proof = std::fs::read(dir.path().join("c1-8.json.proof")).unwrap();
    assert!(verify_seal(&sealed, &proof));
}

#[test]
fn bad_inputs_get_a_clear_error_and_exit_code() {
    ensure_2kib_params();
    let sealed = seal(RegisteredSealProof::StackedDrg2KiBV1_1, MINER, 9, 3);
    let dir = tempfile::tempdir().unwrap();
    let good = sealed.c1_json().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };

    let mut wrong_type: serde_json::Value = serde_json::from_slice(&good).unwrap();
    wrong_type["registered_proof"] = "StackedDrg8MiBV1_1".into();
    let mut tampered: serde_json::Value = serde_json::from_slice(&good).unwrap();
    tampered["comm_r"][3] = serde_json::json!((tampered["comm_r"][3].as_u64().unwrap() + 1) % 64);
    let cases: Vec<(&str, Vec<u8>, u64, &str)> = vec![
        ("garbage", b"\x7fELF\x02\x01garbage".to_vec(), 9, "not JSON"),
        ("truncated", good[..good.len() / 2].to_vec(), 9, "not JSON"),
        (
            "not-c1",
            br#"{"hello": "world"}"#.to_vec(),
            9,
            "not a C1 output",
        ),
        (
            "wrong-type",
            serde_json::to_vec(&wrong_type).unwrap(),
            9,
            "another sector size",
        ),
        (
            "tampered",
            serde_json::to_vec(&tampered).unwrap(),
            9,
            "do not verify",
        ),
        ("other-sector", good.clone(), 10, "replica id differs"),
    ];
    for (name, bytes, sector, expect) in cases {
        let p = write(name, &bytes);
        let out = run_prove(&p, MINER, sector, &[]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(expect),
            "{name}: expected `{expect}` in: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{name}: not one line: {err}");
        assert!(
            !dir.path().join(format!("{name}.proof")).exists(),
            "{name}: wrote a proof"
        );
    }

    let missing = run_prove(&dir.path().join("nope.json"), MINER, 9, &[]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("cannot read"));

    // Parameters: missing, then corrupt.
    let c1 = write("good", &good);
    let empty = tempfile::tempdir().unwrap();
    let out = c2q()
        .env("FIL_PROOFS_PARAMETER_CACHE", empty.path())
        .arg("prove")
        .arg(&c1)
        .args(["--miner", &MINER.to_string(), "--sector", "9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("missing parameters"),
        "{}",
        stderr(&out)
    );

    let corrupt_dir = tempfile::tempdir().unwrap();
    let params = ensure_2kib_params();
    let name = params.file_name().unwrap();
    let bytes = std::fs::read(&params).unwrap();
    std::fs::write(corrupt_dir.path().join(name), &bytes[..bytes.len() / 3]).unwrap();
    let out = c2q()
        .env("FIL_PROOFS_PARAMETER_CACHE", corrupt_dir.path())
        .arg("prove")
        .arg(&c1)
        .args(["--miner", &MINER.to_string(), "--sector", "9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("truncated or corrupt"),
        "{}",
        stderr(&out)
    );
}

/// `testdata c1 --shape-only` writes a C1 of the real shape with random values; `prove` refuses
/// it as bad input (exit 2, one line), in both the raw and the Commit2In form.
#[test]
fn shape_only_c1_is_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    for (name, extra) in [
        ("shape.json", None),
        ("shape-c2in.json", Some("--commit2in")),
    ] {
        let path = dir.path().join(name);
        let made = c2q()
            .args([
                "testdata",
                "c1",
                "--shape-only",
                "--proof",
                "StackedDrg2KiBV1_1",
                "--miner",
                &MINER.to_string(),
                "--sector",
                "11",
                "--out",
            ])
            .arg(&path)
            .args(extra)
            .output()
            .unwrap();
        assert!(made.status.success(), "{name}: {}", stderr(&made));
        assert!(
            String::from_utf8_lossy(&made.stdout).contains("SHAPE-ONLY"),
            "{name}: {}",
            String::from_utf8_lossy(&made.stdout)
        );
        let out = run_prove(&path, MINER, 11, &[]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains("--shape-only") && err.contains("cannot be proved"),
            "{name}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{name}: not one line: {err}");
        assert!(!dir.path().join(format!("{name}.proof")).exists());
    }
}

#[test]
fn params_generate_refuses_the_official_directory() {
    let out = c2q()
        .args([
            "params",
            "generate",
            "--proof",
            "StackedDrg2KiBV1_1",
            "--dir",
            "/var/tmp/filecoin-proof-parameters",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("official parameter directory"),
        "{}",
        stderr(&out)
    );
    let help = c2q()
        .args(["params", "generate", "--help"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("NOT a trusted setup"));
}
