//! Shared test fixtures: test parameters (generated once, cached across runs under
//! /var/tmp/c2q-test-params, never in the official directory) and 2 KiB sectors sealed on the
//! fly with filecoin-proofs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;

use c2q::porep::testdata::{self, Sealed};
use filecoin_proofs_api::RegisteredSealProof;

pub const TEST_PARAMS: &str = "/var/tmp/c2q-test-params";

pub fn c2q() -> Command {
    Command::new(env!("CARGO_BIN_EXE_c2q"))
}

/// Point filecoin-proofs (in this process) at the test parameters before it reads its settings.
pub fn use_test_params() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", TEST_PARAMS));
}

/// Make sure the 2 KiB test parameters exist, generating them with
/// `c2q params generate --if-missing` on first use (it locks the directory, so concurrent
/// tests wait for one generation).
pub fn ensure_2kib_params() -> PathBuf {
    generate_if_missing(&["--proof", "StackedDrg2KiBV1_1"])
}

/// `c2q params generate --if-missing --dir TEST_PARAMS` with `which`; the `.params` path.
fn generate_if_missing(which: &[&str]) -> PathBuf {
    use_test_params();
    let out = c2q()
        .args(["params", "generate", "--if-missing", "--dir", TEST_PARAMS])
        .args(which)
        .output()
        .expect("run c2q params generate");
    assert!(
        out.status.success(),
        "params generate {which:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

pub fn seal(proof: RegisteredSealProof, miner: u64, sector: u64, rng_seed: u64) -> Sealed {
    use_test_params();
    testdata::seal_2kib(proof, miner, sector, rng_seed).expect("seal a test sector")
}

/// Write the C1 (raw, or in a Commit2In envelope) for the CLI.
pub fn write_c1(sealed: &Sealed, dir: &Path, commit2in: bool) -> PathBuf {
    let p = dir.join(format!("c1-{}.json", sealed.sector));
    let bytes = if commit2in {
        sealed.commit2in_json().unwrap()
    } else {
        sealed.c1_json().unwrap()
    };
    std::fs::write(&p, bytes).unwrap();
    p
}

/// filecoin-proofs' own verifier, with the test parameters.
pub fn verify_seal(s: &Sealed, proof: &[u8]) -> bool {
    use_test_params();
    filecoin_proofs_api::seal::verify_seal(
        s.proof,
        s.comm_r,
        s.comm_d,
        c2q::porep::prover_id(s.miner),
        s.sector.into(),
        s.ticket,
        s.seed,
        proof,
    )
    .unwrap_or(false)
}

/// Make sure the 2 KiB SnapDeals test parameters exist (`c2q params generate --snap
/// --if-missing`, under the same lock).
pub fn ensure_snap_params() -> PathBuf {
    generate_if_missing(&["--snap", "--proof", "StackedDrg2KiBV1"])
}

/// Make sure the 2 KiB WindowPoSt test parameters exist.
pub fn ensure_post_params() -> PathBuf {
    generate_if_missing(&["--post", "--proof", "StackedDrgWindow2KiBV1_2"])
}

/// Make sure the 2 KiB WinningPoSt test parameters exist.
pub fn ensure_winning_params() -> PathBuf {
    generate_if_missing(&["--post", "--proof", "StackedDrgWinning2KiBV1"])
}

/// A 2 KiB SnapDeals test update, written as `c2q prove` takes it.
pub fn write_snap_input(dir: &Path, name: &str, seed: u64) -> (c2q::snap::SnapInput, PathBuf) {
    use_test_params();
    let input = c2q::snap::testdata::update_2kib(1000, 1, seed).expect("a test update");
    let path = dir.join(name);
    std::fs::write(&path, input.to_json().unwrap()).unwrap();
    (input, path)
}

/// filecoin-proofs' update verifier, with the test parameters.
pub fn verify_update(input: &c2q::snap::SnapInput, proof: &[u8]) -> bool {
    use_test_params();
    c2q::snap::SnapJob::new(input.clone())
        .and_then(|job| job.check_proof(proof))
        .unwrap_or(false)
}
