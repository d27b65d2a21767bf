// Benchmark inputs made on the GPU, so that a 2^27-point SRS does not have to cross PCIe or be
// computed by the host: random scalars, and points P_i = T1[i mod 2^t] + T2[(i >> t) mod 2^t]
// from two small tables of random points the host provides (distinct for every i < 2^(2t)), in
// G1 (`gen_points`) or G2 (`gen_points_g2`).
#include "curve.cuh"

DEV u64 splitmix(u64 x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

DEV void put_fp(u32* base, const Fp& x) {
#pragma unroll
    for (int i = 0; i < 12; i++) base[i] = x.v[i];
}

DEV Fp get_fp(const u32* base) {
    Fp r;
#pragma unroll
    for (int i = 0; i < 12; i++) r.v[i] = base[i];
    return r;
}

// A uniformly distributed scalar below r (canonical), from 4 random words.
DEV Fr random_fr(u64 seed, u64 i) {
    Fr s;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        u64 w = splitmix(seed ^ splitmix(i * 4 + k));
        s.v[2 * k] = (u32)w;
        s.v[2 * k + 1] = (u32)(w >> 32);
    }
    s.v[7] &= 0x7fffffffu;  // < 2^255 < 2r: one conditional subtraction reduces it.
    Fr d;
    u32 borrow = fe_sub_mod_raw<FrTag>(d, s);
    return borrow ? s : d;
}

// mode 0: full-width random scalars; mode 1: PoRep-like (51 % zero, 47 % one, 2 % random).
// Written in Montgomery form, as blstrs stores them.
extern "C" __global__ void gen_scalars(u32* out, u64 n, u64 seed, u32 mode) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr s;
    if (mode == 1) {
        u64 pick = splitmix(seed * 31 + i) % 100;
        if (pick < 51) s = fe_zero<FrTag>();
        else if (pick < 98) s = fe_one<FrTag>();
        else s = fr_to_mont(random_fr(seed, i));
    } else {
        s = fr_to_mont(random_fr(seed, i));
    }
#pragma unroll
    for (int k = 0; k < 8; k++) out[i * 8 + k] = s.v[k];
}

// Points each thread makes, with one inversion: the launcher sizes the grid by it, so c2q passes
// it (src/gpu/kernels.rs) rather than this file choosing it.
#ifndef GEN_BATCH
#error "GEN_BATCH is passed by c2q as -DGEN_BATCH=... (src/gpu/kernels.rs)"
#endif

// A coordinate of a table or output point (plain loads and stores: the tables are small and
// cached, and each output word is written once).
template <class F>
DEV F get_coord(const u32* base);

template <>
DEV Fp get_coord<Fp>(const u32* base) {
    return get_fp(base);
}

template <>
DEV Fp2 get_coord<Fp2>(const u32* base) {
    Fp2 r;
    r.c0 = get_fp(base);
    r.c1 = get_fp(base + 12);
    return r;
}

DEV void put_coord(u32* base, const Fp& x) {
    put_fp(base, x);
}

DEV void put_coord(u32* base, const Fp2& x) {
    put_fp(base, x.c0);
    put_fp(base + 12, x.c1);
}

DEV Fp coord_inv(const Fp& a) {
    return fp_inv(a);
}

DEV Fp2 coord_inv(const Fp2& a) {
    return fp2_inv(a);
}

// Affine sums with one inversion per GEN_BATCH points (Montgomery's batch-inversion trick).
template <class F>
DEV void gen_points_impl(u32* out, u64 n, const u32* t1, const u32* t2, u32 tlog) {
    typedef Coord<F> K;
    const int L = K::LIMBS, P = 2 * K::LIMBS;
    u64 first = ((u64)blockIdx.x * blockDim.x + threadIdx.x) * GEN_BATCH;
    if (first >= n) return;
    u32 count = (u32)min((u64)GEN_BATCH, n - first);
    const u64 mask = ((u64)1 << tlog) - 1;
    F prefix[GEN_BATCH];
    F acc = K::one();
    for (u32 k = 0; k < count; k++) {
        u64 i = first + k;
        F x1 = get_coord<F>(t1 + (i & mask) * P);
        F x2 = get_coord<F>(t2 + ((i >> tlog) & mask) * P);
        F d = K::sub(x2, x1);
        if (K::is_zero(d)) d = K::one();
        acc = K::mul(acc, d);
        prefix[k] = acc;
    }
    // The inversion (fe_* arithmetic, field.cuh) takes a canonical value.
    F inv = coord_inv(K::canon(acc));
    for (u32 k = count; k-- > 0;) {
        u64 i = first + k;
        const u32* a = t1 + (i & mask) * P;
        const u32* b = t2 + ((i >> tlog) & mask) * P;
        F x1 = get_coord<F>(a), y1 = get_coord<F>(a + L), x2 = get_coord<F>(b),
          y2 = get_coord<F>(b + L);
        F d = K::sub(x2, x1);
        bool degenerate = K::is_zero(d);
        if (degenerate) d = K::one();
        F dinv = k > 0 ? K::mul(inv, prefix[k - 1]) : inv;
        inv = K::mul(inv, d);
        u32* o = out + i * P;
        if (degenerate) {
            // T1 = ±T2: keep T1, still a valid point.
            put_coord(o, x1);
            put_coord(o + L, y1);
            continue;
        }
        F lambda = K::mul(K::sub(y2, y1), dinv);
        F x3 = K::sub(K::sub(K::sqr(lambda), x1), x2);
        F y3 = K::sub(K::mul(lambda, K::sub(x1, x3)), y1);
        // Canonical, as every input point is (K may leave values below 2p: curve.cuh).
        put_coord(o, K::canon(x3));
        put_coord(o + L, K::canon(y3));
    }
}

extern "C" __global__ void gen_points(u32* out, u64 n, const u32* t1, const u32* t2, u32 tlog) {
    gen_points_impl<Fp>(out, n, t1, t2, tlog);
}

extern "C" __global__ void gen_points_g2(u32* out, u64 n, const u32* t1, const u32* t2,
                                         u32 tlog) {
    gen_points_impl<Fp2>(out, n, t1, t2, tlog);
}
