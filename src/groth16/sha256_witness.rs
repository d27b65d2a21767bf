//! The witness of bellperson's SHA-256 gadget, computed on bits.
//!
//! bellperson's `sha256` builds a linear combination for every bit operation and every 32-bit
//! addition; a witness needs none of them, only the values of the variables the gadget
//! allocates, in order. [`sha256`] follows the gadget step for step on [`Bit`]s, which remember
//! what the gadget's `Boolean` would be (a constant, a variable, or a negated variable) and its
//! value, and hands every variable the gadget would allocate to an [`Allocator`], in the same
//! order and with the same value.
//!
//! That is exact because the gadget's allocations depend on the kinds of its bits alone, never
//! on their values: bellpepper's `Boolean::xor`, `and`, `sha256_ch` and `sha256_maj` choose a
//! constant-folding case by matching `Constant`/`Is`/`Not` (and a constant's value, which is
//! part of its kind), and `UInt32::addmany` allocates a fixed number of result bits unless every
//! operand bit is a constant. The functions below repeat those cases in the gadget's order.

use bellperson::gadgets::boolean::Boolean;
use bellperson::SynthesisError;
use blstrs::Scalar as Fr;
use ff::PrimeField;

/// A bit as the SHA-256 gadget sees it: bellpepper's `Boolean` with its variable's value in
/// place of the variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bit {
    Constant(bool),
    /// A variable that holds this value.
    Is(bool),
    /// The negation of a variable that holds this value.
    Not(bool),
}

impl Bit {
    /// The value the bit stands for.
    #[inline]
    pub fn value(self) -> bool {
        match self {
            Bit::Constant(c) => c,
            Bit::Is(v) => v,
            Bit::Not(v) => !v,
        }
    }

    #[inline]
    fn is_constant(self) -> bool {
        matches!(self, Bit::Constant(_))
    }

    /// The bit of a gadget's `Boolean`; a variable without a value (a blank circuit) is an
    /// error, as it is to a witness.
    pub fn from_boolean(b: &Boolean) -> Result<Bit, SynthesisError> {
        Ok(match b {
            Boolean::Constant(c) => Bit::Constant(*c),
            Boolean::Is(v) => Bit::Is(v.get_value().ok_or(SynthesisError::AssignmentMissing)?),
            Boolean::Not(v) => Bit::Not(v.get_value().ok_or(SynthesisError::AssignmentMissing)?),
        })
    }

    pub fn from_booleans(bits: &[Boolean]) -> Result<Vec<Bit>, SynthesisError> {
        bits.iter().map(Bit::from_boolean).collect()
    }
}

/// bellpepper's `Boolean::not`: no variable, the kind flips.
impl std::ops::Not for Bit {
    type Output = Bit;

    #[inline]
    fn not(self) -> Bit {
        match self {
            Bit::Constant(c) => Bit::Constant(!c),
            Bit::Is(v) => Bit::Not(v),
            Bit::Not(v) => Bit::Is(v),
        }
    }
}

/// Where the variables allocated go, in order: each is a bit (0 or 1).
pub trait Allocator {
    fn alloc_bit(&mut self, value: bool);
}

impl Allocator for Vec<bool> {
    fn alloc_bit(&mut self, value: bool) {
        self.push(value);
    }
}

/// bellpepper's `Boolean::xor`.
#[inline]
fn xor(cs: &mut impl Allocator, a: Bit, b: Bit) -> Bit {
    match (a, b) {
        (Bit::Constant(false), x) | (x, Bit::Constant(false)) => x,
        (Bit::Constant(true), x) | (x, Bit::Constant(true)) => !x,
        // The gadget xors the two variables and negates the result.
        (Bit::Is(x), Bit::Not(y)) | (Bit::Not(y), Bit::Is(x)) => {
            cs.alloc_bit(x ^ y);
            Bit::Not(x ^ y)
        }
        (Bit::Is(x), Bit::Is(y)) | (Bit::Not(x), Bit::Not(y)) => {
            cs.alloc_bit(x ^ y);
            Bit::Is(x ^ y)
        }
    }
}

/// bellpepper's `Boolean::and`. Of two variables it allocates their AND (`and`, `and_not` or
/// `nor` of the underlying variables: the AND of the values they stand for in every case).
#[inline]
fn and(cs: &mut impl Allocator, a: Bit, b: Bit) -> Bit {
    match (a, b) {
        (Bit::Constant(false), _) | (_, Bit::Constant(false)) => Bit::Constant(false),
        (Bit::Constant(true), x) | (x, Bit::Constant(true)) => x,
        (a, b) => {
            let v = a.value() & b.value();
            cs.alloc_bit(v);
            Bit::Is(v)
        }
    }
}

