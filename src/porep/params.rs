//! Where parameters live, and making test parameters for small sectors.
//!
//! c2q reads parameters from `FIL_PROOFS_PARAMETER_CACHE` (default
//! `/var/tmp/filecoin-proof-parameters`), under the file names the rest of Filecoin uses, so an
//! existing parameter directory works as it is.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};
use filecoin_proofs::{parameters::setup_params, DefaultPieceHasher, MerkleTreeTrait};
use filecoin_proofs_api::RegisteredSealProof;
use rand::SeedableRng;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::parameter_cache::{CacheableParameters, VERSION};
use storage_proofs_porep::stacked::{StackedCircuit, StackedCompound, StackedDrg};

use super::input::proof_name;
use crate::groth16::setup::{self, Progress};

/// Where official Filecoin parameters live unless configured otherwise.
pub const OFFICIAL_DIR: &str = "/var/tmp/filecoin-proof-parameters";

/// The parameter directory in force.
pub fn params_dir() -> PathBuf {
    match std::env::var_os("FIL_PROOFS_PARAMETER_CACHE") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(OFFICIAL_DIR),
    }
}

/// The `.params` file for a circuit id in the parameter directory in force.
pub fn params_path(cache_id: &str) -> PathBuf {
    params_dir().join(file_name(cache_id, "params"))
}

/// `v28-<cache id>.<ext>`: the file names filecoin-proofs uses.
pub fn file_name(cache_id: &str, ext: &str) -> String {
    format!("v{VERSION}-{cache_id}.{ext}")
}

/// Extension of the marker `generate` writes beside test parameters
/// (`v28-<cache id>.c2q-test-params`). Test parameters have the shape of official ones, so
/// nothing in the `.params` or `.vk` file itself tells them apart without hashing it; the
/// marker lets `c2q params check --size-only` and the worker's start-up check name them.
pub const TEST_MARKER_EXT: &str = "c2q-test-params";

/// The test-parameter marker for a parameter file (`.params` or `.vk`) of any circuit.
pub fn test_marker_for(file: &Path) -> PathBuf {
    file.with_extension(TEST_MARKER_EXT)
}

/// A clear error for missing parameters, naming the file and how to get it.
pub fn require(path: &Path, proof: RegisteredSealProof) -> Result<()> {
    let name = proof_name(proof);
    require_file(path, &name, &format!("--proof {name}"))
}

/// The parameter file `path` of `what` (a proof's name), or an error that names the file and
/// how to get it: `generate` is the `c2q params generate` arguments that make test ones.
pub fn require_file(path: &Path, what: &str, generate: &str) -> Result<()> {
    if path.is_file() {
        return Ok(());
    }
    bail!(
        "missing parameters for {what}: {} does not exist (set FIL_PROOFS_PARAMETER_CACHE, fetch \
         the official parameters, or for test sectors run `c2q params generate {generate} --dir \
         DIR`)",
        path.display(),
    )
}

/// The circuit id (file stem without version) of a registered proof's parameters.
pub fn cache_id(proof: RegisteredSealProof) -> Result<String> {
    let config = proof.as_v1_config();
    filecoin_proofs::with_shape!(u64::from(proof.sector_size()), cache_id_for, &config,)
}

fn cache_id_for<Tree: 'static + MerkleTreeTrait>(
    config: &filecoin_proofs::PoRepConfig,
) -> Result<String> {
    let pp = public_params::<Tree>(config)?;
    Ok(
        <StackedCompound<Tree, DefaultPieceHasher> as CacheableParameters<
            StackedCircuit<Tree, DefaultPieceHasher>,
            _,
        >>::cache_identifier(&pp),
    )
}

fn public_params<Tree: 'static + MerkleTreeTrait>(
    config: &filecoin_proofs::PoRepConfig,
) -> Result<storage_proofs_porep::stacked::PublicParams<Tree>> {
    let compound = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        _,
    >>::setup(&compound_proof::SetupParams {
        vanilla_params: setup_params(config)?,
        partitions: Some(usize::from(config.partitions)),
        priority: false,
    })?;
    Ok(compound.vanilla_params)
}

/// What `generate` wrote.
pub struct Generated {
    pub params: PathBuf,
    pub vk: PathBuf,
    pub meta: PathBuf,
    /// The test-parameter marker (`TEST_MARKER_EXT`).
    pub marker: PathBuf,
    pub bytes: u64,
}

