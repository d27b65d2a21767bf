//! The PoSt circuits' parameters: where they live (the same directory and file names as
//! PoRep's, `v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-…`), and test
//! parameters for small sectors.

use std::path::{Path, PathBuf};

use anyhow::Result;
use filecoin_proofs::MerkleTreeTrait;
use filecoin_proofs_api::RegisteredPoStProof;
use rand::SeedableRng;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_post::fallback::{self, FallbackPoStCompound};

use super::{config, is_window, post_proof_name};
use crate::groth16::setup::{self, Progress};
use crate::porep::params::{self as porep_params, Generated, TestCircuit};

/// The circuit id (file stem without version) of a PoSt proof's parameters, as filecoin-proofs
/// names it.
pub fn cache_id(proof: RegisteredPoStProof) -> Result<String> {
    filecoin_proofs::with_shape!(u64::from(proof.sector_size()), cache_id_for, proof,)
}

fn cache_id_for<Tree: 'static + MerkleTreeTrait>(proof: RegisteredPoStProof) -> Result<String> {
    config(proof).get_cache_identifier::<Tree>()
}

/// The vanilla public parameters of a PoSt proof's circuit, as filecoin-proofs sets them up: a
/// WinningPoSt circuit holds one challenge per "sector", a WindowPoSt one its partition's
/// sectors of ten challenges each.
pub(crate) fn public_params<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredPoStProof,
) -> Result<fallback::PublicParams> {
    let config = config(proof);
    if is_window(proof) {
        filecoin_proofs::parameters::window_post_public_params::<Tree>(&config)
    } else {
        filecoin_proofs::parameters::winning_post_public_params::<Tree>(&config)
    }
}

/// The `.params` file of a PoSt proof in the parameter directory in force.
pub fn params_path(proof: RegisteredPoStProof) -> Result<PathBuf> {
    Ok(porep_params::params_path(&cache_id(proof)?))
}

/// A clear error for missing parameters, naming the file and how to get it.
pub fn require(path: &Path, proof: RegisteredPoStProof) -> Result<()> {
    let name = post_proof_name(proof);
    porep_params::require_file(
        path,
        &format!("the PoSt proof {name}"),
        &format!("--post --proof {name}"),
    )
}

/// Write random **test** parameters for a PoSt proof into `dir` (see
/// `porep::params::write_test_parameters`).
pub fn generate(
    proof: RegisteredPoStProof,
    dir: &Path,
    force: bool,
    progress: &dyn Progress,
) -> Result<Generated> {
    let id = cache_id(proof)?;
    let circuit = TestCircuit {
        id: &id,
        proof_name: &post_proof_name(proof),
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

/// Test parameters for a PoSt proof in `dir` unless they are there (under the directory's
/// generation lock); the `.params` path.
pub fn ensure(proof: RegisteredPoStProof, dir: &Path, progress: &dyn Progress) -> Result<PathBuf> {
    porep_params::ensure_generated(dir, &cache_id(proof)?, || {
        generate(proof, dir, false, progress).map(|_| ())
    })
}

fn generate_for<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredPoStProof,
    id: &str,
    progress: &dyn Progress,
) -> Result<crate::groth16::Srs> {
    let circuit = <FallbackPoStCompound<Tree> as CompoundProof<_, _>>::blank_circuit(
        &public_params::<Tree>(proof)?,
    );
    let mut rng = rand_chacha::ChaCha20Rng::from_entropy();
    setup::generate(circuit, &mut rng, id, progress)
}