/// bellpepper's `Boolean::sha256_ch`: (a and b) xor ((not a) and c).
#[inline]
fn ch(cs: &mut impl Allocator, a: Bit, b: Bit, c: Bit) -> Bit {
    let v = (a.value() & b.value()) ^ (!a.value() & c.value());
    match (a, b, c) {
        (Bit::Constant(_), Bit::Constant(_), Bit::Constant(_)) => Bit::Constant(v),
        (Bit::Constant(false), _, c) => c,
        (a, Bit::Constant(false), c) => and(cs, !a, c),
        (a, b, Bit::Constant(false)) => and(cs, a, b),
        (a, b, Bit::Constant(true)) => !and(cs, a, !b),
        (a, Bit::Constant(true), c) => !and(cs, !a, !c),
        // `a` a true constant, or no constant: one variable.
        _ => {
            cs.alloc_bit(v);
            Bit::Is(v)
        }
    }
}

/// bellpepper's `Boolean::sha256_maj`: (a and b) xor (a and c) xor (b and c).
#[inline]
fn maj(cs: &mut impl Allocator, a: Bit, b: Bit, c: Bit) -> Bit {
    let v = (a.value() & b.value()) ^ (a.value() & c.value()) ^ (b.value() & c.value());
    match (a, b, c) {
        (Bit::Constant(_), Bit::Constant(_), Bit::Constant(_)) => Bit::Constant(v),
        (Bit::Constant(false), b, c) => and(cs, b, c),
        (a, Bit::Constant(false), c) => and(cs, a, c),
        (a, b, Bit::Constant(false)) => and(cs, a, b),
        (a, b, Bit::Constant(true)) => !and(cs, !a, !b),
        (a, Bit::Constant(true), c) => !and(cs, !a, !c),
        (Bit::Constant(true), b, c) => !and(cs, !b, !c),
        // No constant: the result, then `b and c` for its constraint.
        (_, b, c) => {
            cs.alloc_bit(v);
            and(cs, b, c);
            Bit::Is(v)
        }
    }
}

/// bellperson's `UInt32`: 32 bits, least significant first, and the value they stand for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Word {
    bits: [Bit; 32],
    value: u32,
}

impl Word {
    fn constant(value: u32) -> Word {
        Word {
            bits: std::array::from_fn(|i| Bit::Constant(value >> i & 1 == 1)),
            value,
        }
    }

    /// 32 bits, most significant first.
    fn from_bits_be(bits: &[Bit]) -> Word {
        let mut value = 0u32;
        for b in bits {
            value = value << 1 | u32::from(b.value());
        }
        Word {
            bits: std::array::from_fn(|i| bits[31 - i]),
            value,
        }
    }

    fn bits_be(&self) -> impl Iterator<Item = Bit> + '_ {
        self.bits.iter().rev().copied()
    }

    fn rotr(&self, by: usize) -> Word {
        Word {
            bits: std::array::from_fn(|i| self.bits[(i + by) % 32]),
            value: self.value.rotate_right(by as u32),
        }
    }

    fn shr(&self, by: usize) -> Word {
        Word {
            bits: std::array::from_fn(|i| {
                self.bits
                    .get(i + by)
                    .copied()
                    .unwrap_or(Bit::Constant(false))
            }),
            value: self.value >> by,
        }
    }

    fn xor(&self, cs: &mut impl Allocator, other: &Word) -> Word {
        let mut bits = [Bit::Constant(false); 32];
        for (i, out) in bits.iter_mut().enumerate() {
            *out = xor(cs, self.bits[i], other.bits[i]);
        }
        Word {
            bits,
            value: self.value ^ other.value,
        }
    }

    fn ch(cs: &mut impl Allocator, a: &Word, b: &Word, c: &Word) -> Word {
        let mut bits = [Bit::Constant(false); 32];
        for (i, out) in bits.iter_mut().enumerate() {
            *out = ch(cs, a.bits[i], b.bits[i], c.bits[i]);
        }
        Word {
            bits,
            value: (a.value & b.value) ^ (!a.value & c.value),
        }
    }

    fn maj(cs: &mut impl Allocator, a: &Word, b: &Word, c: &Word) -> Word {
        let mut bits = [Bit::Constant(false); 32];
        for (i, out) in bits.iter_mut().enumerate() {
            *out = maj(cs, a.bits[i], b.bits[i], c.bits[i]);
        }
        Word {
            bits,
            value: (a.value & b.value) ^ (a.value & c.value) ^ (b.value & c.value),
        }
    }

    /// bellperson's `UInt32::addmany`: a constant if every operand bit is one, otherwise as
    /// many variables as the largest possible sum has bits (the sum's bits, least significant
    /// first), of which the low 32 are the result.
    fn addmany(cs: &mut impl Allocator, operands: &[Word]) -> Word {
        debug_assert!((2..=10).contains(&operands.len()));
        let sum: u64 = operands.iter().map(|w| u64::from(w.value)).sum();
        if operands
            .iter()
            .all(|w| w.bits.iter().all(|b| b.is_constant()))
        {
            return Word::constant(sum as u32);
        }
        let max = operands.len() as u64 * u64::from(u32::MAX);
        let allocated = 64 - max.leading_zeros() as usize;
        let mut bits = [Bit::Constant(false); 32];
        for i in 0..allocated {
            let v = sum >> i & 1 == 1;
            cs.alloc_bit(v);
            if let Some(bit) = bits.get_mut(i) {
                *bit = Bit::Is(v);
            }
        }
        Word {
            bits,
            value: sum as u32,
        }
    }
}

