//! A non-interactive 2 KiB PoRep C1 has 13 partitions sharing the interactive 2 KiB
//! parameters: a real multi-partition job. filecoin-proofs' `verify_seal` accepts only the
//! aggregated form for this proof type, so each partition proof is checked against
//! `get_seal_inputs` with bellperson's verifier and the `.vk` file from the parameter directory,
//! and by `c2q verify`, which checks it the same way.

mod common;

use bellperson::groth16 as bp;
use blstrs::Bls12;
use common::*;
use filecoin_proofs_api::RegisteredSealProof;

#[test]
fn proves_all_13_partitions_of_a_non_interactive_sector() {
    let params = ensure_2kib_params();
    let proof_type = RegisteredSealProof::StackedDrg2KiBV1_2_Feat_NonInteractivePoRep;
    assert_eq!(
        c2q::porep::params::cache_id(proof_type).unwrap(),
        c2q::porep::params::cache_id(RegisteredSealProof::StackedDrg2KiBV1_1).unwrap(),
        "non-interactive 2 KiB should share the interactive parameters"
    );
    let sealed = seal(proof_type, 77, 3, 5);
    let dir = tempfile::tempdir().unwrap();
    let c1 = write_c1(&sealed, dir.path(), false);
    let out_path = dir.path().join("ni.proof");
    let out = c2q()
        .env("FIL_PROOFS_PARAMETER_CACHE", TEST_PARAMS)
        .arg("prove")
        .arg(&c1)
        .args(["--miner", "77", "--sector", "3", "--json", "--out"])
        .arg(&out_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["partitions"], 13);

    let proof = std::fs::read(&out_path).unwrap();
    assert_eq!(proof.len(), 13 * 192);
    let inputs = filecoin_proofs_api::seal::get_seal_inputs(
        proof_type,
        sealed.comm_r,
        sealed.comm_d,
        c2q::porep::prover_id(77),
        3.into(),
        sealed.ticket,
        sealed.seed,
    )
    .unwrap();
    assert_eq!(inputs.len(), 13);
    let vk_bytes = std::fs::read(params.with_extension("vk")).unwrap();
    let vk = bp::VerifyingKey::<Bls12>::read(&vk_bytes[..]).unwrap();
    let pvk = bp::prepare_verifying_key(&vk);
    for (k, (chunk, inputs)) in proof.chunks(192).zip(&inputs).enumerate() {
        let p = bp::Proof::<Bls12>::read(chunk).unwrap();
        assert!(
            bp::verify_proof(&pvk, &p, inputs).unwrap(),
            "partition {k} rejected"
        );
    }
    // Partition proofs are bound to their partition: swapping two must fail.
    let p0 = bp::Proof::<Bls12>::read(&proof[..192]).unwrap();
    assert!(!bp::verify_proof(&pvk, &p0, &inputs[1]).unwrap());

    // `c2q verify` checks the same way, and names the partitions that fail.
    let run_verify = |proof_file: &std::path::Path| {
        c2q()
            .env("FIL_PROOFS_PARAMETER_CACHE", TEST_PARAMS)
            .arg("verify")
            .arg(&c1)
            .arg(proof_file)
            .args(["--miner", "77", "--sector", "3"])
            .output()
            .unwrap()
    };
    let out = run_verify(&out_path);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "valid");
    let mut swapped = proof.clone();
    swapped[..192].copy_from_slice(&proof[192..384]);
    swapped[192..384].copy_from_slice(&proof[..192]);
    let swapped_path = dir.path().join("swapped.proof");
    std::fs::write(&swapped_path, &swapped).unwrap();
    let out = run_verify(&swapped_path);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("partition(s) 0, 1 do not verify"), "{err}");
}
