//! A circuit's constraints, recorded once per circuit shape.
//!
//! The constraints of a circuit are the same for every proof of its shape; only the witness
//! changes. Recording them once lets each proof compute just its witness (no linear
//! combinations built, see `witness`) and then get the A, B and C evaluations as sparse
//! products `A·w`, `B·w`, `C·w`, which is what bellperson's prover would have evaluated
//! constraint by constraint.
//!
//! Variables are numbered as bellperson numbers them: inputs (index 0 is the constant one)
//! and aux variables, each in allocation order. After the circuit's own constraints come the
//! `input_i · 0 = 0` constraints that bellperson's prover appends, so the rows here are exactly
//! the prover's rows.
//!
//! On disk (`save`/`load`): a header (magic, format version, the circuit's id, counts), the
//! distinct coefficients, the three matrices (row ends, then (variable, coefficient) pairs),
//! then a SHA-256 of everything before it. A file of another version or circuit is stale
//! (rebuilt); one whose digest does not match is corrupt (refused).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{ensure, Context, Result};
use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::assignment::{Assignment, Density, Evaluations, Witness};
use super::witness::{CompactValues, CompactWitness, Value};
use super::SrsKey;

#[cfg(target_endian = "big")]
compile_error!("the recorded constraint format is little-endian");

const MAGIC: &[u8; 8] = b"c2q-r1cs";
/// Bumped whenever the layout or the meaning of a field changes: older files are rebuilt.
pub const FORMAT_VERSION: u32 = 1;
/// Variables of the input kind carry this bit; aux variables are plain indices. kernels/r1cs.cu
/// reads the same encoding and is given this value at build time (`gpu::kernels`).
pub const INPUT_BIT: u32 = 1 << 31;

/// One non-zero entry of a row: a variable and the index of its coefficient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
struct Term {
    var: u32,
    coeff: u32,
}

/// One of A, B, C: rows of terms, compressed (row `r` is `terms[ends[r-1]..ends[r]]`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SparseMatrix {
    ends: Vec<u32>,
    terms: Vec<Term>,
}

impl SparseMatrix {
    pub fn rows(&self) -> usize {
        self.ends.len()
    }

    /// Non-zero entries.
    pub fn nonzeros(&self) -> usize {
        self.terms.len()
    }

    /// Where each row ends in `term_words` (in terms): row `r` is terms `ends[r-1]..ends[r]`.
    pub fn ends(&self) -> &[u32] {
        &self.ends
    }

    /// The terms as words, two per term: the variable (bit 31 set for an input) and the
    /// coefficient's index in `R1cs::coefficients`. The form the GPU's products read.
    pub fn term_words(&self) -> &[u32] {
        let bytes = term_bytes(&self.terms);
        // SAFETY: `Term` is two u32 (repr(C), 4-byte aligned); the length is exact.
        unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast(), self.terms.len() * 2) }
    }

    fn row(&self, r: usize) -> &[Term] {
        let start = if r == 0 { 0 } else { self.ends[r - 1] as usize };
        &self.terms[start..self.ends[r] as usize]
    }

    fn push_row(&mut self) -> Result<(), SynthesisError> {
        let end = u32::try_from(self.terms.len()).map_err(|_| too_large())?;
        self.ends.push(end);
        Ok(())
    }

    fn bytes(&self) -> u64 {
        (self.ends.len() * 4 + self.terms.len() * 8) as u64
    }
}

fn too_large() -> SynthesisError {
    SynthesisError::IoError(std::io::Error::other(
        "circuit too large for c2q's recorded constraints (more than 2^31 variables or 2^32 \
         entries in one matrix)",
    ))
}

/// The recorded constraint system of one circuit shape.
#[derive(Clone, Debug, PartialEq)]
pub struct R1cs {
    /// What it was recorded for (the parameters' circuit id): a file of another id is stale.
    pub circuit_id: String,
    /// Public inputs, the constant one included.
    pub inputs: usize,
    pub aux: usize,
    coeffs: Vec<Fr>,
    pub a: SparseMatrix,
    pub b: SparseMatrix,
    pub c: SparseMatrix,
    /// Which aux variables appear in A, and which inputs and aux variables appear in B: the
    /// densities the prover selects multiexp scalars by.
    pub a_aux_density: Density,
    pub b_input_density: Density,
    pub b_aux_density: Density,
}

impl R1cs {
    /// Record `circuit`'s constraints. Values are never asked for: a blank circuit (no
    /// assignment) records the same constraints as a full one.
    pub fn record<C: Circuit<Fr>>(circuit_id: &str, circuit: C) -> Result<R1cs> {
        let mut cs = Recorder::started();
        circuit
            .synthesize(&mut cs)
            .context("recording the circuit's constraints")?;
        cs.finish(circuit_id)
    }

