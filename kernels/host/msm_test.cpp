// Runs the bucket accumulation of kernels/msm.cu (msm_accumulate, msm_bucket_fix) on the CPU
// (emulate.h) with several chunk lengths, so that buckets straddle chunks in every way, and
// compares every bucket sum with a plain sequential sum. The buckets cover the cases the
// kernels must get right: empty, single, one large bucket, points at infinity, a point added to
// itself (doubling) and to its negation (infinity). Then the window sort that feeds it
// (msm_histogram, msm_scatter), checked bucket by bucket. Built and run by .ci/check-kernels.
#include "emulate.h"
#include "../msm.cu"

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

typedef std::vector<u32> Buf;

static Fp fp_pow(Fp b, const u32* e) {
    Fp r = fe_one<FpTag>();
    for (int i = 11; i >= 0; i--)
        for (int bit = 31; bit >= 0; bit--) {
            r = fe_sqr<FpTag>(r);
            if ((e[i] >> bit) & 1) r = fe_mul<FpTag>(r, b);
        }
    return r;
}

// A random point of y² = x³ + 4 (square roots by a^((p+1)/4), p ≡ 3 mod 4).
static Affine<Fp> random_point(std::mt19937_64& rng) {
    u32 e[12];
    unsigned long long carry = 1;
    for (int i = 0; i < 12; i++) {
        carry += FP_MOD[i];
        e[i] = (u32)carry;
        carry >>= 32;
    }
    for (int i = 0; i < 12; i++) e[i] = (e[i] >> 2) | (i < 11 ? e[i + 1] << 30 : 0);
    Fp four = fe_one<FpTag>();
    four = fe_add<FpTag>(four, four);
    four = fe_add<FpTag>(four, four);
    for (;;) {
        Fp x;
        for (int i = 0; i < 12; i++) x.v[i] = (u32)rng();
        x.v[11] &= 0x0fffffff;  // below p
        Fp rhs = fe_add<FpTag>(fe_mul<FpTag>(fe_sqr<FpTag>(x), x), four);
        Fp y = fp_pow(rhs, e);
        if (fe_eq<FpTag>(fe_sqr<FpTag>(y), rhs)) return {x, y};
    }
}

static bool same_point(const Xyzz<Fp>& a, const Xyzz<Fp>& b) {
    if (xyzz_is_inf(a) || xyzz_is_inf(b)) return xyzz_is_inf(a) && xyzz_is_inf(b);
    return fe_eq<FpTag>(fe_mul<FpTag>(a.x, b.zz), fe_mul<FpTag>(b.x, a.zz)) &&
           fe_eq<FpTag>(fe_mul<FpTag>(a.y, b.zzz), fe_mul<FpTag>(b.y, a.zzz));
}

// Whether every coordinate of an XYZZ point is below k·p: the buckets the kernels leave in
// device memory are canonical (k = 1), or below 2p with lazy reduction (C2Q_LAZY=1).
static bool below_multiple(const Xyzz<Fp>& a, u32 k) {
    u32 kp[12];
    u64 carry = 0;
    for (int i = 0; i < 12; i++) {
        carry += (u64)FpTag::mod(i) * k;
        kp[i] = (u32)carry;
        carry >>= 32;
    }
    for (const Fp* x : {&a.x, &a.y, &a.zz, &a.zzz}) {
        u64 borrow = 0;  // x − k·p borrows when x < k·p
        for (int i = 0; i < 12; i++) borrow = (((u64)x->v[i] - kp[i] - borrow) >> 32) & 1;
        if (!borrow) return false;
    }
    return true;
}

#if defined(C2Q_LAZY_CHAINS)
static const u32 BOUND = 2;
#else
static const u32 BOUND = 1;
#endif

static void host_scan(const Buf& counts, Buf& offsets) {
    offsets.assign(counts.size(), 0);
    u32 run = 0;
    for (size_t i = 0; i < counts.size(); i++) {
        offsets[i] = run;
        run += counts[i];
    }
}

static unsigned grid_for(size_t threads, unsigned block) { return (unsigned)((threads + block - 1) / block); }

