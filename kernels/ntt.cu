// Number-theoretic transforms over Fr (radix 2, domains up to 2^28) and the elementwise steps of
// the Groth16 quotient polynomial H.
//
// A transform of 2^L elements is a sequence of passes; each pass runs up to 10 butterfly stages
// in shared memory on a tile of 1024 elements. A tile holds, for one fixed value of the index
// bits above the pass and a run of 2^lo_log consecutive values of the bits below it, every value
// of the pass's own bits: loads and stores stay coalesced (runs of 8 × 32 bytes) while the data
// crosses device memory once per pass instead of once per stage.
//
// DIT (Cooley–Tukey) takes bit-reversed input to natural output; DIF (Gentleman–Sande) natural
// input to bit-reversed output. Pairing them (DIF inverse, then DIT forward) avoids a
// permutation between the two transforms of the H computation.
//
// Twiddles come from one table tw[e] = ω^e, e < 2^(T-1), for the largest domain 2^T in use; a
// domain 2^L reads it with stride 2^(T-L), and the inverse transform uses
// ω^-e = ω^(2^T - e) = -ω^(2^(T-1) - e).
#include "field.cuh"

#define NTT_TILE 1024

DEV Fr load_fr(const u32* base, u64 i) {
    const uint4* q = (const uint4*)(base + i * 8);
    uint4 a = q[0], b = q[1];
    Fr r;
    r.v[0] = a.x; r.v[1] = a.y; r.v[2] = a.z; r.v[3] = a.w;
    r.v[4] = b.x; r.v[5] = b.y; r.v[6] = b.z; r.v[7] = b.w;
    return r;
}

DEV void store_fr(u32* base, u64 i, const Fr& x) {
    uint4* q = (uint4*)(base + i * 8);
    q[0] = make_uint4(x.v[0], x.v[1], x.v[2], x.v[3]);
    q[1] = make_uint4(x.v[4], x.v[5], x.v[6], x.v[7]);
}

DEV u32 bit_reverse(u32 i, u32 log_n) {
    return log_n == 0 ? 0 : (__brev(i) >> (32 - log_n));
}

// ω^e (or ω^-e when `inverse`) for e < 2^(L-1), from the table of domain 2^(L + tw_shift).
DEV Fr twiddle(const u32* tw, u64 e, u32 tw_shift, u32 log_n, bool inverse) {
    u64 idx = e << tw_shift;
    if (!inverse) return load_fr(tw, idx);
    if (idx == 0) return fe_one<FrTag>();
    u64 half = (u64)1 << (log_n + tw_shift - 1);
    return fe_neg<FrTag>(load_fr(tw, half - idx));
}

// One pass: stages s .. s+k-1 (half-spans 2^s .. 2^(s+k-1)), in increasing order for DIT and
// decreasing order for DIF. The grid has 2^(L - k - lo_log) blocks.
extern "C" __global__ void __launch_bounds__(512) ntt_pass(u32* data, u32 log_n, u32 s, u32 k,
                                                          u32 lo_log, const u32* tw,
                                                          u32 tw_shift, u32 dif, u32 inverse) {
    __shared__ Fr tile[NTT_TILE];
    const u32 elems = 1u << (k + lo_log);
    const u32 lo_mask = (1u << lo_log) - 1;
    const u64 lo_groups = ((u64)1 << s) >> lo_log;
    const u64 blk = blockIdx.x;
    const u64 hi = blk / lo_groups;
    const u64 lo_base = (blk % lo_groups) << lo_log;

    for (u32 f = threadIdx.x; f < elems; f += blockDim.x) {
        u64 gi = lo_base + (f & lo_mask) + ((u64)(f >> lo_log) << s) + (hi << (s + k));
        tile[f] = load_fr(data, gi);
    }
    __syncthreads();

    const u32 butterflies = elems / 2;
    for (u32 step = 0; step < k; step++) {
        const u32 u = dif ? (k - 1 - step) : step;
        const u32 t = s + u;
        const u32 low = (1u << u) - 1;
        for (u32 q = threadIdx.x; q < butterflies; q += blockDim.x) {
            u32 lo_off = q & lo_mask;
            u32 p = q >> lo_log;
            u32 j0 = ((p >> u) << (u + 1)) | (p & low);
            u32 f0 = (j0 << lo_log) | lo_off;
            u32 f1 = f0 + (1u << (u + lo_log));
            u64 imod = lo_base + lo_off + ((u64)(j0 & low) << s);
            Fr w = twiddle(tw, imod << (log_n - 1 - t), tw_shift, log_n, inverse != 0);
            Fr x = tile[f0];
            Fr y = tile[f1];
            if (dif) {
                tile[f0] = fe_add<FrTag>(x, y);
                tile[f1] = fe_mul<FrTag>(fe_sub<FrTag>(x, y), w);
            } else {
                y = fe_mul<FrTag>(y, w);
                tile[f0] = fe_add<FrTag>(x, y);
                tile[f1] = fe_sub<FrTag>(x, y);
            }
        }
        __syncthreads();
    }

    for (u32 f = threadIdx.x; f < elems; f += blockDim.x) {
        u64 gi = lo_base + (f & lo_mask) + ((u64)(f >> lo_log) << s) + (hi << (s + k));
        store_fr(data, gi, tile[f]);
    }
}

// In-place bit-reversal permutation of 2^L elements.
extern "C" __global__ void bit_reverse_permute(u32* data, u32 log_n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >> log_n) return;
    u32 j = bit_reverse((u32)i, log_n);
    if (i < j) {
        Fr a = load_fr(data, i);
        Fr b = load_fr(data, j);
        store_fr(data, i, b);
        store_fr(data, j, a);
    }
}

// out[i] = hi[i >> 10] · lo[i & 1023]: powers x^i from two short tables computed on the host
// (hi[j] = c·x^(1024 j), lo[j] = x^j), for twiddle tables and coset factors.
DEV Fr power_at(const u32* hi, const u32* lo, u64 i) {
    return fe_mul<FrTag>(load_fr(hi, i >> 10), load_fr(lo, i & 1023));
}

extern "C" __global__ void gen_powers(u32* out, u64 count, const u32* hi, const u32* lo) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    store_fr(out, i, power_at(hi, lo, i));
}

// data[p] *= c·x^i with i = p, or i = bitrev(p) for data in bit-reversed order.
extern "C" __global__ void scale_powers(u32* data, u32 log_n, const u32* hi, const u32* lo,
                                        u32 bitrev) {
    u64 p = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >> log_n) return;
    u64 i = bitrev ? bit_reverse((u32)p, log_n) : p;
    store_fr(data, p, fe_mul<FrTag>(load_fr(data, p), power_at(hi, lo, i)));
}

// a = (a·b − c) / Z on the coset, with zinv = 1 / (g^n − 1): every coset point has the same Z.
extern "C" __global__ void h_combine(u32* a, const u32* b, const u32* c, const u32* zinv,
                                     u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr z = load_fr(zinv, 0);
    Fr ab = fe_mul<FrTag>(load_fr(a, i), load_fr(b, i));
    store_fr(a, i, fe_mul<FrTag>(fe_sub<FrTag>(ab, load_fr(c, i)), z));
}
