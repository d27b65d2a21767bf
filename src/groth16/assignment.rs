//! Synthesis: run a circuit against c2q's own constraint system, which keeps the witness and
//! the evaluations of the A, B and C linear combinations at each constraint (what the prover
//! needs) and nothing else. The linear combinations themselves are evaluated and dropped.

use super::pins::Pins;
use super::witness::CompactValues;
use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar as Fr;
use ff::Field;

/// Which variables appear in a query, one bit each. bellperson's parameter files omit the A and
/// B points of variables that never appear there, so the multiexps pick scalars by these bits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Density {
    bits: Vec<u64>,
    len: usize,
}

impl Density {
    /// A density of `len` variables, all of them present.
    pub fn full(len: usize) -> Self {
        let mut bits = vec![u64::MAX; len / 64];
        if !len.is_multiple_of(64) {
            bits.push((1u64 << (len % 64)) - 1);
        }
        Density { bits, len }
    }

    /// A density of `len` variables, variable i present when `present(i)`.
    pub fn from_fn(len: usize, present: impl Fn(usize) -> bool) -> Self {
        let mut d = Density {
            bits: vec![0; len.div_ceil(64)],
            len,
        };
        for i in (0..len).filter(|&i| present(i)) {
            d.set(i);
        }
        d
    }

