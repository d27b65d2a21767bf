// Checks the field arithmetic of kernels/field.cuh on the CPU, squares first: fe_sqr (in the
// carry-chain builds the dedicated square, fe_sqr_wide) must give bit for bit what fe_mul(a, a)
// gives, fully reduced, for every a below the modulus. The values are the edges where carries
// and the final subtraction are decided (0, 1, m − 1, runs of all-ones limbs just below m,
// single limbs at their extremes), values built limb by limb from such extremes, and uniform
// random values. The reference is the plain C++ product fe_mul_inline, which shares no code with
// the carry chains.
//
// Then, in the builds with lazy reduction (C2Q_LAZY=1 with carry chains), the lazy Fp and Fp2
// operations against the reduced ones: each result must be congruent to the reference and
// below the bound it promises (2p), for operands anywhere in the ranges the operations accept
// (below 2p, or 4p for a product's first operand): their edges (0, p − 1, p, 2p − 1, 4p − 1),
// limbs where carries run, uniform values, and chains that feed results back as operands. The
// unreduced products (fe_mul_raw) are compared word for word with a schoolbook product, and the
// shared reduction (fe_redc_wide) with one computed from fe_mul_inline.
//
// Built and run by .ci/check-kernels, in each of its builds.
#include "emulate.h"
#include "../field.cuh"
#include "../fp2.cuh"

#include <cstdio>
#include <random>
#include <vector>

static int failures = 0;
static long checks = 0;

template <class T>
static const char* field_name() {
    return T::N == 8 ? "Fr" : "Fp";
}

template <class T>
static void print_value(const char* label, const Fe<T>& x) {
    printf("  %s = 0x", label);
    for (int i = T::N - 1; i >= 0; i--) printf("%08x", x.v[i]);
    printf("\n");
}

template <class T>
static bool below_modulus(const Fe<T>& x) {
    for (int i = T::N - 1; i >= 0; i--)
        if (x.v[i] != T::mod(i)) return x.v[i] < T::mod(i);
    return false;
}

template <class T>
static void check_square(const Fe<T>& a, const char* kind) {
    if (!below_modulus(a)) return;  // the products' contract: operands below m
    Fe<T> want = fe_mul_inline<T>(a, a);
    Fe<T> sqr = fe_sqr<T>(a), mul = fe_mul<T>(a, a);
    bool ok = fe_eq<T>(sqr, want) && fe_eq<T>(mul, want) && below_modulus(want);
#if defined(C2Q_CARRY_CHAINS)
    // The dedicated square itself, also in the builds whose fe_sqr does not use it.
    Fe<T> wide = fe_sqr_wide<T>(a);
    ok = ok && fe_eq<T>(wide, want);
#endif
    checks++;
    if (!ok) {
        if (++failures <= 10) {
            printf("FAIL %s square of a %s value\n", field_name<T>(), kind);
            print_value<T>("a", a);
            print_value<T>("fe_mul_inline(a, a)", want);
            print_value<T>("fe_sqr(a)", sqr);
            print_value<T>("fe_mul(a, a)", mul);
#if defined(C2Q_CARRY_CHAINS)
            print_value<T>("fe_sqr_wide(a)", wide);
#endif
        }
    }
}

template <class T>
static Fe<T> modulus_minus(u32 k) {
    Fe<T> m, d;
    for (int i = 0; i < T::N; i++) m.v[i] = T::mod(i);
    u64 borrow = k;
    for (int i = 0; i < T::N; i++) {
        u64 t = (u64)m.v[i] - borrow;
        d.v[i] = (u32)t;
        borrow = (t >> 32) & 1;
    }
    return d;
}