    /// Record a circuit that is `copies` copies of `copy` one after another, each allocating
    /// its own inputs and aux variables and reading no variable of another copy but the
    /// constant one (a PoSt partition's sectors): the copy is recorded once and its rows are
    /// repeated with its variables moved past the copies before it. The same constraints as
    /// [`R1cs::record`] of the whole circuit, in seconds where the whole takes minutes.
    pub fn record_repeated<C: Circuit<Fr>>(
        circuit_id: &str,
        copy: C,
        copies: usize,
    ) -> Result<R1cs> {
        let mut one = Recorder::started();
        copy.synthesize(&mut one)
            .context("recording the circuit's constraints")?;
        if let Some(e) = one.error.take() {
            return Err(e).context("recording the circuit's constraints");
        }
        if copies == 0 {
            // No row left to use the copy's coefficients.
            one.coeffs.clear();
            one.coeff_index.clear();
        }
        let shift = Shift {
            inputs: one.inputs - 1,
            aux: one.aux,
        };
        let count = |per: usize, what: &str| {
            per.checked_mul(copies)
                .filter(|n| *n < INPUT_BIT as usize)
                .with_context(|| {
                    format!("{copies} copies of {per} {what}: more than c2q's recorded constraints hold")
                })
        };
        let whole = Recorder {
            inputs: 1 + count(shift.inputs, "inputs")?,
            aux: count(shift.aux, "aux variables")?,
            a: shift.repeat(&one.a, copies)?,
            b: shift.repeat(&one.b, copies)?,
            c: shift.repeat(&one.c, copies)?,
            ..one
        };
        whole.finish(circuit_id)
    }

    /// The distinct coefficients the terms index (index 0 is one).
    pub fn coefficients(&self) -> &[Fr] {
        &self.coeffs
    }

    /// Constraints (rows), the input constraints included.
    pub fn constraints(&self) -> usize {
        self.a.rows()
    }

    /// Memory the recorded form takes.
    pub fn bytes(&self) -> u64 {
        self.a.bytes() + self.b.bytes() + self.c.bytes() + self.coeffs.len() as u64 * 32
    }

    /// Densities follow from the matrices: a variable is in a query when it has a non-zero
    /// coefficient in that matrix (zero coefficients are never recorded).
    fn derive_densities(&mut self) -> Result<()> {
        let mut a_aux = Density::zeros(self.aux);
        let mut b_input = Density::zeros(self.inputs);
        let mut b_aux = Density::zeros(self.aux);
        for t in &self.a.terms {
            if t.var & INPUT_BIT == 0 {
                a_aux.set_checked(t.var as usize)?;
            }
        }
        for t in &self.b.terms {
            if t.var & INPUT_BIT == 0 {
                b_aux.set_checked(t.var as usize)?;
            } else {
                b_input.set_checked((t.var & !INPUT_BIT) as usize)?;
            }
        }
        self.a_aux_density = a_aux;
        self.b_input_density = b_input;
        self.b_aux_density = b_aux;
        Ok(())
    }

    /// Check every term against the counts, so that evaluation cannot index out of bounds.
    fn check_terms(&self) -> Result<()> {
        let rows = self.constraints();
        ensure!(
            self.b.rows() == rows && self.c.rows() == rows,
            "matrices have different row counts"
        );
        for (name, m) in [("A", &self.a), ("B", &self.b), ("C", &self.c)] {
            let mut last = 0u32;
            for &end in &m.ends {
                ensure!(end >= last, "{name}'s row ends are not increasing");
                last = end;
            }
            ensure!(
                last as usize == m.terms.len(),
                "{name}'s rows do not cover its entries"
            );
            let (inputs, aux, coeffs) = (self.inputs, self.aux, self.coeffs.len());
            let ok = m.terms.par_iter().all(|t| {
                let var_ok = if t.var & INPUT_BIT == 0 {
                    (t.var as usize) < aux
                } else {
                    ((t.var & !INPUT_BIT) as usize) < inputs
                };
                var_ok && (t.coeff as usize) < coeffs
            });
            ensure!(
                ok,
                "{name} names a variable or coefficient that does not exist"
            );
        }
        Ok(())
    }

    /// A witness of `inputs` and `aux` values belongs to this circuit.
    pub(crate) fn check_witness(&self, inputs: usize, aux: usize) -> Result<()> {
        ensure!(
            inputs == self.inputs && aux == self.aux,
            "witness has {inputs} inputs and {aux} aux variables, the recorded circuit {} has {} \
             and {}",
            self.circuit_id,
            self.inputs,
            self.aux
        );
        Ok(())
    }

    /// The A, B and C evaluations for a witness: `(M·w)_r` for every row `r`.
    pub fn evaluate(&self, input: &[Fr], aux: &[Fr]) -> Result<Evaluations> {
        self.check_witness(input.len(), aux.len())?;
        Ok(self.products(input, |v| Value::of(&aux[v]), Evaluations::default()))
    }

    /// `evaluate` for aux values kept compact: read in place (`ValueIndex`), never expanded,
    /// which spares the products the random reads of gigabytes of full values.
    pub fn evaluate_packed(&self, input: &[Fr], aux: &CompactValues) -> Result<Evaluations> {
        self.evaluate_packed_into(input, aux, Evaluations::default())
    }

