// G1 of BLS12-381 (y^2 = x^3 + 4 over Fp).
//
// Inputs are affine points exactly as blst stores them (x, y in Montgomery form, 96 bytes); the
// point at infinity is (0, 0), which is not on the curve, so it cannot be mistaken for a point.
//
// Accumulators use extended Jacobian "XYZZ" coordinates (x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2),
// the cheapest for adding affine points (madd-2008-s: 8M + 2S). Infinity is ZZ = 0.
#ifndef C2Q_G1_CUH
#define C2Q_G1_CUH

#include "field.cuh"

// The group operations are inlined, but each field product inside them is one shared,
// out-of-line function (fp_mul_call in field.cuh): inlining the products as well would multiply
// the code size and make ptxas take minutes, which a GPU machine pays at every cold start.
// Everything passes by value so that operands stay in registers across those calls.
#if defined(__CUDACC__)
#define EC_FN __device__ __forceinline__
#else
#define EC_FN inline
#endif

struct Affine {
    Fp x, y;
};

struct Xyzz {
    Fp x, y, zz, zzz;
};

// Jacobian (X/Z^2, Y/Z^3), blst's `blst_p1` layout: what the host receives.
struct Jacobian {
    Fp x, y, z;
};

DEV bool affine_is_inf(const Affine& p) {
    return fe_is_zero<FpTag>(p.x) && fe_is_zero<FpTag>(p.y);
}

DEV Xyzz xyzz_inf() {
    Xyzz r;
    r.x = fe_zero<FpTag>();
    r.y = fe_zero<FpTag>();
    r.zz = fe_zero<FpTag>();
    r.zzz = fe_zero<FpTag>();
    return r;
}

DEV bool xyzz_is_inf(const Xyzz& p) {
    return fe_is_zero<FpTag>(p.zz);
}

DEV Xyzz xyzz_from_affine(const Affine& p) {
    if (affine_is_inf(p)) return xyzz_inf();
    Xyzz r;
    r.x = p.x;
    r.y = p.y;
    r.zz = fe_one<FpTag>();
    r.zzz = r.zz;
    return r;
}

DEV Xyzz xyzz_neg(const Xyzz& p) {
    Xyzz r = p;
    r.y = fe_neg<FpTag>(p.y);
    return r;
}

// dbl-2008-s-1 (a = 0).
EC_FN Xyzz xyzz_dbl(Xyzz p) {
    if (xyzz_is_inf(p)) return p;
    Fp u = fe_dbl<FpTag>(p.y);
    Fp v = fe_sqr<FpTag>(u);
    Fp w = fe_mul<FpTag>(u, v);
    Fp s = fe_mul<FpTag>(p.x, v);
    Fp x2 = fe_sqr<FpTag>(p.x);
    Fp m = fe_add<FpTag>(fe_dbl<FpTag>(x2), x2);
    Xyzz r;
    r.x = fe_sub<FpTag>(fe_sqr<FpTag>(m), fe_dbl<FpTag>(s));
    r.y = fe_sub<FpTag>(fe_mul<FpTag>(m, fe_sub<FpTag>(s, r.x)), fe_mul<FpTag>(w, p.y));
    r.zz = fe_mul<FpTag>(v, p.zz);
    r.zzz = fe_mul<FpTag>(w, p.zzz);
    return r;
}

// mdbl-2008-s-1: doubling an affine point (ZZ = ZZZ = 1).
EC_FN Xyzz xyzz_dbl_affine(Fp x, Fp y) {
    Fp u = fe_dbl<FpTag>(y);
    Fp v = fe_sqr<FpTag>(u);
    Fp w = fe_mul<FpTag>(u, v);
    Fp s = fe_mul<FpTag>(x, v);
    Fp x2 = fe_sqr<FpTag>(x);
    Fp m = fe_add<FpTag>(fe_dbl<FpTag>(x2), x2);
    Xyzz r;
    r.x = fe_sub<FpTag>(fe_sqr<FpTag>(m), fe_dbl<FpTag>(s));
    r.y = fe_sub<FpTag>(fe_mul<FpTag>(m, fe_sub<FpTag>(s, r.x)), fe_mul<FpTag>(w, y));
    r.zz = v;
    r.zzz = w;
    return r;
}

