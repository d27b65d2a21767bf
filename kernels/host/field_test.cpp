// Checks the field arithmetic of kernels/field.cuh on the CPU, squares first: fe_sqr (in the
// carry-chain builds the dedicated square, fe_sqr_wide) must give bit for bit what fe_mul(a, a)
// gives, fully reduced, for every a below the modulus. The values are the edges where carries
// and the final subtraction are decided (0, 1, m − 1, runs of all-ones limbs just below m,
// single limbs at their extremes), values built limb by limb from such extremes, and uniform
// random values. The reference is the plain C++ product fe_mul_inline, which shares no code with
// the carry chains. Built and run by .ci/check-kernels, in each of its builds.
#include "emulate.h"
#include "../field.cuh"

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

int main() {
    std::mt19937_64 rng(11);
    square_checks<FpTag>(rng);
    square_checks<FrTag>(rng);
    if (failures) {
        printf("field test: %d of %ld checks failed\n", failures, checks);
        return 1;
    }
    printf("field test: squares equal products for %ld values of Fp and Fr\n", checks);
    return 0;
}