    /// `evaluate_packed` into `out`'s vectors: where they hold this circuit's rows already
    /// (evaluations of an earlier partition, kept page-locked for a GPU), the same memory is
    /// written again, never moved.
    pub fn evaluate_packed_into(
        &self,
        input: &[Fr],
        aux: &CompactValues,
        out: Evaluations,
    ) -> Result<Evaluations> {
        self.check_witness(input.len(), aux.len())?;
        let index = aux.index();
        Ok(self.products(input, |v| index.get(v), out))
    }

    /// A, B and C times a witness whose aux value `v` is `aux(v)`: the variables were checked
    /// against the counts when the matrices were recorded or loaded, and the witness's
    /// lengths by the caller.
    fn products<'a>(
        &self,
        input: &'a [Fr],
        aux: impl Fn(usize) -> Value<'a> + Sync,
        mut into: Evaluations,
    ) -> Evaluations {
        // Writes over `out` (cleared first; its memory reused where it holds the rows).
        let product = |m: &SparseMatrix, out: &mut Vec<Fr>| {
            (0..m.rows())
                .into_par_iter()
                .with_min_len(1 << 12)
                .map(|r| {
                    let mut acc = Fr::ZERO;
                    for t in m.row(r) {
                        let value = if t.var & INPUT_BIT == 0 {
                            aux(t.var as usize)
                        } else {
                            Value::of(&input[(t.var & !INPUT_BIT) as usize])
                        };
                        let coeff = &self.coeffs[t.coeff as usize];
                        match value {
                            Value::Zero => {}
                            Value::One => acc += coeff,
                            Value::Other(x) if t.coeff == 0 => acc += x,
                            Value::Other(x) => acc += *coeff * x,
                        }
                    }
                    acc
                })
                .collect_into_vec(out);
        };
        product(&self.a, &mut into.a);
        product(&self.b, &mut into.b);
        product(&self.c, &mut into.c);
        into
    }

    /// A full witness from its values, with this circuit's densities.
    pub fn witness(&self, input: Vec<Fr>, aux: Vec<Fr>) -> Result<Witness> {
        self.check_witness(input.len(), aux.len())?;
        Ok(Witness {
            input,
            aux,
            a_aux_density: self.a_aux_density.clone(),
            b_input_density: self.b_input_density.clone(),
            b_aux_density: self.b_aux_density.clone(),
            compact_aux: None,
        })
    }

    /// `Mᵀ·weights` for one of this circuit's matrices: per variable (inputs first, then aux),
    /// the sum over its terms of coefficient × the weight of the term's row. With the Lagrange
    /// basis at τ as weights, the QAP polynomials of every variable evaluated at τ (parameter
    /// generation).
    pub fn transposed_product(&self, m: &SparseMatrix, weights: &[Fr]) -> Vec<Fr> {
        let mut out = vec![Fr::ZERO; self.inputs + self.aux];
        for (r, weight) in weights.iter().enumerate().take(m.rows()) {
            for t in m.row(r) {
                let v = if t.var & INPUT_BIT == 0 {
                    self.inputs + t.var as usize
                } else {
                    (t.var & !INPUT_BIT) as usize
                };
                out[v] += self.coeffs[t.coeff as usize] * weight;
            }
        }
        out
    }

    /// A partition's full assignment from its compact witness: the evaluations as sparse
    /// products over the compact values (`evaluate_packed`), the values expanded for the
    /// multiexps.
    pub fn assignment(&self, witness: &CompactWitness) -> Result<Assignment> {
        self.assignment_into(witness, Evaluations::default())
    }

    /// `assignment` with its evaluations written into `evals` (`evaluate_packed_into`).
    pub fn assignment_into(
        &self,
        witness: &CompactWitness,
        evals: Evaluations,
    ) -> Result<Assignment> {
        let packed = witness.packed();
        let evals = self.evaluate_packed_into(&packed.input, &packed.aux, evals)?;
        let aux = packed.expand_aux();
        let mut witness = self.witness(packed.input, aux)?;
        // Kept for a GPU that streams its points (`Witness::compact_aux`).
        witness.compact_aux = Some(packed.aux);
        Ok(Assignment { witness, evals })
    }

    /// Write to `path` atomically (a temporary file renamed into place).
    pub fn save(&self, path: &Path) -> Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let tmp = tempfile::NamedTempFile::new_in(dir)
            .with_context(|| format!("cannot create a file in {}", dir.display()))?;
        {
            let mut w = HashingWriter {
                inner: BufWriter::with_capacity(1 << 22, tmp.as_file()),
                hash: Sha256::new(),
            };
            w.write_all(MAGIC)?;
            w.write_all(&FORMAT_VERSION.to_le_bytes())?;
            write_u64(&mut w, self.circuit_id.len() as u64)?;
            w.write_all(self.circuit_id.as_bytes())?;
            for n in [self.inputs, self.aux, self.coeffs.len()] {
                write_u64(&mut w, n as u64)?;
            }
            for m in [&self.a, &self.b, &self.c] {
                write_u64(&mut w, m.ends.len() as u64)?;
                write_u64(&mut w, m.terms.len() as u64)?;
            }
            for c in &self.coeffs {
                w.write_all(&c.to_repr())?;
            }
            for m in [&self.a, &self.b, &self.c] {
                w.write_all(u32_bytes(&m.ends))?;
                w.write_all(term_bytes(&m.terms))?;
            }
            let digest = w.hash.finalize_reset();
            w.inner.write_all(&digest)?;
            w.inner.flush()?;
        }
        tmp.as_file().sync_all()?;
        tmp.persist(path).with_context(|| {
            format!("cannot move the recorded constraints to {}", path.display())
        })?;
        Ok(())
    }

    /// Read a file written by `save` for `circuit_id`. `Ok(None)` when it is stale (another
    /// format version or circuit): the caller records again. An error when it is corrupt.
    pub fn load(path: &Path, circuit_id: &str) -> Result<Option<R1cs>> {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let len = file.metadata()?.len();
        let mut r = HashingReader {
            inner: BufReader::with_capacity(1 << 22, file),
            hash: Sha256::new(),
            left: len,
        };
        let corrupt = || format!("recorded constraints {} are corrupt", path.display());
        let mut magic = [0u8; 8];
        r.read_exact(&mut magic).with_context(corrupt)?;
        ensure!(
            &magic == MAGIC,
            "{} is not a c2q constraints file",
            path.display()
        );
        let mut version = [0u8; 4];
        r.read_exact(&mut version).with_context(corrupt)?;
        if u32::from_le_bytes(version) != FORMAT_VERSION {
            return Ok(None);
        }
        let id_len = read_len(&mut r, 1).with_context(corrupt)?;
        let mut id = vec![0u8; id_len];
        r.read_exact(&mut id).with_context(corrupt)?;
        if id != circuit_id.as_bytes() {
            return Ok(None);
        }
        let inputs = read_len(&mut r, 32).with_context(corrupt)?;
        let aux = read_len(&mut r, 32).with_context(corrupt)?;
        let ncoeffs = read_len(&mut r, 32).with_context(corrupt)?;
        let mut shapes = [(0usize, 0usize); 3];
        for s in &mut shapes {
            *s = (
                read_len(&mut r, 4).with_context(corrupt)?,
                read_len(&mut r, 8).with_context(corrupt)?,
            );
        }
        let mut coeffs = Vec::with_capacity(ncoeffs);
        for _ in 0..ncoeffs {
            let mut repr = [0u8; 32];
            r.read_exact(&mut repr).with_context(corrupt)?;
            let c = Option::<Fr>::from(Fr::from_repr(repr))
                .with_context(|| format!("{}: a coefficient is not a field element", corrupt()))?;
            coeffs.push(c);
        }
        let mut matrices = Vec::new();
        for (rows, nnz) in shapes {
            let mut ends = vec![0u32; rows];
            r.read_exact(u32_bytes_mut(&mut ends))
                .with_context(corrupt)?;
            let mut terms = vec![Term { var: 0, coeff: 0 }; nnz];
            r.read_exact(term_bytes_mut(&mut terms))
                .with_context(corrupt)?;
            matrices.push(SparseMatrix { ends, terms });
        }
        let digest = r.hash.finalize_reset();
        let mut stored = [0u8; 32];
        r.inner.read_exact(&mut stored).with_context(corrupt)?;
        ensure!(
            digest.as_slice() == stored && r.left == 32,
            "{}: its checksum does not match (delete the file and c2q records it again)",
            corrupt()
        );
        let c = matrices.pop().unwrap_or_default();
        let b = matrices.pop().unwrap_or_default();
        let a = matrices.pop().unwrap_or_default();
        let mut r1cs = R1cs {
            circuit_id: circuit_id.to_string(),
            inputs,
            aux,
            coeffs,
            a,
            b,
            c,
            a_aux_density: Density::default(),
            b_input_density: Density::default(),
            b_aux_density: Density::default(),
        };
        r1cs.check_terms().with_context(corrupt)?;
        r1cs.derive_densities().with_context(corrupt)?;
        Ok(Some(r1cs))
    }
}

