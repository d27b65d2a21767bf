//! Witness-only synthesis, and the compact form a witness travels and waits in.
//!
//! With the constraints recorded once (`r1cs`), a proof needs only the values of its
//! variables: [`WitnessBuilder`] runs a circuit and keeps the values it allocates, compact as
//! they come, and drops every constraint unbuilt (the closures that would build the linear
//! combinations are never called).
//!
//! A real PoRep witness is about 51 % zeros, 47 % ones and 2 % other values (SHA-256 and
//! Merkle-path bits dominate), so [`CompactValues`] keeps two bitmaps (one, other) and the few
//! other values: ~0.4 bytes per variable instead of 32. A 32 GiB partition's 130M variables
//! wait in ~100 MB instead of 4 GB.

use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar as Fr;
use ff::Field;
use rayon::prelude::*;

use super::sha256_witness::Allocator;

/// A constraint system that keeps only the values of the variables allocated: the inputs (a
/// few) in full, the aux variables (millions, mostly bits) compact.
///
/// With `skip_before` set, values allocated before the first top-level namespace whose name
/// starts with that prefix are dropped: a circuit that repeats one preamble in front of each
/// piece of work can then be synthesized piece by piece, on several threads, and the pieces
/// concatenated in order.
pub struct WitnessBuilder {
    pub input: Vec<Fr>,
    aux: CompactValues,
    skip_before: Option<&'static str>,
    /// Namespace depth: top-level names are the only ones looked at (a name is a closure that
    /// formats a string; calling it for every gadget would cost more than the values).
    depth: usize,
}

impl WitnessBuilder {
    pub fn new() -> Self {
        WitnessBuilder {
            input: Vec::new(),
            aux: CompactValues::default(),
            skip_before: None,
            depth: 0,
        }
    }

    /// Values allocated before the top-level namespace named `prefix…` are not kept.
    pub fn skipping_before(prefix: &'static str) -> Self {
        WitnessBuilder {
            skip_before: Some(prefix),
            ..WitnessBuilder::new()
        }
    }

    /// Whether the namespace `skip_before` names was entered (always, when there is none).
    pub fn reached(&self) -> bool {
        self.skip_before.is_none()
    }

    /// The aux values kept.
    pub fn aux(&self) -> &CompactValues {
        &self.aux
    }

    /// Room for `values` more aux values, `others` of them neither zero nor one: a circuit of
    /// known size then fills them without regrowing (a PoSt witness is ~4 GB of such values).
    pub fn reserve(&mut self, values: usize, others: usize) {
        self.aux.reserve(values, others);
    }

    /// The inputs and aux values kept, compact.
    pub fn into_compact(self) -> (CompactValues, CompactValues) {
        (CompactValues::new(&self.input), self.aux)
    }
}

/// Bits computed without the gadget that would allocate them (`sha256_witness`) are appended
/// as that gadget's variables would be.
impl Allocator for WitnessBuilder {
    #[inline]
    fn alloc_bit(&mut self, value: bool) {
        if self.skip_before.is_none() {
            self.aux.push_bit(value);
        }
    }
}

impl Default for WitnessBuilder {
    fn default() -> Self {
        WitnessBuilder::new()
    }
}

impl ConstraintSystem<Fr> for WitnessBuilder {
    type Root = Self;

