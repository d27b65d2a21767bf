//! A SnapDeals partition's witness, with its SHA-256 hashes computed on bits, in pieces that
//! are synthesized on several threads.
//!
//! storage-proofs-update's `EmptySectorUpdateCircuit::synthesize` (19.1) is a short preamble
//! (the partition index and `h_select` bits, the three commitments as public inputs, phi,
//! comm_c and the two TreeR roots, the partition's apex leaves and partition path, the comm_r
//! checks, the apex tree, every challenge's random bits) and then one block per challenge: its
//! high bits and rho, the three leaves, the two TreeR (Poseidon) paths, the apex leaf it falls
//! under, and its TreeD path up to that apex leaf. TreeD is a binary SHA-256 tree, and its
//! hashes are nearly all of the circuit (19 levels of two compressions per challenge at
//! 32 GiB): bellperson's gadget builds a linear combination for each of their bit operations,
//! which a witness never uses, and the circuit runs on one thread.
//!
//! [`synthesize_piece`] repeats that synthesis, variable for variable, with the real gadgets
//! for everything but SHA-256, which `groth16::sha256_witness` computes on bits straight into
//! the [`WitnessBuilder`] (through `porep::witness::hash_pair`, the TreeD hash). A partition's
//! witness is made in [`pieces`]: the preamble, kept (the public inputs are there), then each
//! challenge, after the preamble made again and dropped. A challenge reads only values of the
//! preamble, and a `WitnessBuilder` builds no constraint, so the dropped preamble's variables
//! serve as well as the kept ones; the parts of it no challenge reads (the comm_r checks and
//! the apex tree, the preamble's SHA-256) are skipped there. Concatenated in order, the pieces
//! are the circuit's witness; the tests compare the two on real and shape-only updates.
//!
//! What the circuit asserts (its shape against the public parameters, the partition path,
//! `leaf_r_new = leaf_r_old + leaf_d_new · rho`) is checked here as errors.

use anyhow::{anyhow, ensure, Context, Result};
use bellperson::gadgets::boolean::{field_into_allocated_bits_le, AllocatedBit, Boolean};
use bellperson::gadgets::multipack::pack_bits;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField, PrimeFieldBits};
use filecoin_hashers::{HashFunction, Hasher};
use filecoin_proofs::MerkleTreeTrait;
use neptune::circuit::poseidon_hash;
use storage_proofs_core::gadgets::insertion::{insert, select};
use storage_proofs_core::gadgets::por::por_no_challenge_input;
use storage_proofs_update::circuit::ChallengeProof;
use storage_proofs_update::constants::{
    hs, validate_tree_r_shape, TreeRHasher, POSEIDON_CONSTANTS_GEN_RANDOMNESS,
};
use storage_proofs_update::{EmptySectorUpdateCircuit, PublicParams};

use crate::groth16::witness::CompactValues;
use crate::groth16::WitnessBuilder;
use crate::porep::witness::hash_pair;

/// The top-level namespace a challenge's piece keeps its values from; its preamble, before it,
/// is dropped.
const CHALLENGE_NAMESPACE: &str = "c2q update challenge ";

/// One piece of a partition's witness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Piece {
    /// The preamble, with the public inputs: the first piece.
    Preamble,
    /// Challenge `i`'s block.
    Challenge(usize),
}

impl std::fmt::Display for Piece {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Piece::Preamble => f.write_str("the preamble"),
            Piece::Challenge(i) => write!(f, "challenge {i}"),
        }
    }
}

/// The pieces of a partition's witness, in order: the preamble, then every challenge.
pub(super) fn pieces(pub_params: &PublicParams) -> Vec<Piece> {
    std::iter::once(Piece::Preamble)
        .chain((0..pub_params.challenge_count).map(Piece::Challenge))
        .collect()
}

