//! Shape-only PoSt inputs: full-size WindowPoSt partitions and WinningPoSts without sealed
//! sectors.
//!
//! A 32 GiB WindowPoSt partition proves 2,349 sectors, and its vanilla proofs need every one
//! of them sealed and on disk. What the prover's cost depends on is the input's *shape*: how
//! many sectors, how many challenges per sector, how long every Merkle path is and with which
//! arities. [`generate`] writes inputs with exactly that shape for any registered PoSt proof,
//! and random values everywhere else, as `porep::shape` does for C1 outputs:
//!
//! - a WindowPoSt input is a full partition (`sectors_per_partition` sectors), a WinningPoSt
//!   one sector; the sector numbers ascend, as the chain's verifier takes them;
//! - each sector's vanilla proof is the bytes `generate_single_vanilla_proof` would give (a
//!   bincode `FallbackPoStSectorProof`), with the proof's number of challenges, derived from
//!   the randomness and the sector number as filecoin-proofs derives them, so every path opens
//!   the node a real one would;
//! - the paths have the base, sub-tree and top-tree arities of the sector's tree (R_last);
//! - the randomness, leaves, siblings and roots are random. The roots are consistent where the
//!   circuit needs them to be: every path of a sector ends at its comm_r_last, and
//!   `comm_r = H(comm_c, comm_r_last)`.
//!
//! Such an input synthesizes into the circuit of exactly the real size, but it cannot be
//! proved: its paths hash to nothing. Its JSON carries `"c2q_shape_only": true`
//! ([`PostInput::shape_only`]); `PostJob::new` refuses it and only `PostJob::for_benchmark`
//! accepts it.

use anyhow::{ensure, Context, Result};
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::{FallbackPoStSectorProof, MerkleTreeTrait};
use filecoin_proofs_api::{RegisteredPoStProof, SectorId};
use rand::{RngCore, SeedableRng};
use rayon::prelude::*;
use storage_proofs_post::fallback;

use super::input::PostInput;
use super::{is_window, post_proof_name, sectors_per_partition};
use crate::porep::shape::{inclusion_proof, tree_levels};

pub use crate::porep::shape::MARKER;

type TreeDomain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;

/// Make a shape-only input for `proof` and `miner`, with random values drawn from `seed` (the
/// same seed gives the same input): a full WindowPoSt partition, or a WinningPoSt's one
/// sector.
pub fn generate(proof: RegisteredPoStProof, miner: u64, seed: u64) -> Result<PostInput> {
    let name = post_proof_name(proof);
    ensure!(
        proof.major_version() == 1,
        "registered PoSt proof {name} is not version 1"
    );
    crate::porep::check_sector_identity(miner, 0)?;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    // The chain's randomness is a field element: clear the top bits.
    let mut randomness = [0u8; 32];
    rng.fill_bytes(&mut randomness);
    randomness[31] &= 0x3f;
    let count = if is_window(proof) {
        sectors_per_partition(proof)
    } else {
        1
    };
    // Ascending, with gaps, as a deadline's sectors are.
    let mut next = rng.next_u64() % 100_000;
    let numbers: Vec<u64> = (0..count)
        .map(|_| {
            next += 1 + rng.next_u64() % 8;
            next
        })
        .collect();
    let ids: Vec<SectorId> = numbers.iter().map(|&n| n.into()).collect();
    let challenges = filecoin_proofs_api::post::generate_fallback_sector_challenges(
        proof,
        &randomness,
        &ids,
        crate::porep::prover_id(miner),
    )
    .context("deriving the sectors' challenges failed")?;
    let sectors = ids
        .iter()
        .map(|id| {
            let challenged = challenges
                .get(id)
                .with_context(|| format!("no challenges for sector {id:?}"))?;
            Ok((*id, challenged.clone(), rng.next_u64()))
        })
        .collect::<Result<Vec<_>>>()?;
    let vanilla_proofs = filecoin_proofs::with_shape!(
        u64::from(proof.sector_size()),
        sector_proofs,
        proof,
        &sectors,
    )
    .with_context(|| format!("cannot make a shape-only input for {name}"))?;
    Ok(PostInput {
        registered_proof: proof,
        miner_id: miner,
        randomness,
        partition_index: 0,
        vanilla_proofs,
        shape_only: true,
    })
}

