// The group law of BLS12-381's G1 (y² = x³ + 4 over Fp) and G2 (y² = x³ + 4(u + 1) over Fp2),
// written once as templates over the coordinate field F (Fp or Fp2).
//
// Inputs are affine points exactly as blst stores them (x, y in Montgomery form: 96 bytes in
// G1, 192 in G2); the point at infinity is (0, 0), which is on neither curve, so it cannot be
// mistaken for a point.
//
// Accumulators use extended Jacobian "XYZZ" coordinates (x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2),
// the cheapest for adding affine points (madd-2008-s: 8M + 2S). Infinity is ZZ = 0. The
// formulas are those of short Weierstrass curves with a = 0, which both groups are; b (4 or
// 4(u + 1)) appears in none of them, so the same code serves both.
#ifndef C2Q_CURVE_CUH
#define C2Q_CURVE_CUH

#include "field.cuh"
#include "fp2.cuh"

// The group operations are inlined, but each Fp product or square inside them is one shared,
// out-of-line function (fp_mul_call, fp_sqr_call in field.cuh): inlining them as well would
// multiply the code size and make ptxas take minutes, which a GPU machine pays at every cold
// start (C2Q_FP_INLINE=1 does so, for timing).
// Everything passes by value so that operands stay in registers across those calls.
#if defined(__CUDACC__)
#define EC_FN __device__ __forceinline__
#else
#define EC_FN inline
#endif

// Fp in device memory: 12 words, loaded and stored 16 bytes at a time.
DEV Fp load_fp(const u32* base) {
    const uint4* q = (const uint4*)base;
    Fp r;
#pragma unroll
    for (int i = 0; i < 3; i++) {
        uint4 a = q[i];
        r.v[4 * i] = a.x;
        r.v[4 * i + 1] = a.y;
        r.v[4 * i + 2] = a.z;
        r.v[4 * i + 3] = a.w;
    }
    return r;
}

DEV void store_fp(u32* base, const Fp& x) {
    uint4* q = (uint4*)base;
#pragma unroll
    for (int i = 0; i < 3; i++)
        q[i] = make_uint4(x.v[4 * i], x.v[4 * i + 1], x.v[4 * i + 2], x.v[4 * i + 3]);
}

// The coordinate fields behind one interface: Coord<Fp> (G1) and Coord<Fp2> (G2). LIMBS is a
// coordinate's size in 32-bit words, in memory as on the host. mul_sub(a, b, c, d) is
// a·b − c·d.
//
// With C2Q_LAZY=1 (field.cuh) the operations are the lazy ones: every value the group law
// makes is below 2p (per Fp coordinate), not necessarily canonical; is_zero and eq accept such
// values, and canon makes one canonical. XYZZ points in device memory between kernels (buckets,
// continuation slots, partial sums) stay so, since every kernel that reads them goes through
// this group law; the Jacobian points for the host are made canonical (xyzz_to_jacobian), as
// are gen.cu's points. The affine input points are canonical (the host's, or gen.cu's).
template <class F>
struct Coord;

