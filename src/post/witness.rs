//! One sector of the PoSt circuit, its witness computed natively: the values storage-proofs'
//! gadgets allocate, in their order, without running the gadgets.
//!
//! A PoSt circuit is Poseidon hashes and little else: a 32 GiB WindowPoSt partition is 2,349
//! sectors × 10 challenges × 10 levels of arity-8 Merkle path, 234,900 hashes of ~505
//! variables each. Through neptune's gadget a hash's witness costs about a millisecond (every
//! linear combination of the MDS layers is built as a vector of terms, only for its value to be
//! read), ~240 core-seconds a partition. Here the same values are computed on field elements
//! alone, as neptune's optimized native hash computes them (compressed round constants, the
//! pre-sparse and sparse matrices), recording what the gadget allocates:
//!
//! - a sector (storage-proofs-post's `&Sector: Circuit`): comm_r_last, comm_c, comm_r, comm_r
//!   again as an input, the Poseidon hash of (comm_c, comm_r_last), then one private
//!   inclusion proof per challenge;
//! - an inclusion proof (storage-proofs-core's `PoRCircuit`): the leaf, then per level of the
//!   base path, then the sub-tree's and the top tree's levels: the node's index bits, the
//!   siblings, the `insert` gadget's picks (and, for arity 8, its `nor` and `and` bits), and
//!   the level's hash; then the index bits packed into inputs (`multipack::pack_into_inputs`);
//! - a hash (neptune's legacy `poseidon_hash`): in the first full round, per element but the
//!   domain tag, (x + pre)², its square and (x + pre)⁵ + post; in every other round, per S-box,
//!   its input, the input's square, fourth power and fifth power plus the round key (none in
//!   the terminal round); then the result (state element 1).
//!
//! Tested equal, variable for variable, to the gadget synthesis (`post::job`'s tests), on real
//! and shape-only sectors of every tree shape the registered PoSt proofs use.

use std::ops::{AddAssign, MulAssign};
use std::sync::OnceLock;

use anyhow::{bail, ensure, Result};
use bellperson::ConstraintSystem;
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use filecoin_hashers::{Hasher, PoseidonArity};
use filecoin_proofs::MerkleTreeTrait;
use generic_array::typenum::{Unsigned, U2};
use storage_proofs_core::merkle::MerkleProofTrait;
use storage_proofs_post::fallback::SectorProof;

use crate::groth16::sha256_witness::Allocator;
use crate::groth16::WitnessBuilder;

/// The widest Poseidon state of Filecoin's trees and columns (arity 11, plus the tag).
const MAX_WIDTH: usize = 12;

/// One sector of the circuit: its comm_r (the public sector's, as the compound circuit takes
/// it) and its vanilla sector proof.
pub(crate) fn synthesize_sector<Tree: 'static + MerkleTreeTrait>(
    cs: &mut WitnessBuilder,
    comm_r: Fr,
    proof: &SectorProof<Tree::Proof>,
) -> Result<()> {
    let comm_c: Fr = proof.comm_c.into();
    let comm_r_last: Fr = proof.comm_r_last.into();
    alloc(cs, comm_r_last);
    alloc(cs, comm_c);
    alloc(cs, comm_r);
    cs.alloc_input(|| "", || Ok(comm_r))?;
    poseidon::<U2>(cs, &[comm_c, comm_r_last]);
    for (i, path) in proof.inclusion_proofs.iter().enumerate() {
        inclusion_proof::<Tree>(cs, path.leaf().into(), &path.path())
            .map_err(|e| e.context(format!("challenge {i}")))?;
    }
    Ok(())
}

