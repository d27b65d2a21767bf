//! Inputs for `c2q bench gpu` and `c2q gpu-check`. Made on the GPU, so that 2^28 points or
//! scalars neither cross PCIe nor take the host minutes: random scalars, and points (in G1 or
//! G2) whose discrete-log structure is known, so that an MSM over them has a cheap exact
//! answer. Made on the host, for the comparisons with the CPU backend: random and PoRep-like
//! scalars, and random points.

use anyhow::Result;
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar as Fr};
use ff::Field;
use group::prime::{PrimeCurve, PrimeCurveAffine};
use group::Group;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::gpu::device::Gpu;
use crate::gpu::kernels::{self, blocks, Kernel, GEN_BATCH};
use crate::gpu::limbs::{points_as_limbs, scalars_as_limbs_mut, DeviceAffine};
use crate::gpu::memory::{DevBuf, DevPtr};

/// log2 of the two point tables `gen_points` combines: 2^28 distinct points from 2 × 2^14.
const TLOG: u32 = 14;

/// `gen_points`' arguments, the same in both groups: output, count, the two tables, their log2.
type GenPoints = Kernel<(DevPtr<u32>, u64, DevPtr<u32>, DevPtr<u32>, u32)>;

/// The groups `gen_points` makes points in, with the kernel that makes them.
pub trait GenGroup: PrimeCurve<Scalar = Fr, Affine: DeviceAffine> {
    const KERNEL: GenPoints;
}

impl GenGroup for G1Projective {
    const KERNEL: GenPoints = kernels::GEN_POINTS;
}

impl GenGroup for G2Projective {
    const KERNEL: GenPoints = kernels::GEN_POINTS_G2;
}

/// B + j·S for j < n, with B and S random: the affine points and (B, S).
pub fn ladder<G: PrimeCurve>(rng: &mut ChaCha8Rng, n: usize) -> (Vec<G::Affine>, G, G) {
    let base = G::random(&mut *rng);
    let step = G::random(&mut *rng);
    let mut proj = Vec::with_capacity(n);
    let mut p = base;
    for _ in 0..n {
        proj.push(p);
        p += step;
    }
    let mut out = vec![G::Affine::identity(); n];
    G::batch_normalize(&proj, &mut out);
    (out, base, step)
}

/// Full-width random scalars.
pub fn random_scalars(rng: &mut ChaCha8Rng, n: usize) -> Vec<Fr> {
    (0..n).map(|_| Fr::random(&mut *rng)).collect()
}

/// PoRep-like witness values: 51 % zero, 47 % one, 2 % anything.
pub fn porep_scalars(rng: &mut ChaCha8Rng, n: usize) -> Vec<Fr> {
    (0..n)
        .map(|_| match rng.gen_range(0..100) {
            0..=50 => Fr::ZERO,
            51..=97 => Fr::ONE,
            _ => Fr::random(&mut *rng),
        })
        .collect()
}

/// PoRep-like host values, generated in parallel from `seed`: 51 % zero, `other_pct` %
/// anything, the rest one.
pub fn porep_host(n: usize, seed: u64, other_pct: u32) -> Vec<Fr> {
    let mut v = vec![Fr::ZERO; n];
    v.par_chunks_mut(1 << 16)
        .enumerate()
        .for_each(|(k, chunk)| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (k as u64).wrapping_mul(0x9e37_79b9));
            for x in chunk {
                let pick = rng.gen_range(0..100u32);
                *x = if pick < 51 {
                    Fr::ZERO
                } else if pick < 100 - other_pct {
                    Fr::ONE
                } else {
                    Fr::random(&mut rng)
                };
            }
        });
    v
}

/// Random points (P_i = P_0 + i·Q for random P_0, Q), with a few at infinity when asked.
pub fn random_points(rng: &mut ChaCha8Rng, n: usize, with_infinity: bool) -> Vec<G1Affine> {
    let (mut out, _, _) = ladder::<G1Projective>(rng, n);
    if with_infinity {
        for _ in 0..n.div_ceil(50) {
            let i = rng.gen_range(0..n);
            out[i] = G1Affine::identity();
        }
    }
    out
}

/// Random G2 points (Q_i = Q_0 + i·R), at infinity where `infinity` says.
pub fn random_g2_points(rng: &mut ChaCha8Rng, n: usize, infinity: &[usize]) -> Vec<G2Affine> {
    let (mut out, _, _) = ladder::<G2Projective>(rng, n);
    for &i in infinity.iter().filter(|&&i| i < n) {
        out[i] = G2Affine::identity();
    }
    out
}

/// How the points of `gen_points` were made: P_i = T1[i mod 2^t] + T2[⌊i / 2^t⌋ mod 2^t] with
/// T1[j] = B1 + j·S1 and T2[k] = B2 + k·S2. So Σ s_i·P_i = (Σ s_i)·(B1 + B2) + (Σ j_i·s_i)·S1 +
/// (Σ k_i·s_i)·S2: three sums over the scalars and three scalar multiplications, an answer
/// that shares nothing with Pippenger's bucket method.
pub struct PointLattice<G> {
    tlog: u32,
    b1: G,
    s1: G,
    b2: G,
    s2: G,
}