template <>
struct Coord<Fp> {
    static const int LIMBS = 12;
    static DEV Fp zero() { return fe_zero<FpTag>(); }
    static DEV Fp one() { return fe_one<FpTag>(); }
#if defined(C2Q_LAZY_CHAINS)
    static DEV bool is_zero(const Fp& a) { return fp_is_zero_lazy(a); }
    static DEV bool eq(const Fp& a, const Fp& b) { return fp_eq_lazy(a, b); }
    static DEV Fp add(const Fp& a, const Fp& b) { return fp_add_lazy(a, b); }
    static DEV Fp sub(const Fp& a, const Fp& b) { return fp_sub_lazy(a, b); }
    static DEV Fp dbl(const Fp& a) { return fp_add_lazy(a, a); }
    static DEV Fp neg(const Fp& a) { return fp_neg_lazy(a); }
    static DEV Fp mul(const Fp& a, const Fp& b) { return fp_mul_lazy(a, b); }
    static DEV Fp sqr(const Fp& a) { return fp_sqr_lazy(a); }
    // One shared reduction for both products (field.cuh).
    static DEV Fp mul_sub(const Fp& a, const Fp& b, const Fp& c, const Fp& d) {
        return fp_mul_sub_lazy(a, b, c, d);
    }
    static DEV Fp canon(const Fp& a) { return fp_canon(a); }
#else
    static DEV bool is_zero(const Fp& a) { return fe_is_zero<FpTag>(a); }
    static DEV bool eq(const Fp& a, const Fp& b) { return fe_eq<FpTag>(a, b); }
    static DEV Fp add(const Fp& a, const Fp& b) { return fe_add<FpTag>(a, b); }
    static DEV Fp sub(const Fp& a, const Fp& b) { return fe_sub<FpTag>(a, b); }
    static DEV Fp dbl(const Fp& a) { return fe_dbl<FpTag>(a); }
    static DEV Fp neg(const Fp& a) { return fe_neg<FpTag>(a); }
    static DEV Fp mul(const Fp& a, const Fp& b) { return fe_mul<FpTag>(a, b); }
    static DEV Fp sqr(const Fp& a) { return fe_sqr<FpTag>(a); }
    static DEV Fp mul_sub(const Fp& a, const Fp& b, const Fp& c, const Fp& d) {
        return fe_sub<FpTag>(fe_mul<FpTag>(a, b), fe_mul<FpTag>(c, d));
    }
    static DEV Fp canon(const Fp& a) { return a; }
#endif
    static DEV Fp load(const u32* base) { return load_fp(base); }
    static DEV void store(u32* base, const Fp& x) { store_fp(base, x); }
};

template <>
struct Coord<Fp2> {
    static const int LIMBS = 24;
    static DEV Fp2 zero() { return fp2_zero(); }
    static DEV Fp2 one() { return fp2_one(); }
#if defined(C2Q_LAZY_CHAINS)
    static DEV bool is_zero(const Fp2& a) { return fp2_is_zero_lazy(a); }
    static DEV bool eq(const Fp2& a, const Fp2& b) { return fp2_eq_lazy(a, b); }
    static DEV Fp2 add(const Fp2& a, const Fp2& b) { return fp2_add_lazy(a, b); }
    static DEV Fp2 sub(const Fp2& a, const Fp2& b) { return fp2_sub_lazy(a, b); }
    static DEV Fp2 dbl(const Fp2& a) { return fp2_add_lazy(a, a); }
    static DEV Fp2 neg(const Fp2& a) { return fp2_neg_lazy(a); }
    static DEV Fp2 mul(const Fp2& a, const Fp2& b) { return fp2_mul_lazy(a, b); }
    static DEV Fp2 sqr(const Fp2& a) { return fp2_sqr_lazy(a); }
    // Two products, each with its own reductions: one shared across both would have to reduce
    // values up to 16p², beyond p·R.
    static DEV Fp2 mul_sub(const Fp2& a, const Fp2& b, const Fp2& c, const Fp2& d) {
        return fp2_sub_lazy(fp2_mul_lazy(a, b), fp2_mul_lazy(c, d));
    }
    static DEV Fp2 canon(const Fp2& a) { return fp2_canon(a); }
#else
    static DEV bool is_zero(const Fp2& a) { return fp2_is_zero(a); }
    static DEV bool eq(const Fp2& a, const Fp2& b) { return fp2_eq(a, b); }
    static DEV Fp2 add(const Fp2& a, const Fp2& b) { return fp2_add(a, b); }
    static DEV Fp2 sub(const Fp2& a, const Fp2& b) { return fp2_sub(a, b); }
    static DEV Fp2 dbl(const Fp2& a) { return fp2_dbl(a); }
    static DEV Fp2 neg(const Fp2& a) { return fp2_neg(a); }
    static DEV Fp2 mul(const Fp2& a, const Fp2& b) { return fp2_mul(a, b); }
    static DEV Fp2 sqr(const Fp2& a) { return fp2_sqr(a); }
    static DEV Fp2 mul_sub(const Fp2& a, const Fp2& b, const Fp2& c, const Fp2& d) {
        return fp2_sub(fp2_mul(a, b), fp2_mul(c, d));
    }
    static DEV Fp2 canon(const Fp2& a) { return a; }
#endif
    static DEV Fp2 load(const u32* base) {
        Fp2 r;
        r.c0 = load_fp(base);
        r.c1 = load_fp(base + 12);
        return r;
    }
    static DEV void store(u32* base, const Fp2& x) {
        store_fp(base, x.c0);
        store_fp(base + 12, x.c1);
    }
};