/// A private inclusion proof of `leaf` along `path` (leaf level first), as `PoRCircuit`
/// allocates it.
fn inclusion_proof<Tree: 'static + MerkleTreeTrait>(
    cs: &mut WitnessBuilder,
    leaf: Fr,
    path: &[(Vec<<Tree::Hasher as Hasher>::Domain>, usize)],
) -> Result<()> {
    alloc(cs, leaf);
    let has_sub = Tree::SubTreeArity::to_usize() > 0;
    let has_top = Tree::TopTreeArity::to_usize() > 0;
    // As `AuthPath::from` splits a path: the last element is the top tree's, the one before
    // the sub-tree's, where the shape has them.
    let upper = usize::from(has_sub) + usize::from(has_top);
    ensure!(
        path.len() >= upper,
        "a path of {} levels, short of the tree's sub-tree and top levels",
        path.len()
    );
    let (base, upper_levels) = path.split_at(path.len() - upper);
    let mut bits = Vec::with_capacity(64);
    let mut cur = leaf;
    for element in base {
        cur = level::<Tree::Arity, _>(cs, cur, element, &mut bits)?;
    }
    let mut upper_levels = upper_levels.iter();
    if has_sub {
        if let Some(element) = upper_levels.next() {
            cur = level::<Tree::SubTreeArity, _>(cs, cur, element, &mut bits)?;
        }
    }
    if has_top {
        if let Some(element) = upper_levels.next() {
            level::<Tree::TopTreeArity, _>(cs, cur, element, &mut bits)?;
        }
    }
    // The index bits packed into inputs, `Fr::CAPACITY` bits each.
    for chunk in bits.chunks(Fr::CAPACITY as usize) {
        let mut packed = Fr::ZERO;
        let mut coeff = Fr::ONE;
        for &bit in chunk {
            if bit {
                packed += coeff;
            }
            coeff = coeff.double();
        }
        cs.alloc_input(|| "", || Ok(packed))?;
    }
    Ok(())
}

/// One level of a Merkle path (`SubPath::synthesize`): the index bits, the siblings, the node
/// inserted among them at its index, their hash (the next level's node).
fn level<A: PoseidonArity, D: Copy + Into<Fr>>(
    cs: &mut WitnessBuilder,
    node: Fr,
    (siblings, index): &(Vec<D>, usize),
    bits: &mut Vec<bool>,
) -> Result<Fr> {
    let arity = A::to_usize();
    ensure!(
        arity.is_power_of_two() && arity < MAX_WIDTH,
        "a tree level of arity {arity}"
    );
    ensure!(
        siblings.len() + 1 == arity,
        "a path element of {} hashes at a level of arity {arity}",
        siblings.len()
    );
    let first = bits.len();
    for i in 0..arity.trailing_zeros() {
        let bit = (index >> i) & 1 == 1;
        cs.alloc_bit(bit);
        bits.push(bit);
    }
    let mut hashes = [Fr::ZERO; MAX_WIDTH];
    for (slot, sibling) in hashes.iter_mut().zip(siblings) {
        *slot = (*sibling).into();
        alloc(cs, *slot);
    }
    let inserted = insert(cs, node, &bits[first..], &hashes[..arity - 1])?;
    Ok(poseidon::<A>(cs, &inserted[..arity]))
}

#[inline]
fn alloc(cs: &mut WitnessBuilder, value: Fr) {
    // Never fails: the value is there.
    let _ = cs.alloc(|| "", || Ok(value));
}

/// storage-proofs' `pick`: `a` where the condition holds, else `b`, allocated.
#[inline]
fn pick(cs: &mut WitnessBuilder, condition: bool, a: Fr, b: Fr) -> Fr {
    let c = if condition { a } else { b };
    alloc(cs, c);
    c
}