impl<G: Group<Scalar = Fr>> PointLattice<G> {
    /// Σ s_i·P_i over the first `scalars.len()` points.
    pub fn msm(&self, scalars: &[Fr]) -> G {
        let m = 1usize << self.tlog;
        // Runs of 2^t consecutive scalars share k; within a run, Σ j·s_j is the sum of the
        // suffix sums from j = 1 up, which needs additions only.
        let (sum, jsum, ksum) = scalars
            .par_chunks(m)
            .enumerate()
            .map(|(c, run)| {
                let mut suffix = Fr::ZERO;
                let mut jsum = Fr::ZERO;
                for s in run[1..].iter().rev() {
                    suffix += s;
                    jsum += suffix;
                }
                suffix += run[0];
                (suffix, jsum, Fr::from((c % m) as u64) * suffix)
            })
            .reduce(
                || (Fr::ZERO, Fr::ZERO, Fr::ZERO),
                |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2),
            );
        (self.b1 + self.b2) * sum + self.s1 * jsum + self.s2 * ksum
    }

    /// The point P_i itself (host arithmetic, for tests).
    pub fn point(&self, i: usize) -> G {
        let m = (1usize << self.tlog) - 1;
        let j = (i & m) as u64;
        let k = ((i >> self.tlog) & m) as u64;
        self.b1 + self.s1 * Fr::from(j) + self.b2 + self.s2 * Fr::from(k)
    }
}

/// n points P_i = T1[i mod 2^t] + T2[⌊i / 2^t⌋ mod 2^t] of G (G1 or G2), summed on the GPU
/// from two random ladders of 2^14 points (distinct for every i < 2^28), and how they were
/// made.
pub fn gen_points<G: GenGroup>(
    gpu: &Gpu,
    n: usize,
    rng: &mut ChaCha8Rng,
) -> Result<(DevBuf<u32>, PointLattice<G>)> {
    let limbs = <G::Affine as DeviceAffine>::LIMBS;
    let (t1, b1, s1) = ladder::<G>(rng, 1 << TLOG);
    let (t2, b2, s2) = ladder::<G>(rng, 1 << TLOG);
    let d1 = gpu.alloc::<u32>(t1.len() * limbs)?;
    gpu.upload(&d1, 0, points_as_limbs(&t1))?;
    let d2 = gpu.alloc::<u32>(t2.len() * limbs)?;
    gpu.upload(&d2, 0, points_as_limbs(&t2))?;
    let out = gpu.alloc::<u32>(n * limbs)?;
    let threads = (n as u64).div_ceil(GEN_BATCH as u64);
    G::KERNEL.launch(
        gpu,
        blocks(threads, 128)?,
        128,
        (out.ptr(), n as u64, d1.ptr(), d2.ptr(), TLOG),
    )?;
    gpu.sync()?;
    let lattice = PointLattice {
        tlog: TLOG,
        b1,
        s1,
        b2,
        s2,
    };
    Ok((out, lattice))
}

/// Random scalars made on the GPU (Montgomery form, as blstrs stores them): mode 0 full
/// width, 1 PoRep-like (51 % zero, 47 % one, 2 % random).
pub fn gen_scalars(gpu: &Gpu, buf: &DevBuf<u32>, n: usize, seed: u64, mode: u32) -> Result<()> {
    kernels::GEN_SCALARS.launch(
        gpu,
        blocks(n as u64, 256)?,
        256,
        (buf.ptr(), n as u64, seed, mode),
    )?;
    gpu.sync()
}

/// The first n scalars of `buf`.
pub fn download_scalars(gpu: &Gpu, buf: &DevBuf<u32>, n: usize) -> Result<Vec<Fr>> {
    let mut v = vec![Fr::ZERO; n];
    gpu.download(buf, 0, scalars_as_limbs_mut(&mut v))?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::Curve;

    /// The closed form agrees with a plain multiexp over the same points, full runs of 2^t
    /// and a partial one included.
    #[test]
    fn lattice_msm_matches_the_multiexp() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let lattice = PointLattice {
            tlog: 3,
            b1: G1Projective::random(&mut rng),
            s1: G1Projective::random(&mut rng),
            b2: G1Projective::random(&mut rng),
            s2: G1Projective::random(&mut rng),
        };
        let lattice2 = PointLattice {
            tlog: 2,
            b1: G2Projective::random(&mut rng),
            s1: G2Projective::random(&mut rng),
            b2: G2Projective::random(&mut rng),
            s2: G2Projective::random(&mut rng),
        };
        for n in [1usize, 7, 8, 9, 64, 100] {
            let points: Vec<G1Affine> = (0..n).map(|i| lattice.point(i).to_affine()).collect();
            let points2: Vec<G2Affine> = (0..n).map(|i| lattice2.point(i).to_affine()).collect();
            let scalars: Vec<Fr> = (0..n)
                .map(|_| {
                    if rng.gen_bool(0.3) {
                        Fr::ONE
                    } else {
                        Fr::random(&mut rng)
                    }
                })
                .collect();
            let want = crate::groth16::msm::g1(&points, &scalars);
            assert_eq!(lattice.msm(&scalars), want, "n = {n}");
            let want = crate::groth16::msm::g2(&points2, &scalars);
            assert_eq!(lattice2.msm(&scalars), want, "n = {n}, G2");
        }
    }

    /// The ladder is B + j·S.
    #[test]
    fn ladder_steps_by_s() {
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        let (pts, b, s) = ladder::<G1Projective>(&mut rng, 5);
        for (j, p) in pts.iter().enumerate() {
            assert_eq!(G1Projective::from(*p), b + s * Fr::from(j as u64));
        }
        let (pts, b, s) = ladder::<G2Projective>(&mut rng, 5);
        for (j, p) in pts.iter().enumerate() {
            assert_eq!(G2Projective::from(*p), b + s * Fr::from(j as u64));
        }
    }
}
