//! A PoRep challenge's witness, with its SHA-256 hashes computed on bits.
//!
//! Synthesizing storage-proofs' stacked circuit for a witness spends most of its time in
//! bellperson's SHA-256 gadget, building linear combinations a witness never uses: a label is
//! 20 compressions (`create_label_circuit` hashes 1,248 bytes), one per layer and challenge, and
//! each level of the comm_d path two more. [`synthesize_challenge`] repeats the synthesis of the
//! stacked circuit of one challenge (`StackedCircuit::synthesize` and the per-challenge
//! `Proof::synthesize` of storage-proofs-porep 19.1) with the same gadgets for everything but
//! those hashes, which `groth16::sha256_witness` computes on bits straight into the
//! [`WitnessBuilder`]. The variables, their order and their values are the circuit's, variable
//! for variable; the tests compare the two on real and shape-only sectors.

use anyhow::{anyhow, ensure, Context, Result};
use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::multipack;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use ff::PrimeField;
use filecoin_hashers::{HashFunction, Hasher};
use filecoin_proofs::{DefaultPieceDomain, DefaultPieceHasher, MerkleTreeTrait};
use generic_array::typenum::{U11, U2};
use storage_proofs_core::gadgets::insertion::insert;
use storage_proofs_core::gadgets::por::{AuthPath, PoRCircuit};
use storage_proofs_core::gadgets::variables::Root;
use storage_proofs_core::gadgets::{constraint, encode::encode, uint64::UInt64};
use storage_proofs_core::merkle::MerkleProofTrait;
use storage_proofs_core::util::reverse_bit_numbering;
use storage_proofs_porep::stacked::{self, StackedCircuit, TOTAL_PARENTS};

use crate::groth16::sha256_witness::{self, Bit};
use crate::groth16::WitnessBuilder;

/// The namespace storage-proofs' stacked circuit puts each challenge under (`challenge_{i}`).
pub(super) const CHALLENGE_NAMESPACE: &str = "challenge_";

type TreeDomain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;
type VanillaProof<Tree> = stacked::Proof<Tree, DefaultPieceHasher>;

/// What the stacked circuit's preamble allocates from the partition's public inputs.
pub(super) struct Commitments<Tree: MerkleTreeTrait> {
    pub replica_id: TreeDomain<Tree>,
    pub comm_d: Option<DefaultPieceDomain>,
    pub comm_r: Option<TreeDomain<Tree>>,
}

/// The stacked circuit of the one challenge `proof` (the circuit storage-proofs'
/// `StackedCompound::circuit` makes of `vec![proof]`), synthesized into `cs`: the preamble
/// (replica id, commitments) then the challenge under `challenge_0`.
///
/// `num_layers` is the public parameters' count, the one the recorded constraints have; the
/// circuit takes it from the length of the first DRG parent's column (storage-proofs keeps
/// that length private). They differ only for a malformed C1: an error here (a column too
/// short) or a witness the recorded constraints reject (columns too long), where the circuit
/// would assert or synthesize a circuit of another shape.
pub(super) fn synthesize_challenge<Tree: 'static + MerkleTreeTrait>(
    cs: &mut WitnessBuilder,
    commitments: &Commitments<Tree>,
    proof: &VanillaProof<Tree>,
    num_layers: usize,
) -> Result<()> {
    // -- the preamble, as `StackedCircuit::synthesize`
    let replica_id = AllocatedNum::alloc(cs.namespace(|| "replica_id"), || {
        Ok(commitments.replica_id.into())
    })?;
    replica_id.inputize(cs.namespace(|| "replica_id_input"))?;
    let replica_id_bits =
        reverse_bit_numbering(replica_id.to_bits_le(cs.namespace(|| "replica_id_bits"))?);

    // comm_d is the comm_d path's root, in constraints only: nothing of the challenge's
    // witness depends on its variable.
    let comm_d = AllocatedNum::alloc(cs.namespace(|| "comm_d"), || {
        commitments
            .comm_d
            .map(Into::into)
            .ok_or(SynthesisError::AssignmentMissing)
    })?;
    comm_d.inputize(cs.namespace(|| "comm_d_input"))?;
    let comm_r = AllocatedNum::alloc(cs.namespace(|| "comm_r"), || {
        commitments
            .comm_r
            .map(Into::into)
            .ok_or(SynthesisError::AssignmentMissing)
    })?;
    comm_r.inputize(cs.namespace(|| "comm_r_input"))?;
    let comm_r_last = AllocatedNum::alloc(cs.namespace(|| "comm_r_last"), || {
        Ok(proof.comm_r_last().into())
    })?;
    let comm_c = AllocatedNum::alloc(cs.namespace(|| "comm_c"), || Ok(proof.comm_c().into()))?;
    let hash = <Tree::Hasher as Hasher>::Function::hash2_circuit(
        cs.namespace(|| "H_comm_c_comm_r_last"),
        &comm_c,
        &comm_r_last,
    )?;
    constraint::equal(
        cs,
        || "enforce comm_r = H(comm_c || comm_r_last)",
        &comm_r,
        &hash,
    );

    let roots = Roots {
        comm_c,
        comm_r_last,
    };
    let replica_id = Bit::from_booleans(&replica_id_bits)?;
    challenge::<Tree, _>(
        cs.namespace(|| format!("{CHALLENGE_NAMESPACE}0")),
        proof,
        &roots,
        &replica_id,
        num_layers,
    )
}