    fn new() -> Self {
        WitnessBuilder::new()
    }

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let value = f()?;
        // Indices are never read back here (no constraint is built); they are the ones a full
        // synthesis would give while values are kept.
        let index = self.aux.len();
        if self.skip_before.is_none() {
            self.aux.push(value);
        }
        Ok(Variable::new_unchecked(Index::Aux(index)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let value = f()?;
        let index = self.input.len();
        if self.skip_before.is_none() {
            self.input.push(value);
        }
        Ok(Variable::new_unchecked(Index::Input(index)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LB: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LC: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
    {
    }

    fn push_namespace<NR, N>(&mut self, name: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
        if self.depth == 0 {
            if let Some(prefix) = self.skip_before {
                if name().into().starts_with(prefix) {
                    self.skip_before = None;
                }
            }
        }
        self.depth += 1;
    }

    fn pop_namespace(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

/// One witness value as products read it: zero and one need no multiplication.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Zero,
    One,
    Other(&'a Fr),
}

impl Value<'_> {
    /// What a full value is.
    #[inline]
    pub fn of(x: &Fr) -> Value<'_> {
        if *x == Fr::ZERO {
            Value::Zero
        } else if *x == Fr::ONE {
            Value::One
        } else {
            Value::Other(x)
        }
    }
}

/// Random access to compact values without expanding them. Per word of 64 values its two
/// bitmaps and the count of other values before it lie side by side, so that reading a value
/// touches one cache line of a table 64× smaller than the values in full (49 MB for a
/// 32 GiB partition's 130 M aux values, against 4.2 GB), and the value itself only when it
/// is neither zero nor one (2 % of a PoRep partition's).
pub struct ValueIndex<'a> {
    words: Vec<IndexWord>,
    values: &'a [Fr],
}

#[derive(Clone, Copy, Default)]
struct IndexWord {
    ones: u64,
    others: u64,
    before: u64,
}

impl ValueIndex<'_> {
    pub fn len(&self) -> usize {
        self.words.len() * 64
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Value `i`, which must be below the length the values were made with.
    #[inline]
    pub fn get(&self, i: usize) -> Value<'_> {
        let w = &self.words[i / 64];
        let bit = 1u64 << (i % 64);
        if w.ones & bit != 0 {
            Value::One
        } else if w.others & bit != 0 {
            let rank = w.before as usize + (w.others & (bit - 1)).count_ones() as usize;
            // Every bit of `others` has its value: they are built together.
            Value::Other(&self.values[rank])
        } else {
            Value::Zero
        }
    }
}

/// Field values kept as two bitmaps (value is one; value is neither zero nor one) and the
/// values that are neither, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompactValues {
    len: usize,
    ones: Vec<u64>,
    others: Vec<u64>,
    values: Vec<Fr>,
}

impl CompactValues {
    pub fn new(values: &[Fr]) -> CompactValues {
        let words = values.len().div_ceil(64);
        let mut ones = vec![0u64; words];
        let mut others = vec![0u64; words];
        let mut kept = Vec::new();
        for (w, chunk) in values.chunks(64).enumerate() {
            for (bit, v) in chunk.iter().enumerate() {
                if *v == Fr::ONE {
                    ones[w] |= 1 << bit;
                } else if *v != Fr::ZERO {
                    others[w] |= 1 << bit;
                    kept.push(*v);
                }
            }
        }
        CompactValues {
            len: values.len(),
            ones,
            others,
            values: kept,
        }
    }

    /// Room for `values` more values, `others` of them neither zero nor one.
    pub fn reserve(&mut self, values: usize, others: usize) {
        let words = (self.len + values)
            .div_ceil(64)
            .saturating_sub(self.ones.len());
        self.ones.reserve(words);
        self.others.reserve(words);
        self.values.reserve(others);
    }

    /// Append a value that is zero or one.
    #[inline]
    pub fn push_bit(&mut self, one: bool) {
        let (word, bit) = (self.len / 64, self.len % 64);
        if bit == 0 {
            self.ones.push(0);
            self.others.push(0);
        }
        self.ones[word] |= u64::from(one) << bit;
        self.len += 1;
    }

    /// Append a value.
    pub fn push(&mut self, value: Fr) {
        if value == Fr::ONE || value == Fr::ZERO {
            self.push_bit(value == Fr::ONE);
        } else {
            let (word, bit) = (self.len / 64, self.len % 64);
            self.push_bit(false);
            self.others[word] |= 1 << bit;
            self.values.push(value);
        }
    }

    /// Random access to the values as they are (`ValueIndex`).
    pub fn index(&self) -> ValueIndex<'_> {
        let mut before = 0u64;
        let words = self
            .ones
            .iter()
            .zip(&self.others)
            .map(|(&ones, &others)| {
                let w = IndexWord {
                    ones,
                    others,
                    before,
                };
                before += u64::from(others.count_ones());
                w
            })
            .collect();
        ValueIndex {
            words,
            values: &self.values,
        }
    }