/// storage-proofs' `insert`: `element` placed among `elements` at the position `bits` give
/// (little-endian), through its gadgets for 2, 4 and 8 elements and `select` for others; the
/// allocations in their order.
fn insert(
    cs: &mut WitnessBuilder,
    element: Fr,
    bits: &[bool],
    elements: &[Fr],
) -> Result<[Fr; MAX_WIDTH]> {
    let size = elements.len() + 1;
    ensure!(
        1 << bits.len() == size,
        "{} bits for {size} elements",
        bits.len()
    );
    let mut out = [Fr::ZERO; MAX_WIDTH];
    let a = element;
    match size {
        2 => {
            out[0] = pick(cs, bits[0], elements[0], a);
            out[1] = pick(cs, bits[0], a, elements[0]);
        }
        4 => {
            let (b0, b1) = (bits[0], bits[1]);
            let (b, c, d) = (elements[0], elements[1], elements[2]);
            let p0_x0 = pick(cs, b0, b, a);
            out[0] = pick(cs, b1, b, p0_x0);
            let p1_x0 = pick(cs, b0, a, b);
            out[1] = pick(cs, b1, c, p1_x0);
            let p2_x1 = pick(cs, b0, d, a);
            out[2] = pick(cs, b1, p2_x1, c);
            let p3_x1 = pick(cs, b0, a, d);
            out[3] = pick(cs, b1, p3_x1, d);
        }
        8 => {
            let (b0, b1, b2) = (bits[0], bits[1], bits[2]);
            let (b, c, d, e) = (elements[0], elements[1], elements[2], elements[3]);
            let (f, g, h) = (elements[4], elements[5], elements[6]);
            let b0_nor_b1 = !b0 & !b1;
            cs.alloc_bit(b0_nor_b1);
            let b0_and_b1 = b0 & b1;
            cs.alloc_bit(b0_and_b1);
            let p0_xx0 = pick(cs, b0_nor_b1, a, b);
            out[0] = pick(cs, b2, b, p0_xx0);
            let p1_x00 = pick(cs, b0, a, b);
            let p1_xx0 = pick(cs, b1, c, p1_x00);
            out[1] = pick(cs, b2, c, p1_xx0);
            let p2_x10 = pick(cs, b0, d, a);
            let p2_xx0 = pick(cs, b1, p2_x10, c);
            out[2] = pick(cs, b2, d, p2_xx0);
            let p3_xx0 = pick(cs, b0_and_b1, a, d);
            out[3] = pick(cs, b2, e, p3_xx0);
            let p4_xx1 = pick(cs, b0_nor_b1, a, f);
            out[4] = pick(cs, b2, p4_xx1, e);
            let p5_x01 = pick(cs, b0, a, f);
            let p5_xx1 = pick(cs, b1, g, p5_x01);
            out[5] = pick(cs, b2, p5_xx1, f);
            let p6_x11 = pick(cs, b0, h, a);
            let p6_xx1 = pick(cs, b1, p6_x11, g);
            out[6] = pick(cs, b2, p6_xx1, g);
            let p7_xx1 = pick(cs, b0_and_b1, a, h);
            out[7] = pick(cs, b2, p7_xx1, h);
        }
        _ if size <= MAX_WIDTH => {
            // `select` per position over the candidates of every insertion index.
            for (pos, slot) in out.iter_mut().enumerate().take(size) {
                let mut state: Vec<Fr> = (0..size)
                    .map(|index| match pos.cmp(&index) {
                        std::cmp::Ordering::Less => elements[pos],
                        std::cmp::Ordering::Equal => a,
                        std::cmp::Ordering::Greater => elements[pos - 1],
                    })
                    .collect();
                let mut half = size / 2;
                for &bit in bits.iter().rev() {
                    state = (0..half)
                        .map(|j| pick(cs, bit, state[half + j], state[j]))
                        .collect();
                    half /= 2;
                }
                *slot = state[0];
            }
        }
        _ => bail!("cannot insert into {size} elements"),
    }
    Ok(out)
}

/// A Poseidon arity's constants laid out for the witness: the matrices column by column
/// (what each output element is the dot product of the state with), flat.
struct Tables {
    width: usize,
    half_full_rounds: usize,
    partial_rounds: usize,
    domain_tag: Fr,
    round_constants: &'static [Fr],
    /// The MDS matrix, column `j` at `[j * width..]`.
    mds: Vec<Fr>,
    /// The pre-sparse matrix, laid out as `mds`.
    pre_sparse: Vec<Fr>,
    /// Per partial round, the sparse matrix's first column (`w_hat`, `width` values) and the
    /// rest of its first row (`v_rest`, `width - 1` values).
    w_hat: Vec<Fr>,
    v_rest: Vec<Fr>,
}

