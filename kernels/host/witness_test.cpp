// Runs witness_expand and witness_select of kernels/witness.cu on the CPU (emulate.h) over a
// witness of zeros, ones and other values whose length is not a multiple of 64, and compares
// them with plain sequential reference code. Built and run by .ci/check-kernels.
#include "emulate.h"
#include "../witness.cu"

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

static int failures = 0;

static void check(bool ok, const char* what, size_t i) {
    if (!ok && failures++ < 10) std::printf("witness_test: %s differs at %zu\n", what, i);
}

// Exclusive prefix counts of set bits per word, as the host makes them.
static std::vector<u32> before(const std::vector<u64>& words) {
    std::vector<u32> out(words.size());
    u32 run = 0;
    for (size_t w = 0; w < words.size(); w++) {
        out[w] = run;
        run += __builtin_popcountll(words[w]);
    }
    return out;
}

int main() {
    std::mt19937_64 rng(7);
    const u32 n = 64 * 37 + 21;
    const u32 words = (n + 63) / 64;
    // Reference values: ~half zero, ~half one, a few others (as PoRep witnesses are), then a
    // run of others to cover whole words of them.
    std::vector<u32> values(n * 8, 0);
    std::vector<u64> ones(words, 0), others(words, 0);
    std::vector<u32> kept;
    const Fr one = fe_one<FrTag>();
    for (u32 i = 0; i < n; i++) {
        u32 kind = (i >= 640 && i < 800) ? 2 : (u32)(rng() % 100);
        kind = kind == 2 ? 2 : (kind < 50 ? 0 : (kind < 97 ? 1 : 2));
        Fr v = fe_zero<FrTag>();
        if (kind == 1) {
            v = one;
            ones[i / 64] |= (u64)1 << (i % 64);
        } else if (kind == 2) {
            for (int k = 0; k < 8; k++) v.v[k] = (u32)rng();
            v.v[7] &= 0x0fffffff;
            others[i / 64] |= (u64)1 << (i % 64);
            for (int k = 0; k < 8; k++) kept.push_back(v.v[k]);
        }
        store_fr(values.data(), i, v);
    }
    const std::vector<u32> others_before = before(others);

    std::vector<u32> out(n * 8, 0xdeadbeef);
    emu_launch((n + 127) / 128, 128, [&] {
        witness_expand(ones.data(), others.data(), others_before.data(), kept.data(), n, out.data());
    });
    for (u32 i = 0; i < n * 8; i++) check(out[i] == values[i], "expand", i / 8);

    // Select through a random density into a buffer with a head of `offset` scalars.
    std::vector<u64> density(words, 0);
    for (u32 i = 0; i < n; i++)
        if (rng() % 3 != 0) density[i / 64] |= (u64)1 << (i % 64);
    const std::vector<u32> density_before = before(density);
    const u32 offset = 5;
    std::vector<u32> want;
    for (u32 i = 0; i < offset * 8; i++) want.push_back(0xabcd0000u + i);
    for (u32 i = 0; i < n; i++)
        if ((density[i / 64] >> (i % 64)) & 1)
            for (int k = 0; k < 8; k++) want.push_back(values[i * 8 + k]);
    std::vector<u32> selected(want.size(), 0xdeadbeef);
    std::memcpy(selected.data(), want.data(), offset * 8 * sizeof(u32));
    emu_launch((n + 127) / 128, 128, [&] {
        witness_select(out.data(), density.data(), density_before.data(), n, selected.data(), offset);
    });
    for (size_t i = 0; i < want.size(); i++) check(selected[i] == want[i], "select", i / 8);

    if (failures) {
        std::printf("witness_test: %d mismatches\n", failures);
        return 1;
    }
    std::printf("witness_test: expand and select of %u variables match\n", n);
    return 0;
}
