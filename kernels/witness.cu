// A partition's witness on the device, from its compact form (src/groth16/witness.rs): two
// bitmaps over the variables (value is one; value is neither zero nor one) and the values that
// are neither, in order. A 32 GiB partition's aux variables travel as ~90 MB this way instead
// of 4.2 GB of scalars, and the selections of the A and B queries are made here instead of by
// host threads copying gigabytes.
//
// Bitmaps are 64-bit words, variable i at bit i % 64 of word i / 64. `before[w]` is the number
// of set bits in words 0 .. w − 1 (an exclusive prefix count, made on the host), so every
// thread finds its place without scanning.
#include "field.cuh"

// Set bits of `word` below bit `bit`.
DEV u32 bits_below(u64 word, u32 bit) {
    return (u32)__popcll(word & (((u64)1 << bit) - 1));
}

// out[i] for i < n: one, the next "other" value, or zero. One thread per variable.
extern "C" __global__ void witness_expand(const u64* ones, const u64* others, const u32* before,
                                          const u32* values, u32 n, u32* out) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const u32 w = i >> 6, bit = i & 63;
    Fr v;
    if ((ones[w] >> bit) & 1) {
        v = fe_one<FrTag>();
    } else if ((others[w] >> bit) & 1) {
        v = load_fr(values, before[w] + bits_below(others[w], bit));
    } else {
        v = fe_zero<FrTag>();
    }
    store_fr(out, i, v);
}

// The scalars of the variables a density marks, in order: src[i] goes to
// out[offset + (marks before i)] for every marked i < n. One thread per variable.
extern "C" __global__ void witness_select(const u32* src, const u64* density, const u32* before,
                                          u32 n, u32* out, u32 offset) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const u32 w = i >> 6, bit = i & 63;
    const u64 word = density[w];
    if (!((word >> bit) & 1)) return;
    store_fr(out, (u64)offset + before[w] + bits_below(word, bit), load_fr(src, i));
}