template <class F>
struct Affine {
    F x, y;
};

template <class F>
struct Xyzz {
    F x, y, zz, zzz;
};

// Jacobian (X/Z^2, Y/Z^3), blst's `blst_p1` / `blst_p2` layout: what the host receives.
template <class F>
struct Jacobian {
    F x, y, z;
};

template <class F>
DEV bool affine_is_inf(const Affine<F>& p) {
    typedef Coord<F> K;
    return K::is_zero(p.x) && K::is_zero(p.y);
}

template <class F>
DEV Xyzz<F> xyzz_inf() {
    typedef Coord<F> K;
    Xyzz<F> r;
    r.x = K::zero();
    r.y = K::zero();
    r.zz = K::zero();
    r.zzz = K::zero();
    return r;
}

template <class F>
DEV bool xyzz_is_inf(const Xyzz<F>& p) {
    return Coord<F>::is_zero(p.zz);
}

template <class F>
DEV Xyzz<F> xyzz_from_affine(const Affine<F>& p) {
    if (affine_is_inf(p)) return xyzz_inf<F>();
    Xyzz<F> r;
    r.x = p.x;
    r.y = p.y;
    r.zz = Coord<F>::one();
    r.zzz = r.zz;
    return r;
}

template <class F>
DEV Xyzz<F> xyzz_neg(const Xyzz<F>& p) {
    Xyzz<F> r = p;
    r.y = Coord<F>::neg(p.y);
    return r;
}

// dbl-2008-s-1 (a = 0).
template <class F>
EC_FN Xyzz<F> xyzz_dbl(Xyzz<F> p) {
    typedef Coord<F> K;
    if (xyzz_is_inf(p)) return p;
    F u = K::dbl(p.y);
    F v = K::sqr(u);
    F w = K::mul(u, v);
    F s = K::mul(p.x, v);
    F x2 = K::sqr(p.x);
    F m = K::add(K::dbl(x2), x2);
    Xyzz<F> r;
    r.x = K::sub(K::sqr(m), K::dbl(s));
    r.y = K::mul_sub(m, K::sub(s, r.x), w, p.y);
    r.zz = K::mul(v, p.zz);
    r.zzz = K::mul(w, p.zzz);
    return r;
}

// mdbl-2008-s-1: doubling an affine point (ZZ = ZZZ = 1).
template <class F>
EC_FN Xyzz<F> xyzz_dbl_affine(F x, F y) {
    typedef Coord<F> K;
    F u = K::dbl(y);
    F v = K::sqr(u);
    F w = K::mul(u, v);
    F s = K::mul(x, v);
    F x2 = K::sqr(x);
    F m = K::add(K::dbl(x2), x2);
    Xyzz<F> r;
    r.x = K::sub(K::sqr(m), K::dbl(s));
    r.y = K::mul_sub(m, K::sub(s, r.x), w, y);
    r.zz = v;
    r.zzz = w;
    return r;
}

// p + (x, y) for an affine point that is not infinity (madd-2008-s), with the equal and
// opposite cases handled: bucket sums meet them whenever a point repeats.
template <class F>
EC_FN Xyzz<F> xyzz_add_affine(Xyzz<F> p, F x, F y) {
    typedef Coord<F> K;
    if (xyzz_is_inf(p)) {
        Xyzz<F> r;
        r.x = x;
        r.y = y;
        r.zz = K::one();
        r.zzz = r.zz;
        return r;
    }
    F u2 = K::mul(x, p.zz);
    F s2 = K::mul(y, p.zzz);
    F pp_ = K::sub(u2, p.x);
    F rr = K::sub(s2, p.y);
    if (K::is_zero(pp_)) {
        if (K::is_zero(rr)) return xyzz_dbl_affine<F>(x, y);
        return xyzz_inf<F>();
    }
    F pp = K::sqr(pp_);
    F ppp = K::mul(pp_, pp);
    F q = K::mul(p.x, pp);
    Xyzz<F> r;
    r.x = K::sub(K::sub(K::sqr(rr), ppp), K::dbl(q));
    r.y = K::mul_sub(rr, K::sub(q, r.x), p.y, ppp);
    r.zz = K::mul(p.zz, pp);
    r.zzz = K::mul(p.zzz, ppp);
    return r;
}

