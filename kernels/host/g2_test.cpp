// Runs the MSM kernels of kernels/msm.cu on the CPU (emulate.h), G1 and G2 over one sort, as
// c2q runs Groth16's B query: the scalars are classified and sorted by bucket once (digits,
// histogram, scan and scatter are the kernels' own; only the classification, whose warp
// ballots the emulation cannot run, is done here), then the bucket accumulation, the bucket
// fixes, the window reductions, the tree sums and the sum of the ones run for both groups over
// the same sorted lists and the same list of ones. Built and run by .ci/check-kernels.
//
// The answer is known in closed form: every point is P_i = k_i·G for a generator G and a
// known k_i (0 for points at infinity, negative for negated points), so Σ s_i·P_i = K·G with
// K = Σ s_i·k_i mod r, computed in Fr. K·G is computed by plain double-and-add in ordinary
// Jacobian coordinates, which shares no formula with the kernels' XYZZ arithmetic. The Fp2
// arithmetic itself is checked against schoolbook formulas first, and gen.cu's point
// generation (`gen_points`, `gen_points_g2`) against the same reference.
#include "emulate.h"
#include "../msm.cu"
#include "../gen.cu"

#include <cstdio>
#include <random>
#include <vector>

typedef std::vector<u32> Buf;

static int failures = 0, checks = 0;

static void check(bool ok, const char* what) {
    checks++;
    if (!ok) {
        failures++;
        printf("FAIL %s\n", what);
    }
}

// --- Values --------------------------------------------------------------------------------

static Fp random_fp(std::mt19937_64& rng) {
    Fp x;
    for (int i = 0; i < 12; i++) x.v[i] = (u32)rng();
    x.v[11] &= 0x0fffffff;  // below p
    return x;
}

static Fp2 random_fp2(std::mt19937_64& rng) { return {random_fp(rng), random_fp(rng)}; }

// A canonical Fr value below r.
static Fr random_fr_canonical(std::mt19937_64& rng) {
    Fr x;
    for (int i = 0; i < 8; i++) x.v[i] = (u32)rng();
    x.v[7] &= 0x3fffffff;  // below r
    return x;
}

static Fr fr_mont_small(u32 k) {
    Fr x = fe_zero<FrTag>();
    x.v[0] = k;
    return fr_to_mont(x);
}

// Fp from blst's 64-bit limbs (Montgomery form).
static Fp fp_from64(const unsigned long long (&w)[6]) {
    Fp r;
    for (int i = 0; i < 6; i++) {
        r.v[2 * i] = (u32)w[i];
        r.v[2 * i + 1] = (u32)(w[i] >> 32);
    }
    return r;
}

// The generators, from blst (e1.c, e2.c), in Montgomery form.
static Affine<Fp> g1_generator() {
    const unsigned long long x[6] = {0x5cb38790fd530c16, 0x7817fc679976fff5, 0x154f95c7143ba1c1,
                                     0xf0ae6acdf3d0e747, 0xedce6ecc21dbf440, 0x120177419e0bfb75};
    const unsigned long long y[6] = {0xbaac93d50ce72271, 0x8c22631a7918fd8e, 0xdd595f13570725ce,
                                     0x51ac582950405194, 0x0e1c8c3fad0059c0, 0x0bbc3efc5008a26a};
    return {fp_from64(x), fp_from64(y)};
}

static Affine<Fp2> g2_generator() {
    const unsigned long long x0[6] = {0xf5f28fa202940a10, 0xb3f5fb2687b4961a, 0xa1a893b53e2ae580,
                                      0x9894999d1a3caee9, 0x6f67b7631863366b, 0x058191924350bcd7};
    const unsigned long long x1[6] = {0xa5a9c0759e23f606, 0xaaa0c59dbccd60c3, 0x3bb17e18e2867806,
                                      0x1b1ab6cc8541b367, 0xc2b6ed0ef2158547, 0x11922a097360edf3};
    const unsigned long long y0[6] = {0x4c730af860494c4a, 0x597cfa1f5e369c5a, 0xe7e6856caa0a635a,
                                      0xbbefb5e96e0d495f, 0x07d3a975f0ef25a2, 0x0083fd8e7e80dae5};
    const unsigned long long y1[6] = {0xadc0fc92df64b05d, 0x18aa270a2b1461dc, 0x86adac6a3be4eba0,
                                      0x79495c4ec93da33a, 0xe7175850a43ccaed, 0x0b2bc2a163de1bf2};
    return {{fp_from64(x0), fp_from64(x1)}, {fp_from64(y0), fp_from64(y1)}};
}

