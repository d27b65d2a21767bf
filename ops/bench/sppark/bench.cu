// sppark's G1 MSM and Fr NTT over BLS12-381 (the NTT natural and bit-reversed out, inverse, and
// on the coset both ways), timed the way `c2q bench gpu` times c2q's: data
// already on the GPU, one warm-up, then the median of --reps calls, each timed on the host clock
// from the call to its result (an MSM's ends with the point back on the host).
//
//   sppark-bench [--msm-logs 20,24,26,27] [--ntt-logs 27] [--reps 5]
//
// The points are (i + 1)·G for the generator G, made on the GPU (distinct, valid points, as
// c2q's bench makes its own); the scalars are pseudo-random canonical values below r, full
// width. Before timing, a small MSM is checked against the same sum made one term at a time, so
// that the timed call is known to compute what it should. Built by build.sh beside this file
// from sppark's public sources (see ops/bench/README.md).
#include <cuda.h>

#include <ff/bls12-381.hpp>

#include <ec/jacobian_t.hpp>
#include <ec/xyzz_t.hpp>

typedef jacobian_t<fp_t> point_t;
typedef xyzz_t<fp_t> bucket_t;
typedef bucket_t::affine_t affine_t;
typedef fr_t scalar_t;

#include <msm/pippenger.cuh>
#include <ntt/ntt.cuh>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// The few blst functions the check needs, declared here: blst.h and sppark's host field types
// (blst's src/blst_t.hpp) define the same names. Layouts as blst's blst_p1 and blst_p1_affine.
struct P1 {
    uint64_t x[6], y[6], z[6];
};
struct P1Affine {
    uint64_t x[6], y[6];
};
extern "C" {
bool blst_p1_affine_on_curve(const P1Affine* p);
void blst_p1_from_affine(P1* out, const P1Affine* p);
void blst_p1_mult(P1* out, const P1* p, const uint8_t* scalar, size_t nbits);
void blst_p1_add_or_double(P1* out, const P1* a, const P1* b);
bool blst_p1_is_equal(const P1* a, const P1* b);
}

namespace {

// The generator of G1, canonical 64-bit words, least significant first.
const uint64_t G1_X[6] = {0xfb3af00adb22c6bb, 0x6c55e83ff97a1aef, 0xa14e3a3f171bac58,
                          0xc3688c4f9774b905, 0x2695638c4fa9ac0f, 0x17f1d3a73197d794};
const uint64_t G1_Y[6] = {0x0caa232946c5e7e1, 0xd03cc744a2888ae4, 0x00db18cb2c04b3ed,
                          0xfcf5e095d5d00af6, 0xa09e30ed741d8ae4, 0x08b3f481e3aaa0f1};
// p − 2, the exponent of Fermat inversion in Fp.
const uint64_t P_MINUS_2[6] = {0xb9feffffffffaaa9, 0x1eabfffeb153ffff, 0x6730d2a0f6b0f624,
                               0x64774b84f38512bf, 0x4b1ba7b6434bacd7, 0x1a0111ea397fe69a};
// r, the group order.
const uint64_t R[4] = {0xffffffff00000001, 0x53bda402fffe5bfe, 0x3339d80809a1d805,
                       0x73eda753299d7d48};

struct Canonical6 {
    uint64_t w[6];
};
struct Canonical4 {
    uint64_t w[4];
};

__device__ uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9;
    x = (x ^ (x >> 27)) * 0x94d049bb133111eb;
    return x ^ (x >> 31);
}

