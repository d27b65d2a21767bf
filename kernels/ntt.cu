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
// the primitive 2^(t+1)-th root of unity, and finds it at tw[2^t − 1 + t + e]: each stage holds
// w_t^0 .. w_t^(2^t), one entry more than the forward transform reads (below). Those values do
// not depend on the domain (w_t = ω_L^(2^(L−1−t)) for every L > t), so one table of
// 2^T − 1 + T entries serves every domain up to 2^T. The layout makes the butterflies of a
// warp, whose exponents are runs of consecutive integers, read runs of consecutive entries: a
// table indexed by a power of ω of the whole domain would scatter them 2^(L−1−t) entries apart,
// one DRAM sector each.
//
// The inverse uses w_t^-e = w_t^(2^(t+1) − e) = −w_t^(2^t − e), for every e < 2^t (e = 0
// reads the extra entry, w_t^(2^t) = −1). The sign is the same for every butterfly, so it goes
// into the butterfly instead of the twiddle: (x − y)·(−w) = (y − x)·w, x ∓ y·(−w) = x ± y·w.
#include "field.cuh"

#define NTT_TILE 1024

DEV u32 bit_reverse(u32 i, u32 log_n) {
    return log_n == 0 ? 0 : (__brev(i) >> (32 - log_n));
}

// w_t^e for e < 2^t from the stage-major table, or when `inverse` −w_t^-e = w_t^(2^t − e): the
// butterflies of an inverse transform negate it back (butterfly's `inverse`).
DEV Fr twiddle(const u32* tw, u32 e, u32 t, bool inverse) {
    const u32 base = (1u << t) - 1 + t;
    return load_fr(tw, base + (inverse ? (1u << t) - e : e));
}

// A butterfly whose twiddle is 1, the same for DIT and DIF: (x, y) → (x + y, x − y).
DEV void butterfly_unit(Fr& x, Fr& y) {
    Fr d = fe_sub<FrTag>(x, y);
    x = fe_add<FrTag>(x, y);
    y = d;
}