// The curves' b: 4 in G1, 4(1 + u) in G2.
static Fp curve_b(Fp) {
    Fp four = fe_one<FpTag>();
    four = fe_dbl<FpTag>(fe_dbl<FpTag>(four));
    return four;
}

static Fp2 curve_b(Fp2) {
    Fp four = curve_b(Fp());
    return {four, four};
}

static Fp invert(const Fp& a) { return fp_inv(a); }
static Fp2 invert(const Fp2& a) { return fp2_inv(a); }

// --- Reference arithmetic: ordinary Jacobian coordinates, infinity as Z = 0 ---------------

template <class F>
static Jacobian<F> jac_inf() {
    typedef Coord<F> K;
    return {K::one(), K::one(), K::zero()};
}

template <class F>
static bool jac_is_inf(const Jacobian<F>& p) {
    return Coord<F>::is_zero(p.z);
}

// dbl-2009-l (a = 0).
template <class F>
static Jacobian<F> jac_dbl(const Jacobian<F>& p) {
    typedef Coord<F> K;
    if (jac_is_inf(p)) return p;
    F a = K::sqr(p.x), b = K::sqr(p.y), c = K::sqr(b);
    F d = K::dbl(K::sub(K::sub(K::sqr(K::add(p.x, b)), a), c));
    F e = K::add(K::dbl(a), a), f = K::sqr(e);
    Jacobian<F> r;
    r.x = K::sub(f, K::dbl(d));
    F c8 = K::dbl(K::dbl(K::dbl(c)));
    r.y = K::sub(K::mul(e, K::sub(d, r.x)), c8);
    r.z = K::dbl(K::mul(p.y, p.z));
    return r;
}

// add-1998-cmo-2.
template <class F>
static Jacobian<F> jac_add(const Jacobian<F>& p, const Jacobian<F>& q) {
    typedef Coord<F> K;
    if (jac_is_inf(p)) return q;
    if (jac_is_inf(q)) return p;
    F z1z1 = K::sqr(p.z), z2z2 = K::sqr(q.z);
    F u1 = K::mul(p.x, z2z2), u2 = K::mul(q.x, z1z1);
    F s1 = K::mul(p.y, K::mul(q.z, z2z2)), s2 = K::mul(q.y, K::mul(p.z, z1z1));
    F h = K::sub(u2, u1), rr = K::sub(s2, s1);
    if (K::is_zero(h)) return K::is_zero(rr) ? jac_dbl(p) : jac_inf<F>();
    F hh = K::sqr(h), hhh = K::mul(h, hh), v = K::mul(u1, hh);
    Jacobian<F> r;
    r.x = K::sub(K::sub(K::sqr(rr), hhh), K::dbl(v));
    r.y = K::sub(K::mul(rr, K::sub(v, r.x)), K::mul(s1, hhh));
    r.z = K::mul(K::mul(p.z, q.z), h);
    return r;
}

template <class F>
static Jacobian<F> jac_from_affine(const Affine<F>& a) {
    if (affine_is_inf(a)) return jac_inf<F>();
    return {a.x, a.y, Coord<F>::one()};
}

template <class F>
static Affine<F> jac_to_affine(const Jacobian<F>& p) {
    typedef Coord<F> K;
    if (jac_is_inf(p)) return {K::zero(), K::zero()};
    F zi = invert(p.z), zi2 = K::sqr(zi);
    // Canonical, as the host's points are (with C2Q_LAZY=1, K's results may not be).
    return {K::canon(K::mul(p.x, zi2)), K::canon(K::mul(p.y, K::mul(zi2, zi)))};
}

