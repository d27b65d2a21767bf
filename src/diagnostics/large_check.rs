//! `c2q gpu-check --large-log L`: the NTTs, H and the MSM checked at full size (2^27 is a
//! 32 GiB partition's domain, 2^28 the largest supported), where the CPU backend's own
//! transforms and multiexps would take minutes. Each GPU result is compared with an answer the
//! host computes in linear time, by a route that shares nothing with the kernels:
//!
//! - MSM: over points of known structure (see `inputs::PointLattice`), a closed form; in G1,
//!   in G1 and G2 over one sort (`gpu::msm::msm_shared`, the B query's MSM), and in G1 with
//!   most points streamed from host memory (`gpu::msm::msm_streamed`, a small GPU's MSM).
//! - NTT: output k of a transform is the input polynomial at ω^k (g·ω^k for the coset, ω^-k/n
//!   for the inverse): checked at a few positions by Horner's rule, and inverse(forward(x)) = x
//!   everywhere.
//! - H: with c = a·b on the domain (a satisfied constraint system), the interpolants satisfy
//!   A(z)·B(z) − C(z) = H(z)·(z^n − 1) at a random z, and H has degree below n − 1.

use anyhow::{ensure, Result};
use blstrs::{G1Affine, G1Projective, G2Projective, Scalar as Fr};
use ff::{Field, PrimeField};
use group::prime::PrimeCurveAffine;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::inputs::{download_scalars, gen_points, gen_scalars, PointLattice};
use crate::gpu::device::Gpu;
use crate::gpu::limbs::{affine_as_limbs_mut, scalars_as_limbs, FR_LIMBS};
use crate::gpu::memory::DevBuf;
use crate::gpu::msm::{msm, msm_shared, msm_streamed, HostPoints, ResidentPrefix};
use crate::gpu::ntt::{omega, Ntt};

/// Coefficients per parallel piece of the host's polynomial evaluations.
const PIECE: usize = 1 << 16;

/// p(z) for each z, p given by its coefficients (low degree first): Horner's rule on pieces in
/// parallel, the pieces then combined with powers of z^PIECE.
pub fn eval_poly(coeffs: &[Fr], zs: &[Fr]) -> Vec<Fr> {
    let pieces: Vec<Vec<Fr>> = coeffs
        .par_chunks(PIECE)
        .map(|piece| {
            let mut acc = vec![Fr::ZERO; zs.len()];
            for c in piece.iter().rev() {
                for (a, z) in acc.iter_mut().zip(zs) {
                    *a = *a * z + c;
                }
            }
            acc
        })
        .collect();
    zs.iter()
        .enumerate()
        .map(|(q, z)| {
            let step = z.pow_vartime([PIECE as u64]);
            let mut at = Fr::ONE;
            let mut sum = Fr::ZERO;
            for piece in &pieces {
                sum += piece[q] * at;
                at *= step;
            }
            sum
        })
        .collect()
}

/// For vectors v of evaluations on the 2^log_n domain, the interpolating polynomials at z
/// (z not a domain point): V(z) = (z^n − 1)/n · Σ_i v_i·ω^i/(z − ω^i). The inverses are
/// batched per piece (Montgomery's trick): about eight products per domain point in all.
pub fn interpolate_at(values: &[&[Fr]], log_n: u32, z: Fr) -> Result<Vec<Fr>> {
    let n = 1usize << log_n;
    for v in values {
        ensure!(v.len() == n, "{} values for a domain of {n}", v.len());
    }
    let w = omega(log_n);
    let sums = (0..n.div_ceil(PIECE))
        .into_par_iter()
        .map(|p| -> Result<Vec<Fr>> {
            let start = p * PIECE;
            let len = PIECE.min(n - start);
            let mut pow = w.pow_vartime([start as u64]);
            let mut powers = Vec::with_capacity(len);
            let mut prefix = Vec::with_capacity(len);
            let mut acc = Fr::ONE;
            for _ in 0..len {
                powers.push(pow);
                prefix.push(acc);
                acc *= z - pow;
                pow *= w;
            }
            let mut inv = Option::<Fr>::from(acc.invert())
                .ok_or_else(|| anyhow::anyhow!("z is a point of the domain"))?;
            let mut out = vec![Fr::ZERO; values.len()];
            for i in (0..len).rev() {
                // inv is 1 / Π_{k ≤ i}(z − ω^k) here.
                let term = powers[i] * inv * prefix[i];
                inv *= z - powers[i];
                for (o, v) in out.iter_mut().zip(values) {
                    *o += v[start + i] * term;
                }
            }
            Ok(out)
        })
        .collect::<Result<Vec<_>>>()?;
    let n_inv = Option::<Fr>::from(Fr::from(n as u64).invert())
        .ok_or_else(|| anyhow::anyhow!("n is not invertible"))?;
    let scale = (z.pow_vartime([n as u64]) - Fr::ONE) * n_inv;
    Ok((0..values.len())
        .map(|q| sums.iter().map(|s| s[q]).sum::<Fr>() * scale)
        .collect())
}