/// The commitments the challenge's column and replica paths end in.
struct Roots {
    comm_c: AllocatedNum<Fr>,
    comm_r_last: AllocatedNum<Fr>,
}

/// storage-proofs' circuit form of a challenge's vanilla proof: the `Proof` of its
/// `stacked::circuit::params`, a module it keeps private (the type's fields are public). The
/// type is reached through the public signature of `StackedCircuit::synthesize`, whose last
/// argument is a `Vec` of them, and made by storage-proofs' own conversion.
#[allow(clippy::type_complexity)]
fn circuit_proof<Tree: 'static + MerkleTreeTrait, P>(
    _synthesize: fn(
        WitnessBuilder,
        Option<TreeDomain<Tree>>,
        Option<DefaultPieceDomain>,
        Option<TreeDomain<Tree>>,
        Option<TreeDomain<Tree>>,
        Option<TreeDomain<Tree>>,
        Vec<P>,
    ) -> Result<(), SynthesisError>,
    vanilla: VanillaProof<Tree>,
) -> P
where
    VanillaProof<Tree>: Into<P>,
{
    vanilla.into()
}

/// storage-proofs' `Proof::synthesize` (of `stacked::circuit::params`), with the labels and
/// the comm_d path hashed on bits.
fn challenge<Tree: 'static + MerkleTreeTrait, CS: ConstraintSystem<Fr, Root = WitnessBuilder>>(
    mut cs: CS,
    vanilla: &VanillaProof<Tree>,
    roots: &Roots,
    replica_id: &[Bit],
    num_layers: usize,
) -> Result<()> {
    let comm_d_path = vanilla.comm_d_proofs.as_options();
    let proof = circuit_proof(
        StackedCircuit::<Tree, DefaultPieceHasher>::synthesize::<WitnessBuilder>,
        vanilla.clone(),
    );
    let drg_parents_proofs = proof.drg_parents_proofs;
    let exp_parents_proofs = proof.exp_parents_proofs;
    ensure!(
        !drg_parents_proofs.is_empty() && !exp_parents_proofs.is_empty(),
        "a challenge proof without DRG or expander parents"
    );

    // -- the data layer
    let data_leaf = AllocatedNum::alloc(cs.namespace(|| "data_leaf"), || {
        proof.data_leaf.ok_or(SynthesisError::AssignmentMissing)
    })?;
    comm_d_inclusion(cs.namespace(|| "comm_d_inclusion"), comm_d_path, &data_leaf)
        .context("comm_d path")?;

    // -- the parents' columns
    let mut drg_parents = Vec::with_capacity(drg_parents_proofs.len());
    for (i, parent) in drg_parents_proofs.into_iter().enumerate() {
        let (column, path) = parent.alloc(cs.namespace(|| format!("drg_parent_{i}_num")))?;
        let hash = column.hash(cs.namespace(|| format!("drg_parent_{i}_constraint")))?;
        enforce_inclusion::<Tree, _>(
            cs.namespace(|| format!("drg_parent_{i}_inclusion")),
            path,
            &roots.comm_c,
            &hash,
        )?;
        drg_parents.push(column);
    }
    let mut exp_parents = Vec::with_capacity(exp_parents_proofs.len());
    for (i, parent) in exp_parents_proofs.into_iter().enumerate() {
        let (column, path) = parent.alloc(cs.namespace(|| format!("exp_parent_{i}_num")))?;
        let hash = column.hash(cs.namespace(|| format!("exp_parent_{i}_constraint")))?;
        enforce_inclusion::<Tree, _>(
            cs.namespace(|| format!("exp_parent_{i}_inclusion")),
            path,
            &roots.comm_c,
            &hash,
        )?;
        exp_parents.push(column);
    }

    // -- labels and encoding
    let challenge = UInt64::alloc(cs.namespace(|| "challenge"), proof.challenge)?;
    challenge.pack_into_input(cs.namespace(|| "challenge input"))?;
    let node = Bit::from_booleans(&challenge.to_bits_be())?;

    let mut labels = Vec::with_capacity(num_layers);
    for layer in 1..=num_layers {
        let mut cs = cs.namespace(|| format!("labeling_{layer}"));
        let mut parents = Vec::with_capacity(drg_parents.len() + exp_parents.len());
        for column in &drg_parents {
            let bits = column
                .get_value(layer)
                .to_bits_le(cs.namespace(|| format!("drg_parent_{}_bits", parents.len())))?;
            parents.push(Bit::from_booleans(&reverse_bit_numbering(bits))?);
        }
        // The first layer has no expander parents; an expander parent's column has no row
        // for the first layer, so layer l is its row l - 1.
        if layer > 1 {
            for column in &exp_parents {
                let bits = column
                    .get_value(layer - 1)
                    .to_bits_le(cs.namespace(|| format!("exp_parent_{}_bits", parents.len())))?;
                parents.push(Bit::from_booleans(&reverse_bit_numbering(bits))?);
            }
        }
        let expanded = expand_parents(&parents, layer)?;
        let layer_index = u32::try_from(layer).context("layer index")?;
        let label = create_label(cs.get_root(), replica_id, &expanded, layer_index, &node)?;
        labels.push(label);
    }
    let key = labels
        .last()
        .ok_or_else(|| anyhow!("a circuit without layers"))?;
    let encoded = encode(cs.namespace(|| "encode_node"), key, &data_leaf)?;
    enforce_inclusion::<Tree, _>(
        cs.namespace(|| "comm_r_last_data_inclusion"),
        proof.comm_r_last_path,
        &roots.comm_r_last,
        &encoded,
    )?;

    // -- the challenged node's column
    let column_hash = hash_single_column(cs.namespace(|| "c_x_column_hash"), &labels)?;
    enforce_inclusion::<Tree, _>(
        cs.namespace(|| "c_x_inclusion"),
        proof.comm_c_path,
        &roots.comm_c,
        &column_hash,
    )?;
    Ok(())
}