// k·P for a canonical k, double-and-add from the top bit.
template <class F>
static Jacobian<F> jac_mul(const Jacobian<F>& p, const Fr& k) {
    Jacobian<F> r = jac_inf<F>();
    for (int i = 255; i >= 0; i--) {
        r = jac_dbl(r);
        if ((k.v[i / 32] >> (i % 32)) & 1) r = jac_add(r, p);
    }
    return r;
}

template <class F>
static bool jac_eq(const Jacobian<F>& a, const Jacobian<F>& b) {
    typedef Coord<F> K;
    if (jac_is_inf(a) || jac_is_inf(b)) return jac_is_inf(a) && jac_is_inf(b);
    F za2 = K::sqr(a.z), zb2 = K::sqr(b.z);
    return K::eq(K::mul(a.x, zb2), K::mul(b.x, za2)) &&
           K::eq(K::mul(a.y, K::mul(zb2, b.z)), K::mul(b.y, K::mul(za2, a.z)));
}

template <class F>
static bool on_curve(const Affine<F>& a) {
    typedef Coord<F> K;
    F rhs = K::add(K::mul(K::sqr(a.x), a.x), curve_b(F()));
    return K::eq(K::sqr(a.y), rhs);
}

// --- Device buffers as the kernels see them ------------------------------------------------

template <class F>
static Buf to_buffer(const std::vector<Affine<F>>& pts) {
    typedef Coord<F> K;
    Buf out(pts.size() * Layout<F>::AFFINE);
    for (size_t i = 0; i < pts.size(); i++) {
        K::store(&out[i * Layout<F>::AFFINE], pts[i].x);
        K::store(&out[i * Layout<F>::AFFINE + K::LIMBS], pts[i].y);
    }
    return out;
}

template <class F>
static Jacobian<F> jacobian_at(const Buf& b, size_t i) {
    typedef Coord<F> K;
    const u32* p = &b[i * Layout<F>::JACOBIAN];
    return {K::load(p), K::load(p + K::LIMBS), K::load(p + 2 * K::LIMBS)};
}

static unsigned grid_for(size_t threads, unsigned block) {
    return (unsigned)((threads + block - 1) / block);
}

// Whether every Fp in a buffer of coordinates (12 words each) is below p: what the host reads
// must be canonical, also where the kernels keep values below 2p in between (C2Q_LAZY=1).
static bool canonical(const Buf& b) {
    for (size_t at = 0; at + 12 <= b.size(); at += 12) {
        int i = 11;
        while (i > 0 && b[at + i] == FpTag::mod(i)) i--;
        if (b[at + i] >= FpTag::mod(i)) return false;
    }
    return true;
}

// The kernels' entry points for one group.
struct G1Kernels {
    typedef Fp F;
    static const unsigned REDUCE_THREADS = 128;
    static void accumulate(const u32* s, const u32* o, u32 nb, u32 ch, const u32* p, u32* b,
                           u32* c) {
        msm_accumulate(s, o, nb, ch, p, b, c);
    }
    static void fold(u32* c, const u32* o, u32 nb, u32 ch, u32 g) { msm_cont_fold(c, o, nb, ch, g); }
    static void fix(u32* b, const u32* c, const u32* o, u32 nb, u32 ch, u32 g) {
        msm_bucket_fix(b, c, o, nb, ch, g);
    }
    static void bucket_reduce(const u32* b, u32 nb, u32 len, u32 nseg, u32 w, u32* out) {
        msm_bucket_reduce(b, nb, len, nseg, w, out);
    }
    static void sum_indexed(const u32* p, const u32* idx, u32 count, u32* partials) {
        msm_sum_indexed(p, idx, count, partials);
    }
    static void reduce(const u32* in, u32 len, u32 bpg, u32 per, u32* out) {
        xyzz_reduce(in, len, bpg, per, out);
    }
    static void to_jacobian(const u32* in, u32 n, u32* out) { xyzz_to_jacobian_kernel(in, n, out); }
};

