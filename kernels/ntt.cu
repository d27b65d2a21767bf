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
// Twiddles are stored stage by stage: stage t (half-span 2^t) needs w_t^e, e < 2^t, with w_t
// the primitive 2^(t+1)-th root of unity, and finds it at tw[2^t − 1 + e]. Those values do not
// depend on the domain (w_t = ω_L^(2^(L−1−t)) for every L > t), so one table of 2^T − 1
// entries serves every domain up to 2^T. The layout makes the butterflies of a warp, whose
// exponents are runs of consecutive integers, read runs of consecutive entries: a table
// indexed by a power of ω of the whole domain would scatter them 2^(L−1−t) entries apart, one
// DRAM sector each. The inverse uses w_t^-e = w_t^(2^(t+1) − e) = −w_t^(2^t − e).
#include "field.cuh"

#define NTT_TILE 1024

DEV u32 bit_reverse(u32 i, u32 log_n) {
    return log_n == 0 ? 0 : (__brev(i) >> (32 - log_n));
}

// w_t^e (or w_t^-e when `inverse`) for e < 2^t, from the stage-major table. The load does not
// depend on a branch, so that a step's twiddle loads all leave before the first one is used:
// one memory latency per step, not one per twiddle. (w_t^0 = 1 sits at the stage's index 0.)
DEV Fr twiddle(const u32* tw, u64 e, u32 t, bool inverse) {
    const u64 base = ((u64)1 << t) - 1;
    const bool negate = inverse && e != 0;
    const Fr w = load_fr(tw, base + (negate ? ((u64)1 << t) - e : e));
    return negate ? fe_neg<FrTag>(w) : w;
}

// A butterfly whose twiddle is 1, the same for DIT and DIF: (x, y) → (x + y, x − y).
DEV void butterfly_unit(Fr& x, Fr& y) {
    Fr d = fe_sub<FrTag>(x, y);
    x = fe_add<FrTag>(x, y);
    y = d;
}

// One butterfly: DIT (x, y) → (x + w·y, x − w·y); DIF (x, y) → (x + y, (x − y)·w).
DEV void butterfly(Fr& x, Fr& y, const Fr& w, bool dif) {
    if (dif) {
        Fr d = fe_sub<FrTag>(x, y);
        x = fe_add<FrTag>(x, y);
        y = fe_mul<FrTag>(d, w);
    } else {
        Fr t = fe_mul<FrTag>(y, w);
        y = fe_sub<FrTag>(x, t);
        x = fe_add<FrTag>(x, t);
    }
}

// One pass: stages s .. s+k-1 (half-spans 2^s .. 2^(s+k-1)), in increasing order for DIT and
// decreasing order for DIF. The grid has 2^(L - k - lo_log) blocks.
//
// Stages go two at a time (radix 4): a thread takes the four tile elements that two
// consecutive stages mix among themselves, does the four butterflies in registers with three
// twiddles, and the block synchronises once per two stages instead of once per stage. An odd
// stage left over runs as plain radix-2 butterflies.
//
// Registers are capped so that C2Q_NTT_BLOCKS blocks fit on an SM: on an H200, with the 64-bit
// products of field.cuh, four ran 0.4 – 3 % faster than three (a small spill notwithstanding),
// and three 6 % faster than two (c2q's $C2Q_KERNEL_DEFINES can override it for tuning runs).
// No more than the SM's shared memory holds, though (c2q passes C2Q_SHARED_PER_SM): on GPUs
// with 100 KB per SM (sm_86, sm_89, sm_120) three tiles fit, and capping registers for four
// would only add spills.
#define NTT_TILE_SHARED (NTT_TILE * 32 + 1024)  // the tile, and the 1 KB the runtime reserves
#ifndef C2Q_NTT_BLOCKS
#if defined(C2Q_SHARED_PER_SM)
#define C2Q_NTT_BLOCKS \
    (C2Q_SHARED_PER_SM / NTT_TILE_SHARED >= 4 ? 4 \
     : C2Q_SHARED_PER_SM / NTT_TILE_SHARED >= 1 ? C2Q_SHARED_PER_SM / NTT_TILE_SHARED : 1)
