//! c2q's CPU prover against bellperson (through filecoin-proofs' `seal_commit_phase2`) on the
//! same 2 KiB C1 and the same test parameters, in one run: a warm-up of each (parameters
//! loaded and cached), then alternating timed rounds. Prints a table and the ratio.
//!
//!     cargo bench --bench cpu_vs_bellperson [-- ROUNDS]

use std::path::Path;
use std::time::Instant;

use c2q::groth16::{setup::Quiet, CpuBackend};
use c2q::porep::{self, testdata, PorepJob};
use filecoin_proofs_api::RegisteredSealProof;

const MINER: u64 = 1000;
const SECTOR: u64 = 5;

fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(3);
    let dir = Path::new("/var/tmp/c2q-test-params");
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", dir);
    let proof = RegisteredSealProof::StackedDrg2KiBV1_1;
    porep::params::ensure(proof, dir, &Quiet)?;
    let sealed = testdata::seal_2kib(proof, MINER, SECTOR, 9)?;
    let c1_json = sealed.c1_json()?;
    let prover_id = porep::prover_id(MINER);

    let c2q_run = || -> anyhow::Result<f64> {
        let started = Instant::now();
        let job = PorepJob::from_c1_bytes(&c1_json, MINER, SECTOR)?;
        let (proof, _) = c2q::prove::prove_job(
            std::sync::Arc::new(job),
            vec![std::sync::Arc::new(CpuBackend)],
            None,
        )
        .map_err(|e| e.source)?;
        anyhow::ensure!(proof.len() == 192);
        Ok(started.elapsed().as_secs_f64())
    };
    let bellperson_run = || -> anyhow::Result<f64> {
        let started = Instant::now();
        let out = filecoin_proofs_api::seal::seal_commit_phase2(
            sealed.c1.clone(),
            prover_id,
            SECTOR.into(),
        )?;
        anyhow::ensure!(out.proof.len() == 192);
        Ok(started.elapsed().as_secs_f64())
    };

    eprintln!("warm-up (loads and caches the parameters in both provers) …");
    c2q_run()?;
    bellperson_run()?;
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for round in 1..=rounds {
        ours.push(c2q_run()?);
        theirs.push(bellperson_run()?);
        eprintln!(
            "round {round}/{rounds}: c2q {:.2} s, bellperson {:.2} s",
            ours[round - 1],
            theirs[round - 1]
        );
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let (o, t) = (median(&mut ours), median(&mut theirs));
    println!("| prover | 2 KiB PoRep C2, median of {rounds} (s) |");
    println!("| --- | --- |");
    println!("| c2q (cpu backend) | {o:.2} |");
    println!("| bellperson (seal_commit_phase2) | {t:.2} |");
    println!("ratio c2q / bellperson = {:.3}", o / t);
    Ok(())
}
