// Runs kernels/ntt.cu on the CPU (emulate.h) and compares pass plans of every shape (so both
// the radix-4 steps and the radix-2 step of an odd stage count run) and both bit-reversal
// kernels with a textbook NTT.
// Built and run by .ci/check-kernels; exits non-zero on the first mismatch.
#include "emulate.h"
#include "../ntt.cu"

#include <algorithm>
#include <array>
#include <cstdio>
#include <random>

static Fr fr_small(u32 v) {
    Fr r = fe_zero<FrTag>();
    r.v[0] = v;
    return fr_to_mont(r);
}

static Fr fr_pow(Fr b, const u32* e, int limbs) {
    Fr r = fe_one<FrTag>();
    for (int i = limbs - 1; i >= 0; i--)
        for (int bit = 31; bit >= 0; bit--) {
            r = fe_mul<FrTag>(r, r);
            if ((e[i] >> bit) & 1) r = fe_mul<FrTag>(r, b);
        }
    return r;
}

// A primitive 2^log_n-th root of unity: 7^((r − 1)/2^32) has order 2^32 (7 generates Fr*).
static Fr omega(u32 log_n) {
    u32 e[7];
    for (int i = 0; i < 7; i++) e[i] = FR_MOD[i + 1];  // (r − 1) >> 32: r's low limb is 1
    Fr w = fr_pow(fr_small(7), e, 7);
    for (u32 i = log_n; i < 32; i++) w = fe_mul<FrTag>(w, w);
    return w;
}

static Fr fr_pow_u64(Fr b, unsigned long long e) {
    u32 limbs[2] = {(u32)e, (u32)(e >> 32)};
    return fr_pow(b, limbs, 2);
}

static void bitrev_host(std::vector<Fr>& v, u32 log_n) {
    for (size_t i = 0; i < v.size(); i++) {
        size_t j = log_n == 0 ? 0 : (__brev((u32)i) >> (32 - log_n));
        if (i < j) std::swap(v[i], v[j]);
    }
}

// Iterative Cooley–Tukey: out[k] = Σ x_j w^(jk).
static void ref_ntt(std::vector<Fr>& a, Fr w, u32 log_n) {
    bitrev_host(a, log_n);
    size_t n = a.size();
    for (size_t len = 2; len <= n; len <<= 1) {
        Fr wl = fr_pow_u64(w, n / len);
        for (size_t i = 0; i < n; i += len) {
            Fr wp = fe_one<FrTag>();
            for (size_t j = 0; j < len / 2; j++) {
                Fr u = a[i + j], v = fe_mul<FrTag>(a[i + j + len / 2], wp);
                a[i + j] = fe_add<FrTag>(u, v);
                a[i + j + len / 2] = fe_sub<FrTag>(u, v);
                wp = fe_mul<FrTag>(wp, wl);
            }
        }
    }
}

static bool same(const std::vector<Fr>& a, const std::vector<Fr>& b) {
    for (size_t i = 0; i < a.size(); i++)
        if (!fe_eq<FrTag>(a[i], b[i])) return false;
    return true;
}

// Same plan as `passes` in src/gpu/ntt.rs.
static std::vector<std::array<u32, 3>> passes(u32 log_n, u32 run) {
    std::vector<std::array<u32, 3>> out;
    u32 s = 0;
    while (s < log_n) {
        u32 k = std::min(log_n - s, 10 - std::min(s, run));
        u32 lo = std::min(s, 10 - k);
        out.push_back({s, k, lo});
        s += k;
    }
    return out;
}

struct Plan {
    u32 run;  // log2 of the run of consecutive elements per tile row
    bool tiled;  // bit reversal by tiles (log n >= 8) or by pairwise swaps
};

static std::vector<u32> to_limbs(const std::vector<Fr>& v) {
    std::vector<u32> out(v.size() * 8);
    for (size_t i = 0; i < v.size(); i++)
        for (int l = 0; l < 8; l++) out[i * 8 + l] = v[i].v[l];
    return out;
}

static std::vector<Fr> from_limbs(const std::vector<u32>& d) {
    std::vector<Fr> out(d.size() / 8);
    for (size_t i = 0; i < out.size(); i++)
        for (int l = 0; l < 8; l++) out[i].v[l] = d[i * 8 + l];
    return out;
}

