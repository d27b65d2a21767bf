//! Host values as the kernels see them: blstrs keeps `Scalar` (Fr) and `Fp` in Montgomery form
//! as little-endian u64 words, exactly the kernels' layout, so slices are reinterpreted as u32
//! limbs without copying (a 2^27-point SRS is 12 GiB; copying it would double its footprint).
//!
//! The layouts are blst's (`blst_fr` = 4 words, `blst_fp` = 6 words, `blst_fp2` = c0, c1,
//! `blst_p1_affine` / `blst_p2_affine` = x, y, `blst_p1` / `blst_p2` = x, y, z), wrapped
//! `#[repr(transparent)]` by blstrs. The sizes are checked at compile time and the values at
//! run time by `layout_self_check`.

use anyhow::{ensure, Result};
use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{prime::PrimeCurveAffine, Group};

pub const FR_LIMBS: usize = 8;
pub const FP_LIMBS: usize = 12;
pub const AFFINE_LIMBS: usize = 24;
pub const JACOBIAN_LIMBS: usize = 36;
/// A G2 affine point: x, y in Fp2 (c0, c1 each), 192 bytes.
pub const G2_AFFINE_LIMBS: usize = 48;
pub const G2_JACOBIAN_LIMBS: usize = 72;

const _: () = assert!(std::mem::size_of::<Scalar>() == 32);
const _: () = assert!(std::mem::size_of::<Fp>() == 48);
const _: () = assert!(std::mem::size_of::<G1Affine>() == 96);
const _: () = assert!(std::mem::size_of::<G1Projective>() == 144);
const _: () = assert!(std::mem::align_of::<Scalar>() >= 4);
const _: () = assert!(std::mem::align_of::<G1Affine>() >= 4);
const _: () = assert!(std::mem::size_of::<Fp2>() == 96);
const _: () = assert!(std::mem::size_of::<G2Affine>() == 192);
const _: () = assert!(std::mem::size_of::<G2Projective>() == 288);
const _: () = assert!(std::mem::align_of::<G2Affine>() >= 4);

/// Affine points as the kernels read them, straight from memory: G1 (`AFFINE_LIMBS`) and G2
/// (`G2_AFFINE_LIMBS`). Implemented for blstrs' two affine types only.
pub trait DeviceAffine: Copy + private::Sealed {
    /// Limbs of one point.
    const LIMBS: usize;
}

impl DeviceAffine for G1Affine {
    const LIMBS: usize = AFFINE_LIMBS;
}

impl DeviceAffine for G2Affine {
    const LIMBS: usize = G2_AFFINE_LIMBS;
}

mod private {
    pub trait Sealed {}
    impl Sealed for blstrs::G1Affine {}
    impl Sealed for blstrs::G2Affine {}
}

/// Scalars as limbs (Montgomery form, 8 per scalar).
pub fn scalars_as_limbs(s: &[Scalar]) -> &[u32] {
    // SAFETY: Scalar is repr(transparent) over blst_fr { l: [u64; 4] } (size asserted above):
    // plain integers with no padding, and u32 has a weaker alignment than u64. Little-endian
    // hosts only (checked in `layout_self_check`).
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u32, s.len() * FR_LIMBS) }
}

/// Scalars as writable limbs, for downloads straight into a `Vec<Scalar>`.
pub fn scalars_as_limbs_mut(s: &mut [Scalar]) -> &mut [u32] {
    // SAFETY: as in `scalars_as_limbs`; the kernels only write reduced Montgomery values.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut u32, s.len() * FR_LIMBS) }
}

/// Affine points as limbs (x then y, Montgomery form; infinity is all zero).
pub fn affine_as_limbs(p: &[G1Affine]) -> &[u32] {
    points_as_limbs(p)
}

/// G1 or G2 affine points as limbs (x then y, Montgomery form; infinity is all zero).
pub fn points_as_limbs<P: DeviceAffine>(p: &[P]) -> &[u32] {
    // SAFETY: P is G1Affine or G2Affine (the trait is sealed), repr(transparent) over
    // blst_p1_affine / blst_p2_affine: 12 or 24 u64 words with no padding, P::LIMBS u32 limbs
    // (sizes asserted above).
    unsafe { std::slice::from_raw_parts(p.as_ptr() as *const u32, p.len() * P::LIMBS) }
}

/// Affine points as writable limbs, for downloads of points the kernels made.
pub fn affine_as_limbs_mut(p: &mut [G1Affine]) -> &mut [u32] {
    points_as_limbs_mut(p)
}

/// G1 or G2 affine points as writable limbs, for downloads of points the kernels made.
pub fn points_as_limbs_mut<P: DeviceAffine>(p: &mut [P]) -> &mut [u32] {
    // SAFETY: as in `points_as_limbs`; the kernels only write points on the curve (or zero).
    unsafe { std::slice::from_raw_parts_mut(p.as_mut_ptr() as *mut u32, p.len() * P::LIMBS) }
}