    /// The values in full.
    pub fn to_vec(&self) -> Vec<Fr> {
        expand(std::slice::from_ref(self))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many values are zero, one, and neither.
    pub fn census(&self) -> Census {
        let ones: usize = self.ones.iter().map(|w| w.count_ones() as usize).sum();
        Census {
            zeros: self.len - ones - self.values.len(),
            ones,
            others: self.values.len(),
        }
    }

    /// Memory held.
    pub fn bytes(&self) -> usize {
        (self.ones.len() + self.others.len()) * 8 + self.values.len() * 32
    }

    /// Which values are one: 64 a word, value i at bit i % 64 of word i / 64.
    pub fn ones_words(&self) -> &[u64] {
        &self.ones
    }

    /// Which values are neither zero nor one, laid out as `ones_words`.
    pub fn others_words(&self) -> &[u64] {
        &self.others
    }

    /// The values that are neither zero nor one, in order.
    pub fn values(&self) -> &[Fr] {
        &self.values
    }

    /// The pieces one after another, as one piece: what a device expands in one pass.
    pub fn concat(pieces: &[CompactValues]) -> CompactValues {
        let len = pieces.iter().map(CompactValues::len).sum::<usize>();
        let mut out = CompactValues {
            len: 0,
            ones: vec![0; len.div_ceil(64)],
            others: vec![0; len.div_ceil(64)],
            values: join_values(pieces),
        };
        for p in pieces {
            or_bits_at(&mut out.ones, out.len, &p.ones, p.len);
            or_bits_at(&mut out.others, out.len, &p.others, p.len);
            out.len += p.len;
        }
        out
    }
}

/// Values past which `join_values` copies on several threads: below it one thread copies in
/// milliseconds (a 32 GiB PoRep partition keeps ~90 MB of values).
const JOIN_ON_THREADS: usize = 1 << 22;

/// The pieces' values one after another. Large ones (a 32 GiB WindowPoSt partition keeps
/// 4 GB: 99 % of its variables are Poseidon states) are copied by a few threads of their own,
/// not rayon's, whose threads may be busy with the next partition's witness: one thread took
/// 2.6 s there, most of it faulting in the new pages, which is what several threads share.
fn join_values(pieces: &[CompactValues]) -> Vec<Fr> {
    let total: usize = pieces.iter().map(|p| p.values.len()).sum();
    let mut values: Vec<Fr> = Vec::with_capacity(total);
    if total < JOIN_ON_THREADS {
        for p in pieces {
            values.extend_from_slice(&p.values);
        }
        return values;
    }
    let threads = std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .clamp(2, 16);
    // Each thread copies a run of whole pieces into its own part of the spare capacity.
    let per_thread = total.div_ceil(threads);
    std::thread::scope(|scope| {
        let mut rest = &mut values.spare_capacity_mut()[..total];
        let mut run: Vec<&[Fr]> = Vec::new();
        let mut run_len = 0;
        for (k, p) in pieces.iter().enumerate() {
            run.push(&p.values);
            run_len += p.values.len();
            if run_len >= per_thread || k + 1 == pieces.len() {
                let (head, tail) = rest.split_at_mut(run_len);
                rest = tail;
                let sources = std::mem::take(&mut run);
                run_len = 0;
                scope.spawn(move || {
                    let mut at = 0;
                    for src in sources {
                        for (slot, v) in head[at..at + src.len()].iter_mut().zip(src) {
                            slot.write(*v);
                        }
                        at += src.len();
                    }
                });
            }
        }
    });
    // SAFETY: the runs above cover the first `total` slots exactly (the pieces in order, each
    // copied whole), and every thread has finished writing its run when the scope ends.
    unsafe { values.set_len(total) };
    values
}

/// ORs the first `n` bits of `src` into `dst` from bit `at` on (`dst` long enough).
fn or_bits_at(dst: &mut [u64], at: usize, src: &[u64], n: usize) {
    let (base, shift) = (at / 64, at % 64);
    for (k, &word) in src.iter().enumerate().take(n.div_ceil(64)) {
        // Bits past `n` must not land on the next piece's first bits.
        let left = n - k * 64;
        let word = if left < 64 {
            word & ((1u64 << left) - 1)
        } else {
            word
        };
        dst[base + k] |= word << shift;
        if shift != 0 {
            if let Some(next) = dst.get_mut(base + k + 1) {
                *next |= word >> (64 - shift);
            }
        }
    }
}

/// Zeros, ones and other values in a witness.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Census {
    pub zeros: usize,
    pub ones: usize,
    pub others: usize,
}