// A window's counting sort (msm_histogram, a scan, msm_scatter) on digits with empty entries,
// a bucket holding a fifth of them, and few or many buckets: each bucket's run of the sorted
// list must hold exactly that bucket's entries (point index | sign << 31), whatever their order.
// Returns the checks passed, or −1.
static int sort_checks(std::mt19937_64& rng) {
    int checks = 0;
    for (u32 nb : {16u, 4096u})
    for (u32 m : {1u, 2047u, 9000u}) {
        Buf enc(m), idx(m);
        std::vector<std::vector<u32>> want(nb);
        for (u32 i = 0; i < m; i++) {
            const u64 x = rng();
            const u32 b = x % 5 == 0 ? 3 : (u32)((x >> 8) % nb);
            const u32 neg = (u32)(x >> 40) & 1;
            enc[i] = x % 13 == 0 ? 0 : 1 + ((b << 1) | neg);
            idx[i] = (u32)(x >> 41) & 0x3fffffffu;
            if (enc[i] != 0) want[b].push_back(idx[i] | (neg << 31));
        }
        Buf counts(nb + 1, 0), offsets, fill(nb, 0), sorted(m, 0xdeadbeefu);
        emu_launch(2, 128, [&] { msm_histogram(enc.data(), m, counts.data()); });
        host_scan(counts, offsets);
        emu_launch(3, 64, [&] {
            msm_scatter(enc.data(), idx.data(), m, offsets.data(), fill.data(), sorted.data());
        });
        for (u32 b = 0; b < nb; b++) {
            checks++;
            Buf got(sorted.begin() + offsets[b], sorted.begin() + offsets[b + 1]);
            Buf expect = want[b];
            std::sort(got.begin(), got.end());
            std::sort(expect.begin(), expect.end());
            if (got != expect) {
                printf("FAIL sort, bucket %u of %u, %u entries\n", b, nb, m);
                return -1;
            }
        }
    }
    return checks;
}

int main() {
    std::mt19937_64 rng(3);
    const u32 npoints = 300;
    std::vector<Affine<Fp>> pts;
    for (u32 i = 0; i < npoints; i++) pts.push_back(random_point(rng));
    pts[7].x = fe_zero<FpTag>();  // points at infinity, as parameters may hold them
    pts[7].y = fe_zero<FpTag>();
    pts[8] = pts[7];
    Buf points(npoints * 24);
    for (u32 i = 0; i < npoints; i++)
        for (int l = 0; l < 12; l++) {
            points[i * 24 + l] = pts[i].x.v[l];
            points[i * 24 + 12 + l] = pts[i].y.v[l];
        }

    // Bucket contents: entries (point index | sign << 31).
    const u32 nb = 41;
    std::vector<std::vector<u32>> content(nb);
    for (u32 b = 0; b < nb; b++) {
        u32 k = b % 7 == 0 ? 0 : (u32)(rng() % 12);  // empty and small buckets
        if (b == 5) k = 1;
        if (b == 20) k = 700;  // one large bucket
        for (u32 i = 0; i < k; i++) content[b].push_back((u32)(rng() % npoints) | ((u32)(rng() & 1) << 31));
    }
    content[3] = {11, 11};                       // P + P
    content[4] = {12, 12u | (1u << 31), 13};     // P − P + Q
    content[6] = {7, 8, 14};                     // ∞ + ∞ + P
    content[9] = {7};                            // ∞ alone
    content[10] = {15, 15, 15, 15, 15, 16};      // repeated doublings

    Buf sorted, counts(nb + 1, 0), offsets;
    for (u32 b = 0; b < nb; b++) {
        counts[b] = (u32)content[b].size();
        sorted.insert(sorted.end(), content[b].begin(), content[b].end());
    }
    host_scan(counts, offsets);

    std::vector<Xyzz<Fp>> want(nb, xyzz_inf<Fp>());
    for (u32 b = 0; b < nb; b++)
        for (u32 e : content[b])
            want[b] = xyzz_add_affine_any(want[b], pts[e & 0x7fffffffu], (e >> 31) != 0);

    int checks = 0;
    // Continuation slots folded in groups of 1 (no fold), 2, 3 and 64 chunks: runs of one
    // bucket's slots start and end inside groups and across them.
    for (u32 chunk : {1u, 2u, 3u, 4u, 7u, 64u, 1024u})
    for (u32 group : {1u, 2u, 3u, 64u}) {
        u32 total = offsets[nb];
        u32 chunks = (total + chunk - 1) / chunk;
        Buf buckets((size_t)nb * 48), cont((size_t)(chunks + 1) * 48);
        emu_launch(grid_for(chunks, 32), 32, [&] {
            msm_accumulate(sorted.data(), offsets.data(), nb, chunk, points.data(), buckets.data(),
                           cont.data());
        });
        if (group > 1)
            emu_launch(grid_for((chunks + group - 1) / group, 32), 32, [&] {
                msm_cont_fold(cont.data(), offsets.data(), nb, chunk, group);
            });
        emu_launch(grid_for(nb, 32), 32, [&] {
            msm_bucket_fix(buckets.data(), cont.data(), offsets.data(), nb, chunk, group);
        });
        for (u32 b = 0; b < nb; b++) {
            checks++;
            const Xyzz<Fp> got = load_xyzz<Fp>(buckets.data(), b);
            if (!same_point(got, want[b]) || !below_multiple(got, BOUND)) {
                printf("FAIL bucket %u (%zu points), chunks of %u, folded in groups of %u\n", b,
                       content[b].size(), chunk, group);
                return 1;
            }
        }
    }
    printf("msm bucket accumulation on the CPU: %d checks passed\n", checks);
    const int sort_passed = sort_checks(rng);
    if (sort_passed < 0) return 1;
    printf("msm window sort on the CPU: %d checks passed\n", sort_passed);
    return 0;
}