// p + (x, y) for an affine point that is not infinity (madd-2008-s), with the equal and
// opposite cases handled: bucket sums meet them whenever a point repeats.
EC_FN Xyzz xyzz_add_affine(Xyzz p, Fp x, Fp y) {
    if (xyzz_is_inf(p)) {
        Xyzz r;
        r.x = x;
        r.y = y;
        r.zz = fe_one<FpTag>();
        r.zzz = r.zz;
        return r;
    }
    Fp u2 = fe_mul<FpTag>(x, p.zz);
    Fp s2 = fe_mul<FpTag>(y, p.zzz);
    Fp pp_ = fe_sub<FpTag>(u2, p.x);
    Fp rr = fe_sub<FpTag>(s2, p.y);
    if (fe_is_zero<FpTag>(pp_)) {
        if (fe_is_zero<FpTag>(rr)) return xyzz_dbl_affine(x, y);
        return xyzz_inf();
    }
    Fp pp = fe_sqr<FpTag>(pp_);
    Fp ppp = fe_mul<FpTag>(pp_, pp);
    Fp q = fe_mul<FpTag>(p.x, pp);
    Xyzz r;
    r.x = fe_sub<FpTag>(fe_sub<FpTag>(fe_sqr<FpTag>(rr), ppp), fe_dbl<FpTag>(q));
    r.y = fe_sub<FpTag>(fe_mul<FpTag>(rr, fe_sub<FpTag>(q, r.x)), fe_mul<FpTag>(p.y, ppp));
    r.zz = fe_mul<FpTag>(p.zz, pp);
    r.zzz = fe_mul<FpTag>(p.zzz, ppp);
    return r;
}

// Adds an affine point that may be infinity, negated when `neg`.
DEV Xyzz xyzz_add_affine_any(const Xyzz& p, const Affine& a, bool neg) {
    if (affine_is_inf(a)) return p;
    Fp y = neg ? fe_neg<FpTag>(a.y) : a.y;
    return xyzz_add_affine(p, a.x, y);
}

// add-2008-s: general XYZZ addition.
EC_FN Xyzz xyzz_add(Xyzz p, Xyzz q) {
    if (xyzz_is_inf(p)) return q;
    if (xyzz_is_inf(q)) return p;
    Fp u1 = fe_mul<FpTag>(p.x, q.zz);
    Fp u2 = fe_mul<FpTag>(q.x, p.zz);
    Fp s1 = fe_mul<FpTag>(p.y, q.zzz);
    Fp s2 = fe_mul<FpTag>(q.y, p.zzz);
    Fp pp_ = fe_sub<FpTag>(u2, u1);
    Fp rr = fe_sub<FpTag>(s2, s1);
    if (fe_is_zero<FpTag>(pp_)) {
        if (fe_is_zero<FpTag>(rr)) return xyzz_dbl(p);
        return xyzz_inf();
    }
    Fp pp = fe_sqr<FpTag>(pp_);
    Fp ppp = fe_mul<FpTag>(pp_, pp);
    Fp q1 = fe_mul<FpTag>(u1, pp);
    Xyzz r;
    r.x = fe_sub<FpTag>(fe_sub<FpTag>(fe_sqr<FpTag>(rr), ppp), fe_dbl<FpTag>(q1));
    r.y = fe_sub<FpTag>(fe_mul<FpTag>(rr, fe_sub<FpTag>(q1, r.x)), fe_mul<FpTag>(s1, ppp));
    r.zz = fe_mul<FpTag>(fe_mul<FpTag>(p.zz, q.zz), pp);
    r.zzz = fe_mul<FpTag>(fe_mul<FpTag>(p.zzz, q.zzz), ppp);
    return r;
}

// k·p for a small non-negative k, double-and-add from the top bit.
EC_FN Xyzz xyzz_mul_small(Xyzz p, u32 k) {
    Xyzz r = xyzz_inf();
    for (int b = 31; b >= 0; b--) {
        r = xyzz_dbl(r);
        if ((k >> b) & 1) r = xyzz_add(r, p);
    }
    return r;
}

// XYZZ → Jacobian without an inversion: Z = ZZ·ZZZ, X = X·ZZ·ZZZ^2, Y = Y·ZZ^3·ZZZ^2.
// Infinity (ZZ = 0) becomes Z = 0, which blst reads as infinity.
EC_FN Jacobian xyzz_to_jacobian(Xyzz p) {
    Jacobian j;
    if (xyzz_is_inf(p)) {
        j.x = fe_zero<FpTag>();
        j.y = fe_zero<FpTag>();
        j.z = fe_zero<FpTag>();
        return j;
    }
    Fp zzz2 = fe_sqr<FpTag>(p.zzz);
    Fp zz2 = fe_sqr<FpTag>(p.zz);
    j.z = fe_mul<FpTag>(p.zz, p.zzz);
    j.x = fe_mul<FpTag>(fe_mul<FpTag>(p.x, p.zz), zzz2);
    j.y = fe_mul<FpTag>(fe_mul<FpTag>(p.y, fe_mul<FpTag>(zz2, p.zz)), zzz2);
    return j;
}

#endif
