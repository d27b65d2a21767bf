//! The SnapDeals circuits' parameters: where they live (the same directory and file names as
//! PoRep's, `v28-empty-sector-update-merkletree-poseidon_hasher-…`), and test parameters for
//! small sectors.

use std::path::{Path, PathBuf};

use anyhow::Result;
use filecoin_proofs::MerkleTreeTrait;
use filecoin_proofs_api::RegisteredUpdateProof;
use rand::SeedableRng;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::{EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PublicParams};

use super::update_proof_name;
use crate::groth16::setup::{self, Progress};
use crate::porep::params::{self as porep_params, Generated, TestCircuit};

/// The circuit id (file stem without version) of an update proof's parameters.
pub fn cache_id(proof: RegisteredUpdateProof) -> Result<String> {
    filecoin_proofs::with_shape!(u64::from(proof.sector_size()), cache_id_for, proof,)
}

fn cache_id_for<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: RegisteredUpdateProof,
) -> Result<String> {
    let pp = public_params(proof);
    Ok(<EmptySectorUpdateCompound<Tree> as CacheableParameters<
        EmptySectorUpdateCircuit<Tree>,
        _,
    >>::cache_identifier(&pp))
}

/// The update circuit's public parameters (they depend on the sector size alone).
pub(crate) fn public_params(proof: RegisteredUpdateProof) -> PublicParams {
    PublicParams::from_sector_size(u64::from(proof.sector_size()))
}

/// The `.params` file of an update proof in the parameter directory in force.
pub fn params_path(proof: RegisteredUpdateProof) -> Result<PathBuf> {
    Ok(porep_params::params_path(&cache_id(proof)?))
}

/// A clear error for missing parameters, naming the file and how to get it.
pub fn require(path: &Path, proof: RegisteredUpdateProof) -> Result<()> {
    let name = update_proof_name(proof);
    porep_params::require_file(
        path,
        &format!("the SnapDeals proof {name}"),
        &format!("--snap --proof {name}"),
    )
}

/// Write random **test** parameters for an update proof into `dir` (see
/// `porep::params::write_test_parameters`).
pub fn generate(
    proof: RegisteredUpdateProof,
    dir: &Path,
    force: bool,
    progress: &dyn Progress,
) -> Result<Generated> {
    let id = cache_id(proof)?;
    let circuit = TestCircuit {
        id: &id,
        proof_name: &format!("update {}", update_proof_name(proof)),
        sector_size: u64::from(proof.sector_size()),
    };
    porep_params::write_test_parameters(&circuit, dir, force, progress, || {
        filecoin_proofs::with_shape!(
            u64::from(proof.sector_size()),
            generate_for,
            proof,
            &id,
            progress,
        )
    })
}

/// Test parameters for an update proof in `dir` unless they are there (under the directory's
/// generation lock); the `.params` path.
pub fn ensure(
    proof: RegisteredUpdateProof,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<PathBuf> {
    porep_params::ensure_generated(dir, &cache_id(proof)?, || {
        generate(proof, dir, false, progress).map(|_| ())
    })
}

fn generate_for<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: RegisteredUpdateProof,
    id: &str,
    progress: &dyn Progress,
) -> Result<crate::groth16::Srs> {
    let circuit = <EmptySectorUpdateCompound<Tree> as CompoundProof<_, _>>::blank_circuit(
        &public_params(proof),
    );
    let mut rng = rand_chacha::ChaCha20Rng::from_entropy();
    setup::generate(circuit, &mut rng, id, progress)
}