// One butterfly: DIT (x, y) → (x + w·y, x − w·y); DIF (x, y) → (x + y, (x − y)·w). With
// `inverse` the twiddle given is −w (see `twiddle`): DIT (x − w·y, x + w·y), DIF (y − x)·w.
DEV void butterfly(Fr& x, Fr& y, const Fr& w, bool dif, bool inverse) {
    if (dif) {
        Fr d = inverse ? fe_sub<FrTag>(y, x) : fe_sub<FrTag>(x, y);
        x = fe_add<FrTag>(x, y);
        y = fe_mul<FrTag>(d, w);
    } else {
        Fr t = fe_mul<FrTag>(y, w);
        Fr sum = fe_add<FrTag>(x, t), diff = fe_sub<FrTag>(x, t);
        x = inverse ? diff : sum;
        y = inverse ? sum : diff;
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
// Registers are capped so that C2Q_NTT_BLOCKS blocks fit on an SM. With the split products of
// field.cuh, three blocks (80 registers, 120 bytes spilled) ran 3 % faster than four (64
// registers, 444 bytes spilled) and 8 % faster than two (108 registers, no spill) on an H100
// (ops/bench/gpu-2026-12-06-ae.md); with the older products four had been 0.4 – 3 % faster
// than three on an H200 (c2q's $C2Q_KERNEL_DEFINES can override it for tuning runs). No more
// than the SM's shared memory holds, though (c2q passes C2Q_SHARED_PER_SM): three tiles fit in
// the 100 KB of sm_86, sm_89 and sm_120 too.
#define NTT_TILE_SHARED (NTT_TILE * 32 + 1024)  // the tile, and the 1 KB the runtime reserves
#ifndef C2Q_NTT_BLOCKS
#if defined(C2Q_SHARED_PER_SM)
#define C2Q_NTT_BLOCKS \
    (C2Q_SHARED_PER_SM / NTT_TILE_SHARED >= 3 ? 3 \
     : C2Q_SHARED_PER_SM / NTT_TILE_SHARED >= 1 ? C2Q_SHARED_PER_SM / NTT_TILE_SHARED : 1)
#else
#define C2Q_NTT_BLOCKS 3
#endif
#endif
//
// C2Q_NTT_RADIX = 2 runs every step as radix-2 butterflies (two tile elements and one twiddle
// live per thread instead of four and three), for comparison.
#ifndef C2Q_NTT_RADIX
#define C2Q_NTT_RADIX 4
#endif
#ifndef C2Q_NTT_HI_FIRST
#define C2Q_NTT_HI_FIRST 1
#endif

// The pass itself. Inlined with constant `is_dif` and `inv` (below), each direction is its own
// code, without branches or selects on the direction inside its butterflies.
DEV void ntt_pass_body(Fr* tile, u32* data, u32 s, u32 k, u32 lo_log, const u32* tw, bool is_dif,
                       bool inv) {
    // Indices are 32-bit: domains are at most 2^28 elements (src/gpu/ntt.rs, MAX_LOG_N), and the
    // twiddle table has fewer entries; byte offsets are formed in 64 bits by load_fr/store_fr.
    const u32 elems = 1u << (k + lo_log);
    const u32 lo_mask = (1u << lo_log) - 1;
    const u32 lo_groups_log = s - lo_log;
    const u32 blk = blockIdx.x;
#if C2Q_NTT_HI_FIRST
    // Blocks that differ only in their high index bits use the same twiddles: numbered next
    // to one another, they run together, and all but the first find the twiddles in L2 (from
    // stage 20 on a stage's table outgrows L2, and each block's twiddles are a third of the
    // bytes it moves).
    // The grid has 2^(L − k − lo_log) blocks, 2^(s − lo_log) of them per value of hi.
    const u32 hi_log = __ffs(gridDim.x) - 1 - lo_groups_log;
    const u32 hi = blk & ((1u << hi_log) - 1);
    const u32 lo_base = (blk >> hi_log) << lo_log;
#else
    const u32 hi = blk >> lo_groups_log;
    const u32 lo_base = (blk & ((1u << lo_groups_log) - 1)) << lo_log;
#endif

    // Loads in rounds of four per thread, all issued before any is stored to the tile: one
    // memory latency per round rather than one per element.
    auto tile_index = [&](u32 f) {
        return lo_base + (f & lo_mask) + ((f >> lo_log) << s) + (hi << (s + k));
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
        const bool two = C2Q_NTT_RADIX == 4 && k - done >= 2;
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
                const u32 e = lo_base + lo_off + ((j0 & low) << s);
                Fr x0 = tile[f0], x1 = tile[f0 + h], x2 = tile[f0 + 2 * h], x3 = tile[f0 + 3 * h];
                // Each twiddle is loaded where its butterflies begin, so that no more than two
                // are live beside the four elements (loading all three ahead spilled more
                // registers and ran 1 % slower).
                const Fr w_hi1 = twiddle(tw, e + (1u << (s + u)), s + u + 1, inv);
                if (s + u == 0) {
                    // Stages 0 and 1 of the whole transform: e = 0, so w_lo = w_0^0 and
                    // w_hi0 = w_1^0 are 1 and three of the four products can go (the same for
                    // the whole block: no divergence).
                    if (is_dif) {
                        butterfly_unit(x0, x2);
                        butterfly(x1, x3, w_hi1, true, inv);
                        butterfly_unit(x0, x1);
                        butterfly_unit(x2, x3);
                    } else {
                        butterfly_unit(x0, x1);
                        butterfly_unit(x2, x3);
                        butterfly_unit(x0, x2);
                        butterfly(x1, x3, w_hi1, false, inv);
                    }
                } else if (is_dif) {
                    const Fr w_hi0 = twiddle(tw, e, s + u + 1, inv);
                    butterfly(x0, x2, w_hi0, true, inv);
                    butterfly(x1, x3, w_hi1, true, inv);
                    const Fr w_lo = twiddle(tw, e, s + u, inv);
                    butterfly(x0, x1, w_lo, true, inv);
                    butterfly(x2, x3, w_lo, true, inv);
                } else {
                    const Fr w_lo = twiddle(tw, e, s + u, inv);
                    butterfly(x0, x1, w_lo, false, inv);
                    butterfly(x2, x3, w_lo, false, inv);
                    const Fr w_hi0 = twiddle(tw, e, s + u + 1, inv);
                    butterfly(x0, x2, w_hi0, false, inv);
                    butterfly(x1, x3, w_hi1, false, inv);
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
                const u32 e = lo_base + lo_off + ((j0 & low) << s);
                Fr x = tile[f0], y = tile[f1];
                butterfly(x, y, twiddle(tw, e, s + u, inv), is_dif, inv);
                tile[f0] = x;
                tile[f1] = y;
            }
        }
        __syncthreads();
        done += two ? 2 : 1;
    }

    for (u32 f = threadIdx.x; f < elems; f += blockDim.x) store_fr(data, tile_index(f), tile[f]);
}

// C2Q_NTT_SPECIALIZE = 0 keeps one body for all four directions, the flags read at run time,
// for comparison.
#ifndef C2Q_NTT_SPECIALIZE
#define C2Q_NTT_SPECIALIZE 1
#endif
extern "C" __global__ void __launch_bounds__(256, C2Q_NTT_BLOCKS) ntt_pass(u32* data, u32 s, u32 k,
                                                             u32 lo_log, const u32* tw,
                                                             u32 dif, u32 inverse) {
    __shared__ Fr tile[NTT_TILE];
#if C2Q_NTT_SPECIALIZE
    // The flags are the same for the whole grid: no divergence.
    if (dif) {
        if (inverse) ntt_pass_body(tile, data, s, k, lo_log, tw, true, true);
        else ntt_pass_body(tile, data, s, k, lo_log, tw, true, false);
    } else {
        if (inverse) ntt_pass_body(tile, data, s, k, lo_log, tw, false, true);
        else ntt_pass_body(tile, data, s, k, lo_log, tw, false, false);
    }
#else
    ntt_pass_body(tile, data, s, k, lo_log, tw, dif != 0, inverse != 0);
#endif
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

