//! SnapDeals through the command line: `c2q testdata snap` makes a 2 KiB update with
//! filecoin-proofs, `c2q prove` proves it on the CPU (recognising the input by its fields) and
//! `c2q verify` checks the proof with filecoin-proofs' update verifier; bad inputs and missing
//! parameters get `prove`'s exit codes.

mod common;

use std::process::Output;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_2kib_update_is_proved_verified_and_bad_inputs_are_refused() {
    common::ensure_snap_params();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("update.json");
    let made = common::c2q()
        .args(["testdata", "snap", "--seed", "3", "--out"])
        .arg(&input)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));

    let proof = dir.path().join("update.proof");
    let out = common::c2q()
        .env("FIL_PROOFS_PARAMETER_CACHE", common::TEST_PARAMS)
        .args(["prove", "--backend", "cpu", "--json", "--out"])
        .arg(&proof)
        .arg(&input)
        .output()
        .unwrap();
    assert!(out.status.success(), "c2q prove failed: {}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["registered_proof"], "StackedDrg2KiBV1", "{report}");
    assert_eq!(report["proof_bytes"], 192, "{report}");
    let parsed = c2q::snap::read_snap_input_file(&input).unwrap();
    assert!(common::verify_update(
        &parsed,
        &std::fs::read(&proof).unwrap()
    ));

    let verify = |input: &std::path::Path| {
        common::c2q()
            .env("FIL_PROOFS_PARAMETER_CACHE", common::TEST_PARAMS)
            .arg("verify")
            .arg(input)
            .arg(&proof)
            .output()
            .unwrap()
    };
    let out = verify(&input);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "valid");
    // The proof of one update is not a proof of another.
    let (_, other) = common::write_snap_input(dir.path(), "other.json", 4);
    let out = verify(&other);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("does not verify"), "{}", stderr(&out));

    // Bad inputs: exit 2 with a one-line reason, before any proving.
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&input).unwrap()).unwrap();
    let one = doc["vanilla_proofs"][0].clone();
    doc["vanilla_proofs"] = serde_json::json!([one.clone(), one]);
    let doubled = dir.path().join("doubled.json");
    std::fs::write(&doubled, serde_json::to_vec(&doc).unwrap()).unwrap();
    let other_doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&other).unwrap()).unwrap();
    doc["vanilla_proofs"] = serde_json::json!([other_doc["vanilla_proofs"][0].clone()]);
    let swapped = dir.path().join("swapped.json");
    std::fs::write(&swapped, serde_json::to_vec(&doc).unwrap()).unwrap();
    for (file, reason) in [
        (
            &doubled,
            "2 vanilla partition proofs, StackedDrg2KiBV1 has 1",
        ),
        (&swapped, "do not verify against comm_r_old"),
    ] {
        let out = common::c2q()
            .env("FIL_PROOFS_PARAMETER_CACHE", common::TEST_PARAMS)
            .args(["prove", "--backend", "cpu"])
            .arg(file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(reason), "{}", stderr(&out));
        assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    }

    // No parameters: exit 3, naming the file and how to make test ones.
    let empty = tempfile::tempdir().unwrap();
    let out = common::c2q()
        .env("FIL_PROOFS_PARAMETER_CACHE", empty.path())
        .args(["prove", "--backend", "cpu"])
        .arg(&input)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("params generate --snap --proof StackedDrg2KiBV1"),
        "{}",
        stderr(&out)
    );

    // `params check` covers the update circuit's files, and names test parameters as such.
    let out = common::c2q()
        .args([
            "params",
            "check",
            "--size-only",
            "--proof",
            "snap-2KiB",
            "--dir",
        ])
        .arg(common::TEST_PARAMS)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let listed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        listed
            .lines()
            .filter(|l| l.contains("empty-sector-update") && l.contains("test parameters"))
            .count(),
        2,
        "{listed}"
    );

    // A C1 output still needs its miner and sector; `--snap` on a C1 says it is not one.
    let sealed = common::seal(
        filecoin_proofs_api::RegisteredSealProof::StackedDrg2KiBV1_1,
        1000,
        2,
        5,
    );
    let c1 = common::write_c1(&sealed, dir.path(), false);
    for (extra, reason) in [
        (&[][..], "give --miner and --sector"),
        (&["--snap"][..], "not a SnapDeals input"),
    ] {
        let out = common::c2q()
            .args(["prove", "--backend", "cpu"])
            .args(extra)
            .arg(&c1)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(reason), "{}", stderr(&out));
    }
}

/// `testdata snap --shape-only` writes an update input of the real shape with random values,
/// for any update proof; `prove` and `verify` refuse it as bad input (exit 2, one line);
/// without `--shape-only` only a 2 KiB update is sealed.
#[test]
fn shape_only_update_is_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("shape.json");
    let made = common::c2q()
        .args([
            "testdata",
            "snap",
            "--shape-only",
            "--proof",
            "StackedDrg8MiBV1",
            "--out",
        ])
        .arg(&input)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    let said = String::from_utf8_lossy(&made.stdout);
    assert!(
        said.contains("SHAPE-ONLY") && said.contains("4 partitions of 10 challenges"),
        "{said}"
    );
    let parsed = c2q::snap::read_snap_input_file(&input).unwrap();
    assert!(parsed.shape_only);
    assert_eq!(parsed.vanilla_proofs.len(), 4);

    let proof = dir.path().join("shape.proof");
    std::fs::write(&proof, [0u8; 4 * 192]).unwrap();
    for command in [&["prove", "--backend", "cpu"][..], &["verify"][..]] {
        let mut run = common::c2q();
        run.args(command).arg(&input);
        if command[0] == "verify" {
            run.arg(&proof);
        }
        let out = run.output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {err}");
        assert!(
            err.contains("--shape-only") && err.contains("cannot be proved"),
            "{command:?}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{command:?}: {err}");
    }

    let out = common::c2q()
        .args(["testdata", "snap", "--proof", "StackedDrg8MiBV1", "--out"])
        .arg(dir.path().join("sealed.json"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--shape-only"), "{}", stderr(&out));
}