// points[i] = (i + 1)·G, affine, Montgomery form (sppark's and blst's memory layout): double
// and add in Jacobian coordinates on sppark's field type (sppark's own point classes are
// host-only), then one inversion. Starting from G at the top bit, the running multiple m is
// never 0 nor G when added to, so the formulas need no special cases.
__global__ void make_points(affine_t::mem_t* points, size_t n, Canonical6 gx, Canonical6 gy,
                            Canonical6 p_minus_2_arg) {
#ifdef __CUDA_ARCH__  // the host pass sees sppark's host field types, which this does not use
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fp_t x2, y2;
    for (int k = 0; k < 12; k++) {
        x2[k] = (uint32_t)(gx.w[k / 2] >> (32 * (k % 2)));
        y2[k] = (uint32_t)(gy.w[k / 2] >> (32 * (k % 2)));
    }
    x2.to();
    y2.to();
    const uint64_t* p_minus_2 = p_minus_2_arg.w;
    const uint64_t k = i + 1;
    fp_t X = x2, Y = y2, Z = fp_t::one();
    for (int bit = 62 - __clzll(k); bit >= 0; bit--) {
        // dbl-2009-l (a = 0)
        fp_t A = X ^ 2, B = Y ^ 2, C = B ^ 2;
        fp_t D = (X + B) ^ 2;
        D -= A;
        D -= C;
        D += D;
        fp_t E = A + A + A, F = E ^ 2;
        fp_t Z3 = Y * Z;
        Z = Z3 + Z3;
        X = F - D - D;
        fp_t C8 = C + C;
        C8 += C8;
        C8 += C8;
        Y = E * (D - X) - C8;
        if ((k >> bit) & 1) {
            // madd-2007-bl: += (x2, y2)
            fp_t Z1Z1 = Z ^ 2, U2 = x2 * Z1Z1, S2 = y2 * Z * Z1Z1;
            fp_t H = U2 - X, HH = H ^ 2;
            fp_t I = HH + HH;
            I += I;
            fp_t J = H * I, r = S2 - Y;
            r += r;
            fp_t V = X * I;
            fp_t X3 = (r ^ 2) - J - V - V;
            fp_t YJ = Y * J;
            fp_t Y3 = r * (V - X3) - YJ - YJ;
            fp_t Z3b = ((Z + H) ^ 2) - Z1Z1 - HH;
            X = X3;
            Y = Y3;
            Z = Z3b;
        }
    }
    // 1/Z by Fermat (Z^(p−2)), one thread alone: sppark's reciprocal pairs each lane with its
    // neighbour through a warp shuffle, which wants the warp converged.
    fp_t zi = fp_t::one();
    for (int w = 5; w >= 0; w--) {
        for (int b = 63; b >= 0; b--) {
            zi = zi ^ 2;
            if ((p_minus_2[w] >> b) & 1) zi *= Z;
        }
    }
    fp_t zi2 = zi ^ 2;
    fp_t xa = X * zi2, ya = Y * zi2 * zi;
    uint32_t* dst = reinterpret_cast<uint32_t*>(&points[i]);
    for (int w = 0; w < 12; w++) {
        dst[w] = xa[w];
        dst[12 + w] = ya[w];
    }
#endif
}

// scalars[i]: canonical, pseudo-random below r (a 255-bit draw, less r when at least r).
__global__ void make_scalars(scalar_t* scalars, size_t n, uint64_t seed, Canonical4 r) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint64_t v[4];
    for (int k = 0; k < 4; k++) v[k] = splitmix(seed ^ (i * 4 + k) * 0x2545f4914f6cdd1d);
    v[3] &= 0x7fffffffffffffff;
    bool ge = true;
    for (int k = 3; k >= 0; k--) {
        if (v[k] != r.w[k]) {
            ge = v[k] > r.w[k];
            break;
        }
    }
    if (ge) {
        unsigned __int128 borrow = 0;
        for (int k = 0; k < 4; k++) {
            unsigned __int128 d = (unsigned __int128)v[k] - r.w[k] - borrow;
            v[k] = (uint64_t)d;
            borrow = (d >> 64) & 1;
        }
    }
    uint32_t* dst = reinterpret_cast<uint32_t*>(&scalars[i]);
    for (int k = 0; k < 8; k++) dst[k] = (uint32_t)(v[k / 2] >> (32 * (k % 2)));
}

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

void check(const RustError& e, const char* what) {
    if (e.code != cudaSuccess) {
        fprintf(stderr, "%s: CUDA error %d\n", what, e.code);
        exit(1);
    }
}