struct G2Kernels {
    typedef Fp2 F;
    static const unsigned REDUCE_THREADS = 64;
    static void accumulate(const u32* s, const u32* o, u32 nb, u32 ch, const u32* p, u32* b,
                           u32* c) {
        msm_accumulate_g2(s, o, nb, ch, p, b, c);
    }
    static void fold(u32* c, const u32* o, u32 nb, u32 ch, u32 g) { msm_cont_fold_g2(c, o, nb, ch, g); }
    static void fix(u32* b, const u32* c, const u32* o, u32 nb, u32 ch, u32 g) {
        msm_bucket_fix_g2(b, c, o, nb, ch, g);
    }
    static void bucket_reduce(const u32* b, u32 nb, u32 len, u32 nseg, u32 w, u32* out) {
        msm_bucket_reduce_g2(b, nb, len, nseg, w, out);
    }
    static void sum_indexed(const u32* p, const u32* idx, u32 count, u32* partials) {
        msm_sum_indexed_g2(p, idx, count, partials);
    }
    static void reduce(const u32* in, u32 len, u32 bpg, u32 per, u32* out) {
        xyzz_reduce_g2(in, len, bpg, per, out);
    }
    static void to_jacobian(const u32* in, u32 n, u32* out) {
        xyzz_to_jacobian_kernel_g2(in, n, out);
    }
};

// What src/gpu/msm.rs does with xyzz_reduce: tree sums of `groups` runs of `len` XYZZ points
// into one each, `per_block` points per block (small here, so that it takes several levels).
template <class G>
static Buf reduce_groups(const Buf& input, u32 groups, u32 len, u32 per_block) {
    const int XL = Layout<typename G::F>::XYZZ;
    Buf src = input;
    for (;;) {
        u32 per_group = (len + per_block - 1) / per_block;
        Buf dst((size_t)groups * per_group * XL);
        emu_launch(groups * per_group, G::REDUCE_THREADS,
                   [&] { G::reduce(src.data(), len, per_group, per_block, dst.data()); });
        if (per_group == 1) return dst;
        src.swap(dst);
        len = per_group;
    }
}

template <class G>
static Buf to_jacobians(const Buf& xyzz, u32 n) {
    Buf out((size_t)n * Layout<typename G::F>::JACOBIAN);
    emu_launch(grid_for(n, 32), 32, [&] { G::to_jacobian(xyzz.data(), n, out.data()); });
    check(canonical(out), "Jacobian points for the host are canonical");
    return out;
}

// One group's buffers: every window's buckets, and the chunks' continuation slots.
template <class G>
struct GroupRun {
    typedef typename G::F F;
    Buf points, buckets, cont;
    GroupRun(const std::vector<Affine<F>>& pts, u32 windows, u32 nbuckets, u32 chunks)
        : points(to_buffer(pts)),
          buckets((size_t)windows * nbuckets * Layout<F>::XYZZ),
          cont((size_t)(chunks + 1) * Layout<F>::XYZZ) {}

    // Window w's buckets from the window's sorted entries.
    void accumulate(u32 w, const Buf& sorted, const Buf& offsets, u32 nbuckets, u32 chunk,
                    u32 chunks, u32 group) {
        u32* wb = buckets.data() + (size_t)w * nbuckets * Layout<F>::XYZZ;
        emu_launch(grid_for(chunks, 32), 32, [&] {
            G::accumulate(sorted.data(), offsets.data(), nbuckets, chunk, points.data(), wb,
                          cont.data());
        });
        emu_launch(grid_for((chunks + group - 1) / group, 32), 32,
                   [&] { G::fold(cont.data(), offsets.data(), nbuckets, chunk, group); });
        emu_launch(grid_for(nbuckets, 32), 32,
                   [&] { G::fix(wb, cont.data(), offsets.data(), nbuckets, chunk, group); });
    }

