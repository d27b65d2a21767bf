// Prime fields of BLS12-381 in Montgomery form, limb for limb the layout blst (and so blstrs)
// keeps in memory: little-endian 64-bit words, here split into 32-bit limbs, R = 2^(32·N).
// That lets the host copy `Scalar` and `Fp` values to the device without any conversion.
//
// Fr: the scalar field, r < 2^255, 8 limbs.   Fp: the base field, p < 2^381, 12 limbs.
// Both moduli leave the top bit of the last limb clear, so a + b never carries out of N limbs.
//
// Multiplication is CIOS Montgomery (Koç, Acar, Kaliski 1996) on 32-bit limbs. The portable
// C++ form uses 64-bit accumulators; on the GPU the same algorithm runs on the hardware's carry
// flag (PTX carry chains, below) with 32×32→64 multiplies.
#ifndef C2Q_FIELD_CUH
#define C2Q_FIELD_CUH

#if defined(__CUDACC__)
#define DEV __device__ __forceinline__
#define CONST_MEM __constant__
#else
// Host build: the same code compiles as C++ for the CPU-side tests in kernels/host/.
#define DEV inline
#define CONST_MEM
#define __device__
#endif

typedef unsigned int u32;
typedef unsigned long long u64;

// The limbs are written once, as macros: the tags below fold them into the code as immediate
// operands (no constant-memory loads in the products), and the arrays serve everything else.
#define C2Q_FR_MOD 0x00000001, 0xffffffff, 0xfffe5bfe, 0x53bda402, \
                   0x09a1d805, 0x3339d808, 0x299d7d48, 0x73eda753
// R mod r: the Montgomery form of 1.
#define C2Q_FR_ONE 0xfffffffe, 0x00000001, 0x00034802, 0x5884b7fa, \
                   0xecbc4ff5, 0x998c4fef, 0xacc5056f, 0x1824b159
#define C2Q_FP_MOD 0xffffaaab, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0, \
                   0xf38512bf, 0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea
#define C2Q_FP_ONE 0x0002fffd, 0x76090000, 0xc40c0002, 0xebf4000b, 0x53c758ba, 0x5f489857, \
                   0x70525745, 0x77ce5853, 0xa256ec6d, 0x5c071a97, 0xfa80e493, 0x15f65ec3

CONST_MEM u32 FR_MOD[8] = {C2Q_FR_MOD};
CONST_MEM u32 FR_ONE[8] = {C2Q_FR_ONE};
// R^2 mod r: multiplying a canonical value by it gives its Montgomery form.
CONST_MEM u32 FR_R2[8] = {0xf3f29c6d, 0xc999e990, 0x87925c23, 0x2b6cedcb,
                          0x7254398f, 0x05d31496, 0x9f59ff11, 0x0748d9d9};

CONST_MEM u32 FP_MOD[12] = {C2Q_FP_MOD};
CONST_MEM u32 FP_ONE[12] = {C2Q_FP_ONE};
// p - 2: the exponent of Fermat inversion.
CONST_MEM u32 FP_PM2[12] = {0xffffaaa9, 0xb9feffff, 0xb153ffff, 0x1eabfffe,
                            0xf6b0f624, 0x6730d2a0, 0xf38512bf, 0x64774b84,
                            0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea};

// The modulus is reached through a tag type so that each loop below unrolls against constants:
// every loop over limbs is unrolled, so `mod(i)` and `one(i)` fold to immediates.
struct FrTag {
    static const int N = 8;
    static const u32 INV = 0xffffffffu;  // -r^-1 mod 2^32
    // Words 0 and 1 of r are 1 and 2^32 − 1 (see redc_word).
    static const bool FRIENDLY_LOW_WORDS = true;
    DEV static constexpr u32 mod(int i) {
        constexpr u32 m[8] = {C2Q_FR_MOD};
        return m[i];
    }
    DEV static constexpr u32 one(int i) {
        constexpr u32 o[8] = {C2Q_FR_ONE};
        return o[i];
    }
};
struct FpTag {
    static const int N = 12;
    static const u32 INV = 0xfffcfffdu;  // -p^-1 mod 2^32
    static const bool FRIENDLY_LOW_WORDS = false;
    DEV static constexpr u32 mod(int i) {
        constexpr u32 m[12] = {C2Q_FP_MOD};
        return m[i];
    }
    DEV static constexpr u32 one(int i) {
        constexpr u32 o[12] = {C2Q_FP_ONE};
        return o[i];
    }
};

template <class T>
struct Fe {
    u32 v[T::N];
};
typedef Fe<FrTag> Fr;
typedef Fe<FpTag> Fp;

template <class T>
DEV Fe<T> fe_zero() {
    Fe<T> r;
#pragma unroll
    for (int i = 0; i < T::N; i++) r.v[i] = 0;
    return r;
}

template <class T>
DEV Fe<T> fe_one() {
    Fe<T> r;
#pragma unroll
    for (int i = 0; i < T::N; i++) r.v[i] = T::one(i);
    return r;
}

template <class T>
DEV bool fe_is_zero(const Fe<T>& a) {
    u32 acc = 0;
#pragma unroll
    for (int i = 0; i < T::N; i++) acc |= a.v[i];
    return acc == 0;
}

template <class T>
DEV bool fe_eq(const Fe<T>& a, const Fe<T>& b) {
    u32 acc = 0;
#pragma unroll
    for (int i = 0; i < T::N; i++) acc |= a.v[i] ^ b.v[i];
    return acc == 0;
}

template <class T>
DEV bool fe_is_one(const Fe<T>& a) {
    u32 acc = 0;
#pragma unroll
    for (int i = 0; i < T::N; i++) acc |= a.v[i] ^ T::one(i);
    return acc == 0;
}

// x - m: returns the borrow out (1 when x < m).
template <class T>
DEV u32 fe_sub_mod_raw(Fe<T>& out, const Fe<T>& x) {
    u64 borrow = 0;
#pragma unroll
    for (int i = 0; i < T::N; i++) {
        u64 d = (u64)x.v[i] - T::mod(i) - borrow;
        out.v[i] = (u32)d;
        borrow = (d >> 32) & 1;
    }
    return (u32)borrow;
}

template <class T>
DEV Fe<T> fe_add_c(const Fe<T>& a, const Fe<T>& b) {
    Fe<T> s, d;
    u64 carry = 0;
#pragma unroll
    for (int i = 0; i < T::N; i++) {
        u64 t = (u64)a.v[i] + b.v[i] + carry;
        s.v[i] = (u32)t;
        carry = t >> 32;
    }
    // The moduli are below 2^(32N-1): no carry out, the sum is below 2m.
    u32 borrow = fe_sub_mod_raw<T>(d, s);
    return borrow ? s : d;
}

template <class T>
DEV Fe<T> fe_sub_c(const Fe<T>& a, const Fe<T>& b) {
    Fe<T> d;
    u64 borrow = 0;
#pragma unroll
    for (int i = 0; i < T::N; i++) {
        u64 t = (u64)a.v[i] - b.v[i] - borrow;
        d.v[i] = (u32)t;
        borrow = (t >> 32) & 1;
    }
    if (borrow) {
        u64 carry = 0;
#pragma unroll
        for (int i = 0; i < T::N; i++) {
            u64 t = (u64)d.v[i] + T::mod(i) + carry;
            d.v[i] = (u32)t;
            carry = t >> 32;
        }
    }
    return d;
}

