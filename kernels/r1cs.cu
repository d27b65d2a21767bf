// A, B and C evaluations of a recorded constraint system (src/groth16/r1cs.rs): for each row r
// of a matrix, out[r] = Σ coefficient · value over the row's terms. A term is two words: the
// variable (bit 31 set for an input, else an aux index) and the index of its coefficient in a
// table of distinct coefficients (index 0 is one). Values and coefficients are Fr in Montgomery
// form, as the host holds them. Rows past the matrix, up to the transform's domain, are zero.
//
// One thread per row: rows hold one to three terms in the main, and a value of zero (half the
// witness) or one (the other half, nearly) needs no product.
#include "field.cuh"

// The bit marking an input variable in a term, as src/groth16/r1cs.rs encodes it; c2q passes it.
#ifndef INPUT_BIT
#error "INPUT_BIT is passed by c2q as -DINPUT_BIT=... (src/gpu/kernels.rs)"
#endif

DEV bool fr_equal(const Fr& a, const Fr& b) {
    u32 d = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) d |= a.v[i] ^ b.v[i];
    return d == 0;
}

extern "C" __global__ void r1cs_rows(const u32* ends, const u32* terms, u32 rows, u32 domain,
                                     const u32* coeffs, const u32* aux, const u32* inputs,
                                     u32* out) {
    const u32 r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= domain) return;
    Fr acc = fe_zero<FrTag>();
    if (r < rows) {
        const Fr one = fe_one<FrTag>();
        const Fr zero = fe_zero<FrTag>();
        const u32 end = ends[r];
        for (u32 t = r == 0 ? 0 : ends[r - 1]; t < end; t++) {
            const u32 var = terms[2 * (u64)t], c = terms[2 * (u64)t + 1];
            const Fr v = (var & INPUT_BIT) ? load_fr(inputs, var & ~INPUT_BIT) : load_fr(aux, var);
            if (fr_equal(v, zero)) continue;
            Fr term;
            if (c == 0) {
                term = v;
            } else {
                const Fr k = load_fr(coeffs, c);
                term = fr_equal(v, one) ? k : fe_mul<FrTag>(k, v);
            }
            acc = fe_add<FrTag>(acc, term);
        }
    }
    store_fr(out, r, acc);
}