std::vector<int> parse_list(const char* s) {
    std::vector<int> out;
    std::string t(s);
    size_t p = 0;
    while (p <= t.size()) {
        size_t q = t.find(',', p);
        if (q == std::string::npos) q = t.size();
        if (q > p) out.push_back(atoi(t.substr(p, q - p).c_str()));
        p = q + 1;
    }
    return out;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double now_ms() {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Times `call`: one warm-up, then `reps` calls, each to its end on the host clock. Prints the
// table row (work, size, median, minimum) and returns it.
template <class Call>
std::string timed_row(const char* work, int lg, int reps, Call call) {
    std::vector<double> times;
    for (int rep = 0; rep <= reps; rep++) {
        double t = now_ms();
        call();
        if (rep > 0) times.push_back(now_ms() - t);
    }
    char line[160];
    snprintf(line, sizeof line, "%-30s 2^%-3d %10.2f %10.2f", work, lg, median(times),
             *std::min_element(times.begin(), times.end()));
    printf("%s\n", line);
    return line;
}

// sppark's MSM of the first n points and (canonical) scalars, both on the device. The points
// are passed as affine_t, not as their memory type affine_t::mem_t (the same bytes): msm_t's
// invoke for device pointers hands the pointers on with the host pointers set to null, and a
// null of any type other than `const affine_t*` matches that same template again, which then
// calls itself for ever.
static_assert(sizeof(affine_t) == sizeof(affine_t::mem_t), "affine layout");
RustError sppark_msm(msm_t<bucket_t, point_t, affine_t, scalar_t>& msm, point_t& out,
                     affine_t::mem_t* d_points, scalar_t* d_scalars, size_t n) {
    return msm.invoke(out, dev_ptr_t<affine_t>{reinterpret_cast<affine_t*>(d_points), n}, n,
                      dev_ptr_t<scalar_t>{d_scalars, n}, false);
}

// Host copies of points and scalars as blst types, for the check.
P1 to_blst(const point_t& p) {
    P1 out;
    static_assert(sizeof(point_t) == sizeof(P1), "jacobian layout");
    memcpy(&out, &p, sizeof(out));
    return out;
}

// Σ s_i·P_i one term at a time with blst (the scalars canonical, little-endian bytes).
P1 naive_sum(const std::vector<P1Affine>& pts, const std::vector<uint8_t>& sc) {
    P1 acc;
    memset(&acc, 0, sizeof(acc));
    for (size_t i = 0; i < pts.size(); i++) {
        P1 p, t;
        blst_p1_from_affine(&p, &pts[i]);
        blst_p1_mult(&t, &p, &sc[32 * i], 255);
        blst_p1_add_or_double(&acc, &acc, &t);
    }
    return acc;
}

}  // namespace

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it comes, into a log file too
    std::vector<int> msm_logs = {20, 24, 26, 27}, ntt_logs = {27};
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--msm-logs") && i + 1 < argc) msm_logs = parse_list(argv[++i]);
        else if (!strcmp(argv[i], "--ntt-logs") && i + 1 < argc) ntt_logs = parse_list(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::max(1, atoi(argv[++i]));
        else {
            fprintf(stderr, "usage: %s [--msm-logs L,..] [--ntt-logs L,..] [--reps N]\n", argv[0]);
            return 2;
        }
    }
    const gpu_t& gpu = select_gpu(0);
    cudaDeviceProp prop;
    check(cudaGetDeviceProperties(&prop, 0), "device properties");
    printf("sppark v0.1.15 on %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor,
           prop.multiProcessorCount);
    Canonical6 gx, gy, pm2;
    Canonical4 r;
    memcpy(gx.w, G1_X, sizeof gx.w);
    memcpy(gy.w, G1_Y, sizeof gy.w);
    memcpy(pm2.w, P_MINUS_2, sizeof pm2.w);
    memcpy(r.w, R, sizeof r.w);
    std::vector<std::string> rows;

    int max_msm = msm_logs.empty() ? 0 : *std::max_element(msm_logs.begin(), msm_logs.end());
    if (!msm_logs.empty()) {
        const size_t nmax = (size_t)1 << max_msm;
        affine_t::mem_t* d_points;
        scalar_t* d_scalars;
        check(cudaMalloc(&d_points, nmax * sizeof(affine_t::mem_t)), "points");
        check(cudaMalloc(&d_scalars, nmax * sizeof(scalar_t)), "scalars");
        double t0 = now_ms();
        printf("making 2^%d points and scalars ...\n", max_msm);
        make_points<<<(nmax + 255) / 256, 256>>>(d_points, nmax, gx, gy, pm2);
        make_scalars<<<(nmax + 255) / 256, 256>>>(d_scalars, nmax, 2712, r);
        check(cudaDeviceSynchronize(), "making points and scalars");
        printf("made 2^%d points and scalars in %.1f s\n", max_msm, (now_ms() - t0) / 1e3);

        // The check: 64 terms through sppark against blst one term at a time.
        {
            const size_t n = 64;
            std::vector<P1Affine> pts(n);
            std::vector<uint8_t> sc(32 * n);
            check(cudaMemcpy(pts.data(), d_points, n * sizeof(P1Affine),
                             cudaMemcpyDeviceToHost),
                  "check points");
            check(cudaMemcpy(sc.data(), d_scalars, 32 * n, cudaMemcpyDeviceToHost),
                  "check scalars");
            for (size_t i = 0; i < n; i++) {
                if (!blst_p1_affine_on_curve(&pts[i])) {
                    fprintf(stderr, "point %zu is not on the curve\n", i);
                    return 1;
                }
            }
            msm_t<bucket_t, point_t, affine_t, scalar_t> msm{nullptr, n};
            point_t out;
            check(sppark_msm(msm, out, d_points, d_scalars, n), "check MSM");
            P1 got = to_blst(out), want = naive_sum(pts, sc);
            bool ok = blst_p1_is_equal(&got, &want);
            printf("check: sppark MSM of 64 terms %s blst's term-by-term sum\n",
                   ok ? "equals" : "DIFFERS FROM");
            if (!ok) return 1;
        }

        for (int lg : msm_logs) {
            const size_t n = (size_t)1 << lg;
            printf("timing sppark's MSM of 2^%d ...\n", lg);
            msm_t<bucket_t, point_t, affine_t, scalar_t> msm{nullptr, n};
            rows.push_back(timed_row("sppark msm full-width", lg, reps, [&] {
                point_t out;
                check(sppark_msm(msm, out, d_points, d_scalars, n), "MSM");
            }));
        }
        check(cudaFree(d_points), "free points");
        check(cudaFree(d_scalars), "free scalars");
    }

    for (int lg : ntt_logs) {
        const size_t n = (size_t)1 << lg;
        scalar_t* d_data;
        check(cudaMalloc(&d_data, n * sizeof(scalar_t)), "ntt data");
        make_scalars<<<(n + 255) / 256, 256>>>(d_data, n, 27, r);
        check(cudaDeviceSynchronize(), "ntt data");
        struct Case {
            const char* name;
            NTT::InputOutputOrder order;
            NTT::Direction direction;
            NTT::Type type;
        } cases[] = {
            {"sppark ntt forward", NTT::InputOutputOrder::NN, NTT::Direction::forward,
             NTT::Type::standard},
            {"sppark ntt forward, bit-rev out", NTT::InputOutputOrder::NR, NTT::Direction::forward,
             NTT::Type::standard},
            {"sppark ntt inverse", NTT::InputOutputOrder::NN, NTT::Direction::inverse,
             NTT::Type::standard},
            // On the coset g·<omega> (g = 7 for both): sppark multiplies by g^i (g^-i) in a pass
            // of its own before (after) the butterflies.
            {"sppark ntt coset forward", NTT::InputOutputOrder::NN, NTT::Direction::forward,
             NTT::Type::coset},
            {"sppark ntt coset inverse", NTT::InputOutputOrder::NN, NTT::Direction::inverse,
             NTT::Type::coset},
        };
        for (const Case& c : cases) {
            stream_t& stream = gpu[0];
            rows.push_back(timed_row(c.name, lg, reps, [&] {
                NTT::Base_dev_ptr(stream, d_data, lg, c.order, c.direction, c.type);
                stream.sync();
            }));
            check(cudaGetLastError(), c.name);
        }
        check(cudaFree(d_data), "free ntt data");
    }

    printf("\n%-30s %-5s %10s %10s\n", "work", "size", "median ms", "min ms");
    for (const auto& row : rows) printf("%s\n", row.c_str());
    return 0;
}
