// Fp2 = Fp[u]/(u² + 1), the field of G2's coordinates, in blst's layout: c0 then c1, each an
// Fp of 12 limbs in Montgomery form (blst_fp2, wrapped by blstrs' Fp2), so that G2 points are
// copied to the device as they are.
//
// Every Fp product here goes through fe_mul<FpTag> (on the GPU the shared out-of-line
// fp_mul_call, see field.cuh): an Fp2 product is three of them (Karatsuba), a square two.
#ifndef C2Q_FP2_CUH
#define C2Q_FP2_CUH

#include "field.cuh"

struct Fp2 {
    Fp c0, c1;
};

DEV Fp2 fp2_zero() {
    Fp2 r;
    r.c0 = fe_zero<FpTag>();
    r.c1 = fe_zero<FpTag>();
    return r;
}

DEV Fp2 fp2_one() {
    Fp2 r;
    r.c0 = fe_one<FpTag>();
    r.c1 = fe_zero<FpTag>();
    return r;
}

DEV bool fp2_is_zero(const Fp2& a) {
    return fe_is_zero<FpTag>(a.c0) && fe_is_zero<FpTag>(a.c1);
}

DEV bool fp2_eq(const Fp2& a, const Fp2& b) {
    return fe_eq<FpTag>(a.c0, b.c0) && fe_eq<FpTag>(a.c1, b.c1);
}

DEV Fp2 fp2_add(const Fp2& a, const Fp2& b) {
    Fp2 r;
    r.c0 = fe_add<FpTag>(a.c0, b.c0);
    r.c1 = fe_add<FpTag>(a.c1, b.c1);
    return r;
}

DEV Fp2 fp2_sub(const Fp2& a, const Fp2& b) {
    Fp2 r;
    r.c0 = fe_sub<FpTag>(a.c0, b.c0);
    r.c1 = fe_sub<FpTag>(a.c1, b.c1);
    return r;
}

DEV Fp2 fp2_dbl(const Fp2& a) {
    return fp2_add(a, a);
}

DEV Fp2 fp2_neg(const Fp2& a) {
    Fp2 r;
    r.c0 = fe_neg<FpTag>(a.c0);
    r.c1 = fe_neg<FpTag>(a.c1);
    return r;
}

// (a0 + a1·u)(b0 + b1·u) = (a0·b0 − a1·b1) + ((a0 + a1)(b0 + b1) − a0·b0 − a1·b1)·u:
// three Fp products (Karatsuba) instead of four. The sums are reduced (fe_add), as the
// Montgomery product expects operands below p.
DEV Fp2 fp2_mul(const Fp2& a, const Fp2& b) {
    Fp t0 = fe_mul<FpTag>(a.c0, b.c0);
    Fp t1 = fe_mul<FpTag>(a.c1, b.c1);
    Fp t2 = fe_mul<FpTag>(fe_add<FpTag>(a.c0, a.c1), fe_add<FpTag>(b.c0, b.c1));
    Fp2 r;
    r.c0 = fe_sub<FpTag>(t0, t1);
    r.c1 = fe_sub<FpTag>(fe_sub<FpTag>(t2, t0), t1);
    return r;
}

// (a0 + a1·u)² = (a0 + a1)(a0 − a1) + 2·a0·a1·u: two Fp products.
DEV Fp2 fp2_sqr(const Fp2& a) {
    Fp2 r;
    r.c0 = fe_mul<FpTag>(fe_add<FpTag>(a.c0, a.c1), fe_sub<FpTag>(a.c0, a.c1));
    Fp t = fe_mul<FpTag>(a.c0, a.c1);
    r.c1 = fe_dbl<FpTag>(t);
    return r;
}

// 1/(a0 + a1·u) = (a0 − a1·u)/(a0² + a1²), one Fp inversion (0 maps to 0). Off the hot paths
// (point generation).
DEV Fp2 fp2_inv(const Fp2& a) {
    Fp norm = fe_add<FpTag>(fe_sqr<FpTag>(a.c0), fe_sqr<FpTag>(a.c1));
    Fp inv = fp_inv(norm);
    Fp2 r;
    r.c0 = fe_mul<FpTag>(a.c0, inv);
    r.c1 = fe_neg<FpTag>(fe_mul<FpTag>(a.c1, inv));
    return r;
}

#endif