/// What the circuit asserts of its inputs before it allocates anything, and the shapes its
/// Merkle-path gadgets assert, as errors: the partition index and `h_select` packed into the
/// first public input, the count of apex leaves and challenges, every path of the sector's
/// shape (TreeD's of the tree's height, TreeR's of its arities, those of an empty circuit),
/// and every TreeD path ending in the same partition path.
pub(super) fn check<TreeR: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    circuit: &EmptySectorUpdateCircuit<TreeR>,
) -> Result<()> {
    let PublicParams {
        sector_nodes,
        challenge_count,
        challenge_bit_len,
        partition_count,
        partition_bit_len,
        apex_leaf_count,
        apex_leaf_bit_len,
    } = circuit.pub_params;
    // Asserts: the tree type is the sector size's (it is chosen by the size).
    validate_tree_r_shape::<TreeR>(sector_nodes);
    let h_select_bit_len = hs(sector_nodes).len();
    if let Some(k_and_h_select) = circuit.pub_inputs.k_and_h_select {
        let bits: Vec<bool> = k_and_h_select.to_le_bits().into_iter().collect();
        let k = bits[..partition_bit_len]
            .iter()
            .enumerate()
            .fold(0usize, |k, (i, &bit)| k | usize::from(bit) << i);
        ensure!(k < partition_count, "partition {k} of {partition_count}");
        let h_select = &bits[partition_bit_len..partition_bit_len + h_select_bit_len];
        ensure!(
            h_select.iter().filter(|&&bit| bit).count() == 1,
            "h_select does not have exactly one bit set"
        );
        ensure!(
            bits[partition_bit_len + h_select_bit_len..]
                .iter()
                .all(|&bit| !bit),
            "k_and_h_select has bits beyond k and h_select"
        );
    }
    let private = &circuit.priv_inputs;
    ensure!(
        private.apex_leafs.len() == apex_leaf_count,
        "{} apex leaves, the sector has {apex_leaf_count}",
        private.apex_leafs.len()
    );
    ensure!(
        private.challenge_proofs.len() == challenge_count,
        "{} challenge proofs, the sector has {challenge_count}",
        private.challenge_proofs.len()
    );
    let empty = ChallengeProof::<TreeR>::empty(sector_nodes);
    let shape = |path: &[Vec<Option<Fr>>]| path.iter().map(Vec::len).collect::<Vec<_>>();
    let tree_r_shape = shape(&empty.path_r_old);
    let to_apex_leaf = challenge_bit_len - partition_bit_len - apex_leaf_bit_len;
    for (i, proof) in private.challenge_proofs.iter().enumerate() {
        ensure!(
            proof.path_d_new.len() == challenge_bit_len,
            "challenge {i}: a TreeD path of {} levels, the tree has {challenge_bit_len}",
            proof.path_d_new.len()
        );
        ensure!(
            proof.path_d_new[..to_apex_leaf]
                .iter()
                .all(|siblings| !siblings.is_empty()),
            "challenge {i}: a TreeD path level without a sibling"
        );
        for (what, path) in [
            ("TreeROld", &proof.path_r_old),
            ("TreeRNew", &proof.path_r_new),
        ] {
            ensure!(
                shape(path) == tree_r_shape,
                "challenge {i}: a {what} path of siblings {:?}, the tree's are {tree_r_shape:?}",
                shape(path)
            );
        }
    }
    let partition_path = |proof: &ChallengeProof<TreeR>| {
        proof.path_d_new[challenge_bit_len - partition_bit_len..].to_vec()
    };
    let first = partition_path(&private.challenge_proofs[0]);
    ensure!(
        first.iter().all(|siblings| siblings.len() == 1),
        "a partition path level without exactly one sibling"
    );
    for (i, proof) in private.challenge_proofs.iter().enumerate().skip(1) {
        ensure!(
            partition_path(proof) == first,
            "challenge {i}: its TreeD path does not end in the partition path"
        );
    }
    Ok(())
}

/// One piece of the witness of `circuit` (a partition's circuit that passed [`check`]): its
/// inputs and aux values, in the circuit's order.
pub(super) fn synthesize_piece<TreeR: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    circuit: &EmptySectorUpdateCircuit<TreeR>,
    piece: Piece,
) -> Result<(CompactValues, CompactValues)> {
    match piece {
        Piece::Preamble => {
            let mut cs = WitnessBuilder::new();
            cs.alloc_input(|| "one", || Ok(Fr::ONE))?;
            preamble(&mut cs, circuit, Preamble::Whole)?;
            Ok(cs.into_compact())
        }
        Piece::Challenge(i) => {
            let mut cs = WitnessBuilder::skipping_before(CHALLENGE_NAMESPACE);
            let values = preamble(&mut cs, circuit, Preamble::ForChallenges)?;
            challenge(
                cs.namespace(|| format!("{CHALLENGE_NAMESPACE}{i}")),
                circuit,
                &values,
                i,
            )?;
            ensure!(cs.reached(), "the challenge's values were not kept");
            Ok(cs.into_compact())
        }
    }
}

