//! Shape-only SnapDeals inputs: full-size update inputs without a sealed and updated sector.
//!
//! Benchmarking the update circuit at 32 GiB or 64 GiB needs an update's vanilla proofs, and
//! making real ones takes a sealed sector, its data encoded into it and its trees (hours and
//! hundreds of GiB of disk). What the prover's cost depends on is the *shape* of the input:
//! partitions, challenges per partition, the length and arities of every Merkle path, the apex
//! leaves. This module writes inputs with exactly that shape for any registered update proof,
//! and random values elsewhere, as [`porep::shape`](crate::porep::shape) does for C1 outputs:
//!
//! - partitions, challenges, apex leaves and `h` come from the update proof's configuration
//!   and storage-proofs-update's public parameters;
//! - the challenges are derived from comm_r_new and the partition (`Challenges`), as the real
//!   ones are, so every path opens the node a real proof would;
//! - TreeROld and TreeRNew paths have the base, sub-tree and top-tree arities of the sector's
//!   tree type; TreeD paths are binary, of the tree's height, their levels above the apex leaves
//!   the apex tree's nodes (hashed from the partition's apex leaves) and then the partition path
//!   (one per partition, shared by its challenges, as the circuit requires);
//! - leaves, siblings, apex leaves and roots are random field elements, consistent where the
//!   circuit asserts or storage-proofs relates them: `comm_r = H(comm_c, root_r)` for the old
//!   and the new replica, and every challenge's new leaf the encoding of its data leaf,
//!   `leaf_r_new = leaf_r_old + leaf_d_new · rho`, with phi = H(comm_d_new, comm_r_old) and rho
//!   from phi and the challenge's high bits (the circuit asserts this one).
//!
//! Such an input synthesizes into circuits of exactly the real size, but it cannot be proved:
//! its Merkle paths do not hash to their roots. Its JSON carries `"c2q_shape_only": true`;
//! `SnapJob::new` refuses it and only `SnapJob::for_benchmark` accepts it.

use anyhow::{anyhow, ensure, Context, Result};
use blstrs::Scalar as Fr;
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::MerkleTreeTrait;
use filecoin_proofs_api::RegisteredUpdateProof;
use rand::{RngCore, SeedableRng};
use rayon::prelude::*;
use storage_proofs_core::merkle::MerkleProof;
use storage_proofs_update::constants::{
    TreeDArity, TreeDDomain, TreeDHasher, TreeRDomain, TreeRHasher,
};
use storage_proofs_update::{phi, rho, ChallengeProof, Challenges, PartitionProof, PublicParams};

use super::input::SnapInput;
use super::{params, update_config, update_proof_name};
use crate::porep::shape::{inclusion_proof_of, tree_levels};

pub use super::input::SHAPE_ONLY_KEY as MARKER;

/// Make a shape-only SnapDeals input for `proof`, with random values drawn from `seed` (the
/// same seed gives the same input).
pub fn generate(proof: RegisteredUpdateProof, seed: u64) -> Result<SnapInput> {
    let name = update_proof_name(proof);
    ensure!(
        proof.major_version() == 1,
        "registered update proof {name} is not version 1"
    );
    filecoin_proofs::with_shape!(u64::from(proof.sector_size()), generate_tree, proof, seed,)
        .with_context(|| format!("cannot make a shape-only SnapDeals input for {name}"))
}

/// Challenges in each partition of an update proof (all partitions have as many).
pub fn challenges_per_partition(proof: RegisteredUpdateProof) -> usize {
    params::public_params(proof).challenge_count
}

/// What every partition of the update shares.
struct Update {
    params: PublicParams,
    /// The number of high bits of a challenge that rho is drawn from.
    h: usize,
    /// Arity of each level of a TreeR path, leaf first.
    tree_r_levels: Vec<usize>,
    comm_c: TreeRDomain,
    root_r_old: TreeRDomain,
    root_r_new: TreeRDomain,
    comm_r_new: TreeRDomain,
    comm_d_new: TreeDDomain,
    phi: TreeRDomain,
}