/// The parents a label hashes, in the order `Proof::synthesize` repeats them: layer 1 has only
/// DRG parents (six, repeated six times and the first once more), the others all of them
/// (fourteen, twice, and the first nine again).
fn expand_parents(parents: &[Vec<Bit>], layer: usize) -> Result<Vec<&[Bit]>> {
    let mut expanded: Vec<&[Bit]> = Vec::with_capacity(TOTAL_PARENTS);
    if layer > 1 {
        ensure!(
            parents.len() >= 9,
            "{} parents in layer {layer}",
            parents.len()
        );
        expanded.extend(parents.iter().map(Vec::as_slice));
        expanded.extend(parents.iter().map(Vec::as_slice));
        expanded.extend(parents[..9].iter().map(Vec::as_slice));
    } else {
        ensure!(!parents.is_empty(), "no parents in layer 1");
        for _ in 0..6 {
            expanded.extend(parents.iter().map(Vec::as_slice));
        }
        expanded.push(&parents[0]);
    }
    ensure!(
        expanded.len() == TOTAL_PARENTS,
        "{} parents in layer {layer}, where labels hash {TOTAL_PARENTS}",
        expanded.len()
    );
    Ok(expanded)
}

/// storage-proofs' `create_label_circuit`: SHA-256 of the replica id, the layer and node, and
/// the parents (32 bytes each), packed into a number (its first `Fr::CAPACITY` bits, bytes in
/// order, bits within a byte reversed).
fn create_label(
    cs: &mut WitnessBuilder,
    replica_id: &[Bit],
    parents: &[&[Bit]],
    layer: u32,
    node: &[Bit],
) -> Result<AllocatedNum<Fr>> {
    ensure!(
        (32..=256).contains(&replica_id.len()),
        "a replica id of {} bits",
        replica_id.len()
    );
    let mut input = Vec::with_capacity((2 + TOTAL_PARENTS) * 256);
    input.extend_from_slice(replica_id);
    pad_to(&mut input, 256);
    input.extend((0..32).rev().map(|i| Bit::Constant(layer >> i & 1 == 1)));
    input.extend_from_slice(node);
    pad_to(&mut input, 512);
    for parent in parents {
        input.extend_from_slice(parent);
        let len = input.len().next_multiple_of(256);
        pad_to(&mut input, len);
    }
    ensure!(
        input.len() == (2 + TOTAL_PARENTS) * 256,
        "a label input of {} bits",
        input.len()
    );
    let digest = sha256_witness::sha256(&mut *cs, &input)?;
    pack_digest(cs, &digest)
}

/// Constant zeros up to `len` bits.
fn pad_to(bits: &mut Vec<Bit>, len: usize) {
    if bits.len() < len {
        bits.resize(len, Bit::Constant(false));
    }
}