/// Write random **test** parameters for `proof` into `dir`, under the names filecoin-proofs
/// looks for. Refuses the official directory unless `force`, and refuses to replace existing
/// files unless `force`.
pub fn generate(
    proof: RegisteredSealProof,
    dir: &Path,
    force: bool,
    progress: &dyn Progress,
) -> Result<Generated> {
    let id = cache_id(proof)?;
    let config = proof.as_v1_config();
    let circuit = TestCircuit {
        id: &id,
        proof_name: &proof_name(proof),
        sector_size: u64::from(proof.sector_size()),
    };
    write_test_parameters(&circuit, dir, force, progress, || {
        filecoin_proofs::with_shape!(
            u64::from(proof.sector_size()),
            generate_for,
            &config,
            &id,
            progress,
        )
    })
}

/// The circuit test parameters are made for: its id (the file stem), the registered proof's
/// name (recorded in the marker) and its sector size (the `.meta` file).
pub struct TestCircuit<'a> {
    pub id: &'a str,
    pub proof_name: &'a str,
    pub sector_size: u64,
}

/// Write the test parameters `make` generates for `circuit` into `dir`: `.params`, `.vk`,
/// `.meta` and the test marker, refusing the official directory and existing files unless
/// `force`. Any circuit's (PoRep's, SnapDeals') test parameters are written this way.
pub fn write_test_parameters(
    circuit: &TestCircuit,
    dir: &Path,
    force: bool,
    progress: &dyn Progress,
    make: impl FnOnce() -> Result<crate::groth16::Srs>,
) -> Result<Generated> {
    let official = Path::new(OFFICIAL_DIR);
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    ensure!(
        force || !same(dir, official),
        "{} is the official parameter directory: test parameters would shadow real ones \
         (use --force if you really mean it)",
        dir.display()
    );
    let id = circuit.id;
    let out = Generated {
        params: dir.join(file_name(id, "params")),
        vk: dir.join(file_name(id, "vk")),
        meta: dir.join(file_name(id, "meta")),
        marker: dir.join(file_name(id, TEST_MARKER_EXT)),
        bytes: 0,
    };
    for p in [&out.params, &out.vk] {
        ensure!(
            force || !p.exists(),
            "{} already exists (use --force to replace it)",
            p.display()
        );
    }
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;

    let srs = make()?;

    progress.stage("writing files");
    // The marker goes first: a crash while writing may leave a marker without parameters,
    // never test parameters without their marker.
    let marker = &out.marker;
    let note = serde_json::json!({
        "test_parameters": true,
        "generated_by": format!("c2q {} params generate", env!("CARGO_PKG_VERSION")),
        "registered_proof": circuit.proof_name,
        "trusted_setup": false,
    });
    fs::write(marker, format!("{note}\n"))
        .with_context(|| format!("cannot write {}", marker.display()))?;
    // Written under a temporary name and renamed, so a crash never leaves a truncated file
    // under the name the cache looks for.
    let tmp = out.params.with_extension("params.partial");
    srs.write(&tmp)?;
    fs::rename(&tmp, &out.params)
        .with_context(|| format!("cannot move {} into place", tmp.display()))?;
    let mut vk = Vec::new();
    srs.vk.write(&mut vk)?;
    fs::write(&out.vk, vk).with_context(|| format!("cannot write {}", out.vk.display()))?;
    let meta = serde_json::json!({ "sector_size": circuit.sector_size });
    fs::write(&out.meta, meta.to_string())
        .with_context(|| format!("cannot write {}", out.meta.display()))?;
    let bytes = fs::metadata(&out.params)?.len();
    Ok(Generated { bytes, ..out })
}

/// Generate test parameters for `proof` into `dir` unless they are already there. A lock file
/// in `dir` makes concurrent callers (parallel tests, several processes) wait for one
/// generation instead of racing.
pub fn ensure(proof: RegisteredSealProof, dir: &Path, progress: &dyn Progress) -> Result<PathBuf> {
    ensure_generated(dir, &cache_id(proof)?, || {
        generate(proof, dir, false, progress).map(|_| ())
    })
}

/// `generate` the parameters of circuit `id` in `dir` unless its `.params` file is there,
/// under `dir`'s generation lock; the `.params` path.
pub fn ensure_generated(
    dir: &Path,
    id: &str,
    generate: impl FnOnce() -> Result<()>,
) -> Result<PathBuf> {
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let lock_path = dir.join(".c2q-generate.lock");
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("cannot open {}", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("cannot lock {}", lock_path.display()))?;
    let path = dir.join(file_name(id, "params"));
    if !path.is_file() {
        generate()?;
    }
    Ok(path)
}

fn generate_for<Tree: 'static + MerkleTreeTrait>(
    config: &filecoin_proofs::PoRepConfig,
    id: &str,
    progress: &dyn Progress,
) -> Result<crate::groth16::Srs> {
    let pp = public_params::<Tree>(config)?;
    let circuit = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        _,
    >>::blank_circuit(&pp);
    let mut rng = rand_chacha::ChaCha20Rng::from_entropy();
    setup::generate(circuit, &mut rng, id, progress)
}