// Adds an affine point that may be infinity, negated when `neg`.
template <class F>
DEV Xyzz<F> xyzz_add_affine_any(const Xyzz<F>& p, const Affine<F>& a, bool neg) {
    if (affine_is_inf(a)) return p;
    F y = neg ? Coord<F>::neg(a.y) : a.y;
    return xyzz_add_affine<F>(p, a.x, y);
}

// add-2008-s: general XYZZ addition.
template <class F>
EC_FN Xyzz<F> xyzz_add_inline(Xyzz<F> p, Xyzz<F> q) {
    typedef Coord<F> K;
    if (xyzz_is_inf(p)) return q;
    if (xyzz_is_inf(q)) return p;
    F u1 = K::mul(p.x, q.zz);
    F u2 = K::mul(q.x, p.zz);
    F s1 = K::mul(p.y, q.zzz);
    F s2 = K::mul(q.y, p.zzz);
    F pp_ = K::sub(u2, u1);
    F rr = K::sub(s2, s1);
    if (K::is_zero(pp_)) {
        if (K::is_zero(rr)) return xyzz_dbl<F>(p);
        return xyzz_inf<F>();
    }
    F pp = K::sqr(pp_);
    F ppp = K::mul(pp_, pp);
    F q1 = K::mul(u1, pp);
    Xyzz<F> r;
    r.x = K::sub(K::sub(K::sqr(rr), ppp), K::dbl(q1));
    r.y = K::mul_sub(rr, K::sub(q1, r.x), s1, ppp);
    r.zz = K::mul(K::mul(p.zz, q.zz), pp);
    r.zzz = K::mul(K::mul(p.zzz, q.zzz), ppp);
    return r;
}

template <class F>
EC_FN Xyzz<F> xyzz_add(Xyzz<F> p, Xyzz<F> q) {
    return xyzz_add_inline<F>(p, q);
}

#if defined(__CUDACC__)
// In G2 the general addition is one shared, out-of-line function. It serves the kernels off
// the hot path (bucket fixes and reductions; the bucket accumulation and the sum of the ones
// add affine points), and its Fp2 arithmetic inlined into each of them would triple the
// module's code and ptxas's time to build it.
__device__ __noinline__ Xyzz<Fp2> xyzz_add_g2_call(Xyzz<Fp2> p, Xyzz<Fp2> q) {
    return xyzz_add_inline<Fp2>(p, q);
}

template <>
EC_FN Xyzz<Fp2> xyzz_add<Fp2>(Xyzz<Fp2> p, Xyzz<Fp2> q) {
    return xyzz_add_g2_call(p, q);
}
#endif

// k·p for a small non-negative k, double-and-add from the top bit.
template <class F>
EC_FN Xyzz<F> xyzz_mul_small(Xyzz<F> p, u32 k) {
    Xyzz<F> r = xyzz_inf<F>();
    for (int b = 31; b >= 0; b--) {
        r = xyzz_dbl<F>(r);
        if ((k >> b) & 1) r = xyzz_add<F>(r, p);
    }
    return r;
}

// XYZZ → Jacobian without an inversion: Z = ZZ·ZZZ, X = X·ZZ·ZZZ^2, Y = Y·ZZ^3·ZZZ^2.
// Infinity (ZZ = 0) becomes Z = 0, which blst reads as infinity.
template <class F>
EC_FN Jacobian<F> xyzz_to_jacobian(Xyzz<F> p) {
    typedef Coord<F> K;
    Jacobian<F> j;
    if (xyzz_is_inf(p)) {
        j.x = K::zero();
        j.y = K::zero();
        j.z = K::zero();
        return j;
    }
    F zzz2 = K::sqr(p.zzz);
    F zz2 = K::sqr(p.zz);
    // Canonical: these go to the host.
    j.z = K::canon(K::mul(p.zz, p.zzz));
    j.x = K::canon(K::mul(K::mul(p.x, p.zz), zzz2));
    j.y = K::canon(K::mul(K::mul(p.y, K::mul(zz2, p.zz)), zzz2));
    return j;
}

#endif