/// The constraint system behind [`R1cs::record`]: counts variables, keeps every constraint's
/// terms, and never asks for a value.
#[derive(Default)]
struct Recorder {
    inputs: usize,
    aux: usize,
    coeffs: Vec<Fr>,
    coeff_index: HashMap<[u8; 32], u32>,
    a: SparseMatrix,
    b: SparseMatrix,
    c: SparseMatrix,
    /// The first error met inside `enforce`, which cannot return one.
    error: Option<anyhow::Error>,
}

impl Recorder {
    /// A recorder holding the constant one, input 0.
    fn started() -> Recorder {
        Recorder {
            inputs: 1,
            ..Default::default()
        }
    }

    /// bellperson's `input_i · 0 = 0` rows after the circuit's own, then the densities.
    fn finish(mut self, circuit_id: &str) -> Result<R1cs> {
        for i in 0..self.inputs {
            self.enforce(
                || "",
                |lc| lc + Variable::new_unchecked(Index::Input(i)),
                |lc| lc,
                |lc| lc,
            );
        }
        if let Some(e) = self.error.take() {
            return Err(e).context("recording the circuit's constraints");
        }
        let mut r1cs = R1cs {
            circuit_id: circuit_id.to_string(),
            inputs: self.inputs,
            aux: self.aux,
            coeffs: self.coeffs,
            a: self.a,
            b: self.b,
            c: self.c,
            a_aux_density: Density::default(),
            b_input_density: Density::default(),
            b_aux_density: Density::default(),
        };
        r1cs.derive_densities()?;
        Ok(r1cs)
    }

