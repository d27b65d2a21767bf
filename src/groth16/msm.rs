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

/// blst's Pippenger over G2 points with little-endian 32-byte scalars.
fn g2_bytes(points: &[G2Affine], scalars: &[u8]) -> G2Projective {
    // SAFETY: blstrs' affine points are `repr(transparent)` wrappers of blst's.
    let raw = unsafe {
        std::slice::from_raw_parts(points.as_ptr() as *const blst_p2_affine, points.len())
    };
    let mut out = G2Projective::identity();
    *out.as_mut() = raw.mult(scalars, 255);
    out
}
msm_for!(g2, G2Affine, G2Projective, blst_p2_affine, blst_p2);

/// `Σ w_i·B_i` in G2: the finalizer's multiexp, read from the witness in place.
///
/// The B query is the inputs, then the aux variables, that its densities mark; point `j` is
/// the `j`-th marked variable. A 32 GiB partition marks ~33M variables, about half of them
/// ones: building the query's scalar vector and copying the ones' points out (3 GB) before
/// summing them cost more than the additions. Here each block of variables finds its first
/// point by counting marks, sums its ones in affine coordinates with one inversion per batch
/// (`batch_add_affine`), and passes on only the points of values other than 0 and 1, which go
/// through Pippenger together.
pub fn b_g2(srs: &Srs, witness: &Witness) -> anyhow::Result<G2Projective> {
    let inputs = witness.b_input_density.count();
    anyhow::ensure!(
        srs.b_g2.len() == inputs + witness.b_aux_density.count()
            && witness.b_input_density.len() <= witness.input.len()
            && witness.b_aux_density.len() <= witness.aux.len(),
        "the B query does not match the parameters' B points"
    );
    let (head, tail) = srs.b_g2.split_at(inputs);
    let first = marked_sum(head, &witness.b_input_density, &witness.input);
    let rest = marked_sum(tail, &witness.b_aux_density, &witness.aux);
    let rest_points: Vec<G2Affine> = [first.rest_points, rest.rest_points].concat();
    let rest_scalars: Vec<u8> = [first.rest_scalars, rest.rest_scalars].concat();
    let pippenger = if rest_points.is_empty() {
        G2Projective::identity()
    } else {
        g2_bytes(&rest_points, &rest_scalars)
    };
    Ok(first.ones + rest.ones + pippenger)
}

/// The sum of the points of ones, and the points and scalars of the values other than 0 and 1.
struct MarkedSum {
    ones: G2Projective,
    rest_points: Vec<G2Affine>,
    rest_scalars: Vec<u8>,
}

/// Lanes summed together in one batch inversion.
const LANES: usize = 512;
/// Variables per parallel task: 64 per word.
const BLOCK_WORDS: usize = 1024;

/// Over the variables `density` marks, in order, with point `j` for the `j`-th of them.
fn marked_sum(points: &[G2Affine], density: &crate::groth16::Density, values: &[Fr]) -> MarkedSum {
    use crate::groth16::curve::{batch_add_affine, AffineCoords};
    let words = density.words();
    let blocks: Vec<&[u64]> = words.chunks(BLOCK_WORDS).collect();
    let mut firsts = Vec::with_capacity(blocks.len());
    let mut marked = 0usize;
    for block in &blocks {
        firsts.push(marked);
        marked += block.iter().map(|w| w.count_ones() as usize).sum::<usize>();
    }
    let parts: Vec<MarkedSum> = blocks
        .par_iter()
        .zip(firsts.par_iter())
        .enumerate()
        .map(|(b, (block, &first))| {
            let mut lanes: Vec<Option<(blstrs::Fp2, blstrs::Fp2)>> = vec![None; LANES];
            let mut batch: Vec<Option<G2Affine>> = Vec::with_capacity(LANES);
            let mut part = MarkedSum {
                ones: G2Projective::identity(),
                rest_points: Vec::new(),
                rest_scalars: Vec::new(),
            };
            let mut j = first;
            for (k, &word) in block.iter().enumerate() {
                let mut bits = word;
                while bits != 0 {
                    let i = (b * BLOCK_WORDS + k) * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    // Lengths were checked by the caller: a mark past the values is a zero.
                    let (Some(v), Some(p)) = (values.get(i), points.get(j)) else {
                        j += 1;
                        continue;
                    };
                    j += 1;
                    if *v == Fr::ZERO {
                        continue;
                    } else if *v == Fr::ONE {
                        batch.push(Some(*p));
                        if batch.len() == LANES {
                            batch_add_affine(&mut lanes, &batch);
                            batch.clear();
                        }
                    } else {
                        part.rest_points.push(*p);
                        part.rest_scalars.extend_from_slice(&v.to_bytes_le());
                    }
                }
            }
            batch_add_affine(&mut lanes[..batch.len()], &batch);
            for (x, y) in lanes.into_iter().flatten() {
                part.ones += G2Affine::from_coords(x, y);
            }
            part
        })
        .collect();
    let mut all = MarkedSum {
        ones: G2Projective::identity(),
        rest_points: Vec::new(),
        rest_scalars: Vec::new(),
    };
    for p in parts {
        all.ones += p.ones;
        all.rest_points.extend_from_slice(&p.rest_points);
        all.rest_scalars.extend_from_slice(&p.rest_scalars);
    }
    all
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

    /// The in-place B multiexp equals the multiexp of the selected scalars, across block
    /// boundaries, with repeated points (doublings in a batch) and with inputs marked too.
    #[test]
    fn b_g2_in_place_matches_the_selected_multiexp() {
        use crate::groth16::{Density, Witness};
        use group::prime::PrimeCurveAffine;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let aux_len = BLOCK_WORDS * 64 + 1000;
        let value = |rng: &mut rand_chacha::ChaCha8Rng| match rng.gen_range(0..100) {
            0..=50 => Fr::ZERO,
            51..=97 => Fr::ONE,
            _ => Fr::random(&mut *rng),
        };
        let witness = Witness {
            input: (0..5).map(|_| value(&mut rng)).collect(),
            aux: (0..aux_len).map(|_| value(&mut rng)).collect(),
            a_aux_density: Density::full(aux_len),
            b_input_density: Density::from_fn(5, |i| i != 2),
            b_aux_density: Density::from_fn(aux_len, |i| i % 4 == 1 || i > aux_len - 300),
            compact_aux: None,
        };
        let n = witness.b_query_len();
        let base: Vec<G2Affine> = (0..97)
            .map(|_| G2Projective::random(&mut rng).to_affine())
            .collect();
        // Few distinct points: equal points meet in one lane, and must be doubled.
        let points: Vec<G2Affine> = (0..n).map(|i| base[(i * 7) % 97]).collect();
        let srs = Srs {
            pins: Default::default(),
            key: "b".into(),
            vk: crate::groth16::VerifyingKey {
                alpha_g1: G1Affine::generator(),
                beta_g1: G1Affine::generator(),
                beta_g2: G2Affine::generator(),
                gamma_g2: G2Affine::generator(),
                delta_g1: G1Affine::generator(),
                delta_g2: G2Affine::generator(),
                ic: vec![],
            },
            h: vec![],
            l: vec![],
            a: vec![],
            b_g1: vec![],
            b_g2: points.clone(),
        };
        let expect = g2(&points, &witness.b_query_scalars());
        assert_eq!(b_g2(&srs, &witness).unwrap(), expect);
        let mut short = srs;
        short.b_g2.pop();
        assert!(b_g2(&short, &witness).is_err());
    }
}