static void transform(std::vector<u32>& d, const std::vector<u32>& tw, u32 log_n, bool dif,
                      bool inverse, const Plan& p) {
    auto list = passes(log_n, p.run);
    if (dif) std::reverse(list.begin(), list.end());
    for (auto [s, k, lo] : list) {
        u32 grid = 1u << (log_n - k - lo);
        u32 block = std::clamp(((1u << (k + lo)) + 3) / 4, 32u, 256u);
        emu_launch(grid, block, [&] {
            ntt_pass(d.data(), s, k, lo, tw.data(), dif, inverse);
        });
    }
}

static void bit_reverse(std::vector<u32>& d, u32 log_n, bool tiled) {
    if (log_n >= 8 && tiled) {
        emu_launch(1u << (log_n - 8), 256, [&] { bit_reverse_tiles(d.data(), log_n); });
    } else {
        u32 n = 1u << log_n;
        emu_launch((n + 255) / 256, 256, [&] { bit_reverse_permute(d.data(), log_n); });
    }
}

int main() {
    std::mt19937_64 rng(11);
    auto random_fr = [&] {
        Fr r;
        for (int l = 0; l < 8; l++) r.v[l] = (u32)rng();
        r.v[7] &= 0x3fffffff;  // below r
        return r;
    };
    // The reference against a direct DFT first.
    for (u32 log_n = 0; log_n <= 5; log_n++) {
        size_t n = 1u << log_n;
        std::vector<Fr> x(n);
        for (auto& v : x) v = random_fr();
        std::vector<Fr> want(n, fe_zero<FrTag>());
        Fr w = omega(log_n);
        for (size_t k = 0; k < n; k++)
            for (size_t j = 0; j < n; j++)
                want[k] = fe_add<FrTag>(want[k], fe_mul<FrTag>(x[j], fr_pow_u64(w, j * k)));
        ref_ntt(x, w, log_n);
        if (!same(x, want)) {
            printf("FAIL reference NTT 2^%u\n", log_n);
            return 1;
        }
    }

    // Up to 2^13 every plan runs; at 2^18 (the default plan only) a middle pass has several
    // values of the high index bits, so the blocks' numbering (C2Q_NTT_HI_FIRST) is covered.
    const u32 max_log = 18, max_log_all_plans = 13;
    std::vector<u32> tw;
    for (u32 t = 0; t < max_log; t++) {
        Fr w = omega(t + 1), p = fe_one<FrTag>();
        for (u32 e = 0; e <= (1u << t); e++) {  // w_t^0 .. w_t^(2^t): kernels/ntt.cu's layout
            for (int l = 0; l < 8; l++) tw.push_back(p.v[l]);
            p = fe_mul<FrTag>(p, w);
        }
    }

    int checks = 0;
    std::vector<Plan> plans;
    for (u32 run = 0; run <= 3; run++) plans.push_back({run, true});
    plans.push_back({3, false});
    for (u32 log_n = 1; log_n <= max_log; log_n++) {
        if (log_n > max_log_all_plans && log_n < max_log) continue;
        size_t n = 1u << log_n;
        std::vector<Fr> x(n);
        for (auto& v : x) v = random_fr();
        Fr w = omega(log_n), winv = fr_pow_u64(w, n - 1);
        std::vector<Fr> fwd = x, back = x;
        ref_ntt(fwd, w, log_n);
        ref_ntt(back, winv, log_n);
        for (const Plan& p : plans) {
            if (log_n > max_log_all_plans && !(p.run == 3 && p.tiled)) continue;
            const char* what[4] = {"DIF forward", "DIF inverse", "DIT forward", "DIT inverse"};
            for (int c = 0; c < 4; c++) {
                const bool dit = c >= 2, inverse = c % 2 == 1;
                std::vector<Fr> in = x;
                if (dit) bitrev_host(in, log_n);
                std::vector<u32> d = to_limbs(in);
                transform(d, tw, log_n, !dit, inverse, p);
                if (!dit) bit_reverse(d, log_n, p.tiled);
                const std::vector<Fr>& want = inverse ? back : fwd;
                checks++;
                if (!same(from_limbs(d), want)) {
                    printf("FAIL %s 2^%u run %u tiled %d\n", what[c], log_n, p.run, p.tiled);
                    return 1;
                }
            }
        }
    }
    printf("ntt kernels on the CPU: %d checks passed\n", checks);
    return 0;
}