/// A digest as storage-proofs makes a number of it (`create_label_circuit`, and
/// `Sha256Function::hash_circuit`): bits reversed within each byte, the first `Fr::CAPACITY`
/// packed into one allocated number.
fn pack_digest(cs: &mut WitnessBuilder, digest: &[Bit]) -> Result<AllocatedNum<Fr>> {
    let le: Vec<Bit> = digest
        .chunks(8)
        .flat_map(|byte| byte.iter().rev().copied())
        .take(Fr::CAPACITY as usize)
        .collect();
    let value = sha256_witness::packed_value(&le)?;
    Ok(AllocatedNum::alloc(cs, || Ok(value))?)
}

/// The inclusion of `leaf` under `root` in a tree of the sector's shape (`enforce_inclusion`
/// of `stacked::circuit::params`).
fn enforce_inclusion<Tree: 'static + MerkleTreeTrait, CS: ConstraintSystem<Fr>>(
    cs: CS,
    path: AuthPath<Tree::Hasher, Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>,
    root: &AllocatedNum<Fr>,
    leaf: &AllocatedNum<Fr>,
) -> Result<(), SynthesisError> {
    PoRCircuit::<Tree>::synthesize(
        cs,
        Root::Var(leaf.clone()),
        path,
        Root::Var(root.clone()),
        true,
    )
}

/// The inclusion of the data leaf under comm_d, a binary SHA-256 tree: storage-proofs'
/// `PoRCircuit::synthesize` (private, its root and leaf allocated already) with each level's
/// hash on bits. A level allocates its index bit and sibling, `insert` orders the pair, and
/// `Sha256Function::hash_multi_leaf_circuit` hashes it; the index bits are packed into public
/// inputs at the end.
fn comm_d_inclusion<CS: ConstraintSystem<Fr, Root = WitnessBuilder>>(
    mut cs: CS,
    path: Vec<(Vec<Option<Fr>>, Option<usize>)>,
    leaf: &AllocatedNum<Fr>,
) -> Result<()> {
    let mut cur = leaf.clone();
    let mut index_bits = Vec::with_capacity(path.len());
    {
        let mut cs = cs.namespace(|| "base");
        for (i, (siblings, index)) in path.into_iter().enumerate() {
            let mut cs = cs.namespace(|| format!("merkle tree hash {i}"));
            ensure!(
                siblings.len() == 1,
                "level {i} of a binary tree's path has {} siblings",
                siblings.len()
            );
            let bit = Boolean::from(AllocatedBit::alloc(
                cs.namespace(|| "index bit 0"),
                index.map(|index| index & 1 == 1),
            )?);
            index_bits.push(bit.clone());
            let sibling = AllocatedNum::alloc(cs.namespace(|| "path element 0"), || {
                siblings[0].ok_or(SynthesisError::AssignmentMissing)
            })?;
            let pair = insert(&mut cs, &cur, &[bit], &[sibling])?;
            cur = hash_pair(cs.namespace(|| "computation of commitment hash"), &pair)?;
        }
    }
    // The tree has no sub-tree or top-tree levels.
    multipack::pack_into_inputs(cs.namespace(|| "path"), &index_bits)?;
    // The computed root is then constrained equal to comm_d: no variable.
    Ok(())
}

/// `Sha256Function::hash_multi_leaf_circuit` (and `hash2_circuit`, which allocates the same):
/// each number's bits (allocated by its `to_bits_le`), bytes reversed, hashed, and the digest
/// packed.
pub(crate) fn hash_pair<CS: ConstraintSystem<Fr, Root = WitnessBuilder>>(
    mut cs: CS,
    leaves: &[AllocatedNum<Fr>],
) -> Result<AllocatedNum<Fr>> {
    let mut bits = Vec::with_capacity(leaves.len() * 256);
    for (i, leaf) in leaves.iter().enumerate() {
        let le = leaf.to_bits_le(cs.namespace(|| format!("{i}_num_into_bits")))?;
        bits.extend(Bit::from_booleans(&reverse_bit_numbering(le))?);
    }
    let cs = cs.get_root();
    let digest = sha256_witness::sha256(&mut *cs, &bits)?;
    pack_digest(cs, &digest)
}

/// storage-proofs' `hash_single_column` (private to it): Poseidon of a column of 2 or 11.
fn hash_single_column<CS: ConstraintSystem<Fr>>(
    cs: CS,
    column: &[AllocatedNum<Fr>],
) -> Result<AllocatedNum<Fr>> {
    use filecoin_hashers::PoseidonArity;
    Ok(match column.len() {
        2 => neptune::circuit::poseidon_hash::<CS, Fr, U2>(
            cs,
            column.to_vec(),
            <U2 as PoseidonArity>::PARAMETERS(),
        )?,
        11 => neptune::circuit::poseidon_hash::<CS, Fr, U11>(
            cs,
            column.to_vec(),
            <U11 as PoseidonArity>::PARAMETERS(),
        )?,
        n => anyhow::bail!("a column of {n} labels: storage-proofs hashes 2 or 11"),
    })
}