template <class T>
static void edge_values() {
    const int N = T::N;
    check_square<T>(fe_zero<T>(), "zero");
    check_square<T>(fe_one<T>(), "Montgomery one");
    Fe<T> x = fe_zero<T>();
    x.v[0] = 1;
    check_square<T>(x, "raw one");
    for (u32 k = 1; k <= 64; k++) check_square<T>(modulus_minus<T>(k), "m − k");
    // All ones below one limb of the modulus lowered by one, its upper limbs as they are: the
    // largest values with that many all-ones low limbs.
    for (int lowered = 1; lowered < N; lowered++) {
        if (T::mod(lowered) == 0) continue;
        for (int i = 0; i < N; i++) x.v[i] = i < lowered ? 0xffffffffu : T::mod(i);
        x.v[lowered] -= 1;
        check_square<T>(x, "all-ones limbs below m");
    }
    for (int i = 0; i < N - 1; i++) x.v[i] = 0xffffffffu;
    x.v[N - 1] = 0;
    check_square<T>(x, "all-ones low limbs");
    // One limb at a time: all ones, the top bit, powers of two.
    for (int i = 0; i < N; i++)
        for (u32 v : {0xffffffffu, 0x80000000u, 0x7fffffffu, 1u, 2u, 0x10000u}) {
            x = fe_zero<T>();
            x.v[i] = v;
            check_square<T>(x, "single limb");
        }
}

// Limbs drawn from the values where carries happen (and from the modulus's own limbs), so that
// long carry runs through the chains are common, unlike in uniform values.
template <class T>
static void extreme_values(std::mt19937_64& rng, int count) {
    for (int n = 0; n < count;) {
        Fe<T> x;
        for (int i = 0; i < T::N; i++) {
            switch (rng() % 8) {
                case 0: x.v[i] = 0; break;
                case 1: x.v[i] = 1; break;
                case 2: x.v[i] = 0xffffffffu; break;
                case 3: x.v[i] = 0xfffffffeu; break;
                case 4: x.v[i] = 0x80000000u; break;
                case 5: x.v[i] = T::mod(i); break;
                case 6: x.v[i] = T::mod(i) - 1; break;
                default: x.v[i] = (u32)rng(); break;
            }
        }
        if (!below_modulus(x)) continue;
        check_square<T>(x, "extreme-limb");
        n++;
    }
}

template <class T>
static void uniform_values(std::mt19937_64& rng, int count) {
    // The modulus's bit length in its top limb bounds the draws; half of them fall below m.
    u32 top_mask = 1;
    while (top_mask < T::mod(T::N - 1)) top_mask = top_mask << 1 | 1;
    for (int n = 0; n < count;) {
        Fe<T> x;
        for (int i = 0; i < T::N; i++) x.v[i] = (u32)rng();
        x.v[T::N - 1] &= top_mask;
        if (!below_modulus(x)) continue;
        check_square<T>(x, "uniform");
        n++;
    }
}

// Squares chained as in an exponentiation, each one the input of the next, so that the values
// are whatever the arithmetic itself produces.
template <class T>
static void chained_values(std::mt19937_64& rng, int count) {
    Fe<T> x = fe_zero<T>();
    x.v[0] = (u32)rng() | 2;
    for (int n = 0; n < count; n++) {
        check_square<T>(x, "chained");
        x = fe_sqr<T>(x);
    }
}

template <class T>
static void square_checks(std::mt19937_64& rng) {
    edge_values<T>();
    extreme_values<T>(rng, 50000);
    uniform_values<T>(rng, 50000);
    chained_values<T>(rng, 10000);
}

#if defined(C2Q_LAZY_CHAINS)
// --- Lazy reduction ------------------------------------------------------------------------

// Plain multi-word integers, little-endian 32-bit words, for the references.
template <int W>
struct Big {
    u32 v[W];
};

template <int W>
static Big<W> big_of(const Fp& x) {
    Big<W> r{};
    for (int i = 0; i < 12; i++) r.v[i] = x.v[i];
    return r;
}

template <int W>
static int big_cmp(const Big<W>& a, const Big<W>& b) {
    for (int i = W - 1; i >= 0; i--)
        if (a.v[i] != b.v[i]) return a.v[i] < b.v[i] ? -1 : 1;
    return 0;
}

// a − b (a ≥ b) and a + b (no carry out), in place.
template <int W>
static void big_sub(Big<W>& a, const Big<W>& b) {
    u64 borrow = 0;
    for (int i = 0; i < W; i++) {
        u64 t = (u64)a.v[i] - b.v[i] - borrow;
        a.v[i] = (u32)t;
        borrow = (t >> 32) & 1;
    }
}