impl std::ops::AddAssign for Census {
    fn add_assign(&mut self, o: Census) {
        self.zeros += o.zeros;
        self.ones += o.ones;
        self.others += o.others;
    }
}

/// A partition's witness in compact pieces (as synthesized, piece by piece), inputs and aux
/// variables each the concatenation of their pieces.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompactWitness {
    pub input: Vec<CompactValues>,
    pub aux: Vec<CompactValues>,
}

impl CompactWitness {
    /// Add the next piece of a witness.
    pub fn push(&mut self, input: &[Fr], aux: &[Fr]) {
        self.input.push(CompactValues::new(input));
        self.aux.push(CompactValues::new(aux));
    }

    pub fn inputs(&self) -> usize {
        self.input.iter().map(CompactValues::len).sum()
    }

    pub fn aux_len(&self) -> usize {
        self.aux.iter().map(CompactValues::len).sum()
    }

    pub fn census(&self) -> Census {
        let mut c = Census::default();
        for piece in self.input.iter().chain(&self.aux) {
            c += piece.census();
        }
        c
    }

    pub fn bytes(&self) -> usize {
        self.input
            .iter()
            .chain(&self.aux)
            .map(CompactValues::bytes)
            .sum()
    }

    /// The full input and aux values, the pieces expanded in parallel.
    pub fn expand(&self) -> (Vec<Fr>, Vec<Fr>) {
        (expand(&self.input), expand(&self.aux))
    }

    /// The form a device takes: the few inputs expanded, the aux pieces joined into one.
    ///
    /// Off rayon's pool (on the calling thread, and `join_values`'s own threads for large
    /// values): handing it to the pool would queue it behind the challenges being synthesized
    /// there (seconds each), which held partitions back from the GPU for up to 5.8 s in a
    /// full-size run.
    pub fn packed(&self) -> PackedWitness {
        let mut input = vec![Fr::ZERO; self.inputs()];
        let mut at = 0;
        for piece in &self.input {
            let out = &mut input[at..at + piece.len()];
            expand_words(&piece.ones, &piece.others, &piece.values, out);
            at += piece.len();
        }
        PackedWitness {
            input,
            aux: CompactValues::concat(&self.aux),
        }
    }
}

/// A partition's witness as it goes to a device: the public inputs (a few hundred values) in
/// full, the aux variables as one compact piece (~90 MB for a 32 GiB partition), expanded on
/// the device (`gpu::witness`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PackedWitness {
    pub input: Vec<Fr>,
    pub aux: CompactValues,
}

impl PackedWitness {
    /// The aux values in full, expanded on the host: for a device that cannot take it.
    pub fn expand_aux(&self) -> Vec<Fr> {
        expand(std::slice::from_ref(&self.aux))
    }

    pub fn bytes(&self) -> usize {
        self.input.len() * 32 + self.aux.bytes()
    }
}

fn expand(pieces: &[CompactValues]) -> Vec<Fr> {
    let total = pieces.iter().map(CompactValues::len).sum();
    let mut out = Vec::new();
    (0..total)
        .into_par_iter()
        .map(|_| Fr::ZERO)
        .collect_into_vec(&mut out);
    let mut slices = Vec::with_capacity(pieces.len());
    let mut rest = out.as_mut_slice();
    for p in pieces {
        let (head, tail) = rest.split_at_mut(p.len());
        slices.push((p, head));
        rest = tail;
    }
    slices.into_par_iter().for_each(|(p, out)| {
        // Large pieces are split further on word boundaries, so that one big piece does not
        // leave the other threads idle.
        const STEP: usize = 64 * 4096;
        out.par_chunks_mut(STEP).enumerate().for_each(|(k, chunk)| {
            let first = k * STEP / 64;
            let words = chunk.len().div_ceil(64);
            let skipped: usize = p.others[..first]
                .iter()
                .map(|w| w.count_ones() as usize)
                .sum();
            expand_words(
                &p.ones[first..first + words],
                &p.others[first..first + words],
                &p.values[skipped..],
                chunk,
            );
        });
    });
    out
}