    // Σ_w 2^(c·w)·W_w plus the sum of the ones, as the host finishes it.
    Jacobian<F> finish(u32 windows, u32 nbuckets, u32 c, u32 seg, const Buf& one_idx) {
        u32 nseg = (nbuckets + seg - 1) / seg;
        Buf segs((size_t)windows * nseg * Layout<F>::XYZZ);
        emu_launch(grid_for(nseg * windows, 32), 32, [&] {
            G::bucket_reduce(buckets.data(), nbuckets, seg, nseg, windows, segs.data());
        });
        Buf sums = to_jacobians<G>(reduce_groups<G>(segs, windows, nseg, 3), windows);
        Jacobian<F> acc = jac_inf<F>();
        for (u32 w = windows; w-- > 0;) {
            for (u32 k = 0; k < c; k++) acc = jac_dbl(acc);
            acc = jac_add(acc, jacobian_at<F>(sums, w));
        }
        // The ones: a grid smaller than the list, so that threads take several each.
        const u32 count = (u32)one_idx.size(), threads = 64;
        Buf partials((size_t)threads * Layout<F>::XYZZ);
        emu_launch(threads / 32, 32, [&] {
            G::sum_indexed(points.data(), one_idx.data(), count, partials.data());
        });
        Buf ones = to_jacobians<G>(reduce_groups<G>(partials, 1, threads, 16), 1);
        return jac_add(acc, jacobian_at<F>(ones, 0));
    }
};

// --- The checks ----------------------------------------------------------------------------

static void fp2_checks(std::mt19937_64& rng) {
    for (int t = 0; t < 200; t++) {
        Fp2 a = random_fp2(rng), b = random_fp2(rng);
        Fp2 m = fp2_mul(a, b);
        // Schoolbook: (a0·b0 − a1·b1) + (a0·b1 + a1·b0)·u.
        Fp c0 = fe_sub<FpTag>(fe_mul<FpTag>(a.c0, b.c0), fe_mul<FpTag>(a.c1, b.c1));
        Fp c1 = fe_add<FpTag>(fe_mul<FpTag>(a.c0, b.c1), fe_mul<FpTag>(a.c1, b.c0));
        check(fe_eq<FpTag>(m.c0, c0) && fe_eq<FpTag>(m.c1, c1), "fp2 product = schoolbook");
        check(fp2_eq(fp2_sqr(a), fp2_mul(a, a)), "fp2 square = product with itself");
        check(fp2_eq(fp2_mul(a, fp2_one()), a), "fp2 product with one");
        check(fp2_is_zero(fp2_mul(a, fp2_zero())), "fp2 product with zero");
        check(fp2_eq(fp2_sub(fp2_add(a, b), b), a), "fp2 (a + b) − b = a");
        check(fp2_is_zero(fp2_add(a, fp2_neg(a))), "fp2 a + (−a) = 0");
        check(fp2_eq(fp2_dbl(a), fp2_add(a, a)), "fp2 double");
        if (t < 10) check(fp2_eq(fp2_mul(a, fp2_inv(a)), fp2_one()), "fp2 inverse");
    }
    // u² = −1.
    Fp2 u = {fe_zero<FpTag>(), fe_one<FpTag>()};
    check(fp2_eq(fp2_sqr(u), fp2_neg(fp2_one())), "fp2 u² = −1");
}

