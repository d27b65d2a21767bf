//! Curve helpers that blstrs does not expose efficiently.

use blst::{
    blst_p1, blst_p1_affine, blst_p1s_to_affine, blst_p2, blst_p2_affine, blst_p2s_to_affine,
};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};
use group::Curve;

/// Projective → affine for many points with one field inversion per batch (blst's), instead
/// of `group`'s default of one inversion per point, which is ~100× slower in bulk.
pub trait BatchAffine: Curve {
    fn batch_affine(points: &[Self], out: &mut [Self::AffineRepr]);
}

macro_rules! batch_affine_for {
    ($proj:ty, $affine:ty, $blst_proj:ty, $blst_affine:ty, $f:ident) => {
        impl BatchAffine for $proj {
            fn batch_affine(points: &[Self], out: &mut [$affine]) {
                assert_eq!(points.len(), out.len(), "batch_affine: length mismatch");
                if points.is_empty() {
                    return;
                }
                // A pointer list of [first, null] tells blst the points are contiguous.
                let list: [*const $blst_proj; 2] =
                    [points.as_ptr() as *const $blst_proj, std::ptr::null()];
                // SAFETY: blstrs' points are `repr(transparent)` wrappers of blst's; `out` has
                // room for `points.len()` affine points; blst maps infinity to infinity.
                unsafe {
                    $f(
                        out.as_mut_ptr() as *mut $blst_affine,
                        list.as_ptr(),
                        points.len(),
                    );
                }
            }
        }
    };
}

batch_affine_for!(
    G1Projective,
    G1Affine,
    blst_p1,
    blst_p1_affine,
    blst_p1s_to_affine
);
batch_affine_for!(
    G2Projective,
    G2Affine,
    blst_p2,
    blst_p2_affine,
    blst_p2s_to_affine
);

/// Affine coordinates, for arithmetic that batches field inversions across many points.
pub trait AffineCoords: Copy + Send + Sync {
    type Base: ff::Field;
    /// `(x, y)`, or `None` for the point at infinity.
    fn coords(&self) -> Option<(Self::Base, Self::Base)>;
    fn from_coords(x: Self::Base, y: Self::Base) -> Self;
}

impl AffineCoords for G1Affine {
    type Base = blstrs::Fp;
    fn coords(&self) -> Option<(blstrs::Fp, blstrs::Fp)> {
        use group::prime::PrimeCurveAffine;
        (!bool::from(self.is_identity())).then(|| (self.x(), self.y()))
    }
    fn from_coords(x: blstrs::Fp, y: blstrs::Fp) -> Self {
        G1Affine::from_raw_unchecked(x, y, false)
    }
}

impl AffineCoords for G2Affine {
    type Base = blstrs::Fp2;
    fn coords(&self) -> Option<(blstrs::Fp2, blstrs::Fp2)> {
        use group::prime::PrimeCurveAffine;
        (!bool::from(self.is_identity())).then(|| (self.x(), self.y()))
    }
    fn from_coords(x: blstrs::Fp2, y: blstrs::Fp2) -> Self {
        G2Affine::from_raw_unchecked(x, y, false)
    }
}

/// Add `addends[i]` to `acc[i]` for every i, in affine coordinates, with one field inversion
/// for the whole batch (Montgomery's trick): about six multiplications per addition instead
/// of the dozen-plus of a mixed projective addition. `None` is the point at infinity.
/// Doublings and inverse pairs (equal x) fall back to projective arithmetic.
pub fn batch_add_affine<A>(acc: &mut [Option<(A::Base, A::Base)>], addends: &[Option<A>])
where
    A: AffineCoords + group::prime::PrimeCurveAffine,
    A::Curve: for<'a> std::ops::AddAssign<&'a A>,
{
    use ff::Field;
    let mut denominators: Vec<A::Base> = Vec::with_capacity(acc.len());
    let mut lanes: Vec<usize> = Vec::with_capacity(acc.len());
    for (i, (a, p)) in acc.iter_mut().zip(addends).enumerate() {
        let Some(p) = p else { continue };
        let Some((x2, y2)) = p.coords() else { continue };
        match a {
            None => *a = Some((x2, y2)),
            Some((x1, y1)) => {
                if *x1 == x2 {
                    // Doubling or P + (−P): rare; do it the slow, general way.
                    let mut sum = A::from_coords(*x1, *y1).to_curve();
                    sum += p;
                    *a = group::Curve::to_affine(&sum).coords();
                } else {
                    denominators.push(x2 - *x1);
                    lanes.push(i);
                }
            }
        }
    }
    if lanes.is_empty() {
        return;
    }
    // prefix[i] = d_0 · … · d_i
    let mut prefix = Vec::with_capacity(denominators.len());
    let mut running = A::Base::ONE;
    for d in &denominators {
        running *= d;
        prefix.push(running);
    }
    let mut inv = running.invert().unwrap_or(A::Base::ZERO);
    for k in (0..lanes.len()).rev() {
        let d_inv = if k == 0 { inv } else { inv * prefix[k - 1] };
        inv *= denominators[k];
        let i = lanes[k];
        let (x2, y2) = addends[i]
            .and_then(|p| p.coords())
            .unwrap_or((A::Base::ZERO, A::Base::ZERO));
        if let Some((x1, y1)) = acc[i].as_mut() {
            let lambda = (y2 - *y1) * d_inv;
            let x3 = lambda.square() - *x1 - x2;
            let y3 = lambda * (*x1 - x3) - *y1;
            *x1 = x3;
            *y1 = y3;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::Group;
    use rand::SeedableRng;

    #[test]
    fn batch_affine_matches_one_by_one_including_infinity() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut points: Vec<G1Projective> =
            (0..50).map(|_| G1Projective::random(&mut rng)).collect();
        points[0] = G1Projective::identity();
        points[17] = G1Projective::identity();
        let mut out = vec![G1Affine::default(); points.len()];
        G1Projective::batch_affine(&points, &mut out);
        for (p, a) in points.iter().zip(&out) {
            assert_eq!(p.to_affine(), *a);
        }
        let g2: Vec<G2Projective> = (0..9).map(|_| G2Projective::random(&mut rng)).collect();
        let mut out2 = vec![G2Affine::default(); g2.len()];
        G2Projective::batch_affine(&g2, &mut out2);
        for (p, a) in g2.iter().zip(&out2) {
            assert_eq!(p.to_affine(), *a);
        }
    }
}