/// A few output positions of a 2^log_n transform: both ends and some random ones.
fn positions(rng: &mut ChaCha8Rng, n: usize) -> Vec<usize> {
    let mut p = vec![0, 1, n - 1];
    p.extend((0..5).map(|_| rng.gen_range(0..n)));
    p
}

/// What was compared, and whether it matched: one line of `gpu-check`'s output each.
pub type Checks = Vec<(String, bool)>;

/// Runs the full-size checks at 2^log_n in turn: the four NTTs, H, the MSM in G1, in G1 and
/// G2 over one sort, and in G1 partly streamed from host memory.
pub fn run(gpu: &Gpu, log_n: u32, rng: &mut ChaCha8Rng) -> Result<Checks> {
    ensure!(
        (10..=28).contains(&log_n),
        "--large-log {log_n}: give 10 to 28"
    );
    let n = 1usize << log_n;
    let mut ntt = Ntt::new();
    // One domain of scalars, shared by the NTTs and H, freed before the points are made.
    let buf = gpu.alloc::<u32>(n * FR_LIMBS)?;
    let mut out = ntts(gpu, &mut ntt, &buf, log_n, rng)?;
    out.extend(h_quotient(gpu, &mut ntt, &buf, log_n, rng)?);
    drop(buf);

    let (points, lattice) = gen_points::<G1Projective>(gpu, n, rng)?;
    let scalars = gpu.alloc::<u32>(n * FR_LIMBS)?;
    out.extend(msm_g1(gpu, &points, &lattice, &scalars, n, rng)?);
    out.extend(msm_g1_g2(gpu, &points, &lattice, &scalars, n, rng)?);
    out.extend(msm_partly_streamed(
        gpu, &points, &lattice, &scalars, n, rng,
    )?);
    Ok(out)
}

/// The MSM of a set partly resident, as a GPU too small for a 32 GiB partition's points runs
/// it: the first eighth of the n points summed where they are on the device, the rest copied
/// from host memory in four pieces behind the sums, with full-width scalars.
fn msm_partly_streamed(
    gpu: &Gpu,
    points: &DevBuf<u32>,
    lattice: &PointLattice<G1Projective>,
    scalars: &DevBuf<u32>,
    n: usize,
    rng: &mut ChaCha8Rng,
) -> Result<Checks> {
    let mut host = vec![G1Affine::identity(); n];
    gpu.download(points, 0, affine_as_limbs_mut(&mut host))?;
    gen_scalars(gpu, scalars, n, rng.gen(), 0)?;
    let want = lattice.msm(&download_scalars(gpu, scalars, n)?);
    let resident = ResidentPrefix {
        terms: n / 8,
        g1: points,
        g2: None,
    };
    let piece = (n - n / 8).div_ceil(4);
    let streamed = HostPoints {
        g1: &host,
        g2: None,
    };
    let (got, copied) = msm_streamed(gpu, streamed, Some(resident), scalars, n, piece)?;
    Ok(vec![(
        format!(
            "msm {n} full-width, {} points resident and the rest streamed in pieces of {piece} \
             ({:.1} GB at {:.1} GB/s, {:.0} ms not hidden)",
            n / 8,
            copied.bytes as f64 / 1e9,
            copied.gb_per_s(),
            copied.waited_ms
        ),
        got.g1 == want && got.g2.is_none(),
    )])
}

