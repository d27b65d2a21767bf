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


#if defined(C2Q_LAZY_CHAINS)
// The lazy forms (C2Q_LAZY=1, field.cuh): both coordinates below 2p in and out, bounds as
// there. The group law in G2 uses these; the functions above stay fully reduced.

DEV Fp2 fp2_add_lazy(const Fp2& a, const Fp2& b) {
    return {fp_add_lazy(a.c0, b.c0), fp_add_lazy(a.c1, b.c1)};
}

DEV Fp2 fp2_sub_lazy(const Fp2& a, const Fp2& b) {
    return {fp_sub_lazy(a.c0, b.c0), fp_sub_lazy(a.c1, b.c1)};
}

DEV Fp2 fp2_neg_lazy(const Fp2& a) {
    return {fp_neg_lazy(a.c0), fp_neg_lazy(a.c1)};
}

DEV Fp2 fp2_canon(const Fp2& a) {
    return {fp_canon(a.c0), fp_canon(a.c1)};
}

DEV bool fp2_is_zero_lazy(const Fp2& a) {
    return fp_is_zero_lazy(a.c0) && fp_is_zero_lazy(a.c1);
}

DEV bool fp2_eq_lazy(const Fp2& a, const Fp2& b) {
    return fp2_is_zero_lazy(fp2_sub_lazy(a, b));
}

// 4p², word i: added to a0·b0 − a1·b1 (which is above −4p²) to keep it non-negative.
DEV constexpr u32 fp_4pp(int i) {
    constexpr u32 m[24] = {0x71c638e4, 0x9aa80000, 0xd8e0baac, 0xf3b5ac75, 0x8844f3f5,
                           0x58b0ce0d, 0xf9c6dd0c, 0x9afe47b4, 0xc2468125, 0xa4ba16a1,
                           0x186171ec, 0x75a18672, 0x25e3bc04, 0xd4c524cc, 0x5b7729bb,
                           0x4298b3f4, 0xd27a2f41, 0x9b967924, 0x39c11ad1, 0x8b724394,
                           0x88bc97a7, 0x2f49e3aa, 0xe30d7f1d, 0x0a90de92};
    return m[i];
}

// Karatsuba as in fp2_mul, with the three 24-word products left unreduced and each coordinate
// reduced once (three products and two reductions instead of three of each); a, b < 2p:
//   c1 = (a0 + a1)(b0 + b1) − a0·b0 − a1·b1 = a0·b1 + a1·b0: the subtractions never go below
//        zero, and the value is below 2·(2p)² = 8p² < p·R (the sums, below 4p, are not reduced;
//        their product, below 16p², fits 24 words);
//   c0 = a0·b0 − a1·b1 + 4p²: in (0, 8p²), since each product is below 4p² (the difference
//        may wrap around 2^768 on the way; the sum with 4p² is exact).
// Both reductions end below 2p.
//
// In the order that keeps the fewest words live: c0 is reduced before the third product.
//
// With C2Q_MUL_SUB_SPLIT=1 (the default, with the split product) each coordinate is instead one
// sum of two products in split rows (fe_mul_sum_split, K = 2): four products' rows and two
// reductions with their carries fused, against three wide products' separate carry additions:
//   c0 = a0·b0 + a1·(2p − b1) = fp_mul_sub_lazy(a0, b0, a1, b1), below 8p² < p·R;
//   c1 = a0·b1 + a1·b0, below 8p².
// c1 is the same T as above, so the same value; c0's T differs from the Karatsuba one by a
// multiple of p, so it is the same element, possibly the other representative below 2p.
DEV Fp2 fp2_mul_lazy_inline(const Fp2& a, const Fp2& b) {
#if C2Q_MUL_SPLIT && C2Q_MUL_SUB_SPLIT
    const Fp x[2] = {a.c0, a.c1}, y[2] = {b.c1, b.c0};
    Fp2 r;
    r.c0 = fp_mul_sub_lazy_inline(a.c0, b.c0, a.c1, b.c1);
    r.c1 = fe_mul_sum_split<FpTag, false, 2>(x, y);
    return r;
#else
    const Fp sa = fp_add_raw(a.c0, a.c1), sb = fp_add_raw(b.c0, b.c1);
    u32 t0[24], t1[24], s[24], t2[24];
    fe_mul_raw<FpTag>(t0, a.c0, b.c0);
    fe_mul_raw<FpTag>(t1, a.c1, b.c1);
    // s = a0·b0 + a1·b1 for c1; t0 = a0·b0 − a1·b1 + 4p² for c0.
    wide_sum(s, t0, t1);
    wide_sub(t0, t1);
    PTX_ADD_CC(t0[0], t0[0], fp_4pp(0));
#pragma unroll
    for (int k = 1; k < 23; k++) PTX_ADDC_CC(t0[k], t0[k], fp_4pp(k));
    PTX_ADDC(t0[23], t0[23], fp_4pp(23));
    Fp2 r;
    r.c0 = fe_redc_wide<FpTag, false>(t0);
    fe_mul_raw<FpTag>(t2, sa, sb);
    wide_sub(t2, s);
    r.c1 = fe_redc_wide<FpTag, false>(t2);
    return r;
#endif
}

#if defined(__CUDACC__) && !C2Q_FP_INLINE
// One shared out-of-line copy, as fp_mul_call: the G2 group law has a dozen Fp2 products.
__device__ __noinline__ Fp2 fp2_mul_lazy_call(Fp2 a, Fp2 b) {
    return fp2_mul_lazy_inline(a, b);
}

DEV Fp2 fp2_mul_lazy(const Fp2& a, const Fp2& b) {
    return fp2_mul_lazy_call(a, b);
}
#else
DEV Fp2 fp2_mul_lazy(const Fp2& a, const Fp2& b) {
    return fp2_mul_lazy_inline(a, b);
}
#endif

// (a0 + a1)(a0 − a1) + 2·a0·a1·u as in fp2_sqr, the sum unreduced (below 4p, the product's
// first operand): two lazy Fp products.
DEV Fp2 fp2_sqr_lazy(const Fp2& a) {
    Fp2 r;
    r.c0 = fp_mul_lazy(fp_add_raw(a.c0, a.c1), fp_sub_lazy(a.c0, a.c1));
    Fp t = fp_mul_lazy(a.c0, a.c1);
    r.c1 = fp_add_lazy(t, t);
    return r;
}
#endif

#endif