pub fn scalar_from_limbs(l: &[u32]) -> Scalar {
    let mut out = Scalar::ZERO;
    // SAFETY: see `scalars_as_limbs`; writing 8 limbs produced by the kernels (reduced values).
    let dst = unsafe { std::slice::from_raw_parts_mut(&mut out as *mut Scalar as *mut u32, 8) };
    dst.copy_from_slice(&l[..FR_LIMBS]);
    out
}

fn fp_from_limbs(l: &[u32]) -> Fp {
    let mut w = [0u64; 6];
    for (i, w) in w.iter_mut().enumerate() {
        *w = l[2 * i] as u64 | (l[2 * i + 1] as u64) << 32;
    }
    Fp::from_raw_unchecked(w)
}

fn fp2_from_limbs(l: &[u32]) -> Fp2 {
    Fp2::new(fp_from_limbs(&l[0..12]), fp_from_limbs(&l[12..24]))
}

/// A G2 Jacobian point from the kernels (x, y, z in Fp2; z = 0 is infinity).
pub fn g2_jacobian_from_limbs(l: &[u32]) -> G2Projective {
    let x = fp2_from_limbs(&l[0..24]);
    let y = fp2_from_limbs(&l[24..48]);
    let z = fp2_from_limbs(&l[48..72]);
    if bool::from(z.is_zero()) {
        return G2Projective::identity();
    }
    G2Projective::from_raw_unchecked(x, y, z)
}

/// A Jacobian point from the kernels (x, y, z; z = 0 is infinity).
pub fn jacobian_from_limbs(l: &[u32]) -> G1Projective {
    let x = fp_from_limbs(&l[0..12]);
    let y = fp_from_limbs(&l[12..24]);
    let z = fp_from_limbs(&l[24..36]);
    if bool::from(z.is_zero()) {
        return G1Projective::identity();
    }
    G1Projective::from_raw_unchecked(x, y, z)
}

/// Checks the layout assumptions on real values: 1 in Montgomery form is R mod r, and the
/// generator's coordinates read back through the limb view.
pub fn layout_self_check() -> Result<()> {
    ensure!(
        cfg!(target_endian = "little"),
        "the GPU backend needs a little-endian host"
    );
    let one = Scalar::ONE;
    let l = scalars_as_limbs(std::slice::from_ref(&one));
    ensure!(
        l == [
            0xfffffffe, 0x00000001, 0x00034802, 0x5884b7fa, 0xecbc4ff5, 0x998c4fef, 0xacc5056f,
            0x1824b159
        ],
        "blstrs Scalar is not in the expected Montgomery layout"
    );
    let g = G1Affine::generator();
    let gl = affine_as_limbs(std::slice::from_ref(&g));
    let mut back = gl.to_vec();
    back.extend_from_slice(&[
        0x0002fffd, 0x76090000, 0xc40c0002, 0xebf4000b, 0x53c758ba, 0x5f489857, 0x70525745,
        0x77ce5853, 0xa256ec6d, 0x5c071a97, 0xfa80e493, 0x15f65ec3,
    ]);
    ensure!(
        jacobian_from_limbs(&back) == G1Projective::generator(),
        "blstrs G1 points are not in the expected layout"
    );
    let inf = G1Affine::identity();
    ensure!(
        affine_as_limbs(std::slice::from_ref(&inf))
            .iter()
            .all(|&w| w == 0),
        "blstrs G1 infinity is not all zero"
    );
    // G2: the generator read back through the limb view with z = 1 (Fp2 one: c0 = R, c1 = 0).
    let g2 = G2Affine::generator();
    let mut back = points_as_limbs(std::slice::from_ref(&g2)).to_vec();
    back.extend_from_slice(&[
        0x0002fffd, 0x76090000, 0xc40c0002, 0xebf4000b, 0x53c758ba, 0x5f489857, 0x70525745,
        0x77ce5853, 0xa256ec6d, 0x5c071a97, 0xfa80e493, 0x15f65ec3,
    ]);
    back.extend_from_slice(&[0; 12]);
    ensure!(
        g2_jacobian_from_limbs(&back) == G2Projective::generator(),
        "blstrs G2 points are not in the expected layout"
    );
    let inf2 = G2Affine::identity();
    ensure!(
        points_as_limbs(std::slice::from_ref(&inf2))
            .iter()
            .all(|&w| w == 0),
        "blstrs G2 infinity is not all zero"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_kernels() {
        layout_self_check().unwrap();
    }

    #[test]
    fn scalar_roundtrip() {
        let s = Scalar::from(123456789u64);
        let l = scalars_as_limbs(std::slice::from_ref(&s)).to_vec();
        assert_eq!(scalar_from_limbs(&l), s);
    }
}
