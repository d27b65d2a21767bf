//! Number-theoretic transforms over Fr on the CPU (rayon), and the quotient polynomial H.
//!
//! The domain, its generator ω and the coset shift g are bellperson's (ω from
//! `Fr::ROOT_OF_UNITY`, g = `Fr::MULTIPLICATIVE_GENERATOR`), so the H coefficients, and with
//! them the proofs, are the same field elements bellperson computes.

use anyhow::{ensure, Result};
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use super::Evaluations;

/// The largest domain c2q proves over (a 64 GiB sector needs 2^27).
pub const MAX_LOG_DOMAIN: u32 = 28;

/// A power-of-two evaluation domain.
#[derive(Clone, Copy, Debug)]
pub struct Domain {
    pub log_n: u32,
    pub omega: Fr,
    pub omega_inv: Fr,
    pub n_inv: Fr,
}

impl Domain {
    /// The smallest domain that holds `len` evaluations.
    pub fn for_len(len: usize) -> Result<Domain> {
        let n = len.max(1).next_power_of_two();
        let log_n = n.trailing_zeros();
        ensure!(
            log_n <= MAX_LOG_DOMAIN,
            "a domain of 2^{log_n} is larger than c2q supports (2^{MAX_LOG_DOMAIN})"
        );
        let mut omega = Fr::ROOT_OF_UNITY;
        for _ in log_n..Fr::S {
            omega = omega.square();
        }
        Ok(Domain {
            log_n,
            omega,
            omega_inv: omega.invert().unwrap_or(Fr::ZERO),
            n_inv: Fr::from(n as u64).invert().unwrap_or(Fr::ZERO),
        })
    }

    pub fn size(&self) -> usize {
        1 << self.log_n
    }
}

/// `values[i] *= g^i`, in parallel chunks.
pub fn distribute_powers(values: &mut [Fr], g: Fr) {
    const CHUNK: usize = 1 << 14;
    values
        .par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(c, chunk)| {
            let mut p = g.pow_vartime([(c * CHUNK) as u64]);
            for v in chunk {
                *v *= p;
                p *= g;
            }
        });
}

/// The powers `w^0 .. w^(len-1)`.
fn powers(w: Fr, len: usize) -> Vec<Fr> {
    const CHUNK: usize = 1 << 14;
    let mut out = vec![Fr::ZERO; len];
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(c, chunk)| {
            let mut p = w.pow_vartime([(c * CHUNK) as u64]);
            for v in chunk {
                *v = p;
                p *= w;
            }
        });
    out
}

fn bit_reverse(values: &mut [Fr], log_n: u32) {
    if log_n == 0 {
        return;
    }
    let rev = |i: usize| i.reverse_bits() >> (usize::BITS - log_n);
    // Each swap pair (i, rev(i)) with i < rev(i) is touched once; pairs are disjoint, so the
    // swaps can proceed in parallel through a shared raw pointer.
    let ptr = SendPtr(values.as_mut_ptr());
    (0..values.len())
        .into_par_iter()
        .with_min_len(1 << 14)
        .for_each(|i| {
            let j = rev(i);
            if i < j {
                let p = &ptr;
                // SAFETY: i and j are in bounds, distinct, and no other iteration touches them.
                unsafe { std::ptr::swap(p.0.add(i), p.0.add(j)) };
            }
        });
}

struct SendPtr(*mut Fr);
// SAFETY: used only for the disjoint swaps above.
unsafe impl Sync for SendPtr {}

/// Butterflies of one stage on one block: `lo` and `hi` are the block's halves, `first` the
/// index of `lo[0]` within its half, `stride` the twiddle step of this stage.
#[inline]
fn butterflies(lo: &mut [Fr], hi: &mut [Fr], twiddles: &[Fr], first: usize, stride: usize) {
    for (j, (x, y)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
        let w = &twiddles[(first + j) * stride];
        let t = if first + j == 0 { *y } else { *y * w };
        *y = *x - t;
        *x += t;
    }
}

/// In-place radix-2 decimation-in-time transform with root `omega` of order `values.len()`.
///
/// The early stages, whose blocks are small, run inside cache-sized tiles (one tile per task,
/// all those stages at once); the late stages split each large block's butterflies across
/// threads.
pub fn ntt(values: &mut [Fr], omega: Fr) {
    const TILE: usize = 1 << 12;
    const PIECE: usize = 1 << 12;
    let n = values.len();
    assert!(n.is_power_of_two(), "NTT size must be a power of two");
    let log_n = n.trailing_zeros();
    bit_reverse(values, log_n);
    if n == 1 {
        return;
    }
    let twiddles = powers(omega, n / 2);
    let tile = TILE.min(n);
    values.par_chunks_mut(tile).for_each(|tile_values| {
        let mut half = 1;
        while half < tile {
            let stride = n / (2 * half);
            for block in tile_values.chunks_mut(2 * half) {
                let (lo, hi) = block.split_at_mut(half);
                butterflies(lo, hi, &twiddles, 0, stride);
            }
            half *= 2;
        }
    });
    let mut half = tile;
    while half < n {
        let stride = n / (2 * half);
        for block in values.chunks_mut(2 * half) {
            let (lo, hi) = block.split_at_mut(half);
            lo.par_chunks_mut(PIECE)
                .zip(hi.par_chunks_mut(PIECE))
                .enumerate()
                .for_each(|(p, (lo, hi))| butterflies(lo, hi, &twiddles, p * PIECE, stride));
        }
        half *= 2;
    }
}

/// Inverse transform, scaled by 1/n.
pub fn intt(values: &mut [Fr], domain: &Domain) {
    ntt(values, domain.omega_inv);
    let n_inv = domain.n_inv;
    values.par_iter_mut().for_each(|v| *v *= n_inv);
}