    fn coefficient(&mut self, c: &Fr) -> u32 {
        if self.coeffs.is_empty() {
            self.coeffs.push(Fr::ONE);
        }
        if *c == Fr::ONE {
            return 0;
        }
        let next = self.coeffs.len() as u32;
        let index = *self.coeff_index.entry(c.to_repr()).or_insert(next);
        if index == next {
            self.coeffs.push(*c);
        }
        index
    }

    fn push(&mut self, which: usize, lc: &LinearCombination<Fr>) -> Result<(), SynthesisError> {
        let mut terms = Vec::new();
        for (&i, coeff) in lc.iter_inputs() {
            if !bool::from(coeff.is_zero()) {
                let var = u32::try_from(i)
                    .ok()
                    .filter(|v| v & INPUT_BIT == 0)
                    .ok_or_else(too_large)?;
                terms.push(Term {
                    var: var | INPUT_BIT,
                    coeff: self.coefficient(coeff),
                });
            }
        }
        for (&i, coeff) in lc.iter_aux() {
            if !bool::from(coeff.is_zero()) {
                let var = u32::try_from(i)
                    .ok()
                    .filter(|v| v & INPUT_BIT == 0)
                    .ok_or_else(too_large)?;
                terms.push(Term {
                    var,
                    coeff: self.coefficient(coeff),
                });
            }
        }
        let m = match which {
            0 => &mut self.a,
            1 => &mut self.b,
            _ => &mut self.c,
        };
        m.terms.extend_from_slice(&terms);
        m.push_row()
    }
}

/// How far one copy of a repeated circuit moves the variables of the next: its inputs (the
/// constant one aside) and its aux variables.
#[derive(Clone, Copy, Debug)]
struct Shift {
    inputs: usize,
    aux: usize,
}

impl Shift {
    /// Copy `k`'s name for a variable of the copy recorded alone (where input 0 is the
    /// constant one, which every copy shares).
    #[inline]
    fn moved(self, var: u32, k: usize) -> u32 {
        if var & INPUT_BIT == 0 {
            (var as usize + k * self.aux) as u32
        } else {
            match (var & !INPUT_BIT) as usize {
                0 => var,
                i => INPUT_BIT | (i + k * self.inputs) as u32,
            }
        }
    }

    /// `m`'s rows `copies` times, copy `k`'s variables moved by `k` shifts; written once, in
    /// place, on rayon's threads.
    fn repeat(self, m: &SparseMatrix, copies: usize) -> Result<SparseMatrix> {
        let (rows, terms) = (m.rows(), m.nonzeros());
        let total = terms
            .checked_mul(copies)
            .filter(|n| *n <= u32::MAX as usize)
            .ok_or_else(too_large)?;
        let ends = (0..rows * copies)
            .into_par_iter()
            .map(|i| (i / rows * terms) as u32 + m.ends[i % rows])
            .collect();
        let terms = (0..total)
            .into_par_iter()
            .map(|i| {
                let t = m.terms[i % terms];
                Term {
                    var: self.moved(t.var, i / terms),
                    coeff: t.coeff,
                }
            })
            .collect();
        Ok(SparseMatrix { ends, terms })
    }
}

impl ConstraintSystem<Fr> for Recorder {
    type Root = Self;

    fn new() -> Self {
        Recorder::default()
    }

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LB: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LC: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
    {
        if self.error.is_some() {
            return;
        }
        let lcs = [
            a(LinearCombination::zero()),
            b(LinearCombination::zero()),
            c(LinearCombination::zero()),
        ];
        for (which, lc) in lcs.iter().enumerate() {
            if let Err(e) = self.push(which, lc) {
                self.error = Some(e.into());
                return;
            }
        }
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

fn write_u64(w: &mut impl Write, n: u64) -> std::io::Result<()> {
    w.write_all(&n.to_le_bytes())
}

/// A count read from the header, refused when the file could not hold that many items of
/// `item` bytes (so a corrupt header cannot make us allocate terabytes).
fn read_len(r: &mut HashingReader<impl Read>, item: u64) -> Result<usize> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    let n = u64::from_le_bytes(b);
    ensure!(
        n.checked_mul(item).is_some_and(|bytes| bytes <= r.left),
        "a count in the header ({n}) is larger than the file"
    );
    usize::try_from(n).context("count does not fit in memory")
}

fn u32_bytes(v: &[u32]) -> &[u8] {
    // SAFETY: u32 has no padding and any byte pattern is valid; the length is exact.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

fn u32_bytes_mut(v: &mut [u32]) -> &mut [u8] {
    // SAFETY: as above; every byte pattern written is a valid u32.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), std::mem::size_of_val(v)) }
}

fn term_bytes(v: &[Term]) -> &[u8] {
    // SAFETY: `Term` is repr(C) of two u32 (no padding); the length is exact.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

fn term_bytes_mut(v: &mut [Term]) -> &mut [u8] {
    // SAFETY: as above; every byte pattern is a valid `Term` (indices are checked after).
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), std::mem::size_of_val(v)) }
}

