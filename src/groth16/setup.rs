//! Random Groth16 parameters for a circuit: **test parameters, not a trusted setup** (whoever
//! runs this knows the toxic waste and could forge proofs against them).
//!
//! The result is what bellperson's `generate_random_parameters` makes (same QAP, same
//! input-constraint convention, same filtering of points at infinity), computed faster: the
//! circuit's shape is recorded as flat term lists, the QAP is evaluated at τ with one inverse
//! NTT, and every point is a fixed-base multiplication through a window table shared by all
//! threads.

use std::ops::AddAssign;

use anyhow::{bail, Result};
use bellperson::Circuit;
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar as Fr};
use ff::Field;
use group::{prime::PrimeCurveAffine, Curve, Group};
use rand_core::RngCore;
use rayon::prelude::*;

use super::curve::{batch_add_affine, AffineCoords, BatchAffine};
use super::r1cs::R1cs;
use super::{ntt, Srs, SrsKey, VerifyingKey};

/// Reports long-running work: a stage name, then progress within it.
pub trait Progress: Sync {
    fn stage(&self, _name: &str) {}
    fn advance(&self, _done: usize, _total: usize) {}
}

/// No progress output (tests, the in-process canary).
pub struct Quiet;
impl Progress for Quiet {}

/// A window table for fixed-base multiplication: `table[w][d] = d·2^(bits·w)·G`, affine, so
/// that each multiplication is one mixed addition per window.
struct FixedBase<G: Curve> {
    bits: usize,
    table: Vec<Vec<G::AffineRepr>>,
}

impl<G> FixedBase<G>
where
    G: BatchAffine + Group + Send + Sync + for<'a> AddAssign<&'a G::AffineRepr>,
    G::AffineRepr: AffineCoords + PrimeCurveAffine<Curve = G> + Default,
{
    /// Choose the window that minimises table work (about two additions per entry, counting
    /// the normalisation) plus one addition per window per multiplication.
    fn new(base: G, multiplications: usize) -> Self {
        let cost = |b: usize| 255usize.div_ceil(b) * ((2usize << b) + multiplications);
        let bits = (2..=18).min_by_key(|&b| cost(b)).unwrap_or(8);
        let windows = 255usize.div_ceil(bits);
        let mut window_bases = Vec::with_capacity(windows);
        let mut b = base;
        for _ in 0..windows {
            window_bases.push(b);
            for _ in 0..bits {
                b = b.double();
            }
        }
        let table = window_bases
            .into_par_iter()
            .map(|wb| {
                let mut proj = Vec::with_capacity(1 << bits);
                let mut acc = G::identity();
                for _ in 0..(1usize << bits) {
                    proj.push(acc);
                    acc += wb;
                }
                let mut affine = vec![G::AffineRepr::default(); proj.len()];
                G::batch_affine(&proj, &mut affine);
                affine
            })
            .collect();
        FixedBase { bits, table }
    }

    /// `scalars[i]·G` for every i, in parallel, as affine points. Each chunk of lanes walks
    /// the windows together, so every window's additions share one field inversion.
    fn mul_all(&self, scalars: &[Fr], progress: &Counted) -> Vec<G::AffineRepr> {
        const LANES: usize = 1 << 10;
        let mut out = vec![G::AffineRepr::default(); scalars.len()];
        out.par_chunks_mut(LANES)
            .zip(scalars.par_chunks(LANES))
            .for_each(|(out, scalars)| {
                let bytes: Vec<[u8; 32]> = scalars.iter().map(|s| s.to_bytes_le()).collect();
                let mut acc = vec![None; scalars.len()];
                let mut addends = vec![None; scalars.len()];
                for (w, row) in self.table.iter().enumerate() {
                    for (a, b) in addends.iter_mut().zip(&bytes) {
                        let digit = window_digit(b, w * self.bits, self.bits);
                        *a = (digit != 0).then(|| row[digit]);
                    }
                    batch_add_affine(&mut acc, &addends);
                }
                for (o, a) in out.iter_mut().zip(acc) {
                    *o = match a {
                        Some((x, y)) => G::AffineRepr::from_coords(x, y),
                        None => G::AffineRepr::identity(),
                    };
                }
                progress.add(scalars.len());
            });
        out
    }
}

fn window_digit(bytes: &[u8; 32], start: usize, bits: usize) -> usize {
    let mut v = 0usize;
    for k in 0..bits {
        let bit = start + k;
        if bit >= 256 {
            break;
        }
        v |= (((bytes[bit / 8] >> (bit % 8)) & 1) as usize) << k;
    }
    v
}

/// The toxic waste.
struct Trapdoor {
    alpha: Fr,
    beta: Fr,
    gamma: Fr,
    delta: Fr,
    tau: Fr,
}