/// Values from their bitmaps: one where `ones` has the bit, the next of `values` where
/// `others` has it, zero elsewhere.
fn expand_words(ones: &[u64], others: &[u64], values: &[Fr], out: &mut [Fr]) {
    let mut next = values.iter();
    for (w, chunk) in out.chunks_mut(64).enumerate() {
        let (one, other) = (ones[w], others[w]);
        for (bit, slot) in chunk.iter_mut().enumerate() {
            if one >> bit & 1 == 1 {
                *slot = Fr::ONE;
            } else if other >> bit & 1 == 1 {
                // The bitmaps and values are built together: there is a value for every bit.
                *slot = next.next().copied().unwrap_or(Fr::ZERO);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn random_values(rng: &mut impl Rng, n: usize) -> Vec<Fr> {
        (0..n)
            .map(|_| match rng.gen_range(0..10) {
                0..=4 => Fr::ZERO,
                5..=8 => Fr::ONE,
                _ => Fr::random(&mut *rng),
            })
            .collect()
    }

    /// Values appended one by one make what the values make at once.
    #[test]
    fn pushed_values_are_the_values_compacted() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(6);
        for n in [0, 1, 63, 64, 65, 1000] {
            let values = random_values(&mut rng, n);
            let mut pushed = CompactValues::default();
            for v in &values {
                if *v == Fr::ONE || *v == Fr::ZERO {
                    pushed.push_bit(*v == Fr::ONE);
                } else {
                    pushed.push(*v);
                }
            }
            let mut general = CompactValues::default();
            values.iter().for_each(|v| general.push(*v));
            assert_eq!(pushed, CompactValues::new(&values));
            assert_eq!(general, pushed);
            assert_eq!(pushed.to_vec(), values);
        }
    }

    /// Every value read in place is the value expanded, at every offset within and across
    /// words, with runs of others long enough that their ranks cross words.
    #[test]
    fn values_read_in_place_are_the_values() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for n in [0, 1, 63, 64, 65, 1000, 4099] {
            let mut values = random_values(&mut rng, n);
            for v in values.iter_mut().skip(n / 3).take(150) {
                *v = Fr::random(&mut rng);
            }
            let compact = CompactValues::new(&values);
            let index = compact.index();
            assert!(index.len() >= n);
            for (i, v) in values.iter().enumerate() {
                assert_eq!(index.get(i), Value::of(v), "value {i} of {n}");
            }
        }
    }

    #[test]
    fn pieces_joined_into_one_expand_to_the_values_in_order() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        // Lengths that start pieces at every kind of offset within a word, and an empty one.
        for lens in [vec![1, 63, 64, 65, 0, 200, 7], vec![128, 128], vec![3; 50]] {
            let mut all = Vec::new();
            let mut witness = CompactWitness::default();
            for n in lens {
                let values = random_values(&mut rng, n);
                witness.push(&values[..n.min(2)], &values);
                all.extend(values);
            }
            let packed = witness.packed();
            assert_eq!(packed.aux.len(), all.len());
            assert_eq!(
                packed.aux.census(),
                witness.aux.iter().fold(Census::default(), |mut c, p| {
                    c += p.census();
                    c
                })
            );
            assert_eq!(packed.expand_aux(), all);
            assert_eq!(packed.input, witness.expand().0);
        }
    }

    /// Values past `JOIN_ON_THREADS` are joined by several threads: the same values in the
    /// same order, whatever the pieces' sizes (empty ones and one larger than a thread's share
    /// included).
    #[test]
    fn large_values_joined_on_threads_keep_their_order() {
        let sizes = [
            0,
            1,
            JOIN_ON_THREADS / 3,
            5,
            JOIN_ON_THREADS / 2,
            0,
            1000,
            JOIN_ON_THREADS / 4,
        ];
        let mut next = 0u64;
        let pieces: Vec<CompactValues> = sizes
            .iter()
            .map(|&n| {
                let values: Vec<Fr> = (0..n)
                    .map(|_| {
                        next += 1;
                        Fr::from(next + 1)
                    })
                    .collect();
                CompactValues::new(&values)
            })
            .collect();
        let joined = join_values(&pieces);
        assert!(joined.len() >= JOIN_ON_THREADS);
        assert_eq!(joined.len() as u64, next);
        assert!(joined
            .iter()
            .enumerate()
            .all(|(i, v)| *v == Fr::from(i as u64 + 2)));
        assert_eq!(CompactValues::concat(&pieces).values(), &joined[..]);
    }
}