template <int W>
static void big_add(Big<W>& a, const Big<W>& b) {
    u64 carry = 0;
    for (int i = 0; i < W; i++) {
        u64 t = (u64)a.v[i] + b.v[i] + carry;
        a.v[i] = (u32)t;
        carry = t >> 32;
    }
}

// Schoolbook product of two 12-word values.
static Big<24> big_mul(const Fp& a, const Fp& b) {
    Big<24> r{};
    for (int i = 0; i < 12; i++) {
        u64 c = 0;
        for (int j = 0; j < 12; j++) {
            c += (u64)a.v[j] * b.v[i] + r.v[i + j];
            r.v[i + j] = (u32)c;
            c >>= 32;
        }
        r.v[i + 12] = (u32)c;
    }
    return r;
}

static Fp fp_of(const Big<12>& x) {
    Fp r;
    for (int i = 0; i < 12; i++) r.v[i] = x.v[i];
    return r;
}

static const Big<12>& big_p() {
    static const Big<12> p = big_of<12>(modulus_minus<FpTag>(0));
    return p;
}

// k·p, for the range edges.
static Fp p_times(u32 k) {
    Big<12> r{};
    for (u32 i = 0; i < k; i++) big_add(r, big_p());
    return fp_of(r);
}

// x mod p for any 12-word x (x < 2^384 < 10p: a few subtractions).
static Fp mod_p(const Fp& x) {
    Big<12> r = big_of<12>(x);
    while (big_cmp(r, big_p()) >= 0) big_sub(r, big_p());
    return fp_of(r);
}

static bool below(const Fp& x, u32 k) {
    return big_cmp(big_of<12>(x), big_of<12>(p_times(k))) < 0;
}

// The reduced references: operands brought below p first.
static Fp ref_mul(const Fp& a, const Fp& b) { return fe_mul_inline<FpTag>(mod_p(a), mod_p(b)); }
static Fp ref_add(const Fp& a, const Fp& b) { return fe_add_c<FpTag>(mod_p(a), mod_p(b)); }
static Fp ref_sub(const Fp& a, const Fp& b) { return fe_sub_c<FpTag>(mod_p(a), mod_p(b)); }

static void lazy_check(bool ok, const char* what, std::initializer_list<Fp> values) {
    checks++;
    if (!ok && ++failures <= 10) {
        printf("FAIL lazy %s\n", what);
        int k = 0;
        for (const Fp& x : values) {
            char label[24];
            snprintf(label, sizeof label, "value %d", k++);
            print_value<FpTag>(label, x);
        }
    }
}

// A lazy result: congruent to the reference and below 2p.
static void expect(const Fp& got, const Fp& want, const char* what, std::initializer_list<Fp> in) {
    lazy_check(below(got, 2) && fe_eq<FpTag>(mod_p(got), want), what, in);
}

// T·R^-1 mod p for a 24-word T, by the reduced product: T = hi·R + lo, T·R^-1 ≡ hi + lo·R^-1.
static Fp ref_redc(const Big<24>& t) {
    Fp lo, hi, raw_one = fe_zero<FpTag>();
    for (int i = 0; i < 12; i++) {
        lo.v[i] = t.v[i];
        hi.v[i] = t.v[12 + i];
    }
    raw_one.v[0] = 1;
    return fe_add_c<FpTag>(mod_p(hi), fe_mul_inline<FpTag>(mod_p(lo), raw_one));
}