/// Each sector's vanilla proof, serialized as filecoin-proofs-api serializes it; sectors are
/// `(id, challenges, seed of its random values)`, made in parallel.
fn sector_proofs<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredPoStProof,
    sectors: &[(SectorId, Vec<u64>, u64)],
) -> Result<Vec<Vec<u8>>> {
    let nodes = usize::try_from(u64::from(proof.sector_size()) / 32)?;
    let levels = tree_levels::<Tree>(nodes)?;
    sectors
        .par_iter()
        .map(|(id, challenges, seed)| {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(*seed);
            let comm_c = TreeDomain::<Tree>::random(&mut rng);
            let comm_r_last = TreeDomain::<Tree>::random(&mut rng);
            let comm_r = <Tree::Hasher as Hasher>::Function::hash2(&comm_c, &comm_r_last);
            let inclusion_proofs = challenges
                .iter()
                .map(|&c| {
                    let node = usize::try_from(c)?;
                    ensure!(
                        node < nodes,
                        "challenge {c} beyond the sector's {nodes} nodes"
                    );
                    Ok(inclusion_proof(&levels, node, comm_r_last, &mut rng))
                })
                .collect::<Result<Vec<_>>>()?;
            let sector = FallbackPoStSectorProof::<Tree> {
                sector_id: *id,
                comm_r,
                vanilla_proof: fallback::Proof {
                    sectors: vec![fallback::SectorProof {
                        inclusion_proofs,
                        comm_c,
                        comm_r_last,
                    }],
                },
            };
            bincode::serialize(&sector).context("cannot serialize a sector's vanilla proof")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::post::REGISTERED_POST_PROOFS;

    /// Every registered PoSt proof: the real number of sectors and challenges, ascending sector
    /// numbers, paths of the sector's tree shape opening the challenged nodes, consistent roots.
    #[test]
    fn every_proof_has_the_real_shape() {
        for proof in REGISTERED_POST_PROOFS {
            let input = generate(proof, 1000, 3).unwrap();
            assert!(input.shape_only);
            let config = proof.as_v1_config();
            let sectors = if is_window(proof) {
                config.sector_count
            } else {
                1
            };
            assert_eq!(input.vanilla_proofs.len(), sectors, "{proof:?}");
            filecoin_proofs::with_shape!(
                u64::from(proof.sector_size()),
                check_shape,
                &input,
                config.challenge_count,
            );
            // The same seed, the same input; another seed, other values.
            if u64::from(proof.sector_size()) <= 8 << 20 {
                assert_eq!(generate(proof, 1000, 3).unwrap(), input);
                assert_ne!(generate(proof, 1000, 4).unwrap(), input);
            }
        }
    }

    fn check_shape<Tree: 'static + MerkleTreeTrait>(input: &PostInput, challenges: usize) {
        use storage_proofs_core::merkle::MerkleProofTrait;
        let nodes = (u64::from(input.registered_proof.sector_size()) / 32) as usize;
        let levels = tree_levels::<Tree>(nodes).unwrap();
        let proofs: Vec<FallbackPoStSectorProof<Tree>> = input
            .vanilla_proofs
            .iter()
            .map(|b| bincode::deserialize(b).unwrap())
            .collect();
        let numbers: Vec<u64> = proofs.iter().map(|p| u64::from(p.sector_id)).collect();
        assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
        let ids: Vec<SectorId> = numbers.iter().map(|&n| n.into()).collect();
        let expected = filecoin_proofs_api::post::generate_fallback_sector_challenges(
            input.registered_proof,
            &input.randomness,
            &ids,
            crate::porep::prover_id(input.miner_id),
        )
        .unwrap();
        for p in &proofs {
            assert_eq!(p.vanilla_proof.sectors.len(), 1);
            let sector = &p.vanilla_proof.sectors[0];
            assert_eq!(
                p.comm_r,
                <Tree::Hasher as Hasher>::Function::hash2(&sector.comm_c, &sector.comm_r_last)
            );
            assert_eq!(sector.inclusion_proofs.len(), challenges);
            for (path, &c) in sector.inclusion_proofs.iter().zip(&expected[&p.sector_id]) {
                assert_eq!(path.root(), sector.comm_r_last);
                assert_eq!(path.path_index(), c as usize);
                let arities: Vec<usize> = path.path().iter().map(|(h, _)| h.len() + 1).collect();
                assert_eq!(arities, levels);
            }
        }
    }
}