#else
#define C2Q_NTT_BLOCKS 4
#endif
#endif
extern "C" __global__ void __launch_bounds__(256, C2Q_NTT_BLOCKS) ntt_pass(u32* data, u32 s, u32 k,
                                                             u32 lo_log, const u32* tw,
                                                             u32 dif, u32 inverse) {
    __shared__ Fr tile[NTT_TILE];
    const u32 elems = 1u << (k + lo_log);
    const u32 lo_mask = (1u << lo_log) - 1;
    const u64 lo_groups = ((u64)1 << s) >> lo_log;
    const u64 blk = blockIdx.x;
    const u64 hi = blk / lo_groups;
    const u64 lo_base = (blk % lo_groups) << lo_log;
    const bool inv = inverse != 0;
    const bool is_dif = dif != 0;

    // Loads in rounds of four per thread, all issued before any is stored to the tile: one
    // memory latency per round rather than one per element.
    auto tile_index = [&](u32 f) {
        return lo_base + (f & lo_mask) + ((u64)(f >> lo_log) << s) + (hi << (s + k));
    };
    for (u32 f = threadIdx.x; f < elems; f += 4 * blockDim.x) {
        Fr v[4];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const u32 g = f + r * blockDim.x;
            if (g < elems) v[r] = load_fr(data, tile_index(g));
        }
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const u32 g = f + r * blockDim.x;
            if (g < elems) tile[g] = v[r];
        }
    }
    __syncthreads();

    // DIT walks the stages up from 0, DIF down from k − 1; `u` is the lower stage of the
    // step, `two` whether the step covers stages u and u + 1.
    u32 done = 0;
    while (done < k) {
        const bool two = k - done >= 2;
        const u32 u = is_dif ? k - done - (two ? 2 : 1) : done;
        const u32 low = (1u << u) - 1;
        if (two) {
            const u32 h = 1u << (u + lo_log);
            for (u32 q = threadIdx.x; q < elems / 4; q += blockDim.x) {
                const u32 lo_off = q & lo_mask;
                const u32 p = q >> lo_log;
                // The four elements differ in bits u and u + 1 of the pass index.
                const u32 j0 = ((p >> u) << (u + 2)) | (p & low);
                const u32 f0 = (j0 << lo_log) | lo_off;
                // Their index modulo 2^(s+u): the exponent for stage u, and for the pair
                // (e0, e2) of stage u + 1; the pair (e1, e3) is 2^(s+u) further.
                const u64 e = lo_base + lo_off + ((u64)(j0 & low) << s);
                Fr x0 = tile[f0], x1 = tile[f0 + h], x2 = tile[f0 + 2 * h], x3 = tile[f0 + 3 * h];
                // All three loaded ahead of the branch (at stages 0 and 1, w_lo and w_hi0 are
                // valid entries, just unused).
                const Fr w_hi1 = twiddle(tw, e + ((u64)1 << (s + u)), s + u + 1, inv);
                const Fr w_lo = twiddle(tw, e, s + u, inv);
                const Fr w_hi0 = twiddle(tw, e, s + u + 1, inv);
                if (s + u == 0) {
                    // Stages 0 and 1 of the whole transform: e = 0, so w_lo = w_0^0 and
                    // w_hi0 = w_1^0 are 1 and three of the four products can go (the same for
                    // the whole block: no divergence).
                    if (is_dif) {
                        butterfly_unit(x0, x2);
                        butterfly(x1, x3, w_hi1, true);
                        butterfly_unit(x0, x1);
                        butterfly_unit(x2, x3);
                    } else {
                        butterfly_unit(x0, x1);
                        butterfly_unit(x2, x3);
                        butterfly_unit(x0, x2);
                        butterfly(x1, x3, w_hi1, false);
                    }
                } else {
                    if (is_dif) {
                        butterfly(x0, x2, w_hi0, true);
                        butterfly(x1, x3, w_hi1, true);
                        butterfly(x0, x1, w_lo, true);
                        butterfly(x2, x3, w_lo, true);
                    } else {
                        butterfly(x0, x1, w_lo, false);
                        butterfly(x2, x3, w_lo, false);
                        butterfly(x0, x2, w_hi0, false);
                        butterfly(x1, x3, w_hi1, false);
                    }
                }
                tile[f0] = x0;
                tile[f0 + h] = x1;
                tile[f0 + 2 * h] = x2;
                tile[f0 + 3 * h] = x3;
            }
        } else {
            for (u32 q = threadIdx.x; q < elems / 2; q += blockDim.x) {
                const u32 lo_off = q & lo_mask;
                const u32 p = q >> lo_log;
                const u32 j0 = ((p >> u) << (u + 1)) | (p & low);
                const u32 f0 = (j0 << lo_log) | lo_off;
                const u32 f1 = f0 + (1u << (u + lo_log));
                const u64 e = lo_base + lo_off + ((u64)(j0 & low) << s);
                Fr x = tile[f0], y = tile[f1];
                butterfly(x, y, twiddle(tw, e, s + u, inv), is_dif);
                tile[f0] = x;
                tile[f1] = y;
            }
        }
        __syncthreads();
        done += two ? 2 : 1;
    }

    for (u32 f = threadIdx.x; f < elems; f += blockDim.x) store_fr(data, tile_index(f), tile[f]);
}

