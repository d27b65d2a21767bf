//! Multi-scalar multiplication on the CPU, through blst's multi-threaded Pippenger.
//!
//! PoRep witnesses are mostly bits (about half zeros, half ones): zeros are skipped, the points
//! of ones are summed with plain additions, and only the rest goes through Pippenger. That turns
//! the witness multiexps from full-width MSMs into little more than one addition per point.

use blst::{blst_p1, blst_p1_affine, blst_p2, blst_p2_affine, MultiPoint};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar as Fr};
use ff::Field;
use group::Group;
use rayon::prelude::*;

use super::{Srs, Witness};

/// When fewer than this share of scalars are 0 or 1, splitting them out is not worth the
/// copy of the remaining points.
const SPLIT_THRESHOLD: f64 = 0.25;

/// How the scalars of one multiexp divide up.
struct Split<P> {
    ones: Vec<P>,
    rest_points: Vec<P>,
    rest_scalars: Vec<u8>,
}

fn count_bits(scalars: &[Fr]) -> usize {
    scalars
        .par_iter()
        .filter(|s| **s == Fr::ZERO || **s == Fr::ONE)
        .count()
}

fn split<P: Copy + Send + Sync>(points: &[P], scalars: &[Fr]) -> Split<P> {
    const CHUNK: usize = 1 << 16;
    let parts: Vec<Split<P>> = points
        .par_chunks(CHUNK)
        .zip(scalars.par_chunks(CHUNK))
        .map(|(points, scalars)| {
            let mut part = Split {
                ones: Vec::new(),
                rest_points: Vec::new(),
                rest_scalars: Vec::new(),
            };
            for (p, s) in points.iter().zip(scalars) {
                if *s == Fr::ZERO {
                    continue;
                } else if *s == Fr::ONE {
                    part.ones.push(*p);
                } else {
                    part.rest_points.push(*p);
                    part.rest_scalars.extend_from_slice(&s.to_bytes_le());
                }
            }
            part
        })
        .collect();
    let mut all = Split {
        ones: Vec::with_capacity(parts.iter().map(|p| p.ones.len()).sum()),
        rest_points: Vec::with_capacity(parts.iter().map(|p| p.rest_points.len()).sum()),
        rest_scalars: Vec::with_capacity(parts.iter().map(|p| p.rest_scalars.len()).sum()),
    };
    for p in parts {
        all.ones.extend_from_slice(&p.ones);
        all.rest_points.extend_from_slice(&p.rest_points);
        all.rest_scalars.extend_from_slice(&p.rest_scalars);
    }
    all
}

fn scalar_bytes(scalars: &[Fr]) -> Vec<u8> {
    let mut out = vec![0u8; scalars.len() * 32];
    out.par_chunks_mut(32)
        .zip(scalars.par_iter())
        .for_each(|(o, s)| o.copy_from_slice(&s.to_bytes_le()));
    out
}

macro_rules! msm_for {
    ($name:ident, $affine:ty, $proj:ty, $blst_affine:ty, $blst_proj:ty) => {
        /// `Σ scalars[i]·points[i]`. Both slices must have the same length.
        pub fn $name(points: &[$affine], scalars: &[Fr]) -> $proj {
            assert_eq!(
                points.len(),
                scalars.len(),
                "multiexp: points and scalars differ"
            );
            // SAFETY: blstrs' affine points are `repr(transparent)` wrappers of blst's.
            let cast = |p: &[$affine]| unsafe {
                std::slice::from_raw_parts(p.as_ptr() as *const $blst_affine, p.len())
            };
            let wrap = |raw: $blst_proj| {
                let mut out = <$proj>::identity();
                *out.as_mut() = raw;
                out
            };
            let pippenger = |points: &[$affine], bytes: &[u8]| {
                if points.is_empty() {
                    <$proj>::identity()
                } else {
                    wrap(cast(points).mult(bytes, 255))
                }
            };
            let sum = |points: &[$affine]| {
                if points.is_empty() {
                    <$proj>::identity()
                } else {
                    wrap(cast(points).add())
                }
            };
            if points.is_empty() {
                return <$proj>::identity();
            }
            let bits = count_bits(scalars);
            if (bits as f64) < SPLIT_THRESHOLD * points.len() as f64 {
                return pippenger(points, &scalar_bytes(scalars));
            }
            let s = split(points, scalars);
            sum(&s.ones) + pippenger(&s.rest_points, &s.rest_scalars)
        }
    };
}

msm_for!(g1, G1Affine, G1Projective, blst_p1_affine, blst_p1);
msm_for!(g2, G2Affine, G2Projective, blst_p2_affine, blst_p2);

/// `Σ w_i·B_i` in G2: the finalizer's multiexp.
pub fn b_g2(srs: &Srs, witness: &Witness) -> G2Projective {
    g2(&srs.b_g2, &witness.b_query_scalars())
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::Curve;
    use rand::{Rng, SeedableRng};

    fn naive(points: &[G1Affine], scalars: &[Fr]) -> G1Projective {
        points
            .iter()
            .zip(scalars)
            .map(|(p, s)| G1Projective::from(p) * s)
            .sum()
    }

    #[test]
    fn msm_matches_naive_for_every_scalar_mix() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        for (n, zero_one_share) in [(1, 0.0), (7, 1.0), (100, 0.0), (300, 0.98), (513, 0.5)] {
            let points: Vec<G1Affine> = (0..n)
                .map(|_| G1Projective::random(&mut rng).to_affine())
                .collect();
            let scalars: Vec<Fr> = (0..n)
                .map(|_| {
                    if rng.gen_bool(zero_one_share) {
                        if rng.gen_bool(0.5) {
                            Fr::ZERO
                        } else {
                            Fr::ONE
                        }
                    } else {
                        Fr::random(&mut rng)
                    }
                })
                .collect();
            assert_eq!(g1(&points, &scalars), naive(&points, &scalars), "n={n}");
        }
        assert_eq!(g1(&[], &[]), G1Projective::identity());
    }

    #[test]
    fn g2_msm_matches_naive() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
        let points: Vec<G2Affine> = (0..64)
            .map(|_| G2Projective::random(&mut rng).to_affine())
            .collect();
        let scalars: Vec<Fr> = (0..64)
            .map(|i| {
                if i % 3 == 0 {
                    Fr::random(&mut rng)
                } else {
                    Fr::from((i % 2) as u64)
                }
            })
            .collect();
        let expect: G2Projective = points
            .iter()
            .zip(&scalars)
            .map(|(p, s)| G2Projective::from(p) * s)
            .sum();
        assert_eq!(g2(&points, &scalars), expect);
    }
}