fn generate_tree<TreeR: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: RegisteredUpdateProof,
    seed: u64,
) -> Result<SnapInput> {
    let params = params::public_params(proof);
    let config = update_config(proof);
    ensure!(
        usize::from(config.update_partitions) == params.partition_count,
        "{} partitions configured, storage-proofs-update has {}",
        usize::from(config.update_partitions),
        params.partition_count
    );
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let comm_c = TreeRDomain::random(&mut rng);
    let root_r_old = TreeRDomain::random(&mut rng);
    let root_r_new = TreeRDomain::random(&mut rng);
    let comm_d_new = TreeDDomain::random(&mut rng);
    let comm_r_old = <TreeRHasher as Hasher>::Function::hash2(&comm_c, &root_r_old);
    let comm_r_new = <TreeRHasher as Hasher>::Function::hash2(&comm_c, &root_r_new);
    let update = Update {
        h: config.h,
        tree_r_levels: tree_levels::<TreeR>(params.sector_nodes)?,
        comm_c,
        root_r_old,
        root_r_new,
        comm_r_new,
        comm_d_new,
        phi: phi(&comm_d_new, &comm_r_old),
        params,
    };

    // One random stream per partition, drawn up front, so the output does not depend on how
    // the partitions are spread over threads.
    let partition_seeds: Vec<u64> = (0..update.params.partition_count)
        .map(|_| rng.next_u64())
        .collect();
    let vanilla_proofs = partition_seeds
        .into_par_iter()
        .enumerate()
        .map(|(k, partition_seed)| {
            let proof = partition_proof::<TreeR>(&update, k, partition_seed);
            bincode::serialize(&proof)
                .with_context(|| format!("cannot serialize the proof of partition {k}"))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(SnapInput {
        registered_proof: proof,
        comm_r_old: bytes32(comm_r_old.as_ref())?,
        comm_r_new: bytes32(comm_r_new.as_ref())?,
        comm_d_new: bytes32(comm_d_new.as_ref())?,
        vanilla_proofs,
        shape_only: true,
    })
}

/// Partition `k`'s vanilla proof, laid out as `EmptySectorUpdate::prove` lays it out.
fn partition_proof<TreeR: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    update: &Update,
    k: usize,
    seed: u64,
) -> PartitionProof<TreeR> {
    let PublicParams {
        sector_nodes,
        challenge_bit_len,
        partition_bit_len,
        apex_leaf_count,
        apex_leaf_bit_len,
        ..
    } = update.params;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let apex_leafs: Vec<TreeDDomain> = (0..apex_leaf_count)
        .map(|_| TreeDDomain::random(&mut rng))
        .collect();
    // The apex tree, leaves first: TreeD's rows from the apex leaves to the partition's root.
    let mut apex_tree = vec![apex_leafs.clone()];
    for _ in 0..apex_leaf_bit_len {
        let row = apex_tree[apex_tree.len() - 1]
            .chunks(2)
            .map(|pair| <TreeDHasher as Hasher>::Function::hash2(&pair[0], &pair[1]))
            .collect();
        apex_tree.push(row);
    }
    // From the partition's root to comm_d: one path for all of the partition's challenges.
    let partition_path: Vec<TreeDDomain> = (0..partition_bit_len)
        .map(|_| TreeDDomain::random(&mut rng))
        .collect();
    let apex_leafs_height = challenge_bit_len - partition_bit_len - apex_leaf_bit_len;
    let high_bits_shr = challenge_bit_len - update.h;

    let challenge_proofs = Challenges::new(sector_nodes, update.comm_r_new, k)
        .map(|c| {
            let node = c as usize;
            let leaf_r_old = TreeRDomain::random(&mut rng);
            let leaf_d_new = TreeDDomain::random(&mut rng);
            let rho = rho(&update.phi, c >> high_bits_shr);
            let leaf_r_new: TreeRDomain =
                (Fr::from(leaf_r_old) + Fr::from(leaf_d_new) * rho).into();
            let proof_r_old = inclusion_proof_of(
                &update.tree_r_levels,
                node,
                leaf_r_old,
                update.root_r_old,
                &mut rng,
            );
            let proof_r_new = inclusion_proof_of(
                &update.tree_r_levels,
                node,
                leaf_r_new,
                update.root_r_new,
                &mut rng,
            );
            let path_d = (0..challenge_bit_len)
                .map(|level| {
                    let index = node >> level;
                    let sibling = if level < apex_leafs_height {
                        TreeDDomain::random(&mut rng)
                    } else if level < apex_leafs_height + apex_leaf_bit_len {
                        let row = &apex_tree[level - apex_leafs_height];
                        row[(index & (row.len() - 1)) ^ 1]
                    } else {
                        partition_path[level - apex_leafs_height - apex_leaf_bit_len]
                    };
                    (vec![sibling], index & 1)
                })
                .collect();
            let proof_d_new = MerkleProof::<TreeDHasher, TreeDArity>::from_parts(
                leaf_d_new,
                update.comm_d_new,
                path_d,
            );
            ChallengeProof {
                proof_r_old,
                proof_d_new,
                proof_r_new,
            }
        })
        .collect();
    PartitionProof {
        comm_c: update.comm_c,
        apex_leafs,
        challenge_proofs,
    }
}

fn bytes32(bytes: &[u8]) -> Result<[u8; 32]> {
    bytes
        .try_into()
        .map_err(|_| anyhow!("a commitment of {} bytes, not 32", bytes.len()))
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use filecoin_proofs::{SectorShape2KiB, SectorShape32GiB, SectorShape64GiB};
    use storage_proofs_core::merkle::MerkleProofTrait;

    use super::*;
    use crate::job::ProofJob;
    use crate::snap::{parse_snap_input, testdata, SnapJob, REGISTERED_UPDATE_PROOFS};

    /// The arity of every level of a Merkle proof's path, leaf first.
    fn arities<P: MerkleProofTrait>(proof: &P) -> Vec<usize> {
        proof
            .path()
            .iter()
            .map(|(siblings, _)| siblings.len() + 1)
            .collect()
    }

    /// Per challenge: the node each of its three paths opens and their arities.
    #[allow(clippy::type_complexity)]
    fn layout<TreeR: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        proof: &PartitionProof<TreeR>,
    ) -> Vec<([usize; 3], [Vec<usize>; 3])> {
        proof
            .challenge_proofs
            .iter()
            .map(|c| {
                (
                    [
                        c.proof_r_old.path_index(),
                        c.proof_d_new.path_index(),
                        c.proof_r_new.path_index(),
                    ],
                    [
                        arities(&c.proof_r_old),
                        arities(&c.proof_d_new),
                        arities(&c.proof_r_new),
                    ],
                )
            })
            .collect()
    }

    fn decode<TreeR: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        input: &SnapInput,
    ) -> Vec<PartitionProof<TreeR>> {
        input
            .vanilla_proofs
            .iter()
            .map(|bytes| bincode::deserialize(bytes).unwrap())
            .collect()
    }

    /// The values are consistent where storage-proofs relates them: comm_r = H(comm_c,
    /// root_r), every new leaf the encoding of its data leaf, the TreeD paths through the
    /// apex tree of the partition's apex leaves and then one partition path.
    fn assert_consistent<TreeR: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        input: &SnapInput,
    ) {
        let proof = input.registered_proof;
        let params = params::public_params(proof);
        let h = update_config(proof).h;
        let domain = |bytes: &[u8; 32]| TreeRDomain::try_from_bytes(bytes).unwrap();
        let (comm_r_old, comm_r_new) = (domain(&input.comm_r_old), domain(&input.comm_r_new));
        let comm_d_new = TreeDDomain::try_from_bytes(&input.comm_d_new).unwrap();
        let phi = phi(&comm_d_new, &comm_r_old);
        let apex_height =
            params.challenge_bit_len - params.partition_bit_len - params.apex_leaf_bit_len;
        for (k, partition) in decode::<TreeR>(input).iter().enumerate() {
            let first = &partition.challenge_proofs[0];
            let comm_r = |root: TreeRDomain| {
                <TreeRHasher as Hasher>::Function::hash2(&partition.comm_c, &root)
            };
            assert_eq!(comm_r(first.proof_r_old.root()), comm_r_old);
            assert_eq!(comm_r(first.proof_r_new.root()), comm_r_new);
            let mut apex_tree = vec![partition.apex_leafs.clone()];
            for _ in 0..params.apex_leaf_bit_len {
                let row = apex_tree[apex_tree.len() - 1]
                    .chunks(2)
                    .map(|p| <TreeDHasher as Hasher>::Function::hash2(&p[0], &p[1]))
                    .collect();
                apex_tree.push(row);
            }
            let top = |c: &ChallengeProof<TreeR>| {
                c.proof_d_new.path()[apex_height + params.apex_leaf_bit_len..].to_vec()
            };
            let challenges = Challenges::new(params.sector_nodes, comm_r_new, k);
            for (c, proof) in challenges.zip(&partition.challenge_proofs) {
                assert_eq!(proof.proof_d_new.path_index(), c as usize);
                assert_eq!(proof.proof_d_new.root(), comm_d_new);
                let rho = rho(&phi, c >> (params.challenge_bit_len - h));
                let old: Fr = proof.proof_r_old.leaf().into();
                let data: Fr = proof.proof_d_new.leaf().into();
                assert_eq!(proof.proof_r_new.leaf(), (old + data * rho).into());
                let path = proof.proof_d_new.path();
                for (row, (siblings, _)) in apex_tree
                    .iter()
                    .zip(&path[apex_height..apex_height + params.apex_leaf_bit_len])
                {
                    assert!(row.contains(&siblings[0]));
                }
                assert_eq!(top(proof), top(first), "partition {k}");
            }
        }
    }

    /// A shape-only 2 KiB update has the structure of a real one, down to the length of every
    /// vanilla proof's bytes, opens the nodes the challenges of its comm_r_new name, and
    /// synthesizes into the same circuit.
    #[test]
    fn shape_of_2kib_is_that_of_a_real_update() {
        let real = testdata::update_2kib(1000, 5, 7).unwrap();
        let shape = generate(RegisteredUpdateProof::StackedDrg2KiBV1, 7).unwrap();
        assert!(shape.shape_only);
        assert_eq!(shape.vanilla_proofs.len(), real.vanilla_proofs.len());
        for (a, b) in shape.vanilla_proofs.iter().zip(&real.vanilla_proofs) {
            assert_eq!(a.len(), b.len());
        }
        let (real_proofs, shape_proofs) = (
            decode::<SectorShape2KiB>(&real),
            decode::<SectorShape2KiB>(&shape),
        );
        let arity_layout = |p: &PartitionProof<SectorShape2KiB>| {
            layout(p).into_iter().map(|(_, a)| a).collect::<Vec<_>>()
        };
        assert_eq!(
            arity_layout(&shape_proofs[0]),
            arity_layout(&real_proofs[0])
        );
        assert_eq!(
            shape_proofs[0].apex_leafs.len(),
            real_proofs[0].apex_leafs.len()
        );
        for (nodes, _) in layout(&shape_proofs[0]) {
            assert!(nodes[0] == nodes[1] && nodes[1] == nodes[2], "{nodes:?}");
        }
        assert_consistent::<SectorShape2KiB>(&shape);
        // The same seed, the same input.
        assert_eq!(
            generate(RegisteredUpdateProof::StackedDrg2KiBV1, 7).unwrap(),
            shape
        );

        let json = shape.to_json().unwrap();
        let parsed = parse_snap_input(&json).unwrap();
        assert_eq!(parsed, shape);
        let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(value[MARKER], serde_json::Value::Bool(true));
    }

    /// Every registered update proof up to 512 MiB: generated, read back, and accepted by
    /// `for_benchmark`'s checks (partition count, apex leaves and challenges per partition).
    #[test]
    fn every_small_update_proof_generates_and_passes_the_benchmark_checks() {
        for proof in &REGISTERED_UPDATE_PROOFS[..3] {
            let input = generate(*proof, 2).unwrap();
            let parsed = parse_snap_input(&input.to_json().unwrap()).unwrap();
            let job = SnapJob::for_benchmark(parsed).unwrap();
            assert_eq!(
                job.partitions(),
                crate::snap::partitions(*proof),
                "{proof:?}"
            );
            filecoin_proofs::with_shape!(u64::from(proof.sector_size()), assert_consistent, &input,);
        }
    }

    /// 32 GiB and 64 GiB updates without a sector: the figures every real one has.
    #[test]
    fn shapes_of_32gib_and_64gib_have_the_known_figures() {
        for proof in [
            RegisteredUpdateProof::StackedDrg32GiBV1,
            RegisteredUpdateProof::StackedDrg64GiBV1,
        ] {
            let started = Instant::now();
            let input = generate(proof, 1).unwrap();
            let generated = started.elapsed();
            let json = input.to_json().unwrap();
            assert_eq!(input.vanilla_proofs.len(), 16);
            let (tree_r, tree_d) = if proof == RegisteredUpdateProof::StackedDrg32GiBV1 {
                let first = &decode::<SectorShape32GiB>(&input)[15];
                assert_eq!(first.apex_leafs.len(), 128);
                assert_eq!(first.challenge_proofs.len(), 86);
                let (_, arities) = layout(first).swap_remove(0);
                (arities[0].clone(), arities[1].clone())
            } else {
                let first = &decode::<SectorShape64GiB>(&input)[15];
                assert_eq!(first.apex_leafs.len(), 128);
                assert_eq!(first.challenge_proofs.len(), 86);
                let (_, arities) = layout(first).swap_remove(0);
                (arities[0].clone(), arities[1].clone())
            };
            let (bits, mut expected) = if proof == RegisteredUpdateProof::StackedDrg32GiBV1 {
                (30, vec![8; 10])
            } else {
                (31, [vec![8; 10], vec![2]].concat())
            };
            assert_eq!(tree_r, expected);
            expected = vec![2; bits];
            assert_eq!(tree_d, expected);
            eprintln!(
                "{proof:?} shape-only input: generated in {:.2} s, {} bytes of JSON",
                generated.as_secs_f64(),
                json.len()
            );
            assert!(json.len() < crate::snap::MAX_SNAP_INPUT_BYTES);
            let job = SnapJob::for_benchmark(parse_snap_input(&json).unwrap()).unwrap();
            assert_eq!(job.partitions(), 16);
        }
        let input = generate(RegisteredUpdateProof::StackedDrg32GiBV1, 1).unwrap();
        assert_consistent::<SectorShape32GiB>(&input);
    }
}