// Montgomery product a·b·R^-1 mod m, inputs and output fully reduced.
template <class T>
DEV Fe<T> fe_mul_inline(const Fe<T>& a, const Fe<T>& b) {
    const int N = T::N;
    u32 t[N + 2];
#pragma unroll
    for (int i = 0; i < N + 2; i++) t[i] = 0;
#pragma unroll
    for (int i = 0; i < N; i++) {
        u64 c = 0;
#pragma unroll
        for (int j = 0; j < N; j++) {
            c += (u64)a.v[j] * b.v[i] + t[j];
            t[j] = (u32)c;
            c >>= 32;
        }
        c += t[N];
        t[N] = (u32)c;
        t[N + 1] = (u32)(c >> 32);

        u32 m = t[0] * T::INV;
        c = ((u64)m * T::mod(0) + t[0]) >> 32;
#pragma unroll
        for (int j = 1; j < N; j++) {
            c += (u64)m * T::mod(j) + t[j];
            t[j - 1] = (u32)c;
            c >>= 32;
        }
        c += t[N];
        t[N - 1] = (u32)c;
        t[N] = t[N + 1] + (u32)(c >> 32);
    }
    // t < 2m: one conditional subtraction.
    Fe<T> r, d;
#pragma unroll
    for (int i = 0; i < N; i++) r.v[i] = t[i];
    u32 borrow = fe_sub_mod_raw<T>(d, r);
    return (t[N] != 0 || !borrow) ? d : r;
}

// C2Q_PORTABLE (set by c2q when $C2Q_KERNELS_PORTABLE is set) keeps the plain C++ arithmetic
// on the device too: a diagnostic fallback should a driver mis-handle the carry chains.
#if defined(__CUDA_ARCH__) && !defined(C2Q_PORTABLE)
#define C2Q_PTX 1
#endif