    /// A density of `len` variables, none of them present yet.
    pub(crate) fn zeros(len: usize) -> Self {
        Density {
            bits: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// Mark variable `i` present; an error when it is beyond the density's length.
    pub(crate) fn set_checked(&mut self, i: usize) -> anyhow::Result<()> {
        anyhow::ensure!(
            i < self.len,
            "variable {i} is beyond the {} variables",
            self.len
        );
        self.set(i);
        Ok(())
    }

    fn push(&mut self) {
        if self.len.is_multiple_of(64) {
            self.bits.push(0);
        }
        self.len += 1;
    }

    fn set(&mut self, i: usize) {
        self.bits[i / 64] |= 1 << (i % 64);
    }

    pub fn get(&self, i: usize) -> bool {
        i < self.len && self.bits[i / 64] & (1 << (i % 64)) != 0
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The presence bits, 64 variables a word (bit i of word w is variable 64·w + i).
    pub fn words(&self) -> &[u64] {
        &self.bits
    }

    /// How many variables are present: the number of points the parameter file holds.
    pub fn count(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The scalars of the present variables, in order: the multiexp's scalar vector. A 32 GiB
    /// partition selects ~130M of them (4 GB) per proof, so the work is split: each piece of
    /// `values` is counted, then copied to its place in the output, in parallel (a plain
    /// filter-and-collect took seconds, growing its vector by doubling).
    pub fn select(&self, values: &[Fr]) -> Vec<Fr> {
        use rayon::prelude::*;
        let present = |i: usize| self.get(i);
        let counts = super::select::count(values, 0, &present);
        let mut out = Vec::new();
        (0..counts.iter().sum::<usize>())
            .into_par_iter()
            .map(|_| Fr::ZERO)
            .collect_into_vec(&mut out);
        super::select::gather(values, 0, &present, &counts, &mut out);
        out
    }
}

/// The assignment of every variable, with the query densities.
#[derive(Clone, Debug, PartialEq)]
pub struct Witness {
    /// Public inputs; index 0 is the constant one.
    pub input: Vec<Fr>,
    /// Private (auxiliary) variables.
    pub aux: Vec<Fr>,
    pub a_aux_density: Density,
    pub b_input_density: Density,
    pub b_aux_density: Density,
    /// The aux values in their compact form as well, where the products stage made it (~90 MB
    /// for a 32 GiB partition): a GPU that streams its points copies these and expands them
    /// on the device instead of copying 4.2 GB of values through its staging buffers.
    pub compact_aux: Option<CompactValues>,
}

impl Witness {
    /// Scalars of the A query: every input (the input constraints put them all in A), then the
    /// aux variables that appear in A.
    pub fn a_query_scalars(&self) -> Vec<Fr> {
        let mut v = self.input.clone();
        v.extend(self.a_aux_density.select(&self.aux));
        v
    }

    /// Scalars of the B query (G1 and G2): the inputs and aux variables that appear in B.
    pub fn b_query_scalars(&self) -> Vec<Fr> {
        let mut v = self.b_input_density.select(&self.input);
        v.extend(self.b_aux_density.select(&self.aux));
        v
    }

    /// `a_query_scalars().len()`, without building them.
    pub fn a_query_len(&self) -> usize {
        self.input.len() + count_present(&self.a_aux_density, self.aux.len())
    }

    /// `b_query_scalars().len()`, without building them.
    pub fn b_query_len(&self) -> usize {
        count_present(&self.b_input_density, self.input.len())
            + count_present(&self.b_aux_density, self.aux.len())
    }
}

/// How many of the first `n` variables `d` marks present.
fn count_present(d: &Density, n: usize) -> usize {
    if n >= d.len() {
        d.count()
    } else {
        (0..n).filter(|&i| d.get(i)).count()
    }
}

/// A, B and C evaluated at every constraint, the input constraints `x * 0 = 0` included.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evaluations {
    /// Page-locking of a, b and c for a GPU's copies (`Backend::prepare_evaluations`), let go
    /// of before them. Not part of the values: a clone has none, and equality ignores them.
    pub pins: Pins,
    pub a: Vec<Fr>,
    pub b: Vec<Fr>,
    pub c: Vec<Fr>,
}

impl Evaluations {
    pub fn constraints(&self) -> usize {
        self.a.len()
    }

    /// Whether a, b and c hold `rows` values each, so that evaluations of a circuit of that
    /// many rows can be written over them without moving them.
    pub fn holds_rows(&self, rows: usize) -> bool {
        [&self.a, &self.b, &self.c].iter().all(|v| v.len() == rows)
    }
}

/// What synthesis produces for one circuit (one partition).
#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    pub witness: Witness,
    pub evals: Evaluations,
}

/// Synthesize `circuit` the way bellperson's prover does: the constant one is input 0, and an
/// `input * 0 = 0` constraint per input follows the circuit's own, which makes the IC query
/// full and binds the inputs.
pub fn synthesize<C: Circuit<Fr>>(circuit: C) -> Result<Assignment, SynthesisError> {
    let mut cs = AssignmentBuilder::new();
    cs.alloc_input(|| "one", || Ok(Fr::ONE))?;
    circuit.synthesize(&mut cs)?;
    for i in 0..cs.input.len() {
        cs.enforce(
            || "",
            |lc| lc + Variable::new_unchecked(Index::Input(i)),
            |lc| lc,
            |lc| lc,
        );
    }
    Ok(Assignment {
        witness: Witness {
            input: cs.input,
            aux: cs.aux,
            a_aux_density: cs.a_aux_density,
            b_input_density: cs.b_input_density,
            b_aux_density: cs.b_aux_density,
            compact_aux: None,
        },
        evals: Evaluations {
            pins: Default::default(),
            a: cs.a,
            b: cs.b,
            c: cs.c,
        },
    })
}

/// The constraint system behind [`synthesize`].
pub struct AssignmentBuilder {
    input: Vec<Fr>,
    aux: Vec<Fr>,
    a_aux_density: Density,
    b_input_density: Density,
    b_aux_density: Density,
    a: Vec<Fr>,
    b: Vec<Fr>,
    c: Vec<Fr>,
}

/// Evaluate a linear combination and mark its variables in the densities given. Witness values
/// are mostly 0 and 1, so those skip the multiplication.
fn eval(
    lc: &LinearCombination<Fr>,
    input: &[Fr],
    aux: &[Fr],
    mut input_density: Option<&mut Density>,
    mut aux_density: Option<&mut Density>,
) -> Fr {
    let mut acc = Fr::ZERO;
    for (&i, coeff) in lc.iter_inputs() {
        if bool::from(coeff.is_zero()) {
            continue;
        }
        acc += times(coeff, &input[i]);
        if let Some(d) = input_density.as_deref_mut() {
            d.set(i);
        }
    }
    for (&i, coeff) in lc.iter_aux() {
        if bool::from(coeff.is_zero()) {
            continue;
        }
        acc += times(coeff, &aux[i]);
        if let Some(d) = aux_density.as_deref_mut() {
            d.set(i);
        }
    }
    acc
}

#[inline]
fn times(coeff: &Fr, value: &Fr) -> Fr {
    if *value == Fr::ZERO {
        Fr::ZERO
    } else if *value == Fr::ONE {
        *coeff
    } else if *coeff == Fr::ONE {
        *value
    } else {
        *coeff * value
    }
}

impl ConstraintSystem<Fr> for AssignmentBuilder {
    type Root = Self;

    fn new() -> Self {
        AssignmentBuilder {
            input: Vec::new(),
            aux: Vec::new(),
            a_aux_density: Density::default(),
            b_input_density: Density::default(),
            b_aux_density: Density::default(),
            a: Vec::new(),
            b: Vec::new(),
            c: Vec::new(),
        }
    }

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(f()?);
        self.a_aux_density.push();
        self.b_aux_density.push();
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.input.push(f()?);
        self.b_input_density.push();
        Ok(Variable::new_unchecked(Index::Input(self.input.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LB: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LC: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
    {
        let a = a(LinearCombination::zero());
        let b = b(LinearCombination::zero());
        let c = c(LinearCombination::zero());
        // Inputs are always in the A query (through the input constraints), so only the aux
        // part of A is tracked. C has no query of its own.
        let a = eval(
            &a,
            &self.input,
            &self.aux,
            None,
            Some(&mut self.a_aux_density),
        );
        let b = eval(
            &b,
            &self.input,
            &self.aux,
            Some(&mut self.b_input_density),
            Some(&mut self.b_aux_density),
        );
        let c = eval(&c, &self.input, &self.aux, None, None);
        self.a.push(a);
        self.b.push(b);
        self.c.push(c);
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn density_from_a_predicate() {
        let d = Density::from_fn(130, |i| i % 3 == 0);
        assert_eq!(d.len(), 130);
        assert!((0..140).all(|i| d.get(i) == (i < 130 && i % 3 == 0)));
        let values: Vec<Fr> = (0..130u64).map(Fr::from).collect();
        let picked = d.select(&values);
        assert_eq!(picked.len(), 44);
        assert_eq!(picked[1], Fr::from(3u64));
        assert_eq!(Density::from_fn(0, |_| true).len(), 0);
    }

    /// The parallel selection is the plain filter, across piece boundaries and for value
    /// vectors shorter and longer than the density.
    #[test]
    fn select_matches_the_plain_filter() {
        let values: Vec<Fr> = (0..300_000u64).map(Fr::from).collect();
        for (len, n) in [
            (300_000usize, 300_000usize),
            (200_000, 300_000),
            (300_000, 70_001),
            (5, 0),
        ] {
            let d = Density::from_fn(len, |i| (i * 7919) % 13 < 4 || i == 65_536);
            let want: Vec<Fr> = values[..n]
                .iter()
                .enumerate()
                .filter(|(i, _)| d.get(*i))
                .map(|(_, v)| *v)
                .collect();
            assert_eq!(d.select(&values[..n]), want, "len {len}, n {n}");
            assert_eq!(count_present(&d, n), want.len());
        }
        let w = Witness {
            input: vec![Fr::ONE; 3],
            aux: values[..1000].to_vec(),
            a_aux_density: Density::from_fn(1000, |i| i % 2 == 0),
            b_input_density: Density::from_fn(3, |i| i != 1),
            b_aux_density: Density::from_fn(1000, |i| i % 5 == 0),
            compact_aux: None,
        };
        assert_eq!(w.a_query_len(), w.a_query_scalars().len());
        assert_eq!(w.b_query_len(), w.b_query_scalars().len());
    }
}