// Every lazy operation on operands a, b, c, d below 2p, and a4 below 4p.
static void lazy_ops(const Fp& a, const Fp& b, const Fp& c, const Fp& d, const Fp& a4) {
    expect(fp_add_lazy(a, b), ref_add(a, b), "fp_add_lazy", {a, b});
    expect(fp_sub_lazy(a, b), ref_sub(a, b), "fp_sub_lazy", {a, b});
    expect(fp_neg_lazy(a), ref_sub(fe_zero<FpTag>(), a), "fp_neg_lazy", {a});
    Big<12> sum = big_of<12>(a);
    big_add(sum, big_of<12>(b));
    lazy_check(fe_eq<FpTag>(fp_add_raw(a, b), fp_of(sum)), "fp_add_raw", {a, b});
    expect(fp_mul_lazy(a, b), ref_mul(a, b), "fp_mul_lazy", {a, b});
    expect(fp_mul_lazy(a4, b), ref_mul(a4, b), "fp_mul_lazy, first operand below 4p", {a4, b});
    expect(fe_mul_chains<FpTag, false>(a4, b), ref_mul(a4, b), "fe_mul_chains, no reduction",
           {a4, b});
    expect(fp_sqr_lazy(a), ref_mul(a, a), "fp_sqr_lazy", {a});
    expect(fe_sqr_wide<FpTag, false>(a), ref_mul(a, a), "fe_sqr_wide, no reduction", {a});
    expect(fp_mul_sub_lazy(a, b, c, d), fe_sub_c<FpTag>(ref_mul(a, b), ref_mul(c, d)),
           "fp_mul_sub_lazy", {a, b, c, d});
    // The unreduced product word for word, and its reduction.
    u32 raw[24];
    fe_mul_raw<FpTag>(raw, a4, b);
    Big<24> want = big_mul(a4, b), got;
    for (int i = 0; i < 24; i++) got.v[i] = raw[i];
    lazy_check(big_cmp(got, want) == 0, "fe_mul_raw", {a4, b});
    expect(fe_redc_wide<FpTag, false>(raw), ref_redc(want), "fe_redc_wide of a product", {a4, b});
    // Fp2 (a, b) · (c, d) and (a, b)².
    Fp2 x = {a, b}, y = {c, d};
    Fp2 m = fp2_mul_lazy(x, y), q = fp2_sqr_lazy(x);
    expect(m.c0, fe_sub_c<FpTag>(ref_mul(a, c), ref_mul(b, d)), "fp2_mul_lazy c0", {a, b, c, d});
    expect(m.c1, ref_add(ref_mul(a, d), ref_mul(b, c)), "fp2_mul_lazy c1", {a, b, c, d});
    expect(q.c0, fe_sub_c<FpTag>(ref_mul(a, a), ref_mul(b, b)), "fp2_sqr_lazy c0", {a, b});
    expect(q.c1, ref_add(ref_mul(a, b), ref_mul(a, b)), "fp2_sqr_lazy c1", {a, b});
    // Canonical values and zero tests.
    lazy_check(fe_eq<FpTag>(fp_canon(a), mod_p(a)), "fp_canon", {a});
    const bool zero = fe_is_zero<FpTag>(mod_p(a));
    lazy_check(fp_is_zero_lazy(a) == zero, "fp_is_zero_lazy", {a});
    lazy_check(fp_eq_lazy(a, b) == fe_eq<FpTag>(mod_p(a), mod_p(b)), "fp_eq_lazy", {a, b});
    lazy_check(fp2_is_zero_lazy({a, b}) == (zero && fe_is_zero<FpTag>(mod_p(b))),
               "fp2_is_zero_lazy", {a, b});
}

// Values below 2p (or 4p): the ranges' edges, limbs where carries run, uniform ones.
static std::vector<Fp> lazy_edges(u32 k) {
    std::vector<Fp> v;
    Fp one = fe_zero<FpTag>();
    one.v[0] = 1;
    v.push_back(fe_zero<FpTag>());
    v.push_back(one);
    v.push_back(fe_one<FpTag>());
    // j·p − 1 up to the range's top, k·p − 1, and j·p, j·p + 1 within it.
    for (u32 j = 1; j <= k; j++) {
        Big<12> below = big_of<12>(p_times(j)), above = below;
        big_sub(below, big_of<12>(one));
        big_add(above, big_of<12>(one));
        v.push_back(fp_of(below));
        if (j < k) {
            v.push_back(p_times(j));
            v.push_back(fp_of(above));
        }
    }
    return v;
}