#if defined(C2Q_PTX)
// The same operations with the carry flag of the hardware (PTX add.cc / madc chains): one
// instruction per limb step instead of the 64-bit emulation above. Each chain is a run of
// volatile asm statements, so that nothing is scheduled between them and the flag survives.
#define PTX_ADD_CC(d, a, b) asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b))
#define PTX_ADDC_CC(d, a, b) asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b))
#define PTX_ADDC(d, a, b) asm volatile("addc.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b))
#define PTX_SUB_CC(d, a, b) asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b))
#define PTX_SUBC_CC(d, a, b) asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b))
#define PTX_SUBC(d, a, b) asm volatile("subc.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b))
#define PTX_MADLO_CC(d, a, b, c) \
    asm volatile("mad.lo.cc.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c))
#define PTX_MADCLO_CC(d, a, b, c) \
    asm volatile("madc.lo.cc.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c))
#define PTX_MADHI_CC(d, a, b, c) \
    asm volatile("mad.hi.cc.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c))
#define PTX_MADCHI_CC(d, a, b, c) \
    asm volatile("madc.hi.cc.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c))
#define PTX_MADCHI(d, a, b, c) \
    asm volatile("madc.hi.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c))
// (hi, lo) = a·b, 64 bits in one instruction (IMAD.WIDE.U32).
#define PTX_MULWIDE(lo, hi, a, b)                                                         \
    asm("{\n\t.reg .u64 w;\n\tmul.wide.u32 w, %2, %3;\n\tmov.b64 {%0, %1}, w;\n\t}" \
        : "=r"(lo), "=r"(hi)                                                               \
        : "r"(a), "r"(b))
#define C2Q_CARRY_CHAINS 1
#elif defined(C2Q_EMULATE_PTX)
// Host build (kernels/host/ tests): the same instructions on an emulated carry flag, so that
// the carry-chain code the GPU runs is tested on the CPU too. `.cc` forms set the flag, `c`
// forms consume it; for subtraction the flag is the borrow, as in PTX.
inline thread_local u32 c2q_cf = 0;
inline u32 c2q_put(u64 v, bool set) {
    if (set) c2q_cf = (u32)(v >> 32) & 1;
    return (u32)v;
}
#define PTX_ADD_CC(d, a, b) (d = c2q_put((u64)(a) + (b), true))
#define PTX_ADDC_CC(d, a, b) (d = c2q_put((u64)(a) + (b) + c2q_cf, true))
#define PTX_ADDC(d, a, b) (d = c2q_put((u64)(a) + (b) + c2q_cf, false))
#define PTX_SUB_CC(d, a, b) (d = c2q_put((u64)(a) - (b), true))
#define PTX_SUBC_CC(d, a, b) (d = c2q_put((u64)(a) - (b) - c2q_cf, true))
#define PTX_SUBC(d, a, b) (d = c2q_put((u64)(a) - (b) - c2q_cf, false))
#define PTX_MADLO_CC(d, a, b, c) (d = c2q_put((u64)(u32)((u64)(a) * (b)) + (c), true))
#define PTX_MADCLO_CC(d, a, b, c) \
    (d = c2q_put((u64)(u32)((u64)(a) * (b)) + (c) + c2q_cf, true))
#define PTX_MADHI_CC(d, a, b, c) (d = c2q_put((((u64)(a) * (b)) >> 32) + (c), true))
#define PTX_MADCHI_CC(d, a, b, c) \
    (d = c2q_put((((u64)(a) * (b)) >> 32) + (c) + c2q_cf, true))
#define PTX_MADCHI(d, a, b, c) (d = c2q_put((((u64)(a) * (b)) >> 32) + (c) + c2q_cf, false))
#define PTX_MULWIDE(lo, hi, a, b) \
    do {                          \
        u64 w_ = (u64)(a) * (b);  \
        lo = (u32)w_;             \
        hi = (u32)(w_ >> 32);     \
    } while (0)
#define C2Q_CARRY_CHAINS 1
#endif

#if defined(C2Q_CARRY_CHAINS)
// x − m when x ≥ m, else x (for x < 2m): the conditional subtraction that ends a sum or a
// product. x is given by word, so that a product's running value needs no copy.
template <class T, class X>
DEV Fe<T> reduce_once_ptx(X x) {
    const int N = T::N;
    Fe<T> d;
    PTX_SUB_CC(d.v[0], x(0), T::mod(0));
#pragma unroll
    for (int i = 1; i < N; i++) PTX_SUBC_CC(d.v[i], x(i), T::mod(i));
    u32 borrow;
    PTX_SUBC(borrow, 0u, 0u);
    // borrow = all ones when x < m: keep x.
#pragma unroll
    for (int i = 0; i < N; i++) d.v[i] = borrow ? x(i) : d.v[i];
    return d;
}

// The end of a Montgomery product whose value t (N + 1 words, the top one zero) is below 2m:
// reduced to [0, m) by one conditional subtraction, or (REDUCE = false) returned as it is.
template <class T, bool REDUCE>
DEV Fe<T> fe_mul_end(const u32 (&t)[T::N + 1]) {
    if constexpr (REDUCE) {
        return reduce_once_ptx<T>([&](int i) { return t[i]; });
    } else {
        Fe<T> r;
#pragma unroll
        for (int i = 0; i < T::N; i++) r.v[i] = t[i];
        return r;
    }
}

// a + b mod m (both < m).
template <class T>
DEV Fe<T> fe_add_ptx(const Fe<T>& a, const Fe<T>& b) {
    const int N = T::N;
    Fe<T> s;
    PTX_ADD_CC(s.v[0], a.v[0], b.v[0]);
#pragma unroll
    for (int i = 1; i < N; i++) PTX_ADDC_CC(s.v[i], a.v[i], b.v[i]);
    return reduce_once_ptx<T>([&](int i) { return s.v[i]; });
}

// a − b mod m.
template <class T>
DEV Fe<T> fe_sub_ptx(const Fe<T>& a, const Fe<T>& b) {
    const int N = T::N;
    Fe<T> d, r;
    PTX_SUB_CC(d.v[0], a.v[0], b.v[0]);
#pragma unroll
    for (int i = 1; i < N; i++) PTX_SUBC_CC(d.v[i], a.v[i], b.v[i]);
    u32 mask;
    PTX_SUBC(mask, 0u, 0u);
    PTX_ADD_CC(r.v[0], d.v[0], T::mod(0) & mask);
#pragma unroll
    for (int i = 1; i < N; i++) PTX_ADDC_CC(r.v[i], d.v[i], T::mod(i) & mask);
    return r;
}

// CIOS Montgomery product with carry chains: per word of b, add a·b_i (low halves, then high
// halves one word up), then m·p the same way, then drop the zero low word.
//
// Both moduli are below 2^(32N−1), so the running value t stays below 2m < 2^(32N) between
// words, and t + a·b_i + m·p < 2m + 2^33·m < 2^(32N+32): it always fits in N + 1 words. So no
// chain carries out of the top word, and no (N+2)-th word is kept (the "no-carry" CIOS
// condition, top word of the modulus below 2^31 − 1, holds for r and p).
//
// REDUCE = false leaves out the final subtraction, for the lazy products of Fp (below): the
// result is then t = (a·b + M·m)/R < a·b/R + m (M < R, the sum of the word multiples of m), and
// the running value stays below a + m (it is less than (t + (a + m)(2^32 − 1))/2^32 after each
// word), so an operand a up to 4m still fits N + 1 words when 5m < 2^(32N), as for p.
template <class T, bool REDUCE = true>
DEV Fe<T> fe_mul_ptx(const Fe<T>& a, const Fe<T>& b) {
    const int N = T::N;
    u32 t[N + 1];
#pragma unroll
    for (int i = 0; i < N + 1; i++) t[i] = 0;
#pragma unroll
    for (int i = 0; i < N; i++) {
        const u32 bi = b.v[i];
        PTX_MADLO_CC(t[0], a.v[0], bi, t[0]);
#pragma unroll
        for (int j = 1; j < N; j++) PTX_MADCLO_CC(t[j], a.v[j], bi, t[j]);
        PTX_ADDC(t[N], t[N], 0u);
        PTX_MADHI_CC(t[1], a.v[0], bi, t[1]);
#pragma unroll
        for (int j = 1; j < N - 1; j++) PTX_MADCHI_CC(t[j + 1], a.v[j], bi, t[j + 1]);
        PTX_MADCHI(t[N], a.v[N - 1], bi, t[N]);

        const u32 m = t[0] * T::INV;
        PTX_MADLO_CC(t[0], m, T::mod(0), t[0]);
#pragma unroll
        for (int j = 1; j < N; j++) PTX_MADCLO_CC(t[j], m, T::mod(j), t[j]);
        PTX_ADDC(t[N], t[N], 0u);
        PTX_MADHI_CC(t[1], m, T::mod(0), t[1]);
#pragma unroll
        for (int j = 1; j < N - 1; j++) PTX_MADCHI_CC(t[j + 1], m, T::mod(j), t[j + 1]);
        PTX_MADCHI(t[N], m, T::mod(N - 1), t[N]);
#pragma unroll
        for (int j = 0; j < N; j++) t[j] = t[j + 1];
        t[N] = 0;
    }
    return fe_mul_end<T, REDUCE>(t);
}

// t (N + 1 words) += ev + od·2^32, the word products of mul_word_add: ev holds the products of
// the even words of x (words 0 .. N − 1, not overlapping), od those of the odd words (words
// 1 .. N). One carry chain each. No chain carries out of t[N] (the callers' bound, as in
// fe_mul_ptx).
template <class T>
DEV void add_word_products(u32 (&t)[T::N + 1], const u32 (&ev)[T::N], const u32 (&od)[T::N]) {
    const int N = T::N;
    PTX_ADD_CC(t[0], t[0], ev[0]);
#pragma unroll
    for (int j = 1; j < N; j++) PTX_ADDC_CC(t[j], t[j], ev[j]);
    PTX_ADDC(t[N], t[N], 0u);
    PTX_ADD_CC(t[1], t[1], od[0]);
#pragma unroll
    for (int j = 2; j < N; j++) PTX_ADDC_CC(t[j], t[j], od[j - 1]);
    PTX_ADDC(t[N], t[N], od[N - 1]);
}

// t (N + 1 words) += x·y (x given by word, y one word), with 64-bit products: the products of
// the even words of x fill words 0 .. N − 1 of one N-word number without overlapping, those of
// the odd words words 1 .. N of another; both are then added to t with carry chains.
template <class T, class X>
DEV void mul_word_add(u32 (&t)[T::N + 1], X x, u32 y) {
    const int N = T::N;
    u32 ev[N], od[N];
#pragma unroll
    for (int j = 0; j < N; j += 2) PTX_MULWIDE(ev[j], ev[j + 1], x(j), y);
#pragma unroll
    for (int j = 1; j < N; j += 2) PTX_MULWIDE(od[j - 1], od[j], x(j), y);
    add_word_products<T>(t, ev, od);
}

// With C2Q_FR_REDC=1 (the default) Fr's word reductions take its first two words for what
// they are; 0 multiplies them like the others, for comparison. The split product (the default
// product, below) does without redc_word: this serves the wide form and the squares.
#ifndef C2Q_FR_REDC
#define C2Q_FR_REDC 1
#endif

// One word of a Montgomery reduction: t (N + 1 words) + q·m for the q that makes word 0 zero
// (q = t[0]·(−m^-1) mod 2^32), then divided by 2^32, t[N] left zero.
//
// For Fr the first two words need no multiply. r ≡ 1 mod 2^32, so −r^-1 ≡ −1 and q = −t[0];
// r's word 0 is 1, so q·1 is (q, 0) (ptxas finds that one itself); its word 1 is 2^32 − 1, and
// q·(2^32 − 1) = (q − 1)·2^32 + (2^32 − q) for q ≠ 0: low word t[0], high word q − 1 (both 0
// when q = 0). The subtraction 0 − t[0] that makes q borrows exactly when q ≠ 0, so one more
// subtraction with that borrow gives the high word. That takes one of the 8 64-bit multiplies
// of each word reduction, 8 of an Fr product's 120, off the multiply pipe.
template <class T>
DEV void redc_word(u32 (&t)[T::N + 1]) {
    const int N = T::N;
    if constexpr (C2Q_FR_REDC && T::FRIENDLY_LOW_WORDS) {
        static_assert(T::mod(0) == 1 && T::mod(1) == 0xffffffffu, "words 0 and 1 of r");
        u32 ev[N], od[N];
        u32 q;
        PTX_SUB_CC(q, 0u, t[0]);
        PTX_SUBC(od[1], q, 0u);
        od[0] = t[0];
        ev[0] = q;
        ev[1] = 0;
#pragma unroll
        for (int j = 2; j < N; j += 2) PTX_MULWIDE(ev[j], ev[j + 1], T::mod(j), q);
#pragma unroll
        for (int j = 3; j < N; j += 2) PTX_MULWIDE(od[j - 1], od[j], T::mod(j), q);
        add_word_products<T>(t, ev, od);
    } else {
        const u32 q = t[0] * T::INV;
        mul_word_add<T>(t, [](int j) { return T::mod(j); }, q);
    }
    // t[0] is now 0: divide by the word.
#pragma unroll
    for (int j = 0; j < N; j++) t[j] = t[j + 1];
    t[N] = 0;
}

// t = x·y, the same way for a t that holds nothing yet: the even products are the low N words
// as they stand, and only the odd ones need adding (the first word of a product).
template <class T, class X>
DEV void mul_word_set(u32 (&t)[T::N + 1], X x, u32 y) {
    const int N = T::N;
    u32 od[N];
#pragma unroll
    for (int j = 0; j < N; j += 2) PTX_MULWIDE(t[j], t[j + 1], x(j), y);
#pragma unroll
    for (int j = 1; j < N; j += 2) PTX_MULWIDE(od[j - 1], od[j], x(j), y);
    PTX_ADD_CC(t[1], t[1], od[0]);
#pragma unroll
    for (int j = 2; j < N; j++) PTX_ADDC_CC(t[j], t[j], od[j - 1]);
    PTX_ADDC(t[N], od[N - 1], 0u);
}

// The CIOS product of fe_mul_ptx with 64-bit products (IMAD.WIDE) instead of separate low and
// high multiply-adds: half the multiply instructions, a few more additions. On an H200 the
// high-half multiply-add (IMAD.HI) issues at half rate and kept the multiplier pipe the busiest
// (86 %); this form ran the G1 MSM 8 % and the NTT 4 % faster, and was the default until
// fe_mul_split (below) replaced it (C2Q_MUL_SPLIT=0 selects it; with C2Q_MUL_WIDE=0 too,
// fe_mul_ptx). Its word reduction (redc_word) also serves the square and the lazy sums of
// products (fe_redc_wide). REDUCE as in fe_mul_ptx.
template <class T, bool REDUCE = true>
DEV Fe<T> fe_mul_wide(const Fe<T>& a, const Fe<T>& b) {
    const int N = T::N;
    u32 t[N + 1];
#pragma unroll
    for (int i = 0; i < N; i++) {
        if (i == 0) mul_word_set<T>(t, [&](int j) { return a.v[j]; }, b.v[0]);
        else mul_word_add<T>(t, [&](int j) { return a.v[j]; }, b.v[i]);
        redc_word<T>(t);
    }
    return fe_mul_end<T, REDUCE>(t);
}

// The CIOS product with its running value split in two, so that each word of b makes two
// independent carry chains instead of one long one (C2Q_MUL_SPLIT=1). The products a_j·b_i of
// the even words j fill disjoint word pairs (j, j + 1), and so do those of the odd words: each
// set is one chain of multiply-adds, low then high half, the carry running through both
// (madc.lo, madc.hi). So t is kept as e + o·2^32: e holds the even-word products (e[k] at word
// k), o the odd-word ones (o[k] at word k + 1). The same for q·m, where q is e[0]'s word
// multiple (o has no word 0). After the row, t's word 0 is zero and t is divided by 2^32 by
// renaming alone: o's words now start at word 0, so o is the next row's e; e's words start
// at word −1, with e[0] = 0 there, so e[1] (now at word 0) is added into the next e[0], and the
// rest, e[k] at word k − 1, is the next o two words down: the next row's odd chain reads it
// two words up as it goes (split_row's `fold`), picking up that addition's carry at word 1.
// The even chains' carries out of word N − 1 go into o's top word, word N; the odd chains'
// stay below it, since o·2^32 ≤ t < 2^(32(N+1)) (the bound of fe_mul_ptx). The two chains are
// merged once, at the end.
//
// The two chains of a row are independent, so each row's dependent path is about half that of
// fe_mul_ptx, with the same multiplies (2N per row for a·b_i, 2N for q·m) and no separate
// carry additions as in fe_mul_wide, which ptxas fuses into 64-bit multiply-adds with carry
// (see C2Q_MUL_SPLIT below). sppark organises its product this way.
// REDUCE as in fe_mul_ptx (the bounds are the same: t fits N + 1 words).

// h (N words, h[k] at word k of its half) += x's words j = J0, J0 + 2, … times y: one chain of
// multiply-adds, each pair (low, high) of x_j·y at words (j − J0, j − J0 + 1). Without CARRY_OUT
// the chain ends in h's top word (the caller's bound keeps it there), else its carry is left
// for the caller's next instruction.
template <class T, int J0, bool CARRY_OUT, class X>
DEV void split_chain(u32 (&h)[T::N], X x, u32 y) {
    const int N = T::N;
    PTX_MADLO_CC(h[0], x(J0), y, h[0]);
    if (J0 + 2 >= N && !CARRY_OUT) {
        PTX_MADCHI(h[1], x(J0), y, h[1]);
        return;
    }
    PTX_MADCHI_CC(h[1], x(J0), y, h[1]);
#pragma unroll
    for (int j = J0 + 2; j < N; j += 2) {
        PTX_MADCLO_CC(h[j - J0], x(j), y, h[j - J0]);
        if (j + 2 >= N && !CARRY_OUT) PTX_MADCHI(h[j - J0 + 1], x(j), y, h[j - J0 + 1]);
        else PTX_MADCHI_CC(h[j - J0 + 1], x(j), y, h[j - J0 + 1]);
    }
}

// e += x_even·y and o += x_odd·y, on halves that hold something: the even chain's carry out of
// word N − 1 goes into o's top word (word N), the odd chain stays within o.
template <class T, class X>
DEV void split_add(u32 (&e)[T::N], u32 (&o)[T::N], X x, u32 y) {
    split_chain<T, 1, false>(o, x, y);
    split_chain<T, 0, true>(e, x, y);
    PTX_ADDC(o[T::N - 1], o[T::N - 1], 0u);
}

// One row: (e, o) += Σ_k x_k·y_k + q·m, then the renaming. In the first row, e and o hold
// nothing; otherwise o holds the previous row's e (fold, as described above). K products summed
// before the reduction serve the lazy a·b − c·d (fp_mul_sub_lazy).
template <class T, bool FIRST, int K>
DEV void split_row(u32 (&e)[T::N], u32 (&o)[T::N], const Fe<T> (&x)[K], const u32 (&y)[K]) {
    const int N = T::N;
    if constexpr (FIRST) {
#pragma unroll
        for (int j = 0; j < N; j += 2) PTX_MULWIDE(e[j], e[j + 1], x[0].v[j], y[0]);
#pragma unroll
        for (int j = 1; j < N; j += 2) PTX_MULWIDE(o[j - 1], o[j], x[0].v[j], y[0]);
    } else {
        // o arrives as the previous e, one word up: o[1] is at word 0, o[k] at word k − 1.
        // Word 0 joins e; the odd chain takes the carry and moves o two words down as it adds.
        const Fe<T>& a = x[0];
        const u32 bi = y[0];
        PTX_ADD_CC(e[0], e[0], o[1]);
#pragma unroll
        for (int j = 0; j < N - 2; j += 2) {
            PTX_MADCLO_CC(o[j], a.v[j + 1], bi, o[j + 2]);
            PTX_MADCHI_CC(o[j + 1], a.v[j + 1], bi, o[j + 3]);
        }
        PTX_MADCLO_CC(o[N - 2], a.v[N - 1], bi, 0u);
        PTX_MADCHI(o[N - 1], a.v[N - 1], bi, 0u);
        split_chain<T, 0, true>(e, [&](int j) { return a.v[j]; }, bi);
        PTX_ADDC(o[N - 1], o[N - 1], 0u);
    }
#pragma unroll
    for (int k = 1; k < K; k++) split_add<T>(e, o, [&](int j) { return x[k].v[j]; }, y[k]);
    const u32 q = e[0] * T::INV;
    split_add<T>(e, o, [](int j) { return T::mod(j); }, q);
}

// Σ_k x_k·y_k·R^-1 by split rows (K = 1: the product). After the last row the halves are
// merged: the second holds the even half with word 0 zero (its word k at k − 1 once divided),
// the first the odd half (word k at k): t = first + (second >> 32).
template <class T, bool REDUCE, int K>
DEV Fe<T> fe_mul_sum_split(const Fe<T> (&x)[K], const Fe<T> (&y)[K]) {
    const int N = T::N;
    static_assert(N % 2 == 0, "the rows alternate the two halves in pairs");
    u32 h0[N], h1[N];
#pragma unroll
    for (int i = 0; i < N; i += 2) {
        u32 yi[K], yi1[K];
#pragma unroll
        for (int k = 0; k < K; k++) {
            yi[k] = y[k].v[i];
            yi1[k] = y[k].v[i + 1];
        }
        if (i == 0) split_row<T, true, K>(h0, h1, x, yi);
        else split_row<T, false, K>(h0, h1, x, yi);
        split_row<T, false, K>(h1, h0, x, yi1);
    }
    u32 t[N + 1];
    PTX_ADD_CC(t[0], h0[0], h1[1]);
#pragma unroll
    for (int k = 1; k < N - 1; k++) PTX_ADDC_CC(t[k], h0[k], h1[k + 1]);
    PTX_ADDC(t[N - 1], h0[N - 1], 0u);
    t[N] = 0;
    return fe_mul_end<T, REDUCE>(t);
}

template <class T, bool REDUCE = true>
DEV Fe<T> fe_mul_split(const Fe<T>& a, const Fe<T>& b) {
    const Fe<T> x[1] = {a}, y[1] = {b};
    return fe_mul_sum_split<T, REDUCE, 1>(x, y);
}

// Squaring with 64-bit products (IMAD.WIDE): each cross product a_i·a_j (i < j) is computed
// once and doubled, instead of twice as in fe_mul_wide(a, a); with the N squares a_i² that is
// N(N + 1)/2 products for the full 2N-word square instead of N². The square is then
// Montgomery-reduced (SOS: Koç, Acar, Kaliski 1996): its low N words are divided by R through N
// word reductions as in fe_mul_wide, which leaves at most m, and its high N words (below m,
// since a² < m·R) are added, so one conditional subtraction gives the same fully reduced value
// as fe_mul. The square (fe_sqr_raw) and the reduction (fe_redc_wide) are separate functions:
// the reduction also serves products summed before they are reduced (fe_mul_raw, below).

// s[OFF .. OFF + L] += x·y (x given by its L words, y one word), as in mul_word_add: the
// products of the even words of x do not overlap one another, nor do those of the odd words, so
// each set is one carry chain. When SET, s[OFF ..] holds nothing yet and the even products are
// written instead of added. No chain carries out of s[OFF + L] (the caller's bound).
template <int OFF, int L, bool SET, int S, class X>
DEV void mul_row_add(u32 (&s)[S], X x, u32 y) {
    static_assert(L >= 1 && OFF + L < S, "row out of range");
    u32 ev[L + 1], od[L + 1];
    (void)ev;
#pragma unroll
    for (int j = 0; j < L; j += 2) {
        if constexpr (SET) PTX_MULWIDE(s[OFF + j], s[OFF + j + 1], x(j), y);
        else PTX_MULWIDE(ev[j], ev[j + 1], x(j), y);
    }
#pragma unroll
    for (int j = 1; j < L; j += 2) PTX_MULWIDE(od[j], od[j + 1], x(j), y);
    // The even products cover words 0 .. L − 1 when L is even, 0 .. L when odd; the odd ones
    // 1 .. L when L is even, 1 .. L − 1 when odd. A chain ends at word L, either adding its last
    // word there or passing its carry on.
    const int ev_top = (L % 2 == 0) ? L - 1 : L;
    const int od_top = (L % 2 == 0) ? L : L - 1;
    if constexpr (SET) {
        // The top word is written only by an odd-L even product: with L even it is still empty.
        if (L % 2 == 0) s[OFF + L] = 0;
    } else {
        PTX_ADD_CC(s[OFF], s[OFF], ev[0]);
#pragma unroll
        for (int j = 1; j < ev_top; j++) PTX_ADDC_CC(s[OFF + j], s[OFF + j], ev[j]);
        if (ev_top == L) PTX_ADDC(s[OFF + L], s[OFF + L], ev[L]);
        else {
            PTX_ADDC_CC(s[OFF + ev_top], s[OFF + ev_top], ev[ev_top]);
            PTX_ADDC(s[OFF + L], s[OFF + L], 0u);
        }
    }
    if (L >= 2) {
        PTX_ADD_CC(s[OFF + 1], s[OFF + 1], od[1]);
#pragma unroll
        for (int j = 2; j < od_top; j++) PTX_ADDC_CC(s[OFF + j], s[OFF + j], od[j]);
        if (od_top == L) PTX_ADDC(s[OFF + L], s[OFF + L], od[L]);
        else {
            PTX_ADDC_CC(s[OFF + od_top], s[OFF + od_top], od[od_top]);
            PTX_ADDC(s[OFF + L], s[OFF + L], 0u);
        }
    }
}

// The cross products, row by row: row I adds a_I·(a_(I+1) .. a_(N−1)) at word 2I + 1. Rows
// 0 .. I − 1 sum to less than (a mod 2^(32I))·2^(32N) ≤ 2^(32(N+I)), so the row's top word,
// I + N, is still empty, and with row I the sum stays below 2^(32(N+I+1)): nothing carries past
// that word.
template <class T, int I>
DEV void sqr_cross_rows(u32 (&s)[2 * T::N], const Fe<T>& a) {
    if constexpr (I < T::N - 1) {
        mul_row_add<2 * I + 1, T::N - 1 - I, I == 0>(s, [&](int j) { return a.v[I + 1 + j]; },
                                                     a.v[I]);
        sqr_cross_rows<T, I + 1>(s, a);
    }
}

// The 2N-word square a², no reduction.
template <class T>
DEV void fe_sqr_raw(u32 (&p)[2 * T::N], const Fe<T>& a) {
    const int N = T::N;
    u32 s[2 * N];
#pragma unroll
    for (int k = 0; k < 2 * N; k++) s[k] = 0;
    sqr_cross_rows<T, 0>(s, a);
    // The squares a_k² fill the 2N words two by two. The cross sum is doubled by a one-bit shift
    // across words, no carry chain (its top bit is clear: twice it is below a² < 2^(64N)), and
    // added to them; s[0] is empty (the cross products start at word 1).
#pragma unroll
    for (int k = 0; k < N; k++) PTX_MULWIDE(p[2 * k], p[2 * k + 1], a.v[k], a.v[k]);
    PTX_ADD_CC(p[1], p[1], s[1] << 1);
#pragma unroll
    for (int k = 2; k < 2 * N - 1; k++) PTX_ADDC_CC(p[k], p[k], (s[k] << 1) | (s[k - 1] >> 31));
    PTX_ADDC(p[2 * N - 1], p[2 * N - 1], (s[2 * N - 1] << 1) | (s[2 * N - 2] >> 31));
}

// The 2N-word product a·b, no reduction (SOS's first half), row by row: row i adds a·b_i at
// word i. Rows 0 .. i − 1 sum to a·(b mod 2^(32i)) < 2^(32(N+i)), so row i's top word, N + i, is
// still empty, and with row i the sum stays below 2^(32(N+i+1)): nothing carries past that word.
template <class T, int I>
DEV void mul_rows(u32 (&p)[2 * T::N], const Fe<T>& a, const Fe<T>& b) {
    if constexpr (I < T::N) {
        mul_row_add<I, T::N, I == 0>(p, [&](int j) { return a.v[j]; }, b.v[I]);
        mul_rows<T, I + 1>(p, a, b);
    }
}

template <class T>
DEV void fe_mul_raw(u32 (&p)[2 * T::N], const Fe<T>& a, const Fe<T>& b) {
    const int N = T::N;
    // Row 0 writes words 0 .. N; the rows after it add into the words above.
#pragma unroll
    for (int k = N + 1; k < 2 * N; k++) p[k] = 0;
    mul_rows<T, 0>(p, a, b);
}

// Montgomery reduction (SOS) of a 2N-word value P < m·R: P·R^-1 mod m, below 2m before the
// final subtraction (REDUCE as in fe_mul_ptx). The low half goes through N word reductions as
// in fe_mul_wide: (P_lo + q·m)/R with P_lo and q below R is at most m; the word multiples q
// depend on the low words alone, so the high half, P_hi = floor(P/R) < m, is added after:
// (P + q·m)/R = (P_lo + q·m)/R + P_hi < 2m.
template <class T, bool REDUCE = true>
DEV Fe<T> fe_redc_wide(const u32 (&p)[2 * T::N]) {
    const int N = T::N;
    u32 t[N + 1];
#pragma unroll
    for (int k = 0; k < N; k++) t[k] = p[k];
    t[N] = 0;
#pragma unroll
    for (int i = 0; i < N; i++) redc_word<T>(t);
    // Plus the high half: below 2m < 2^(32N), so no carry out of word N − 1.
    PTX_ADD_CC(t[0], t[0], p[N]);
#pragma unroll
    for (int k = 1; k < N - 1; k++) PTX_ADDC_CC(t[k], t[k], p[N + k]);
    PTX_ADDC(t[N - 1], t[N - 1], p[2 * N - 1]);
    return fe_mul_end<T, REDUCE>(t);
}

// a² < m·R for a < m: the SOS reduction of the square ends below 2m.
template <class T, bool REDUCE = true>
DEV Fe<T> fe_sqr_wide(const Fe<T>& a) {
    u32 p[2 * T::N];
    fe_sqr_raw<T>(p, a);
    return fe_redc_wide<T, REDUCE>(p);
}

#ifndef C2Q_MUL_WIDE
#define C2Q_MUL_WIDE 1
#endif

// The product's form: C2Q_MUL_SPLIT=1 (the default) is fe_mul_split; 0 selects fe_mul_wide, or
// with C2Q_MUL_WIDE=0 fe_mul_ptx, for comparison. On an H100 the split form took the 2^27 MSM
// from 1120 to 852 ms and the 2^27 NTT from 52.3 to 42.2 ms (ops/bench/gpu-2026-12-06-ac.md):
// ptxas turns each madc.lo/madc.hi pair into one 64-bit multiply-add with carry
// (IMAD.WIDE.U32.X), so an Fp product is 347 instructions against the wide form's 878, whose
// products are added to the running value by separate 32-bit carry additions.
#ifndef C2Q_MUL_SPLIT
#define C2Q_MUL_SPLIT 1
#endif

template <class T, bool REDUCE = true>
DEV Fe<T> fe_mul_chains(const Fe<T>& a, const Fe<T>& b) {
#if C2Q_MUL_SPLIT
    return fe_mul_split<T, REDUCE>(a, b);
#elif C2Q_MUL_WIDE
    return fe_mul_wide<T, REDUCE>(a, b);
#else
    return fe_mul_ptx<T, REDUCE>(a, b);
#endif
}
#endif

template <class T>
DEV Fe<T> fe_add(const Fe<T>& a, const Fe<T>& b) {
#if defined(C2Q_CARRY_CHAINS)
    return fe_add_ptx<T>(a, b);
#else
    return fe_add_c<T>(a, b);
#endif
}

template <class T>
DEV Fe<T> fe_sub(const Fe<T>& a, const Fe<T>& b) {
#if defined(C2Q_CARRY_CHAINS)
    return fe_sub_ptx<T>(a, b);
#else
    return fe_sub_c<T>(a, b);
#endif
}

template <class T>
DEV Fe<T> fe_dbl(const Fe<T>& a) {
    return fe_add<T>(a, a);
}

template <class T>
DEV Fe<T> fe_neg(const Fe<T>& a) {
    return fe_sub<T>(fe_zero<T>(), a);
}

// With C2Q_SQR=1 the dedicated square (fe_sqr_wide) replaces fe_mul(a, a) in the default
// product form. It is off by default until a GPU run shows what it gains: it saves 4.4 % of the
// G1 accumulation's multiplies, but a kernel's registers and spills shift with it
// (ops/bench/sass-2026-12-04.md). With the older product form (C2Q_MUL_WIDE=0, kept for
// comparison as a whole) a square is always a product.
#ifndef C2Q_SQR
#define C2Q_SQR 0
#endif
#if defined(C2Q_CARRY_CHAINS) && C2Q_MUL_WIDE && C2Q_SQR
#define C2Q_SQR_WIDE 1
#endif

// Fr products stay inline (NTT butterflies are short); an Fp product is a real call: the
// group operations use a dozen each, and one shared copy keeps ptxas time and code size sane.
// C2Q_FP_INLINE=1 inlines the Fp products and squares too, to measure what the calls cost
// (ptxas then takes much longer over msm.cu).
#ifndef C2Q_FP_INLINE
#define C2Q_FP_INLINE 0
#endif

template <class T>
DEV Fe<T> fe_mul(const Fe<T>& a, const Fe<T>& b) {
#if defined(C2Q_CARRY_CHAINS)
    return fe_mul_chains<T>(a, b);
#else
    return fe_mul_inline<T>(a, b);
#endif
}

template <class T>
DEV Fe<T> fe_sqr(const Fe<T>& a) {
#if defined(C2Q_SQR_WIDE)
    return fe_sqr_wide<T>(a);
#else
    return fe_mul<T>(a, a);
#endif
}

#if defined(__CUDACC__) && !C2Q_FP_INLINE
// Operands by value: a reference would force them (and every temporary of the callers) into
// local memory; values travel in registers under the device calling convention.
__device__ __noinline__ Fp fp_mul_call(Fp a, Fp b) {
#if defined(C2Q_CARRY_CHAINS)
    return fe_mul_chains<FpTag>(a, b);
#else
    return fe_mul_inline<FpTag>(a, b);
#endif
}

template <>
DEV Fp fe_mul<FpTag>(const Fp& a, const Fp& b) {
    return fp_mul_call(a, b);
}

#if defined(C2Q_SQR_WIDE)
// The square's own shared copy, for the same reason (the group law squares 2 to 4 times per
// operation, next to 8 to 12 products).
__device__ __noinline__ Fp fp_sqr_call(Fp a) {
    return fe_sqr_wide<FpTag>(a);
}

template <>
DEV Fp fe_sqr<FpTag>(const Fp& a) {
    return fp_sqr_call(a);
}
#endif
#endif

// Lazy reduction in Fp (C2Q_LAZY=1, the default; 0 keeps every value fully reduced). Timed on
// an H200 (ops/bench/gpu-2026-12-05-w.md): the 2^27 MSM 1083 against 1089 ms with full-width
// scalars, 72.9 against 78.2 ms with PoRep-like ones; a 32 GiB proof 17.6 against 17.8 s.
//
// The group law (curve.cuh's Coord<Fp>, fp2.cuh's lazy Fp2) then keeps its Fp values below 2p
// instead of p, so that products end without their conditional subtraction. It rests on p's
// headroom: p < 2^381, so 8p < R = 2^384. A Montgomery reduction of T (CIOS or SOS) gives
// (T + M·p)/R with M < R, a value below T/R + p, which is below 2p whenever T < p·R. Hence:
// - a product a·b of a < 4p and b < 2p: T < 8p² < p·R, the result is below 2p;
// - a square of a < 2p: T < 4p², below 2p;
// - a sum of two values below 2p is below 4p < 2^383 (12 limbs, no carry out): it is either
//   brought below 2p by a conditional subtraction of 2p (fp_add_lazy), or left as it is as the
//   "< 4p" operand of a product (fp_add_raw);
// - a difference a − b of values below 2p lies in (−2p, 2p): adding 2p when it borrows puts it
//   in [0, 2p) (fp_sub_lazy);
// - a·b − c·d of values below 2p is one reduction of T = a·b + c·(2p − d), two unreduced
//   products (0 < 2p − d ≤ 2p): 0 ≤ T < 4p² + 4p² = 8p² < p·R, so the result is below 2p.
// A value x below 2p is ≡ 0 when x = 0 or x = p (fp_is_zero_lazy), and fp_canon gives the
// canonical x mod p: values that leave the group law (for the host, or to be compared) go
// through it. Fr (r < 2^255, no room) and the NTT are untouched. Only the carry-chain builds
// have the lazy forms; the plain C++ fallback keeps full reduction.
#ifndef C2Q_LAZY
#define C2Q_LAZY 1
#endif
#if defined(C2Q_CARRY_CHAINS) && C2Q_LAZY
#define C2Q_LAZY_CHAINS 1
#define C2Q_FP_MOD2 0xffff5556, 0x73fdffff, 0x62a7ffff, 0x3d57fffd, 0xed61ec48, 0xce61a541, \
                    0xe70a257e, 0xc8ee9709, 0x869759ae, 0x96374f6c, 0x72ffcd34, 0x340223d4

// 2p, word i.
DEV constexpr u32 fp_2p(int i) {
    constexpr u32 m[12] = {C2Q_FP_MOD2};
    return m[i];
}

// x − 2p when x ≥ 2p, else x (for x < 4p).
DEV Fp fp_reduce_2p(const Fp& x) {
    Fp d;
    PTX_SUB_CC(d.v[0], x.v[0], fp_2p(0));
#pragma unroll
    for (int i = 1; i < 12; i++) PTX_SUBC_CC(d.v[i], x.v[i], fp_2p(i));
    u32 borrow;
    PTX_SUBC(borrow, 0u, 0u);
    // borrow = all ones when x < 2p: keep x.
#pragma unroll
    for (int i = 0; i < 12; i++) d.v[i] = borrow ? x.v[i] : d.v[i];
    return d;
}

// a + b for a, b < 2p, not reduced: below 4p, for a product's first operand.
DEV Fp fp_add_raw(const Fp& a, const Fp& b) {
    Fp s;
    PTX_ADD_CC(s.v[0], a.v[0], b.v[0]);
#pragma unroll
    for (int i = 1; i < 12; i++) PTX_ADDC_CC(s.v[i], a.v[i], b.v[i]);
    return s;
}

// a + b for a, b < 2p: below 2p.
DEV Fp fp_add_lazy(const Fp& a, const Fp& b) {
    return fp_reduce_2p(fp_add_raw(a, b));
}

// a − b for a, b < 2p: in [0, 2p).
DEV Fp fp_sub_lazy(const Fp& a, const Fp& b) {
    Fp d, r;
    PTX_SUB_CC(d.v[0], a.v[0], b.v[0]);
#pragma unroll
    for (int i = 1; i < 12; i++) PTX_SUBC_CC(d.v[i], a.v[i], b.v[i]);
    u32 mask;
    PTX_SUBC(mask, 0u, 0u);
    PTX_ADD_CC(r.v[0], d.v[0], fp_2p(0) & mask);
#pragma unroll
    for (int i = 1; i < 12; i++) PTX_ADDC_CC(r.v[i], d.v[i], fp_2p(i) & mask);
    return r;
}

DEV Fp fp_neg_lazy(const Fp& a) {
    return fp_sub_lazy(fe_zero<FpTag>(), a);
}

// The canonical value of x < 2p.
DEV Fp fp_canon(const Fp& x) {
    return reduce_once_ptx<FpTag>([&](int i) { return x.v[i]; });
}

// x ≡ 0 for x < 2p: x = 0 or x = p.
DEV bool fp_is_zero_lazy(const Fp& x) {
    u32 zero = 0, mod = 0;
#pragma unroll
    for (int i = 0; i < 12; i++) {
        zero |= x.v[i];
        mod |= x.v[i] ^ FpTag::mod(i);
    }
    return zero == 0 || mod == 0;
}

DEV bool fp_eq_lazy(const Fp& a, const Fp& b) {
    return fp_is_zero_lazy(fp_sub_lazy(a, b));
}

// S = P + Q for multi-word values whose sum fits S words.
template <int S>
DEV void wide_sum(u32 (&s)[S], const u32 (&p)[S], const u32 (&q)[S]) {
    PTX_ADD_CC(s[0], p[0], q[0]);
#pragma unroll
    for (int k = 1; k < S - 1; k++) PTX_ADDC_CC(s[k], p[k], q[k]);
    PTX_ADDC(s[S - 1], p[S - 1], q[S - 1]);
}

// P += Q, the same.
template <int S>
DEV void wide_add(u32 (&p)[S], const u32 (&q)[S]) {
    wide_sum(p, p, q);
}

// P −= Q, modulo 2^(32·S).
template <int S>
DEV void wide_sub(u32 (&p)[S], const u32 (&q)[S]) {
    PTX_SUB_CC(p[0], p[0], q[0]);
#pragma unroll
    for (int k = 1; k < S - 1; k++) PTX_SUBC_CC(p[k], p[k], q[k]);
    PTX_SUBC(p[S - 1], p[S - 1], q[S - 1]);
}

// a·b·R^-1 for a < 4p, b < 2p: below 2p (the bounds above; the product forms' running value
// stays below a + p < 5p, see fe_mul_ptx).
DEV Fp fp_mul_lazy_inline(const Fp& a, const Fp& b) {
    return fe_mul_chains<FpTag, false>(a, b);
}

// With C2Q_MUL_SUB_SPLIT=1 (the default, with the split product), a·b − c·d is summed by split
// rows: both products go into the two halves before each word's reduction (fe_mul_sum_split,
// K = 2), 36 fused multiply-adds per word against the wide rows' separate products and carry
// additions (C2Q_MUL_SUB_SPLIT=0, and the wide and narrow product forms).
// The Fp2 product is two such sums (fp2.cuh). On an H100 (record gpu-2026-12-06-ad) the 2^27
// MSM took 809 ms with it against 854, the B query's G1 + G2 MSM at 2^25 69 against 83 ms.
#ifndef C2Q_MUL_SUB_SPLIT
#define C2Q_MUL_SUB_SPLIT 1
#endif

// (a·b − c·d)·R^-1 for a, b, c, d < 2p, with one reduction: T = a·b + c·(2p − d) < 8p² < p·R
// (0 < 2p − d ≤ 2p), below 2p. Either way the result is (T + Q·p)/R for the one Q < R that
// makes it whole, so both forms give the same value. In split rows the running value stays
// below a + c + p ≤ 5p between words and below 5p·2^32 + 5p < 2^416 within one: 13 words.
DEV Fp fp_mul_sub_lazy_inline(const Fp& a, const Fp& b, const Fp& c, const Fp& d) {
    Fp nd;
    PTX_SUB_CC(nd.v[0], fp_2p(0), d.v[0]);
#pragma unroll
    for (int i = 1; i < 11; i++) PTX_SUBC_CC(nd.v[i], fp_2p(i), d.v[i]);
    PTX_SUBC(nd.v[11], fp_2p(11), d.v[11]);
#if C2Q_MUL_SPLIT && C2Q_MUL_SUB_SPLIT
    const Fp x[2] = {a, c}, y[2] = {b, nd};
    return fe_mul_sum_split<FpTag, false, 2>(x, y);
#else
    u32 ab[24], cd[24];
    fe_mul_raw<FpTag>(ab, a, b);
    fe_mul_raw<FpTag>(cd, c, nd);
    wide_add(ab, cd);
    return fe_redc_wide<FpTag, false>(ab);
#endif
}

#if defined(__CUDACC__) && !C2Q_FP_INLINE
// Shared out-of-line copies, as fp_mul_call.
__device__ __noinline__ Fp fp_mul_lazy_call(Fp a, Fp b) {
    return fp_mul_lazy_inline(a, b);
}

__device__ __noinline__ Fp fp_mul_sub_lazy_call(Fp a, Fp b, Fp c, Fp d) {
    return fp_mul_sub_lazy_inline(a, b, c, d);
}

DEV Fp fp_mul_lazy(const Fp& a, const Fp& b) {
    return fp_mul_lazy_call(a, b);
}

DEV Fp fp_mul_sub_lazy(const Fp& a, const Fp& b, const Fp& c, const Fp& d) {
    return fp_mul_sub_lazy_call(a, b, c, d);
}

#if defined(C2Q_SQR_WIDE)
__device__ __noinline__ Fp fp_sqr_lazy_call(Fp a) {
    return fe_sqr_wide<FpTag, false>(a);
}

// a² for a < 2p: below 2p.
DEV Fp fp_sqr_lazy(const Fp& a) {
    return fp_sqr_lazy_call(a);
}
#else
DEV Fp fp_sqr_lazy(const Fp& a) {
    return fp_mul_lazy(a, a);
}
#endif
#else
DEV Fp fp_mul_lazy(const Fp& a, const Fp& b) {
    return fp_mul_lazy_inline(a, b);
}

DEV Fp fp_mul_sub_lazy(const Fp& a, const Fp& b, const Fp& c, const Fp& d) {
    return fp_mul_sub_lazy_inline(a, b, c, d);
}

DEV Fp fp_sqr_lazy(const Fp& a) {
#if defined(C2Q_SQR_WIDE)
    return fe_sqr_wide<FpTag, false>(a);
#else
    return fp_mul_lazy_inline(a, a);
#endif
}
#endif
#endif

// Montgomery form → canonical integer (multiply by 1).
template <class T>
DEV Fe<T> fe_from_mont(const Fe<T>& a) {
    Fe<T> one_raw = fe_zero<T>();
    one_raw.v[0] = 1;
    return fe_mul<T>(a, one_raw);
}

// Canonical integer (< r) → Montgomery form.
DEV Fr fr_to_mont(const Fr& a) {
    Fr r2;
#pragma unroll
    for (int i = 0; i < 8; i++) r2.v[i] = FR_R2[i];
    return fe_mul<FrTag>(a, r2);
}

// a^(p-2) = a^-1 for a ≠ 0 (0 maps to 0). Only used off the hot paths (point generation).
DEV Fp fp_inv(const Fp& a) {
    Fp r = fe_one<FpTag>();
    for (int i = 11; i >= 0; i--) {
        u32 e = FP_PM2[i];
        for (int b = 31; b >= 0; b--) {
            r = fe_sqr<FpTag>(r);
            if ((e >> b) & 1) r = fe_mul<FpTag>(r, a);
        }
    }
    return r;
}

// Fr as 8 words in device memory: element i at base + 8·i, loaded and stored 16 bytes at a time.
DEV Fr load_fr(const u32* base, u64 i) {
    const uint4* q = (const uint4*)(base + i * 8);
    uint4 a = q[0], b = q[1];
    Fr r;
    r.v[0] = a.x; r.v[1] = a.y; r.v[2] = a.z; r.v[3] = a.w;
    r.v[4] = b.x; r.v[5] = b.y; r.v[6] = b.z; r.v[7] = b.w;
    return r;
}

DEV void store_fr(u32* base, u64 i, const Fr& x) {
    uint4* q = (uint4*)(base + i * 8);
    q[0] = make_uint4(x.v[0], x.v[1], x.v[2], x.v[3]);
    q[1] = make_uint4(x.v[4], x.v[5], x.v[6], x.v[7]);
}

#endif