#[allow(clippy::unreadable_literal)]
const ROUND_CONSTANTS: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

#[allow(clippy::unreadable_literal)]
const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// A working variable of the compression rounds: the gadget defers the additions that make
/// `a` and `e` until they are used, so that each is one `addmany` of all its terms.
enum Deferred {
    Sum(Vec<Word>),
    Word(Word),
}

impl Deferred {
    fn compute(self, cs: &mut impl Allocator, others: &[Word]) -> Word {
        match self {
            // As in the gadget, a word already computed ignores `others` (never the case after
            // 64 rounds).
            Deferred::Word(w) => w,
            Deferred::Sum(mut terms) => {
                terms.extend_from_slice(others);
                Word::addmany(cs, &terms)
            }
        }
    }
}

/// bellperson's `sha256_compression_function` on one 512-bit block.
fn compression(cs: &mut impl Allocator, block: &[Bit], current: &[Word; 8]) -> [Word; 8] {
    let mut w: Vec<Word> = block.chunks(32).map(Word::from_bits_be).collect();
    for i in 16..64 {
        let s0 = w[i - 15]
            .rotr(7)
            .xor(cs, &w[i - 15].rotr(18))
            .xor(cs, &w[i - 15].shr(3));
        let s1 = w[i - 2]
            .rotr(17)
            .xor(cs, &w[i - 2].rotr(19))
            .xor(cs, &w[i - 2].shr(10));
        let next = Word::addmany(cs, &[w[i - 16], s0, w[i - 7], s1]);
        w.push(next);
    }

    let mut a = Deferred::Word(current[0]);
    let mut b = current[1];
    let mut c = current[2];
    let mut d = current[3];
    let mut e = Deferred::Word(current[4]);
    let mut f = current[5];
    let mut g = current[6];
    let mut h = current[7];
    for (i, &k) in ROUND_CONSTANTS.iter().enumerate() {
        let new_e = e.compute(cs, &[]);
        let s1 = new_e
            .rotr(6)
            .xor(cs, &new_e.rotr(11))
            .xor(cs, &new_e.rotr(25));
        let ch = Word::ch(cs, &new_e, &f, &g);
        let temp1 = [h, s1, ch, Word::constant(k), w[i]];

        let new_a = a.compute(cs, &[]);
        let s0 = new_a
            .rotr(2)
            .xor(cs, &new_a.rotr(13))
            .xor(cs, &new_a.rotr(22));
        let maj = Word::maj(cs, &new_a, &b, &c);

        h = g;
        g = f;
        f = new_e;
        e = Deferred::Sum(temp1.iter().copied().chain([d]).collect());
        d = c;
        c = b;
        b = new_a;
        a = Deferred::Sum(temp1.iter().copied().chain([s0, maj]).collect());
    }

    let h0 = a.compute(cs, &[current[0]]);
    let h1 = Word::addmany(cs, &[current[1], b]);
    let h2 = Word::addmany(cs, &[current[2], c]);
    let h3 = Word::addmany(cs, &[current[3], d]);
    let h4 = e.compute(cs, &[current[4]]);
    let h5 = Word::addmany(cs, &[current[5], f]);
    let h6 = Word::addmany(cs, &[current[6], g]);
    let h7 = Word::addmany(cs, &[current[7], h]);
    [h0, h1, h2, h3, h4, h5, h6, h7]
}

/// bellperson's `sha256` gadget: the variables it allocates for `input` go to `cs`; the digest
/// is returned as the gadget returns it (256 bits, each word most significant bit first).
pub fn sha256(cs: &mut impl Allocator, input: &[Bit]) -> Result<Vec<Bit>, SynthesisError> {
    if !input.len().is_multiple_of(8) {
        return Err(SynthesisError::Unsatisfiable);
    }
    let len = input.len() as u64;
    let mut padded = input.to_vec();
    padded.push(Bit::Constant(true));
    while !(padded.len() + 64).is_multiple_of(512) {
        padded.push(Bit::Constant(false));
    }
    padded.extend((0..64).rev().map(|i| Bit::Constant(len >> i & 1 == 1)));

    let mut state = IV.map(Word::constant);
    for block in padded.chunks(512) {
        state = compression(cs, block, &state);
    }
    Ok(state.iter().flat_map(Word::bits_be).collect())
}