/// How much of the preamble is synthesized.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Preamble {
    /// All of it: the first piece.
    Whole,
    /// What the challenges read, its values dropped.
    ForChallenges,
}

/// The preamble's variables that the challenges read.
struct Shared {
    partition_bits: Vec<AllocatedBit>,
    h_select_bits: Vec<AllocatedBit>,
    phi: AllocatedNum<Fr>,
    root_r_old: AllocatedNum<Fr>,
    root_r_new: AllocatedNum<Fr>,
    apex_leafs: Vec<AllocatedNum<Fr>>,
    /// Each challenge's random bits (little-endian, without the partition's).
    challenge_bits: Vec<Vec<AllocatedBit>>,
}

fn alloc(
    cs: impl ConstraintSystem<Fr>,
    value: Option<Fr>,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    AllocatedNum::alloc(cs, || value.ok_or(SynthesisError::AssignmentMissing))
}

/// `EmptySectorUpdateCircuit::synthesize` up to the first challenge.
fn preamble<TreeR: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    cs: &mut WitnessBuilder,
    circuit: &EmptySectorUpdateCircuit<TreeR>,
    how: Preamble,
) -> Result<Shared> {
    let PublicParams {
        sector_nodes,
        challenge_count,
        challenge_bit_len,
        partition_bit_len,
        ..
    } = circuit.pub_params;
    let inputs = &circuit.pub_inputs;
    let private = &circuit.priv_inputs;
    let first = private
        .challenge_proofs
        .first()
        .ok_or_else(|| anyhow!("a partition without challenges"))?;
    let partition_path = first
        .path_d_new
        .get(challenge_bit_len - partition_bit_len..)
        .ok_or_else(|| anyhow!("a TreeD path shorter than the tree"))?;

    // -- public inputs: k and h_select packed in one, and its bits
    let k_and_h_select = alloc(cs.namespace(|| "k_and_h_select"), inputs.k_and_h_select)?;
    k_and_h_select.inputize(cs.namespace(|| "k_and_h_select (public input)"))?;
    let bit_len = partition_bit_len + hs(sector_nodes).len();
    let value = k_and_h_select
        .get_value()
        .ok_or(SynthesisError::AssignmentMissing)?;
    let bits = value
        .to_le_bits()
        .into_iter()
        .take(bit_len)
        .enumerate()
        .map(|(i, bit)| {
            AllocatedBit::alloc(
                cs.namespace(|| format!("k_and_h_select_bit_{i}")),
                Some(bit),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let partition_bits = bits[..partition_bit_len].to_vec();
    let h_select_bits = bits[partition_bit_len..].to_vec();
    let partition = pack_bits(
        cs.namespace(|| "pack partition bits"),
        &partition_bits
            .iter()
            .cloned()
            .map(Boolean::from)
            .collect::<Vec<_>>(),
    )?;

    let comm_r_old = alloc(cs.namespace(|| "comm_r_old"), inputs.comm_r_old)?;
    comm_r_old.inputize(cs.namespace(|| "comm_r_old_input"))?;
    let comm_d_new = alloc(cs.namespace(|| "comm_d_new"), inputs.comm_d_new)?;
    comm_d_new.inputize(cs.namespace(|| "comm_d_new_input"))?;
    let comm_r_new = alloc(cs.namespace(|| "comm_r_new"), inputs.comm_r_new)?;
    comm_r_new.inputize(cs.namespace(|| "comm_r_new_input"))?;

    let phi = poseidon_hash(
        cs.namespace(|| "phi"),
        vec![comm_d_new, comm_r_old],
        &POSEIDON_CONSTANTS_GEN_RANDOMNESS,
    )?;

    // -- private inputs but the challenges' paths
    let comm_c = alloc(cs.namespace(|| "comm_c"), private.comm_c)?;
    let root_r_old = alloc(cs.namespace(|| "root_r_old"), private.root_r_old)?;
    let root_r_new = alloc(cs.namespace(|| "root_r_new"), private.root_r_new)?;
    let apex_leafs = private
        .apex_leafs
        .iter()
        .enumerate()
        .map(|(i, leaf)| alloc(cs.namespace(|| format!("apex_leaf_{i}")), *leaf))
        .collect::<Result<Vec<_>, _>>()?;
    let partition_path = partition_path
        .iter()
        .enumerate()
        .map(|(i, siblings)| {
            let sibling = siblings.first().copied().flatten();
            alloc(
                cs.namespace(|| format!("partition_path_sibling_{i}")),
                sibling,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;

    if how == Preamble::Whole {
        // comm_r = H(comm_c || root_r): each computed, then constrained equal to the public
        // one (no variable).
        <TreeRHasher as Hasher>::Function::hash2_circuit(
            cs.namespace(|| "comm_r_old_calc"),
            &comm_c,
            &root_r_old,
        )?;
        <TreeRHasher as Hasher>::Function::hash2_circuit(
            cs.namespace(|| "comm_r_new_calc"),
            &comm_c,
            &root_r_new,
        )?;
        apex_por(
            cs.namespace(|| "apex_gadget"),
            &apex_leafs,
            &partition_bits,
            partition_path,
        )?;
    }

    let challenge_bits = gen_challenge_bits(
        cs.namespace(|| "gen_challenge_bits"),
        &comm_r_new,
        &partition,
        challenge_count,
        challenge_bit_len - partition_bit_len,
    )?;
    Ok(Shared {
        partition_bits,
        h_select_bits,
        phi,
        root_r_old,
        root_r_new,
        apex_leafs,
        challenge_bits,
    })
}

/// storage-proofs-update's `apex_por` (private to it): the apex tree over the partition's apex
/// leaves, its root's inclusion under comm_d by the partition path (then constrained equal to
/// comm_d: no variable).
fn apex_por<CS: ConstraintSystem<Fr, Root = WitnessBuilder>>(
    mut cs: CS,
    apex_leafs: &[AllocatedNum<Fr>],
    partition_bits: &[AllocatedBit],
    partition_path: Vec<AllocatedNum<Fr>>,
) -> Result<()> {
    let height = apex_leafs.len().trailing_zeros() as usize;
    let mut row = apex_leafs.to_vec();
    for row_index in 0..height {
        row = row
            .chunks(2)
            .enumerate()
            .map(|(i, siblings)| {
                hash_pair(
                    cs.namespace(|| {
                        format!("apex_tree generation hash (tree_row={row_index}, siblings={i})")
                    }),
                    siblings,
                )
            })
            .collect::<Result<Vec<_>>>()?;
    }
    let apex_root = row
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("no apex leaves"))?;
    tree_d_por(
        cs.namespace(|| "partition-tree por"),
        partition_bits,
        apex_root,
        partition_path,
    )
}

/// `por_no_challenge_input::<TreeD>` (TreeD is binary: no sub-tree or top-tree levels) with
/// each level's hash on bits: a level orders the pair by its bit (`insert`) and hashes it; the
/// computed root is then constrained equal to the given one (no variable).
fn tree_d_por<CS: ConstraintSystem<Fr, Root = WitnessBuilder>>(
    mut cs: CS,
    bits: &[AllocatedBit],
    leaf: AllocatedNum<Fr>,
    path: Vec<AllocatedNum<Fr>>,
) -> Result<()> {
    ensure!(
        bits.len() == path.len(),
        "a TreeD path of {} levels for {} bits",
        path.len(),
        bits.len()
    );
    let mut cur = leaf;
    for (height, (sibling, bit)) in path.into_iter().zip(bits).enumerate() {
        let pair = insert(
            &mut cs.namespace(|| format!("merkle proof insert (height={height})")),
            &cur,
            &[Boolean::from(bit.clone())],
            &[sibling],
        )?;
        cur = hash_pair(
            cs.namespace(|| format!("merkle proof hash (height={height})")),
            &pair,
        )?;
    }
    Ok(())
}

/// storage-proofs-update's `gen_challenge_bits` (private to it): each challenge's random bits,
/// from digests `H(comm_r_new || digest_index)` allocated as bits.
fn gen_challenge_bits<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    comm_r_new: &AllocatedNum<Fr>,
    partition: &AllocatedNum<Fr>,
    challenges: usize,
    bits_per_challenge: usize,
) -> Result<Vec<Vec<AllocatedBit>>> {
    ensure!(bits_per_challenge > 0, "challenges without random bits");
    let challenges_per_digest = Fr::CAPACITY as usize / bits_per_challenge;
    // As storage-proofs-update counts them.
    let digests = (challenges as f32 / challenges_per_digest as f32).ceil() as u64;
    let mut generated: Vec<Vec<AllocatedBit>> = Vec::with_capacity(challenges);
    for j in 0..digests {
        let digest_index =
            AllocatedNum::alloc(cs.namespace(|| format!("digest_index_{j}")), || {
                let k = partition
                    .get_value()
                    .ok_or(SynthesisError::AssignmentMissing)?;
                Ok(k * Fr::from(digests) + Fr::from(j))
            })?;
        let digest = poseidon_hash(
            cs.namespace(|| format!("digest_{j}")),
            vec![comm_r_new.clone(), digest_index],
            &POSEIDON_CONSTANTS_GEN_RANDOMNESS,
        )?;
        let digest_bits = field_into_allocated_bits_le(
            cs.namespace(|| format!("digest_{j}_bits")),
            digest.get_value(),
        )?;
        let take = if j == digests - 1 {
            challenges - generated.len()
        } else {
            challenges_per_digest
        };
        generated.extend(
            digest_bits
                .chunks(bits_per_challenge)
                .take(take)
                .map(<[AllocatedBit]>::to_vec),
        );
    }
    Ok(generated)
}

/// storage-proofs-update's `get_challenge_high_bits` (private to it): the challenge's `h`
/// high bits as a number, `h` chosen among `hs` by the one bit set in `h_select_bits`.
fn challenge_high_bits<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    c_bits: &[AllocatedBit],
    h_select_bits: &[AllocatedBit],
    hs: &[usize],
) -> Result<AllocatedNum<Fr>> {
    ensure!(
        h_select_bits.len() == hs.len(),
        "{} h_select bits for {} values of h",
        h_select_bits.len(),
        hs.len()
    );
    let bit_len = c_bits.len();
    let c_bits: Vec<Boolean> = c_bits.iter().cloned().map(Boolean::from).collect();
    let mut c_high_and_zeros = Vec::with_capacity(hs.len());
    for (k, (&h, h_select_bit)) in hs.iter().zip(h_select_bits).enumerate() {
        ensure!(h <= bit_len, "h = {h} of a {bit_len}-bit challenge");
        let c_high = pack_bits(
            cs.namespace(|| format!("c_high (h={h}, k={k})")),
            &c_bits[bit_len - h..],
        )?;
        let c_high_or_zero = AllocatedNum::alloc(
            cs.namespace(|| format!("c_high_or_zero (h={h}, k={k})")),
            || {
                if h_select_bit
                    .get_value()
                    .ok_or(SynthesisError::AssignmentMissing)?
                {
                    c_high.get_value().ok_or(SynthesisError::AssignmentMissing)
                } else {
                    Ok(Fr::ZERO)
                }
            },
        )?;
        c_high_and_zeros.push(c_high_or_zero);
    }
    Ok(AllocatedNum::alloc(
        cs.namespace(|| "c_high_selected"),
        || {
            c_high_and_zeros.iter().try_fold(Fr::ZERO, |sum, v| {
                Ok(sum + v.get_value().ok_or(SynthesisError::AssignmentMissing)?)
            })
        },
    )?)
}

/// A Merkle path's siblings allocated, level by level.
fn alloc_path<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    path: &[Vec<Option<Fr>>],
) -> Result<Vec<Vec<AllocatedNum<Fr>>>, SynthesisError> {
    path.iter()
        .enumerate()
        .map(|(row, siblings)| {
            siblings
                .iter()
                .enumerate()
                .map(|(i, sibling)| {
                    alloc(
                        cs.namespace(|| format!("sibling (tree_row={row}, sibling_index={i})")),
                        *sibling,
                    )
                })
                .collect()
        })
        .collect()
}

/// Challenge `c_index`'s block of `EmptySectorUpdateCircuit::synthesize`.
fn challenge<
    TreeR: 'static + MerkleTreeTrait<Hasher = TreeRHasher>,
    CS: ConstraintSystem<Fr, Root = WitnessBuilder>,
>(
    mut cs: CS,
    circuit: &EmptySectorUpdateCircuit<TreeR>,
    shared: &Shared,
    c_index: usize,
) -> Result<()> {
    let PublicParams {
        sector_nodes,
        challenge_bit_len,
        partition_bit_len,
        apex_leaf_bit_len,
        ..
    } = circuit.pub_params;
    let proof = circuit
        .priv_inputs
        .challenge_proofs
        .get(c_index)
        .ok_or_else(|| anyhow!("no challenge {c_index}"))?;
    let random_bits = shared
        .challenge_bits
        .get(c_index)
        .ok_or_else(|| anyhow!("no random bits for challenge {c_index}"))?;
    // Little-endian: the random bits, then the partition's.
    let c_bits: Vec<AllocatedBit> = random_bits
        .iter()
        .chain(&shared.partition_bits)
        .cloned()
        .collect();
    ensure!(
        c_bits.len() == challenge_bit_len,
        "a challenge of {} bits",
        c_bits.len()
    );

    // -- rho, from the challenge's high bits
    let c_high = challenge_high_bits(
        cs.namespace(|| "get_challenge_high_bits"),
        &c_bits,
        &shared.h_select_bits,
        &hs(sector_nodes),
    )?;
    let rho = poseidon_hash(
        cs.namespace(|| "rho"),
        vec![shared.phi.clone(), c_high],
        &POSEIDON_CONSTANTS_GEN_RANDOMNESS,
    )?;

    // -- the leaves, and the new one's encoding (`label_r_new`, private to storage-proofs)
    let leaf_r_old = alloc(cs.namespace(|| "leaf_r_old"), proof.leaf_r_old)?;
    let leaf_d_new = alloc(cs.namespace(|| "leaf_d_new"), proof.leaf_d_new)?;
    let leaf_r_new = {
        let mut cs = cs.namespace(|| "leaf_r_new");
        let d_rho = leaf_d_new.mul(cs.namespace(|| "label_d_new * rho"), &rho)?;
        AllocatedNum::alloc(cs.namespace(|| "label_r_new"), || {
            let old = leaf_r_old
                .get_value()
                .ok_or(SynthesisError::AssignmentMissing)?;
            let d_rho = d_rho.get_value().ok_or(SynthesisError::AssignmentMissing)?;
            Ok(old + d_rho)
        })?
    };
    ensure!(
        leaf_r_new.get_value() == proof.leaf_r_new,
        "challenge {c_index}: leaf_r_new is not leaf_r_old + leaf_d_new * rho"
    );

    // -- the two TreeR paths (Poseidon), through storage-proofs' gadget
    let path_r_old = alloc_path(cs.namespace(|| "path_r_old"), &proof.path_r_old)?;
    por_no_challenge_input::<TreeR, _>(
        cs.namespace(|| "por tree_r_old"),
        c_bits.clone(),
        leaf_r_old,
        path_r_old,
        shared.root_r_old.clone(),
    )?;
    let path_r_new = alloc_path(cs.namespace(|| "path_r_new"), &proof.path_r_new)?;
    por_no_challenge_input::<TreeR, _>(
        cs.namespace(|| "por tree_r_new"),
        c_bits.clone(),
        leaf_r_new,
        path_r_new,
        shared.root_r_new.clone(),
    )?;

    // -- the TreeD path up to the challenge's apex leaf (SHA-256 on bits)
    let to_apex_leaf = challenge_bit_len - partition_bit_len - apex_leaf_bit_len;
    let apex_leaf_bits: Vec<Boolean> = c_bits[to_apex_leaf..to_apex_leaf + apex_leaf_bit_len]
        .iter()
        .cloned()
        .map(Boolean::from)
        .collect();
    let _apex_leaf = select(
        cs.namespace(|| "select_apex_leaf"),
        &shared.apex_leafs,
        &apex_leaf_bits,
    )?;
    let path = proof
        .path_d_new
        .iter()
        .take(to_apex_leaf)
        .enumerate()
        .map(|(row, siblings)| {
            alloc(
                cs.namespace(|| format!("path_to_apex_leaf sibling (tree_row={row})")),
                siblings.first().copied().flatten(),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    // The path's computed root is then constrained equal to `apex_leaf`: no variable.
    tree_d_por(
        cs.namespace(|| "por to_apex_leaf"),
        &c_bits[..to_apex_leaf],
        leaf_d_new,
        path,
    )
    .with_context(|| format!("challenge {c_index}"))
}