impl Tables {
    /// The tables of arity `A`, made once per process.
    fn of<A: PoseidonArity>() -> &'static Tables {
        static TABLES: [OnceLock<Tables>; MAX_WIDTH + 1] =
            [const { OnceLock::new() }; MAX_WIDTH + 1];
        let c = A::PARAMETERS();
        let width = c.width();
        TABLES[width].get_or_init(|| {
            let columns = |m: &[Vec<Fr>]| {
                (0..width)
                    .flat_map(|j| m.iter().map(move |row| row[j]))
                    .collect()
            };
            Tables {
                width,
                half_full_rounds: c.half_full_rounds,
                partial_rounds: c.partial_rounds,
                domain_tag: c.domain_tag,
                round_constants: &c.compressed_round_constants,
                mds: columns(&c.mds_matrices.m),
                pre_sparse: columns(&c.pre_sparse_matrix),
                w_hat: c
                    .sparse_matrixes
                    .iter()
                    .flat_map(|m| m.w_hat.iter().copied())
                    .collect(),
                v_rest: c
                    .sparse_matrixes
                    .iter()
                    .flat_map(|m| m.v_rest.iter().copied())
                    .collect(),
            }
        })
    }

    /// The linear layer after round `round`, as the circuit's `product_mds` picks it: the
    /// pre-sparse matrix after the first half's last full round, the sparse matrices through
    /// the partial rounds, the MDS matrix elsewhere.
    #[inline]
    fn mix(&self, round: usize, state: &mut [Fr]) {
        let width = self.width;
        let sparse_offset = self.half_full_rounds - 1;
        if round > sparse_offset && round < self.half_full_rounds + self.partial_rounds {
            let k = round - sparse_offset - 1;
            let w_hat = &self.w_hat[k * width..(k + 1) * width];
            let v_rest = &self.v_rest[k * (width - 1)..(k + 1) * (width - 1)];
            let first = state[0];
            let out0 = dot(state, w_hat);
            for (x, v) in state[1..].iter_mut().zip(v_rest) {
                let mut t = first;
                t.mul_assign(v);
                x.add_assign(&t);
            }
            state[0] = out0;
        } else {
            let m = if round == sparse_offset {
                &self.pre_sparse
            } else {
                &self.mds
            };
            let mut out = [Fr::ZERO; MAX_WIDTH];
            for (slot, column) in out.iter_mut().zip(m.chunks_exact(width)) {
                *slot = dot(state, column);
            }
            state.copy_from_slice(&out[..width]);
        }
    }
}

#[inline]
fn dot(a: &[Fr], b: &[Fr]) -> Fr {
    let mut acc = Fr::ZERO;
    for (x, y) in a.iter().zip(b) {
        let mut t = *x;
        t.mul_assign(y);
        acc.add_assign(&t);
    }
    acc
}

/// neptune's legacy Poseidon circuit of `preimage` (its arity's constants), its allocations
/// recorded; the hash.
fn poseidon<A: PoseidonArity>(cs: &mut WitnessBuilder, preimage: &[Fr]) -> Fr {
    let t = Tables::of::<A>();
    let width = preimage.len() + 1;
    debug_assert_eq!(width, t.width);
    let rc = t.round_constants;
    let half = t.half_full_rounds;
    let mut s = [Fr::ZERO; MAX_WIDTH];
    s[0] = t.domain_tag;
    s[1..width].copy_from_slice(preimage);
    let state = &mut s[..width];

    // First full round: round keys added before and after the S-boxes; the tag's S-box is a
    // constant.
    let (pre, post) = rc[..2 * width].split_at(width);
    let mut offset = 2 * width;
    let tag = state[0] + pre[0];
    state[0] = tag.square().square() * tag + post[0];
    for i in 1..width {
        let x = state[i] + pre[i];
        let x2 = x.square();
        alloc(cs, x2);
        let x4 = x2.square();
        alloc(cs, x4);
        let x5 = x4 * x + post[i];
        alloc(cs, x5);
        state[i] = x5;
    }
    let mut round = 0;
    t.mix(round, state);
    round += 1;
    for _ in 1..half {
        full_round(cs, state, Some(&rc[offset..offset + width]));
        offset += width;
        t.mix(round, state);
        round += 1;
    }
    for _ in 0..t.partial_rounds {
        state[0] = s_box(cs, state[0], Some(rc[offset]));
        offset += 1;
        t.mix(round, state);
        round += 1;
    }
    for _ in 0..half - 1 {
        full_round(cs, state, Some(&rc[offset..offset + width]));
        offset += width;
        t.mix(round, state);
        round += 1;
    }
    full_round(cs, state, None);
    t.mix(round, state);
    alloc(cs, state[1]);
    state[1]
}

/// An S-box on a state element that is a linear combination: the element allocated, its
/// square, fourth power, and fifth power plus the round key.
#[inline]
fn s_box(cs: &mut WitnessBuilder, x: Fr, post: Option<Fr>) -> Fr {
    alloc(cs, x);
    let x2 = x.square();
    alloc(cs, x2);
    let x4 = x2.square();
    alloc(cs, x4);
    let mut x5 = x4 * x;
    if let Some(key) = post {
        x5 += key;
    }
    alloc(cs, x5);
    x5
}

fn full_round(cs: &mut WitnessBuilder, state: &mut [Fr], post: Option<&[Fr]>) {
    for (i, x) in state.iter_mut().enumerate() {
        *x = s_box(cs, *x, post.map(|keys| keys[i]));
    }
}