/// Generate random parameters for `circuit`, synthesized with bellperson's conventions (the
/// constant one is input 0, an `input * 0 = 0` constraint per input closes the system). `id`
/// names the circuit's recorded constraints and the parameters (their [`SrsKey`]).
pub fn generate<C: Circuit<Fr>>(
    circuit: C,
    rng: &mut impl RngCore,
    id: &str,
    progress: &dyn Progress,
) -> Result<Srs> {
    progress.stage("synthesizing the circuit's shape");
    let cs = R1cs::record(id, circuit)?;

    let t = Trapdoor {
        alpha: nonzero(rng),
        beta: nonzero(rng),
        gamma: nonzero(rng),
        delta: nonzero(rng),
        tau: nonzero(rng),
    };
    let g1 = G1Projective::random(&mut *rng);
    let g2 = G2Projective::random(&mut *rng);

    progress.stage("evaluating the QAP at tau");
    let domain = ntt::Domain::for_len(cs.constraints())?;
    let n = domain.size();
    let mut lagrange = vec![Fr::ZERO; n];
    lagrange
        .par_chunks_mut(1 << 14)
        .enumerate()
        .for_each(|(c, chunk)| {
            let mut p = t.tau.pow_vartime([(c << 14) as u64]);
            for v in chunk {
                *v = p;
                p *= t.tau;
            }
        });
    // Powers of τ, kept for the H query, then turned into the Lagrange basis at τ.
    let h_scalars = {
        let z_over_delta =
            (t.tau.pow_vartime([n as u64]) - Fr::ONE) * t.delta.invert().unwrap_or(Fr::ZERO);
        lagrange[..n - 1]
            .par_iter()
            .map(|p| *p * z_over_delta)
            .collect::<Vec<_>>()
    };
    ntt::intt(&mut lagrange, &domain);

    let vars = cs.inputs + cs.aux;
    let (at, (bt, ct)) = rayon::join(
        || cs.transposed_product(&cs.a, &lagrange),
        || {
            rayon::join(
                || cs.transposed_product(&cs.b, &lagrange),
                || cs.transposed_product(&cs.c, &lagrange),
            )
        },
    );
    drop(lagrange);

    // IC (inputs) and L (aux): (β·A + α·B + C) / γ and / δ.
    let gamma_inv = t.gamma.invert().unwrap_or(Fr::ZERO);
    let delta_inv = t.delta.invert().unwrap_or(Fr::ZERO);
    let ext: Vec<Fr> = (0..vars)
        .into_par_iter()
        .map(|v| {
            let e = t.beta * at[v] + t.alpha * bt[v] + ct[v];
            e * if v < cs.inputs { gamma_inv } else { delta_inv }
        })
        .collect();
    // Points at infinity are left out of the A and B queries.
    let a_scalars: Vec<Fr> = at
        .into_iter()
        .filter(|s| !bool::from(s.is_zero()))
        .collect();
    let b_scalars: Vec<Fr> = bt
        .into_iter()
        .filter(|s| !bool::from(s.is_zero()))
        .collect();
    drop(ct);

    let g1_count = h_scalars.len() + ext.len() + a_scalars.len() + b_scalars.len();
    progress.stage("building window tables");
    let g1_base = FixedBase::new(g1, g1_count);
    let g2_base = FixedBase::new(g2, b_scalars.len());

    let counted = Counted {
        inner: progress,
        done: std::sync::atomic::AtomicUsize::new(0),
        total: g1_count + b_scalars.len(),
    };
    progress.stage("computing points");
    let h = g1_base.mul_all(&h_scalars, &counted);
    drop(h_scalars);
    let ext_points = g1_base.mul_all(&ext, &counted);
    let a = g1_base.mul_all(&a_scalars, &counted);
    let b_g1 = g1_base.mul_all(&b_scalars, &counted);
    let b_g2 = g2_base.mul_all(&b_scalars, &counted);

    let l: Vec<G1Affine> = ext_points[cs.inputs..].to_vec();
    if l.iter().any(|p| bool::from(p.is_identity())) {
        bail!("circuit has an unconstrained variable: its L point is at infinity");
    }
    let g1 = g1.to_affine();
    let g2 = g2.to_affine();
    let vk = VerifyingKey {
        alpha_g1: (g1 * t.alpha).to_affine(),
        beta_g1: (g1 * t.beta).to_affine(),
        beta_g2: (g2 * t.beta).to_affine(),
        gamma_g2: (g2 * t.gamma).to_affine(),
        delta_g1: (g1 * t.delta).to_affine(),
        delta_g2: (g2 * t.delta).to_affine(),
        ic: ext_points[..cs.inputs].to_vec(),
    };
    Ok(Srs {
        pins: Default::default(),
        key: SrsKey::new(id),
        vk,
        h,
        l,
        a,
        b_g1,
        b_g2: b_g2.into_iter().collect::<Vec<G2Affine>>(),
    })
}

fn nonzero(rng: &mut impl RngCore) -> Fr {
    loop {
        let v = Fr::random(&mut *rng);
        if !bool::from(v.is_zero()) {
            return v;
        }
    }
}

/// Sums progress across the point stages so the caller sees one percentage.
struct Counted<'a> {
    inner: &'a dyn Progress,
    done: std::sync::atomic::AtomicUsize,
    total: usize,
}

impl Counted<'_> {
    fn add(&self, n: usize) {
        let done = self.done.fetch_add(n, std::sync::atomic::Ordering::Relaxed) + n;
        self.inner.advance(done, self.total);
    }
}