// Σ s_i·P_i in G1 and G2 over one classification and one sort, against K·G.
static void msm_checks(std::mt19937_64& rng, u32 n, u32 c, u32 chunk, u32 seg, u32 group) {
    const Affine<Fp> g1 = g1_generator();
    const Affine<Fp2> g2 = g2_generator();
    const Jacobian<Fp> jg1 = jac_from_affine(g1);
    const Jacobian<Fp2> jg2 = jac_from_affine(g2);

    // Points: P_i = k_i·G, k_i small, some repeated, some negated, some zero (infinity).
    std::vector<Fr> k(n);          // Montgomery form
    std::vector<Affine<Fp>> p1(n);
    std::vector<Affine<Fp2>> p2(n);
    for (u32 i = 0; i < n; i++) {
        u32 ki = 1 + (u32)(rng() % 5000);
        if (i % 11 == 3) ki = 0;                          // infinity
        if (i % 13 == 5 && i > 0) ki = (u32)(rng() % 7);  // few distinct values: repeats
        bool neg = rng() % 4 == 0;
        Fr kc = fe_zero<FrTag>();
        kc.v[0] = ki;
        p1[i] = jac_to_affine(jac_mul(jg1, kc));
        p2[i] = jac_to_affine(jac_mul(jg2, kc));
        k[i] = fr_mont_small(ki);
        if (neg && ki != 0) {
            p1[i].y = fe_neg<FpTag>(p1[i].y);
            p2[i].y = fp2_neg(p2[i].y);
            k[i] = fe_neg<FrTag>(k[i]);
        }
    }
    // Scalars (Montgomery form, as blstrs stores them): zeros, ones, full width, small, r − 1,
    // and one value repeated many times (one large bucket per window).
    const Fr repeated = fr_to_mont(random_fr_canonical(rng));
    std::vector<Fr> s(n);
    for (u32 i = 0; i < n; i++) {
        switch (rng() % 8) {
            case 0: case 1: s[i] = fe_zero<FrTag>(); break;
            case 2: case 3: s[i] = fe_one<FrTag>(); break;
            case 4: s[i] = fr_to_mont(random_fr_canonical(rng)); break;
            case 5: s[i] = fr_mont_small(2 + (u32)(rng() % 40)); break;
            case 6: s[i] = fe_neg<FrTag>(fe_one<FrTag>()); break;
            default: s[i] = repeated; break;
        }
    }
    // P and −P under the same scalar (they meet in one bucket), and P twice (a doubling).
    p1[1] = p1[0];
    p2[1] = p2[0];
    k[1] = k[0];
    s[1] = s[0] = repeated;
    p1[3] = {p1[2].x, fe_neg<FpTag>(p1[2].y)};
    p2[3] = {p2[2].x, fp2_neg(p2[2].y)};
    k[3] = fe_neg<FrTag>(k[2]);
    s[3] = s[2] = repeated;

    for (u32 i = 0; i < n; i++) {
        check(affine_is_inf(p1[i]) || on_curve(p1[i]), "G1 point on the curve");
        check(affine_is_inf(p2[i]) || on_curve(p2[i]), "G2 point on the curve");
    }

    // K = Σ s_i·k_i: the multiexps are K·G1 and K·G2.
    Fr sum = fe_zero<FrTag>();
    for (u32 i = 0; i < n; i++) sum = fe_add<FrTag>(sum, fe_mul<FrTag>(s[i], k[i]));
    const Fr kk = fe_from_mont<FrTag>(sum);
    const Jacobian<Fp> want1 = jac_mul(jg1, kk);
    const Jacobian<Fp2> want2 = jac_mul(jg2, kk);

    // Classification (msm_classify's job): ones, and the others with canonical scalars.
    Buf one_idx, other_idx, other_scalars;
    for (u32 i = 0; i < n; i++) {
        if (fe_is_zero<FrTag>(s[i])) continue;
        if (fe_is_one<FrTag>(s[i])) {
            one_idx.push_back(i);
            continue;
        }
        other_idx.push_back(i);
        Fr canon = fe_from_mont<FrTag>(s[i]);
        other_scalars.insert(other_scalars.end(), canon.v, canon.v + 8);
    }
    const u32 m = (u32)other_idx.size();
    const u32 windows = (256 + c - 1) / c, nbuckets = 1u << (c - 1);
    Buf digits((size_t)windows * m);
    emu_launch(grid_for(m, 32), 32,
               [&] { msm_digits(other_scalars.data(), m, c, windows, digits.data()); });

    const u32 chunks = (m + chunk - 1) / chunk;
    GroupRun<G1Kernels> run1(p1, windows, nbuckets, chunks);
    GroupRun<G2Kernels> run2(p2, windows, nbuckets, chunks);
    for (u32 w = 0; w < windows; w++) {
        // The window's counting sort, once for both groups.
        const u32* dw = digits.data() + (size_t)w * m;
        Buf counts(nbuckets + 1, 0), offsets(nbuckets + 1), fill(nbuckets, 0), sorted(m + 1);
        Buf spare(1);
        emu_launch(2, 64, [&] { msm_histogram(dw, m, counts.data()); });
        emu_launch(1, 256,
                   [&] { scan_blocks(counts.data(), offsets.data(), nbuckets + 1, spare.data()); });
        emu_launch(2, 64, [&] {
            msm_scatter(dw, other_idx.data(), m, offsets.data(), fill.data(), sorted.data());
        });
        run1.accumulate(w, sorted, offsets, nbuckets, chunk, chunks, group);
        run2.accumulate(w, sorted, offsets, nbuckets, chunk, chunks, group);
    }
    char what[160];
    snprintf(what, sizeof what, "G1 msm of %u points (%u ones, %u others), c = %u, chunk %u", n,
             (u32)one_idx.size(), m, c, chunk);
    check(jac_eq(run1.finish(windows, nbuckets, c, seg, one_idx), want1), what);
    snprintf(what, sizeof what, "G2 msm of %u points (%u ones, %u others), c = %u, chunk %u", n,
             (u32)one_idx.size(), m, c, chunk);
    check(jac_eq(run2.finish(windows, nbuckets, c, seg, one_idx), want2), what);
}