struct HashingWriter<W: Write> {
    inner: W,
    hash: Sha256,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

struct HashingReader<R: Read> {
    inner: R,
    hash: Sha256,
    /// Bytes of the file not read yet.
    left: u64,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        self.left = self.left.saturating_sub(n as u64);
        Ok(n)
    }
}

/// Recorded constraints are large and slow to make: each circuit's are loaded (or recorded)
/// once per process and shared. Files live beside the parameters.
#[derive(Default)]
pub struct R1csCache {
    /// By circuit id, each with the parameters it belongs to (whose release drops it too).
    entries: Mutex<HashMap<String, (SrsKey, Arc<Slot>)>>,
}

/// One circuit's entry: locked while it is loaded or recorded, so that happens once.
type Slot = Mutex<Option<Arc<R1cs>>>;

impl R1csCache {
    pub fn global() -> &'static R1csCache {
        static CACHE: OnceLock<R1csCache> = OnceLock::new();
        CACHE.get_or_init(R1csCache::default)
    }

    /// The constraints of `circuit_id`: from memory, else from `file` when it holds them, else
    /// recorded by `record` and written to `file` (when there is one). Concurrent callers for
    /// one circuit wait for a single load or recording, which takes minutes at 32 GiB. A stale
    /// file is replaced; a corrupt one is an error, left in place for the operator to see.
    /// `params` names the parameters the circuit is proved with: [`R1csCache::unload`] of
    /// them drops these constraints too.
    pub fn get(
        &self,
        circuit_id: &str,
        params: &SrsKey,
        file: Option<&Path>,
        record: impl FnOnce() -> Result<R1cs>,
    ) -> Result<Arc<R1cs>> {
        let slot = {
            let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            let (_, slot) = entries
                .entry(circuit_id.to_string())
                .or_insert_with(|| (params.clone(), Arc::default()));
            slot.clone()
        };
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r1cs) = slot.as_ref() {
            return Ok(r1cs.clone());
        }
        let t = std::time::Instant::now();
        let from_file = match file {
            Some(path) if path.is_file() => R1cs::load(path, circuit_id)?,
            _ => None,
        };
        let r1cs = match from_file {
            Some(r1cs) => {
                tracing::info!(
                    circuit = circuit_id,
                    ms = t.elapsed().as_millis() as u64,
                    "recorded constraints loaded"
                );
                r1cs
            }
            None => {
                tracing::info!(
                    circuit = circuit_id,
                    "recording the circuit's constraints (once per circuit shape)"
                );
                let r1cs = record()?;
                ensure!(
                    r1cs.circuit_id == circuit_id,
                    "constraints recorded for {} where {circuit_id} was asked for",
                    r1cs.circuit_id
                );
                tracing::info!(
                    circuit = circuit_id,
                    constraints = r1cs.constraints(),
                    nonzeros = r1cs.a.nonzeros() + r1cs.b.nonzeros() + r1cs.c.nonzeros(),
                    bytes = r1cs.bytes(),
                    ms = t.elapsed().as_millis() as u64,
                    "constraints recorded"
                );
                if let Some(path) = file {
                    // Without the file every process records again: slower, not wrong.
                    if let Err(e) = r1cs.save(path) {
                        tracing::warn!(path = %path.display(), error = %format!("{e:#}"), "cannot keep the recorded constraints on disk");
                    }
                }
                r1cs
            }
        };
        let r1cs = Arc::new(r1cs);
        *slot = Some(r1cs.clone());
        Ok(r1cs)
    }

    /// Drop the constraints of the circuits proved with `params` (the memory is freed once
    /// no job holds them); the next job loads them from their file again.
    pub fn unload(&self, params: &SrsKey) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.retain(|_, (owner, _)| owner != params);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::groth16::{synthesize, WitnessBuilder};
    use rand::{Rng, SeedableRng};

    /// A preamble, then `pieces` pieces of work under top-level namespaces `piece_i`, each
    /// allocating inputs and aux variables, with mostly 0/1 values, assorted coefficients
    /// (zero, one, repeated, negative) and repeated terms.
    #[derive(Clone)]
    struct Pieces {
        seed: u64,
        pieces: usize,
    }

    impl Circuit<Fr> for Pieces {
        fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed);
            let shared = cs.alloc(|| "shared", || Ok(Fr::from(7u64)))?;
            let public = cs.alloc_input(|| "public", || Ok(Fr::from(3u64)))?;
            cs.enforce(
                || "pre",
                |lc| lc + shared,
                |lc| lc + CS::one(),
                |lc| lc + shared,
            );
            for p in 0..self.pieces {
                let mut cs = cs.namespace(|| format!("piece_{p}"));
                let mut vars = vec![shared];
                for i in 0..50 {
                    let v = match rng.gen_range(0..10) {
                        0..=4 => Fr::ZERO,
                        5..=8 => Fr::ONE,
                        _ => Fr::from(rng.gen::<u64>()),
                    };
                    vars.push(cs.alloc(|| format!("v{i}"), || Ok(v))?);
                }
                let input = cs.alloc_input(|| "in", || Ok(Fr::from(p as u64 + 11)))?;
                for i in 1..vars.len() {
                    let k = Fr::from(rng.gen_range(0..4u64));
                    let (x, y) = (vars[i], vars[rng.gen_range(0..i)]);
                    cs.enforce(
                        || format!("c{i}"),
                        |lc| lc + (k, x) + y + (-Fr::ONE, public),
                        |lc| lc + CS::one() + (Fr::from(2u64), y) + y,
                        |lc| lc + (Fr::ZERO, x) + input,
                    );
                }
            }
            Ok(())
        }
    }

    fn circuit() -> Pieces {
        Pieces { seed: 5, pieces: 4 }
    }

    /// Recorded constraints times a witness-only synthesis give exactly what synthesis with
    /// every linear combination evaluated gives: the evaluations and the densities.
    #[test]
    fn recorded_products_equal_full_synthesis() {
        let full = synthesize(circuit()).unwrap();
        let r1cs = R1cs::record("pieces", circuit()).unwrap();
        assert_eq!(r1cs.constraints(), full.evals.constraints());
        let mut cs = WitnessBuilder::new();
        cs.alloc_input(|| "one", || Ok(Fr::ONE)).unwrap();
        circuit().synthesize(&mut cs).unwrap();
        let aux = cs.aux().to_vec();
        let evals = r1cs.evaluate(&cs.input, &aux).unwrap();
        assert_eq!(evals, full.evals);
        // Read in place from the compact values, the same.
        let compact = CompactValues::new(&aux);
        assert_eq!(r1cs.evaluate_packed(&cs.input, &compact).unwrap(), evals);
        assert!(r1cs.evaluate_packed(&cs.input[1..], &compact).is_err());
        // Written over an earlier partition's evaluations (kept page-locked by a GPU): the
        // same values, in the same memory.
        let mut earlier = evals.clone();
        for v in [&mut earlier.a, &mut earlier.b, &mut earlier.c] {
            v.iter_mut().for_each(|x| *x = Fr::from(7u64));
        }
        let at = [earlier.a.as_ptr(), earlier.b.as_ptr(), earlier.c.as_ptr()];
        let again = r1cs
            .evaluate_packed_into(&cs.input, &compact, earlier)
            .unwrap();
        assert_eq!(again, evals);
        assert_eq!(at, [again.a.as_ptr(), again.b.as_ptr(), again.c.as_ptr()]);
        assert_eq!(r1cs.witness(cs.input, aux).unwrap(), full.witness);
        // Zero coefficients are not recorded, repeated terms are merged.
        assert!(r1cs.a.nonzeros() < 3 * r1cs.constraints());
    }

    /// One copy of a repeated circuit: its own inputs and aux variables, the constant one,
    /// and coefficients it shares with the other copies.
    #[derive(Clone, Copy)]
    struct OneCopy;

    impl Circuit<Fr> for OneCopy {
        fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let x = cs.alloc(|| "x", || Ok(Fr::from(3u64)))?;
            let input = cs.alloc_input(|| "in", || Ok(Fr::from(9u64)))?;
            let y = cs.alloc(|| "y", || Ok(Fr::from(9u64)))?;
            let second = cs.alloc_input(|| "in2", || Ok(Fr::from(27u64)))?;
            cs.enforce(|| "square", |lc| lc + x, |lc| lc + x, |lc| lc + y);
            cs.enforce(
                || "input",
                |lc| lc + y + (Fr::from(5u64), CS::one()),
                |lc| lc + CS::one(),
                |lc| lc + input + (-Fr::ONE, second) + (Fr::from(5u64), CS::one()),
            );
            cs.enforce(|| "empty", |lc| lc, |lc| lc, |lc| lc);
            Ok(())
        }
    }

    struct Copies(usize);

    impl Circuit<Fr> for Copies {
        fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            for k in 0..self.0 {
                OneCopy.synthesize(&mut cs.namespace(|| format!("copy_{k}")))?;
            }
            Ok(())
        }
    }

    /// A copy recorded once and repeated gives the circuit of the copies recorded whole,
    /// inputs and aux variables numbered as bellperson numbers them.
    #[test]
    fn a_copy_repeated_is_the_circuit_recorded_whole() {
        for copies in [1, 2, 7] {
            let whole = R1cs::record("copies", Copies(copies)).unwrap();
            let repeated = R1cs::record_repeated("copies", OneCopy, copies).unwrap();
            assert_eq!(repeated, whole, "{copies} copies");
            assert_eq!(whole.inputs, 1 + 2 * copies);
            // And it is the right circuit: a witness of the copies satisfies it.
            let full = synthesize(Copies(copies)).unwrap();
            let evals = repeated
                .evaluate(&full.witness.input, &full.witness.aux)
                .unwrap();
            assert_eq!(evals, full.evals);
        }
        let none = R1cs::record_repeated("copies", OneCopy, 0).unwrap();
        assert_eq!(none, R1cs::record("copies", Copies(0)).unwrap());
    }

    /// A circuit synthesized piece by piece (each piece after the shared preamble, skipped
    /// where it repeats) gives the sequential witness.
    #[test]
    fn pieces_concatenate_to_the_sequential_witness() {
        let full = synthesize(circuit()).unwrap();
        let mut whole = CompactWitness::default();
        for p in 0..4 {
            let piece = Pieces {
                seed: 5,
                pieces: p + 1,
            };
            let mut cs = if p == 0 {
                let mut cs = WitnessBuilder::new();
                cs.alloc_input(|| "one", || Ok(Fr::ONE)).unwrap();
                cs
            } else {
                WitnessBuilder::skipping_before("piece_")
            };
            // Only the last piece of each run is new: skip the ones before it too.
            piece.synthesize(&mut cs).unwrap();
            assert!(cs.reached());
            let aux = cs.aux().to_vec();
            let (input, aux) = if p == 0 {
                (cs.input, aux)
            } else {
                let per = (cs.input.len() / (p + 1), aux.len() / (p + 1));
                (cs.input[p * per.0..].to_vec(), aux[p * per.1..].to_vec())
            };
            whole.push(&input, &aux);
        }
        let (input, aux) = whole.expand();
        assert_eq!(input, full.witness.input);
        assert_eq!(aux, full.witness.aux);
        // The assignment the products stage makes from it: the same witness and evaluations,
        // with the aux values in compact form beside the full ones for a streaming GPU.
        let r1cs = R1cs::record("pieces", circuit()).unwrap();
        let mut assignment = r1cs.assignment(&whole).unwrap();
        assert_eq!(assignment.evals, full.evals);
        let compact = assignment
            .witness
            .compact_aux
            .take()
            .expect("compact aux values");
        assert_eq!(compact, CompactValues::new(&full.witness.aux));
        assert_eq!(assignment.witness, full.witness);
    }

    #[test]
    fn compact_values_round_trip_and_count() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        for len in [0usize, 1, 63, 64, 65, 64 * 4096 + 17, 3 * 64 * 4096] {
            let values: Vec<Fr> = (0..len)
                .map(|_| match rng.gen_range(0..100) {
                    0..=50 => Fr::ZERO,
                    51..=97 => Fr::ONE,
                    _ => Fr::from(rng.gen::<u64>() | 2),
                })
                .collect();
            let mut w = CompactWitness::default();
            w.push(&values[..len / 3], &values[len / 3..]);
            w.push(&[], &values[..len / 2]);
            let (input, aux) = w.expand();
            assert_eq!(input, values[..len / 3]);
            assert_eq!(aux[..len - len / 3], values[len / 3..]);
            assert_eq!(aux[len - len / 3..], values[..len / 2]);
            let c = CompactValues::new(&values).census();
            assert_eq!(c.zeros + c.ones + c.others, len);
            assert_eq!(c.ones, values.iter().filter(|v| **v == Fr::ONE).count());
            assert!(CompactValues::new(&values).bytes() <= len / 4 + 16 + c.others * 32);
        }
    }

    #[test]
    fn files_round_trip_and_stale_or_corrupt_ones_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pieces.c2q-r1cs");
        let r1cs = R1cs::record("pieces", circuit()).unwrap();
        r1cs.save(&path).unwrap();
        assert_eq!(R1cs::load(&path, "pieces").unwrap(), Some(r1cs.clone()));
        assert_eq!(R1cs::load(&path, "other circuit").unwrap(), None);

        let bytes = std::fs::read(&path).unwrap();
        let mut flipped = bytes.clone();
        let at = bytes.len() - 100;
        flipped[at] ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        let err = R1cs::load(&path, "pieces").unwrap_err();
        assert!(format!("{err:#}").contains("corrupt"), "{err:#}");
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        assert!(R1cs::load(&path, "pieces").is_err());
        let mut older = bytes.clone();
        older[8] = 0;
        std::fs::write(&path, &older).unwrap();
        assert_eq!(R1cs::load(&path, "pieces").unwrap(), None);

        // The cache records when the file is stale and replaces it; a corrupt file is refused.
        let params = SrsKey::new("pieces-params");
        let cache = R1csCache::default();
        let got = cache
            .get("pieces", &params, Some(&path), || {
                R1cs::record("pieces", circuit())
            })
            .unwrap();
        assert_eq!(*got, r1cs);
        assert_eq!(R1cs::load(&path, "pieces").unwrap(), Some(r1cs.clone()));
        // Unloaded with its parameters: the next use reads the file again.
        cache.unload(&params);
        let mut read_again = true;
        let again = cache
            .get("pieces", &params, Some(&path), || {
                read_again = false;
                R1cs::record("pieces", circuit())
            })
            .unwrap();
        assert!(read_again && *again == r1cs && !Arc::ptr_eq(&got, &again));
        std::fs::write(&path, &flipped).unwrap();
        let err = R1csCache::default()
            .get("pieces", &params, Some(&path), || {
                R1cs::record("pieces", circuit())
            })
            .unwrap_err();
        assert!(format!("{err:#}").contains("checksum"), "{err:#}");
    }
}