/// NTTs: forward, inverse, coset forward, coset inverse, each from the same random input,
/// made in `buf`: a few outputs against the input polynomial evaluated by Horner's rule, and
/// the inverse of the forward transform against the input.
fn ntts(
    gpu: &Gpu,
    ntt: &mut Ntt,
    buf: &DevBuf<u32>,
    log_n: u32,
    rng: &mut ChaCha8Rng,
) -> Result<Checks> {
    let n = 1usize << log_n;
    let mut out = Checks::new();
    let w = omega(log_n);
    let g = Fr::MULTIPLICATIVE_GENERATOR;
    let n_inv = Option::<Fr>::from(Fr::from(n as u64).invert())
        .ok_or_else(|| anyhow::anyhow!("n is not invertible"))?;
    let g_inv = Option::<Fr>::from(g.invert()).ok_or_else(|| anyhow::anyhow!("g = 0"))?;

    gen_scalars(gpu, buf, n, rng.gen(), 0)?;
    let x = download_scalars(gpu, buf, n)?;
    type Want = fn(Fr, Fr, Fr, Fr, usize) -> (Fr, Fr);
    // Per transform: where output k evaluates the input, and the factor applied after.
    let kinds: [(&str, Want); 4] = [
        ("forward", |w, _, _, _, k| {
            (w.pow_vartime([k as u64]), Fr::ONE)
        }),
        ("inverse", |w, _, _, ni, k| {
            (w.pow_vartime([k as u64]).invert().unwrap_or(Fr::ZERO), ni)
        }),
        ("coset forward", |w, g, _, _, k| {
            (g * w.pow_vartime([k as u64]), Fr::ONE)
        }),
        ("coset inverse", |w, _, gi, ni, k| {
            (
                w.pow_vartime([k as u64]).invert().unwrap_or(Fr::ZERO),
                ni * gi.pow_vartime([k as u64]),
            )
        }),
    ];
    for (name, want) in kinds {
        gpu.upload(buf, 0, scalars_as_limbs(&x))?;
        match name {
            "forward" => ntt.forward(gpu, buf, log_n)?,
            "inverse" => ntt.inverse(gpu, buf, log_n)?,
            "coset forward" => ntt.coset_forward(gpu, buf, log_n)?,
            _ => ntt.coset_inverse(gpu, buf, log_n)?,
        }
        let got = download_scalars(gpu, buf, n)?;
        let ks = positions(rng, n);
        let (zs, factors): (Vec<Fr>, Vec<Fr>) =
            ks.iter().map(|&k| want(w, g, g_inv, n_inv, k)).unzip();
        let evals = eval_poly(&x, &zs);
        let ok = ks
            .iter()
            .zip(evals.iter().zip(&factors))
            .all(|(&k, (e, f))| got[k] == *e * f);
        out.push((
            format!("ntt {name} 2^{log_n}: outputs {ks:?} = input polynomial evaluated"),
            ok,
        ));
        if name == "forward" {
            // And back: the inverse of this output is the input, element for element.
            ntt.inverse(gpu, buf, log_n)?;
            let back = download_scalars(gpu, buf, n)?;
            out.push((format!("ntt inverse(forward(x)) = x, 2^{log_n}"), back == x));
        }
    }
    Ok(out)
}

/// H over a satisfied system: a, b PoRep-like (made in `buf`), c = a·b, the last 3
/// constraints missing (zero padding, as for a real circuit); the quotient identity at a
/// random point.
fn h_quotient(
    gpu: &Gpu,
    ntt: &mut Ntt,
    buf: &DevBuf<u32>,
    log_n: u32,
    rng: &mut ChaCha8Rng,
) -> Result<Checks> {
    let n = 1usize << log_n;
    let used = n - 3;
    let dev = |seed: u64| -> Result<Vec<Fr>> {
        gen_scalars(gpu, buf, n, seed, 1)?;
        let mut v = download_scalars(gpu, buf, n)?;
        v[used..].fill(Fr::ZERO);
        Ok(v)
    };
    let a = dev(rng.gen())?;
    let b = dev(rng.gen())?;
    let c: Vec<Fr> = a.par_iter().zip(&b).map(|(x, y)| *x * y).collect();
    let up = |v: &[Fr]| -> Result<_> {
        let d = gpu.alloc::<u32>(n * FR_LIMBS)?;
        gpu.upload(&d, 0, scalars_as_limbs(v))?;
        Ok(d)
    };
    let (da, db, dc) = (up(&a)?, up(&b)?, up(&c)?);
    ntt.h_quotient(gpu, &da, &db, &dc, log_n)?;
    drop((db, dc));
    let h = download_scalars(gpu, &da, n)?;
    drop(da);
    let z = Fr::random(&mut *rng);
    let abc = interpolate_at(&[&a, &b, &c], log_n, z)?;
    let hz = eval_poly(&h, &[z])[0];
    let zn = z.pow_vartime([n as u64]) - Fr::ONE;
    Ok(vec![(
        format!("H 2^{log_n}: A(z)·B(z) − C(z) = H(z)·(z^n − 1) at a random z, deg H < n − 1"),
        abc[0] * abc[1] - abc[2] == hz * zn && h[n - 1] == Fr::ZERO,
    )])
}

/// MSMs over the n G1 points of known structure: the full size and an odd size below it,
/// with full-width and PoRep-like scalars (made in `scalars`).
fn msm_g1(
    gpu: &Gpu,
    points: &DevBuf<u32>,
    lattice: &PointLattice<G1Projective>,
    scalars: &DevBuf<u32>,
    n: usize,
    rng: &mut ChaCha8Rng,
) -> Result<Checks> {
    let mut out = Checks::new();
    for (kind, mode) in [("full-width", 0u32), ("porep-like", 1)] {
        gen_scalars(gpu, scalars, n, rng.gen(), mode)?;
        let host = download_scalars(gpu, scalars, n)?;
        for len in [n, n - 5] {
            let got = msm(gpu, points, scalars, len)?;
            out.push((
                format!("msm {len} {kind} (points of known structure)"),
                got == lattice.msm(&host[..len]),
            ));
        }
    }
    Ok(out)
}