// gen.cu: P_i = T1[i mod 2^t] + T2[(i >> t) mod 2^t] for random multiples of the generator,
// T2 sharing one point with T1 and holding the negation of another: the degenerate sums, for
// which the kernel keeps T1.
template <class F>
static void gen_checks(std::mt19937_64& rng, const Affine<F>& g,
                       void (*kernel)(u32*, u64, const u32*, const u32*, u32)) {
    const u32 tlog = 3, t = 1u << tlog;
    const Jacobian<F> jg = jac_from_affine(g);
    std::vector<Affine<F>> t1(t), t2(t);
    for (u32 j = 0; j < t; j++) {
        Fr k1 = fe_zero<FrTag>(), k2 = fe_zero<FrTag>();
        k1.v[0] = 1 + (u32)(rng() % 1000);
        k2.v[0] = 1 + (u32)(rng() % 1000);
        t1[j] = jac_to_affine(jac_mul(jg, k1));
        t2[j] = jac_to_affine(jac_mul(jg, k2));
    }
    t2[1] = t1[1];                                   // T1 = T2: kept as T1
    t2[2] = {t1[2].x, Coord<F>::canon(Coord<F>::neg(t1[2].y))};  // T1 = −T2: kept as T1
    const u32 n = t * t + 5;
    Buf b1 = to_buffer(t1), b2 = to_buffer(t2), out((size_t)n * Layout<F>::AFFINE);
    const u32 threads = (n + GEN_BATCH - 1) / GEN_BATCH;
    emu_launch(grid_for(threads, 4), 4,
               [&] { kernel(out.data(), n, b1.data(), b2.data(), tlog); });
    bool ok = true;
    for (u32 i = 0; i < n; i++) {
        const Affine<F>& a = t1[i & (t - 1)];
        const Affine<F>& b = t2[(i >> tlog) & (t - 1)];
        typedef Coord<F> K;
        Affine<F> want =
            K::eq(a.x, b.x) ? a : jac_to_affine(jac_add(jac_from_affine(a), jac_from_affine(b)));
        const u32* o = &out[(size_t)i * Layout<F>::AFFINE];
        ok = ok && K::eq(K::load(o), want.x) && K::eq(K::load(o + K::LIMBS), want.y) &&
             on_curve(want);
    }
    check(ok, Coord<F>::LIMBS == 12 ? "gen_points in G1" : "gen_points in G2");
    check(canonical(out), "gen_points' points are canonical");
}

int main() {
    std::mt19937_64 rng(7);
    check(on_curve(g1_generator()), "G1 generator on y² = x³ + 4");
    check(on_curve(g2_generator()), "G2 generator on y² = x³ + 4(1 + u)");
    fp2_checks(rng);
    gen_checks<Fp>(rng, g1_generator(), gen_points);
    gen_checks<Fp2>(rng, g2_generator(), gen_points_g2);
    // Window sizes and chunk lengths so that buckets straddle chunks in every way, and bucket
    // segments start past bucket 0 (the reduction's small multiple).
    // Continuation slots folded in groups of several sizes (1: none), so that the repeated
    // scalar's long runs of slots are summed across groups.
    msm_checks(rng, 300, 5, 1, 4, 3);
    msm_checks(rng, 300, 8, 3, 32, 2);
    msm_checks(rng, 300, 5, 2, 4, 64);
    msm_checks(rng, 120, 6, 64, 8, 1);
    if (failures) {
        printf("g2 test: %d of %d checks failed\n", failures, checks);
        return 1;
    }
    printf("msm in G1 and G2 over one sort on the CPU: %d checks passed\n", checks);
    return 0;
}