static Fp lazy_random(std::mt19937_64& rng, u32 k, bool extreme) {
    for (;;) {
        Fp x;
        for (int i = 0; i < 12; i++) {
            if (!extreme) {
                x.v[i] = (u32)rng();
                continue;
            }
            switch (rng() % 6) {
                case 0: x.v[i] = 0; break;
                case 1: x.v[i] = 0xffffffffu; break;
                case 2: x.v[i] = FpTag::mod(i); break;
                case 3: x.v[i] = fp_2p(i); break;
                case 4: x.v[i] = 0x80000000u; break;
                default: x.v[i] = (u32)rng(); break;
            }
        }
        // The top limb within the range's bit length, then kept only when below k·p.
        x.v[11] &= k == 4 ? 0x7fffffffu : 0x3fffffffu;
        if (below(x, k)) return x;
    }
}

static void lazy_checks(std::mt19937_64& rng) {
    // 4p², the offset that keeps fp2_mul_lazy's c0 non-negative.
    const Fp p = modulus_minus<FpTag>(0);
    Big<24> pp = big_mul(p, p), four{};
    for (int k = 0; k < 4; k++) big_add(four, pp);
    bool ok = true;
    for (int i = 0; i < 24; i++) ok = ok && fp_4pp(i) == four.v[i];
    lazy_check(ok, "4p² constant", {});
    ok = true;
    for (int i = 0; i < 12; i++) ok = ok && fp_2p(i) == p_times(2).v[i];
    lazy_check(ok, "2p constant", {});

    // Every combination of edges (a4 running over the edges below 4p).
    const std::vector<Fp> e2 = lazy_edges(2), e4 = lazy_edges(4);
    for (size_t i = 0; i < e2.size(); i++)
        for (size_t j = 0; j < e2.size(); j++)
            for (size_t k = 0; k < e4.size(); k++)
                lazy_ops(e2[i], e2[j], e2[(i + k) % e2.size()], e2[(j + 2 * k) % e2.size()], e4[k]);
    for (int n = 0; n < 20000; n++) {
        const bool extreme = n % 2 == 0;
        lazy_ops(lazy_random(rng, 2, extreme), lazy_random(rng, 2, extreme),
                 lazy_random(rng, 2, extreme), lazy_random(rng, 2, extreme),
                 lazy_random(rng, 4, extreme));
    }
    // Chains: each result an operand of the next, as in the group law, against the same chain
    // of reduced operations.
    Fp x = lazy_random(rng, 2, false), y = lazy_random(rng, 2, false);
    Fp rx = mod_p(x), ry = mod_p(y);
    for (int n = 0; n < 5000; n++) {
        Fp u = fp_mul_sub_lazy(x, y, fp_sub_lazy(x, y), fp_add_lazy(y, y));
        Fp ru = fe_sub_c<FpTag>(fe_mul_inline<FpTag>(rx, ry),
                                fe_mul_inline<FpTag>(fe_sub_c<FpTag>(rx, ry), fe_add_c<FpTag>(ry, ry)));
        Fp w = fp_mul_lazy(fp_add_raw(u, x), fp_sqr_lazy(y));
        Fp rw = fe_mul_inline<FpTag>(fe_add_c<FpTag>(ru, rx), fe_mul_inline<FpTag>(ry, ry));
        expect(u, ru, "chained fp_mul_sub_lazy", {x, y});
        expect(w, rw, "chained fp_mul_lazy", {x, y});
        x = u;
        y = w;
        rx = ru;
        ry = rw;
    }
}
#endif

int main() {
    std::mt19937_64 rng(11);
    square_checks<FpTag>(rng);
    square_checks<FrTag>(rng);
#if defined(C2Q_LAZY_CHAINS)
    lazy_checks(rng);
    const char* lazy = ", lazy Fp and Fp2 operations within their bounds";
#else
    const char* lazy = "";
#endif
    if (failures) {
        printf("field test: %d of %ld checks failed\n", failures, checks);
        return 1;
    }
    printf("field test: squares equal products for values of Fp and Fr%s (%ld checks)\n", lazy,
           checks);
    return 0;
}
