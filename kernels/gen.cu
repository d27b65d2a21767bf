// Benchmark inputs made on the GPU, so that a 2^27-point SRS does not have to cross PCIe or be
// computed by the host: random scalars, and points P_i = T1[i mod 2^t] + T2[(i >> t) mod 2^t]
// from two small tables of random points the host provides (distinct for every i < 2^(2t)).
#include "g1.cuh"

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

#define GEN_BATCH 16

// Affine sums with one inversion per GEN_BATCH points (Montgomery's batch-inversion trick).
extern "C" __global__ void gen_points(u32* out, u64 n, const u32* t1, const u32* t2, u32 tlog) {
    u64 first = ((u64)blockIdx.x * blockDim.x + threadIdx.x) * GEN_BATCH;
    if (first >= n) return;
    u32 count = (u32)min((u64)GEN_BATCH, n - first);
    const u64 mask = ((u64)1 << tlog) - 1;
    Fp prefix[GEN_BATCH];
    Fp acc = fe_one<FpTag>();
    for (u32 k = 0; k < count; k++) {
        u64 i = first + k;
        Fp x1 = get_fp(t1 + (i & mask) * 24);
        Fp x2 = get_fp(t2 + ((i >> tlog) & mask) * 24);
        Fp d = fe_sub<FpTag>(x2, x1);
        if (fe_is_zero<FpTag>(d)) d = fe_one<FpTag>();
        acc = fe_mul<FpTag>(acc, d);
        prefix[k] = acc;
    }
    Fp inv = fp_inv(acc);
    for (u32 k = count; k-- > 0;) {
        u64 i = first + k;
        const u32* a = t1 + (i & mask) * 24;
        const u32* b = t2 + ((i >> tlog) & mask) * 24;
        Fp x1 = get_fp(a), y1 = get_fp(a + 12), x2 = get_fp(b), y2 = get_fp(b + 12);
        Fp d = fe_sub<FpTag>(x2, x1);
        bool degenerate = fe_is_zero<FpTag>(d);
        if (degenerate) d = fe_one<FpTag>();
        Fp dinv = k > 0 ? fe_mul<FpTag>(inv, prefix[k - 1]) : inv;
        inv = fe_mul<FpTag>(inv, d);
        u32* o = out + i * 24;
        if (degenerate) {
            // T1 = ±T2: keep T1, still a valid point.
            put_fp(o, x1);
            put_fp(o + 12, y1);
            continue;
        }
        Fp lambda = fe_mul<FpTag>(fe_sub<FpTag>(y2, y1), dinv);
        Fp x3 = fe_sub<FpTag>(fe_sub<FpTag>(fe_sqr<FpTag>(lambda), x1), x2);
        Fp y3 = fe_sub<FpTag>(fe_mul<FpTag>(lambda, fe_sub<FpTag>(x1, x3)), y1);
        put_fp(o, x3);
        put_fp(o + 12, y3);
    }
}