/// From evaluations on the domain to evaluations on the coset g·domain.
fn to_coset(values: &mut [Fr], domain: &Domain) {
    intt(values, domain);
    distribute_powers(values, Fr::MULTIPLICATIVE_GENERATOR);
    ntt(values, domain.omega);
}

/// The coefficients of H = (A·B − C) / Z, the scalars of the H multiexp: n − 1 of them.
///
/// bellperson takes A, B and C to the coset g·domain (two transforms each), combines them
/// there and comes back (one more): H = icoset((A_g·B_g − C_g) / Z_g). The way back is linear
/// and undoes C's way there, so H = (icoset(A_g·B_g) − intt(C)) / Z_g: the same field elements
/// for any A, B, C, with one inverse transform of C instead of two transforms (six in all
/// instead of seven).
pub fn h_coefficients(evals: Evaluations) -> Result<Vec<Fr>> {
    let domain = Domain::for_len(evals.constraints())?;
    let n = domain.size();
    let Evaluations {
        pins,
        mut a,
        mut b,
        mut c,
    } = evals;
    // Unlocked before the vectors are resized (and perhaps moved).
    drop(pins);
    for v in [&mut a, &mut b] {
        v.resize(n, Fr::ZERO);
        to_coset(v, &domain);
    }
    a.par_iter_mut()
        .zip(b.par_iter())
        .for_each(|(a, b)| *a *= b);
    drop(b);
    intt(&mut a, &domain);
    let g_inv = Fr::MULTIPLICATIVE_GENERATOR.invert().unwrap_or(Fr::ZERO);
    distribute_powers(&mut a, g_inv);
    c.resize(n, Fr::ZERO);
    intt(&mut c, &domain);
    // Z(x) = x^n − 1 is the same constant at every point of the coset g·domain.
    let z_inv = z_on_coset(n).invert().unwrap_or(Fr::ZERO);
    a.par_iter_mut()
        .zip(c.par_iter())
        .for_each(|(a, c)| *a = (*a - c) * z_inv);
    a.truncate(n - 1);
    Ok(a)
}

/// Z(x) = x^n − 1 at the points of the coset g·domain: g^n − 1 at every one.
fn z_on_coset(n: usize) -> Fr {
    Fr::MULTIPLICATIVE_GENERATOR.pow_vartime([n as u64]) - Fr::ONE
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn naive_dft(values: &[Fr], omega: Fr) -> Vec<Fr> {
        let n = values.len();
        (0..n)
            .map(|i| {
                let wi = omega.pow_vartime([i as u64]);
                let mut acc = Fr::ZERO;
                let mut p = Fr::ONE;
                for v in values {
                    acc += *v * p;
                    p *= wi;
                }
                acc
            })
            .collect()
    }

    #[test]
    fn ntt_matches_the_definition_and_inverts() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for log_n in [0u32, 1, 2, 5, 9, 13, 14] {
            let domain = Domain::for_len(1 << log_n).unwrap();
            let values: Vec<Fr> = (0..1 << log_n).map(|_| Fr::random(&mut rng)).collect();
            let mut fast = values.clone();
            ntt(&mut fast, domain.omega);
            if log_n <= 9 {
                assert_eq!(fast, naive_dft(&values, domain.omega), "2^{log_n}");
            } else {
                // Past the tile size: check sampled outputs against the definition.
                for i in [0usize, 1, 4095, 4096, 5000, (1 << log_n) - 1] {
                    let wi = domain.omega.pow_vartime([i as u64]);
                    let expect = values.iter().rev().fold(Fr::ZERO, |acc, v| acc * wi + v);
                    assert_eq!(fast[i], expect, "2^{log_n}, output {i}");
                }
            }
            intt(&mut fast, &domain);
            assert_eq!(fast, values);
        }
    }

    /// H as bellperson computes it: all three of A, B, C to the coset and back.
    fn h_by_bellpersons_steps(evals: Evaluations) -> Vec<Fr> {
        let domain = Domain::for_len(evals.constraints()).unwrap();
        let n = domain.size();
        let Evaluations {
            pins: _,
            mut a,
            mut b,
            mut c,
        } = evals;
        for v in [&mut a, &mut b, &mut c] {
            v.resize(n, Fr::ZERO);
            to_coset(v, &domain);
        }
        let z_inv = z_on_coset(n).invert().unwrap();
        for i in 0..n {
            a[i] = (a[i] * b[i] - c[i]) * z_inv;
        }
        intt(&mut a, &domain);
        distribute_powers(&mut a, Fr::MULTIPLICATIVE_GENERATOR.invert().unwrap());
        a.truncate(n - 1);
        a
    }

    #[test]
    fn h_is_bellpersons_for_any_evaluations() {
        // Random A, B, C (no circuit satisfies them, so Z does not divide A·B − C): the
        // shortcut is an identity of the transforms, not of satisfied circuits.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        for len in [1usize, 2, 3, 100, 1 << 10, (1 << 12) + 5] {
            let mut random = |k: usize| (0..k).map(|_| Fr::random(&mut rng)).collect::<Vec<_>>();
            let evals = Evaluations {
                pins: Default::default(),
                a: random(len),
                b: random(len),
                c: random(len),
            };
            let want = h_by_bellpersons_steps(evals.clone());
            assert_eq!(h_coefficients(evals).unwrap(), want, "{len} evaluations");
        }
    }

    #[test]
    fn domain_rejects_oversize() {
        assert!(Domain::for_len((1 << MAX_LOG_DOMAIN) + 1).is_err());
    }
}