// Bit-reversal permutation of 2^L elements, L ≥ 8, in place and coalesced. With the index
// split as (a: top 4 bits, m: middle L − 8 bits, b: low 4 bits), element (a, m, b) moves to
// (rev b, rev m, rev a). Block m loads the 16 × 16 elements with middle bits m and, unless m
// is its own reverse, the 16 × 16 with middle bits rev m (runs of 16 consecutive elements),
// then writes each set transposed into the other's place. Blocks with rev m < m have nothing
// to do: their pair was handled by block rev m.
extern "C" __global__ void __launch_bounds__(256) bit_reverse_tiles(u32* data, u32 log_n) {
    __shared__ Fr ta[256];
    __shared__ Fr tb[256];
    const u32 mid = log_n - 8;
    const u32 m = blockIdx.x;
    const u32 rm = bit_reverse(m, mid);
    if (rm < m) return;
    const u32 a = threadIdx.x >> 4, b = threadIdx.x & 15;
    const u64 row = (u64)a << (mid + 4);
    ta[threadIdx.x] = load_fr(data, row | ((u64)m << 4) | b);
    if (rm != m) tb[threadIdx.x] = load_fr(data, row | ((u64)rm << 4) | b);
    __syncthreads();
    // This thread writes position (a, ·, b): it receives element (rev b, ·, rev a).
    const u32 from = bit_reverse(b, 4) * 16 + bit_reverse(a, 4);
    store_fr(data, row | ((u64)rm << 4) | b, ta[from]);
    if (rm != m) store_fr(data, row | ((u64)m << 4) | b, tb[from]);
}

// In-place bit-reversal permutation of 2^L elements, for L < 8 (one thread per swap).
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

// out[i] = hi[i >> POWER_LO_LOG] · lo[i mod 2^POWER_LO_LOG]: powers x^i from two short tables
// computed on the host (hi[j] = c·x^(2^POWER_LO_LOG · j), lo[j] = x^j), for twiddle tables and
// coset factors. The host builds the tables by it, so c2q passes it (src/gpu/kernels.rs).
#ifndef POWER_LO_LOG
#error "POWER_LO_LOG is passed by c2q as -DPOWER_LO_LOG=... (src/gpu/kernels.rs)"
#endif
DEV Fr power_at(const u32* hi, const u32* lo, u64 i) {
    return fe_mul<FrTag>(load_fr(hi, i >> POWER_LO_LOG),
                         load_fr(lo, i & (((u64)1 << POWER_LO_LOG) - 1)));
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

// a = a·b elementwise: A·B on the coset, from the coset evaluations of A and B.
extern "C" __global__ void h_mul(u32* a, const u32* b, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    store_fr(a, i, fe_mul<FrTag>(load_fr(a, i), load_fr(b, i)));
}

// a = (a − c)·zinv elementwise: H from the coefficients of A·B and of C, both bit-reversed and
// not divided by n (src/gpu/ntt.rs); zinv = 1/(n·Z) on the coset.
extern "C" __global__ void h_sub_div(u32* a, const u32* c, const u32* zinv, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    store_fr(a, i, fe_mul<FrTag>(fe_sub<FrTag>(load_fr(a, i), load_fr(c, i)), load_fr(zinv, 0)));
}