/// The B query's MSM, G1 and G2 over one sort, at a quarter of the size (a PoRep partition's
/// B query is a quarter of its domain: 2^25 at 2^27), over the first G1 points and as many G2
/// points of known structure.
fn msm_g1_g2(
    gpu: &Gpu,
    points: &DevBuf<u32>,
    lattice: &PointLattice<G1Projective>,
    scalars: &DevBuf<u32>,
    n: usize,
    rng: &mut ChaCha8Rng,
) -> Result<Checks> {
    let mut out = Checks::new();
    let n2 = n / 4;
    let (points2, lattice2) = gen_points::<G2Projective>(gpu, n2, rng)?;
    for (kind, mode) in [("full-width", 0u32), ("porep-like", 1)] {
        gen_scalars(gpu, scalars, n2, rng.gen(), mode)?;
        let host = download_scalars(gpu, scalars, n2)?;
        for len in [n2, n2 - 5] {
            let got = msm_shared(gpu, points, Some(&points2), scalars, len)?;
            out.push((
                format!("msm g1+g2 {len} {kind} (points of known structure)"),
                got.g1 == lattice.msm(&host[..len]) && got.g2 == Some(lattice2.msm(&host[..len])),
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::groth16::ntt as cpu_ntt;
    use crate::groth16::Evaluations;
    use rand::SeedableRng;

    #[test]
    fn eval_poly_is_the_forward_transform() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // More than one piece, and a partial last one.
        let n = PIECE * 2 + 17;
        let coeffs: Vec<Fr> = (0..n).map(|_| Fr::random(&mut rng)).collect();
        let z = Fr::random(&mut rng);
        let mut naive = Fr::ZERO;
        for c in coeffs.iter().rev() {
            naive = naive * z + c;
        }
        assert_eq!(eval_poly(&coeffs, &[z, Fr::ONE])[0], naive);
        assert_eq!(eval_poly(&coeffs, &[Fr::ONE])[0], coeffs.iter().sum::<Fr>());

        let log_n = 10;
        let x: Vec<Fr> = (0..1 << log_n).map(|_| Fr::random(&mut rng)).collect();
        let mut want = x.clone();
        cpu_ntt::ntt(&mut want, omega(log_n));
        let zs: Vec<Fr> = [0u64, 5, 1023]
            .iter()
            .map(|&k| omega(log_n).pow_vartime([k]))
            .collect();
        let got = eval_poly(&x, &zs);
        assert_eq!(got, vec![want[0], want[5], want[1023]]);
    }

    #[test]
    fn interpolation_and_the_h_identity() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let log_n = 17; // two pieces
        let n = 1usize << log_n;
        // A polynomial of degree < n, its evaluations on the domain, its value at z.
        let coeffs: Vec<Fr> = (0..n).map(|_| Fr::random(&mut rng)).collect();
        let mut evals = coeffs.clone();
        cpu_ntt::ntt(&mut evals, omega(log_n));
        let z = Fr::random(&mut rng);
        let got = interpolate_at(&[&evals], log_n, z).expect("interpolate");
        assert_eq!(got[0], eval_poly(&coeffs, &[z])[0]);
        assert!(interpolate_at(&[&evals], log_n, omega(log_n)).is_err());

        // The identity the H check relies on, with the CPU backend's H.
        let small = 10;
        let m = 1usize << small;
        let a: Vec<Fr> = (0..m).map(|_| Fr::random(&mut rng)).collect();
        let b: Vec<Fr> = (0..m).map(|_| Fr::random(&mut rng)).collect();
        let c: Vec<Fr> = a.iter().zip(&b).map(|(x, y)| *x * y).collect();
        let mut h = cpu_ntt::h_coefficients(Evaluations {
            pins: Default::default(),
            a: a.clone(),
            b: b.clone(),
            c: c.clone(),
        })
        .expect("h");
        h.resize(m, Fr::ZERO);
        let abc = interpolate_at(&[&a, &b, &c], small, z).expect("interpolate");
        let zn = z.pow_vartime([m as u64]) - Fr::ONE;
        assert_eq!(abc[0] * abc[1] - abc[2], eval_poly(&h, &[z])[0] * zn);
        // A wrong H fails it.
        h[3] += Fr::ONE;
        assert_ne!(abc[0] * abc[1] - abc[2], eval_poly(&h, &[z])[0] * zn);
    }
}