/// The value of bellperson's `multipack::pack_bits` of `bits` (least significant first, at most
/// `Fr::CAPACITY` of them): the number the gadget allocates.
pub fn packed_value(bits: &[Bit]) -> Result<Fr, SynthesisError> {
    if bits.len() > Fr::CAPACITY as usize {
        return Err(SynthesisError::Unsatisfiable);
    }
    let mut repr = [0u8; 32];
    for (i, b) in bits.iter().enumerate() {
        repr[i / 8] |= u8::from(b.value()) << (i % 8);
    }
    // Fewer bits than the modulus has: always a canonical field element.
    Option::from(Fr::from_repr(repr)).ok_or(SynthesisError::Unsatisfiable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::groth16::WitnessBuilder;
    use bellperson::gadgets::boolean::AllocatedBit;
    use bellperson::gadgets::multipack;
    use bellperson::ConstraintSystem;
    use ff::Field;
    use rand::{Rng, SeedableRng};
    use sha2::Digest;

    /// Input bits of every kind, allocated in a builder; the same bits for the mirror.
    fn random_input(
        rng: &mut impl Rng,
        cs: &mut WitnessBuilder,
        len: usize,
        kinds: &[u8],
    ) -> (Vec<Boolean>, Vec<Bit>) {
        (0..len)
            .map(|i| {
                let v: bool = rng.gen();
                match kinds[rng.gen_range(0..kinds.len())] {
                    0 => (Boolean::Constant(v), Bit::Constant(v)),
                    kind => {
                        let var = AllocatedBit::alloc(cs.namespace(|| format!("in {i}")), Some(v))
                            .unwrap();
                        if kind == 1 {
                            (Boolean::Is(var), Bit::Is(v))
                        } else {
                            (Boolean::Not(var), Bit::Not(v))
                        }
                    }
                }
            })
            .unzip()
    }

    fn as_field(bits: &[bool]) -> Vec<Fr> {
        bits.iter()
            .map(|&b| if b { Fr::ONE } else { Fr::ZERO })
            .collect()
    }

    /// The mirror allocates what the gadget allocates, for inputs mixing constants, variables
    /// and negated variables in every proportion (all-constant blocks included), of one to
    /// several blocks; and both give the digest SHA-256 gives.
    #[test]
    fn sha256_allocates_what_the_gadget_allocates() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let kinds: [&[u8]; 6] = [&[0], &[1], &[2], &[0, 1], &[1, 2], &[0, 1, 2]];
        for (case, &len) in [0usize, 8, 440, 448, 512, 1024, 1248 * 8, 64 * 8]
            .iter()
            .enumerate()
        {
            for kinds in kinds {
                let mut gadget = WitnessBuilder::new();
                let (booleans, bits) = random_input(&mut rng, &mut gadget, len, kinds);
                let inputs = gadget.aux().len();
                let digest =
                    bellperson::gadgets::sha256::sha256(gadget.namespace(|| "hash"), &booleans)
                        .unwrap();

                let mut ours: Vec<bool> = Vec::new();
                let out = sha256(&mut ours, &bits).unwrap();
                assert_eq!(
                    as_field(&ours),
                    gadget.aux().to_vec()[inputs..],
                    "case {case}, kinds {kinds:?}"
                );
                assert_eq!(out, Bit::from_booleans(&digest).unwrap());

                let bytes: Vec<u8> = bits
                    .chunks(8)
                    .map(|b| b.iter().fold(0u8, |acc, b| acc << 1 | u8::from(b.value())))
                    .collect();
                let expected = sha2::Sha256::digest(&bytes);
                let got: Vec<u8> = out
                    .chunks(8)
                    .map(|b| b.iter().fold(0u8, |acc, b| acc << 1 | u8::from(b.value())))
                    .collect();
                assert_eq!(got, expected.to_vec());
            }
        }
    }

    #[test]
    fn packed_value_is_what_pack_bits_allocates() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(12);
        let mut cs = WitnessBuilder::new();
        let (booleans, bits) = random_input(&mut rng, &mut cs, Fr::CAPACITY as usize, &[0, 1, 2]);
        let num = multipack::pack_bits(cs.namespace(|| "pack"), &booleans).unwrap();
        assert_eq!(num.get_value(), Some(packed_value(&bits).unwrap()));
        assert!(packed_value(&vec![Bit::Constant(true); 255]).is_err());
    }
}
