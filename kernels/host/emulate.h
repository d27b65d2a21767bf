// The CUDA built-ins the kernels use, emulated on the CPU: one std::thread per CUDA thread,
// blocks run one after another, __syncthreads is a barrier and __shared__ arrays are statics
// (shared by the block's threads; blocks do not overlap). Slow, but it runs the kernels' own
// index arithmetic and synchronisation, so kernel logic is tested without a GPU.
// A kernel may return early only uniformly across its block when it synchronises later (the
// same rule CUDA has).
#ifndef C2Q_EMULATE_H
#define C2Q_EMULATE_H

#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

struct EmuDim {
    unsigned x = 0, y = 0, z = 0;
};
inline thread_local EmuDim threadIdx, blockIdx;
inline EmuDim blockDim, gridDim;
inline std::barrier<>* emu_barrier = nullptr;

inline void __syncthreads() { emu_barrier->arrive_and_wait(); }

struct uint4 {
    unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

inline unsigned __brev(unsigned v) {
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= ((v >> i) & 1u) << (31 - i);
    return r;
}

// CUDA's min/max overloads for the integer types the kernels mix.
template <class A, class B>
inline std::common_type_t<A, B> min(A a, B b) { return a < b ? a : b; }
template <class A, class B>
inline std::common_type_t<A, B> max(A a, B b) { return a < b ? b : a; }

inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __ffs(unsigned v) { return __builtin_ffs((int)v); }

// Warp-synchronous intrinsics would need the threads of a warp to run in lock step, which this
// emulation does not do: kernels that use them are not run here.
[[noreturn]] inline void emu_unsupported(const char* what) {
    std::fprintf(stderr, "emulate.h: %s is not emulated\n", what);
    std::abort();
}
inline unsigned __ballot_sync(unsigned, bool) { emu_unsupported("__ballot_sync"); }
inline unsigned __shfl_sync(unsigned, unsigned, int) { emu_unsupported("__shfl_sync"); }

inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }

#define __global__
#define __shared__ static
#define __launch_bounds__(...)

// Runs `call` as a grid of `grid` blocks of `block` threads: the same `block` threads play
// every block in turn, with a barrier between blocks.
template <class F>
void emu_launch(unsigned grid, unsigned block, F call) {
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    std::barrier<> inside(block), between(block);
    emu_barrier = &inside;
    std::vector<std::thread> threads;
    threads.reserve(block);
    for (unsigned t = 0; t < block; t++)
        threads.emplace_back([&, t] {
            threadIdx = {t, 0, 0};
            for (unsigned b = 0; b < grid; b++) {
                blockIdx = {b, 0, 0};
                call();
                between.arrive_and_wait();
            }
        });
    for (auto& th : threads) th.join();
}

#endif
