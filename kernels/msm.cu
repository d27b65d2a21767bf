// Multi-scalar multiplication in G1 and G2: Σ s_i·P_i with Pippenger's bucket method.
//
// 1. classify: scalars (Montgomery form, as blstrs stores them) equal to 0 are dropped, those
//    equal to 1 only need their points summed (PoRep witnesses are mostly bits), the rest are
//    converted to canonical integers and compacted with their point indices.
// 2. digits: each remaining scalar is split into signed c-bit windows, d ∈ [-2^(c-1), 2^(c-1)],
//    so a window needs 2^(c-1) buckets; −d·P is d·(−P), and negating an affine point is free.
//    (Replacing s > r/2 by r − s with −P first would leave 254 bits, but signed digits still
//    need one bit for the top window's carry: 255 bits, 12 windows of 22 either way. 11 windows
//    take c = 24: 8.4M buckets a window, 17.7 GB of them at 2^27, and more additions by the
//    cost model of src/gpu/msm.rs's `window_bits`, 1.75G against 1.69G. Not done.
//    Nor precomputed shifted copies 2^(6c)·P of the points, which would let window w + 6 share
//    window w's buckets: the same additions into buckets, half the bucket work, 1.65G by the
//    same model; the trace puts the bucket fix-up and reduction at ~77 ms of a 2^27 MSM's
//    ~1.09 s, so at most ~40 ms, for 12.9 GB more of device memory: a 32 GiB start peaks at
//    80.8 GB, so only a 141 GB GPU has that room.)
// 3. per window, a counting sort on the GPU orders (point, sign) by bucket: histogram with
//    atomics, exclusive scan of the counts, scatter.
// 4. accumulate: the sorted list is cut into fixed chunks, one thread each, so a bucket with
//    millions of points (a repeated scalar) costs no more than many small ones. A thread writes
//    the part of a bucket that starts in its chunk to the bucket; a part that continues a bucket
//    from an earlier chunk goes to the chunk's own slot; `cont_fold` sums a bucket's slots group
//    by group, and `bucket_fix` adds those sums in.
// 5. reduce: Σ (b+1)·B_b per window by running sums over short segments of buckets, then a tree
//    sum; the host combines the windows (Σ 2^(c·w)·W_w) and adds the sum of the ones.
//
// Steps 1–3 depend on the scalars alone; 4, 5 and the sum of the ones on the points. The
// point-dependent kernels are templates over the coordinate field, instantiated for G1 (the
// names without a suffix) and for G2 (`_g2`), so that a G2 multiexp with the same scalars as a
// G1 one (Groth16's B query) runs over the G1 multiexp's sorted lists and list of ones.
#include "curve.cuh"

// Whether the gathers of points are prefetched (c2q's $C2Q_KERNEL_DEFINES can turn it off,
// to measure what it gains).
#ifndef C2Q_MSM_PREFETCH
#define C2Q_MSM_PREFETCH 1
#endif

// Points in memory: AFFINE limbs each (x then y: 24 in G1, 48 in G2). Accumulators: XYZZ limbs
// (x, y, zz, zzz: 48 and 96). Results for the host: JACOBIAN limbs (x, y, z: 36 and 72).
template <class F>
struct Layout {
    static const int AFFINE = 2 * Coord<F>::LIMBS;
    static const int XYZZ = 4 * Coord<F>::LIMBS;
    static const int JACOBIAN = 3 * Coord<F>::LIMBS;
};

template <class F>
DEV Affine<F> load_affine(const u32* points, u64 i) {
    typedef Coord<F> K;
    const u32* p = points + i * Layout<F>::AFFINE;
    Affine<F> a;
    a.x = K::load(p);
    a.y = K::load(p + K::LIMBS);
    return a;
}

// Starts fetching affine point i into L1: its first and last words, which lie in the two cache
// lines it can straddle (a 96-byte G1 point, a 192-byte G2 point at a multiple of 64 bytes).
template <class F>
DEV void prefetch_affine(const u32* points, u64 i) {
#if defined(__CUDA_ARCH__) && C2Q_MSM_PREFETCH
    const u32* p = points + i * Layout<F>::AFFINE;
    asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
    asm volatile("prefetch.global.L1 [%0];" ::"l"(p + Layout<F>::AFFINE - 1));
#else
    (void)points;
    (void)i;
#endif
}

template <class F>
DEV Xyzz<F> load_xyzz(const u32* base, u64 i) {
    typedef Coord<F> K;
    const u32* q = base + i * Layout<F>::XYZZ;
    Xyzz<F> p;
    p.x = K::load(q);
    p.y = K::load(q + K::LIMBS);
    p.zz = K::load(q + 2 * K::LIMBS);
    p.zzz = K::load(q + 3 * K::LIMBS);
    return p;
}

template <class F>
DEV void store_xyzz(u32* base, u64 i, const Xyzz<F>& p) {
    typedef Coord<F> K;
    u32* q = base + i * Layout<F>::XYZZ;
    K::store(q, p.x);
    K::store(q + K::LIMBS, p.y);
    K::store(q + 2 * K::LIMBS, p.zz);
    K::store(q + 3 * K::LIMBS, p.zzz);
}

// Appends `take` to a list shared by the warp with one atomic per warp; returns this lane's slot.
DEV u32 warp_append(bool take, u32* counter) {
    const u32 lane = threadIdx.x & 31;
    u32 mask = __ballot_sync(0xffffffffu, take);
    u32 base = 0;
    if (mask != 0) {
        u32 leader = __ffs(mask) - 1;
        if (lane == leader) base = atomicAdd(counter, __popc(mask));
        base = __shfl_sync(0xffffffffu, base, leader);
    }
    return base + __popc(mask & ((1u << lane) - 1));
}

// counters[0]: number of ones, counters[1]: number of other non-zero scalars.
// The block size must be a multiple of 32 (whole warps take part in the ballots).
extern "C" __global__ void msm_classify(const u32* scalars, u32 n, u32* one_idx,
                                        u32* other_idx, u32* other_scalars, u32* counters) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    bool active = i < n;
    Fr s = active ? load_fr(scalars, i) : fe_zero<FrTag>();
    bool zero = fe_is_zero<FrTag>(s);
    bool one = active && !zero && fe_is_one<FrTag>(s);
    bool other = active && !zero && !one;
    u32 slot_one = warp_append(one, &counters[0]);
    u32 slot_other = warp_append(other, &counters[1]);
    if (one) one_idx[slot_one] = i;
    if (other) {
        other_idx[slot_other] = i;
        store_fr(other_scalars, slot_other, fe_from_mont<FrTag>(s));
    }
}

// Signed window digits of canonical scalars (< 2^255), window-major: digits[w·m + i].
// Encoding: 0 for a zero digit, else 1 + (bucket << 1 | negative), bucket = |d| − 1.
extern "C" __global__ void msm_digits(const u32* scalars, u32 m, u32 c, u32 windows,
                                      u32* digits) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    Fr s = load_fr(scalars, i);
    const u32 half = 1u << (c - 1);
    const u64 mask = ((u64)1 << c) - 1;
    u32 carry = 0;
    for (u32 w = 0; w < windows; w++) {
        u32 bit = w * c;
        u32 q = bit >> 5, sh = bit & 31;
        u64 lo = q < 8 ? s.v[q] : 0;
        u64 hi = q + 1 < 8 ? s.v[q + 1] : 0;
        u32 raw = (u32)((((hi << 32) | lo) >> sh) & mask) + carry;
        u32 enc;
        if (raw > half) {
            // Negative digit raw − 2^c, and a carry into the next window.
            u32 mag = (1u << c) - raw;
            carry = 1;
            enc = mag == 0 ? 0 : 1 + (((mag - 1) << 1) | 1);
        } else {
            carry = 0;
            enc = raw == 0 ? 0 : 1 + ((raw - 1) << 1);
        }
        digits[(u64)w * m + i] = enc;
    }
}

// The counting sort's two passes over a window take SORT_UNROLL entries per thread per round,
// over a grid of any size: each thread keeps that many loads and atomics in flight. They run
// beside the bucket accumulation, which leaves room for about one block per SM; one entry per
// thread would leave them waiting on memory one round trip at a time. The launcher sizes the
// grid by it, so c2q passes it (src/gpu/kernels.rs) rather than this file choosing it.
#ifndef SORT_UNROLL
#error "SORT_UNROLL is passed by c2q as -DSORT_UNROLL=... (src/gpu/kernels.rs)"
#endif

// The digits of one round's entries i0, i0 + stride, …, 0 (no bucket) past the end.
DEV void load_digit_round(u32 (&enc)[SORT_UNROLL], const u32* digits, u32 i0, u32 stride,
                          u32 m) {
#pragma unroll
    for (int r = 0; r < SORT_UNROLL; r++) {
        const u32 i = i0 + r * stride;
        enc[r] = i < m ? digits[i] : 0;
    }
}

// The two passes are launched in blocks small enough to fit beside the accumulation
// (src/gpu/msm.rs, sort_block), which leaves an sm_90 SM 4,096 registers: a block of 128
// threads fits there at the 32 registers a thread each pass takes (ops/bench/sass-count.py).
extern "C" __global__ void msm_histogram(const u32* digits, u32 m, u32* counts) {
    const u32 stride = gridDim.x * blockDim.x;
    for (u32 i0 = blockIdx.x * blockDim.x + threadIdx.x; i0 < m; i0 += SORT_UNROLL * stride) {
        u32 enc[SORT_UNROLL];
        load_digit_round(enc, digits, i0, stride, m);
#pragma unroll
        for (int r = 0; r < SORT_UNROLL; r++)
            if (enc[r] != 0) atomicAdd(&counts[(enc[r] - 1) >> 1], 1u);
    }
}

// Exclusive scan, 1024 elements per block of 256 threads; block totals go to `sums` so that the
// host can scan them in turn and add them back with `scan_add`.
extern "C" __global__ void __launch_bounds__(256) scan_blocks(const u32* in, u32* out, u32 len,
                                                             u32* sums) {
    __shared__ u32 part[256];
    const u32 base = blockIdx.x * 1024 + threadIdx.x * 4;
    u32 v[4];
    u32 total = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        v[k] = base + k < len ? in[base + k] : 0;
        total += v[k];
    }
    part[threadIdx.x] = total;
    __syncthreads();
    // Hillis–Steele inclusive scan of the 256 thread totals.
    for (u32 d = 1; d < 256; d <<= 1) {
        u32 add = threadIdx.x >= d ? part[threadIdx.x - d] : 0;
        __syncthreads();
        part[threadIdx.x] += add;
        __syncthreads();
    }
    u32 run = part[threadIdx.x] - total;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if (base + k < len) out[base + k] = run;
        run += v[k];
    }
    if (threadIdx.x == 255) sums[blockIdx.x] = part[255];
}

extern "C" __global__ void scan_add(u32* out, u32 len, const u32* sums) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < len) out[i] += sums[i / 1024];
}

extern "C" __global__ void msm_scatter(const u32* digits, const u32* other_idx, u32 m,
                                       const u32* offsets, u32* fill, u32* sorted) {
    const u32 stride = gridDim.x * blockDim.x;
    for (u32 i0 = blockIdx.x * blockDim.x + threadIdx.x; i0 < m; i0 += SORT_UNROLL * stride) {
        u32 enc[SORT_UNROLL], pos[SORT_UNROLL];
        load_digit_round(enc, digits, i0, stride, m);
#pragma unroll
        for (int r = 0; r < SORT_UNROLL; r++) {
            if (enc[r] != 0) {
                const u32 b = (enc[r] - 1) >> 1;
                pos[r] = offsets[b] + atomicAdd(&fill[b], 1u);
            }
        }
#pragma unroll
        for (int r = 0; r < SORT_UNROLL; r++) {
            const u32 i = i0 + r * stride;
            if (enc[r] != 0) sorted[pos[r]] = other_idx[i] | (((enc[r] - 1) & 1) << 31);
        }
    }
}

// Blocks of 128 threads per SM the accumulation is built for: registers are capped to fit
// them (c2q's $C2Q_KERNEL_DEFINES can override it for tuning runs). A G2 accumulator is twice
// the size of a G1 one, so G2 gets fewer blocks, and more registers each.
#ifndef C2Q_ACCUMULATE_BLOCKS
#define C2Q_ACCUMULATE_BLOCKS 3
#endif
#ifndef C2Q_ACCUMULATE_BLOCKS_G2
#define C2Q_ACCUMULATE_BLOCKS_G2 2
#endif

// Chunk t covers sorted[t·chunk, (t+1)·chunk). offsets has nbuckets + 1 entries, the last one
// being the number of sorted entries.
template <class F>
DEV void accumulate(const u32* sorted, const u32* offsets, u32 nbuckets, u32 chunk,
                    const u32* points, u32* buckets, u32* cont) {
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    const u32 total = offsets[nbuckets];
    const u64 start64 = (u64)t * chunk;
    if (start64 >= total) return;
    const u32 start = (u32)start64;
    const u32 end = min(total, start + chunk);
    // The bucket holding `start`: the last b with offsets[b] <= start.
    u32 lo = 0, hi = nbuckets;
    while (hi - lo > 1) {
        u32 mid = (lo + hi) >> 1;
        if (offsets[mid] <= start) lo = mid; else hi = mid;
    }
    u32 b = lo;
    u32 next = offsets[b + 1];
    u32 part_start = start;
    Xyzz<F> acc = xyzz_inf<F>();
    // The points are gathered from all over device memory: each one's fetch is started an
    // addition ahead (into L1, costing no registers), and each sorted entry read two ahead, so
    // that the thread does not wait on memory between additions.
    u32 entry = sorted[start];
    u32 entry_next = start + 1 < end ? sorted[start + 1] : 0;
    prefetch_affine<F>(points, entry & 0x7fffffffu);
    for (u32 e = start; e < end; e++) {
        while (e >= next) {
            if (part_start < e) {
                if (part_start == offsets[b]) store_xyzz<F>(buckets, b, acc);
                else store_xyzz<F>(cont, t, acc);
            }
            acc = xyzz_inf<F>();
            part_start = e;
            b++;
            next = offsets[b + 1];
        }
        const u32 entry_after = e + 2 < end ? sorted[e + 2] : 0;
        if (e + 1 < end) prefetch_affine<F>(points, entry_next & 0x7fffffffu);
        Affine<F> p = load_affine<F>(points, entry & 0x7fffffffu);
        acc = xyzz_add_affine_any<F>(acc, p, (entry >> 31) != 0);
        entry = entry_next;
        entry_next = entry_after;
    }
    if (part_start == offsets[b]) store_xyzz<F>(buckets, b, acc);
    else store_xyzz<F>(cont, t, acc);
}

extern "C" __global__ void __launch_bounds__(128, C2Q_ACCUMULATE_BLOCKS) msm_accumulate(const u32* sorted, const u32* offsets, u32 nbuckets,
                                          u32 chunk, const u32* points, u32* buckets,
                                          u32* cont) {
    accumulate<Fp>(sorted, offsets, nbuckets, chunk, points, buckets, cont);
}

extern "C" __global__ void __launch_bounds__(128, C2Q_ACCUMULATE_BLOCKS_G2)
    msm_accumulate_g2(const u32* sorted, const u32* offsets, u32 nbuckets, u32 chunk,
                      const u32* points, u32* buckets, u32* cont) {
    accumulate<Fp2>(sorted, offsets, nbuckets, chunk, points, buckets, cont);
}

// Chunk c's slot holds a continuation when the chunk starts inside a bucket that began in an
// earlier chunk. A bucket of s entries (a scalar repeated s times in a window) has about
// s/chunk continuations, which bucket_fix would add one after another in a single thread: tens
// of milliseconds for a few tens of thousands of entries, most of a small MSM's time. So first,
// one thread per group of `group` consecutive slots: where the whole group continues a single
// bucket, its slots are summed into the group's first. bucket_fix then adds such a group as one
// slot, and the longest chain of additions is about 3·group + s/(chunk·group) instead of
// s/chunk. Groups that do not lie within one bucket are left alone, so data without repeated
// scalars costs one search per group and no addition. With group = 1 nothing is folded (and the
// fold need not run).
template <class F>
DEV void cont_fold(u32* cont, const u32* offsets, u32 nbuckets, u32 chunk, u32 group) {
    const u64 total = offsets[nbuckets];
    const u64 slots = (total + chunk - 1) / chunk;
    const u64 first = (u64)(blockIdx.x * blockDim.x + threadIdx.x) * group;
    if (first + group > slots) return;
    // The bucket holding the group's first entry: the last b with offsets[b] <= it.
    const u64 start = first * chunk;
    u32 lo = 0, hi = nbuckets;
    while (hi - lo > 1) {
        u32 mid = (lo + hi) >> 1;
        if (offsets[mid] <= start) lo = mid; else hi = mid;
    }
    // Folded when the bucket began before the group and goes on into its last chunk.
    if (offsets[lo] >= start || offsets[lo + 1] <= (first + group - 1) * chunk) return;
    Xyzz<F> acc = load_xyzz<F>(cont, first);
    for (u32 k = 1; k < group; k++) acc = xyzz_add<F>(acc, load_xyzz<F>(cont, first + k));
    store_xyzz<F>(cont, first, acc);
}

extern "C" __global__ void msm_cont_fold(u32* cont, const u32* offsets, u32 nbuckets, u32 chunk,
                                         u32 group) {
    cont_fold<Fp>(cont, offsets, nbuckets, chunk, group);
}

extern "C" __global__ void msm_cont_fold_g2(u32* cont, const u32* offsets, u32 nbuckets,
                                            u32 chunk, u32 group) {
    cont_fold<Fp2>(cont, offsets, nbuckets, chunk, group);
}

// Completes each bucket: empty ones become infinity, split ones get their continuations: one
// slot at a time, or a whole group at once where `cont_fold` summed it (a group that starts at
// or after the bucket's first continuation and ends before the bucket does).
template <class F>
DEV void bucket_fix(u32* buckets, const u32* cont, const u32* offsets, u32 nbuckets,
                    u32 chunk, u32 group) {
    u32 b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nbuckets) return;
    u32 o0 = offsets[b], o1 = offsets[b + 1];
    if (o0 == o1) {
        store_xyzz<F>(buckets, b, xyzz_inf<F>());
        return;
    }
    u32 c = o0 / chunk + 1;
    if ((u64)c * chunk >= o1) return;
    Xyzz<F> acc = load_xyzz<F>(buckets, b);
    while ((u64)c * chunk < o1) {
        acc = xyzz_add<F>(acc, load_xyzz<F>(cont, c));
        const bool folded = c % group == 0 && (u64)(c + group - 1) * chunk < o1;
        c += folded ? group : 1;
    }
    store_xyzz<F>(buckets, b, acc);
}

extern "C" __global__ void msm_bucket_fix(u32* buckets, const u32* cont, const u32* offsets,
                                          u32 nbuckets, u32 chunk, u32 group) {
    bucket_fix<Fp>(buckets, cont, offsets, nbuckets, chunk, group);
}

extern "C" __global__ void msm_bucket_fix_g2(u32* buckets, const u32* cont, const u32* offsets,
                                             u32 nbuckets, u32 chunk, u32 group) {
    bucket_fix<Fp2>(buckets, cont, offsets, nbuckets, chunk, group);
}

// Segment j of window w covers buckets [j·len, (j+1)·len) of that window and yields
// Σ (b+1)·B_b over them: running sums from the top give Σ (b − j·len + 1)·B_b, and
// (j·len)·Σ B_b supplies the rest. All windows in one launch: out[w·nseg + j].
template <class F>
DEV void bucket_reduce(const u32* buckets, u32 nbuckets, u32 len, u32 nseg, u32 windows,
                       u32* out) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nseg * windows) return;
    u32 w = t / nseg, j = t % nseg;
    const u32* wb = buckets + (u64)w * nbuckets * Layout<F>::XYZZ;
    u32 first = j * len;
    u32 last = min(nbuckets, first + len);
    Xyzz<F> run = xyzz_inf<F>(), sum = xyzz_inf<F>();
    for (u32 b = last; b > first; b--) {
        run = xyzz_add<F>(run, load_xyzz<F>(wb, b - 1));
        sum = xyzz_add<F>(sum, run);
    }
    if (first != 0) sum = xyzz_add<F>(sum, xyzz_mul_small<F>(run, first));
    store_xyzz<F>(out, t, sum);
}

extern "C" __global__ void msm_bucket_reduce(const u32* buckets, u32 nbuckets, u32 len,
                                             u32 nseg, u32 windows, u32* out) {
    bucket_reduce<Fp>(buckets, nbuckets, len, nseg, windows, out);
}

extern "C" __global__ void msm_bucket_reduce_g2(const u32* buckets, u32 nbuckets, u32 len,
                                                u32 nseg, u32 windows, u32* out) {
    bucket_reduce<Fp2>(buckets, nbuckets, len, nseg, windows, out);
}

// Sums points[idx[k]] for all k < count into one partial sum per thread.
template <class F>
DEV void sum_indexed(const u32* points, const u32* idx, u32 count, u32* partials) {
    u32 g = blockIdx.x * blockDim.x + threadIdx.x;
    u32 stride = gridDim.x * blockDim.x;
    Xyzz<F> acc = xyzz_inf<F>();
    // As in accumulate: the next point's fetch starts an addition ahead.
    u32 i = g < count ? idx[g] : 0;
    for (u32 k = g; k < count; k += stride) {
        const u32 i_next = k + stride < count ? idx[k + stride] : 0;
        if (k + stride < count) prefetch_affine<F>(points, i_next);
        acc = xyzz_add_affine_any<F>(acc, load_affine<F>(points, i), false);
        i = i_next;
    }
    store_xyzz<F>(partials, g, acc);
}

extern "C" __global__ void msm_sum_indexed(const u32* points, const u32* idx, u32 count,
                                           u32* partials) {
    sum_indexed<Fp>(points, idx, count, partials);
}

extern "C" __global__ void msm_sum_indexed_g2(const u32* points, const u32* idx, u32 count,
                                              u32* partials) {
    sum_indexed<Fp2>(points, idx, count, partials);
}

// Tree sums of groups: the input is `groups` runs of group_len points; each run is split over
// blocks_per_group blocks of THREADS threads, and block b writes the sum of its part to out[b].
// Repeating with group_len = blocks_per_group ends with one sum per group. THREADS is 128 in
// G1 and 64 in G2, so that the block's partial sums take 24 KiB of shared memory in both.
template <class F, int THREADS>
DEV void reduce_tree(const u32* in, u32 group_len, u32 blocks_per_group, u32 per_block,
                     u32* out) {
    __shared__ Xyzz<F> part[THREADS];
    const u32 g = blockIdx.x / blocks_per_group;
    const u32 q = blockIdx.x % blocks_per_group;
    const u64 base = (u64)g * group_len;
    const u32 begin = q * per_block;
    const u32 end = min(group_len, begin + per_block);
    Xyzz<F> acc = xyzz_inf<F>();
    for (u32 k = begin + threadIdx.x; k < end; k += THREADS)
        acc = xyzz_add<F>(acc, load_xyzz<F>(in, base + k));
    part[threadIdx.x] = acc;
    __syncthreads();
    for (u32 d = THREADS / 2; d > 0; d >>= 1) {
        if (threadIdx.x < d)
            part[threadIdx.x] = xyzz_add<F>(part[threadIdx.x], part[threadIdx.x + d]);
        __syncthreads();
    }
    if (threadIdx.x == 0) store_xyzz<F>(out, blockIdx.x, part[0]);
}

extern "C" __global__ void __launch_bounds__(128) xyzz_reduce(const u32* in, u32 group_len,
                                                             u32 blocks_per_group,
                                                             u32 per_block, u32* out) {
    reduce_tree<Fp, 128>(in, group_len, blocks_per_group, per_block, out);
}

extern "C" __global__ void __launch_bounds__(64) xyzz_reduce_g2(const u32* in, u32 group_len,
                                                               u32 blocks_per_group,
                                                               u32 per_block, u32* out) {
    reduce_tree<Fp2, 64>(in, group_len, blocks_per_group, per_block, out);
}

// XYZZ → Jacobian (blst_p1 / blst_p2 layout) for the host.
template <class F>
DEV void to_jacobian(const u32* in, u32 n, u32* out) {
    typedef Coord<F> K;
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Jacobian<F> j = xyzz_to_jacobian<F>(load_xyzz<F>(in, i));
    u32* o = out + i * Layout<F>::JACOBIAN;
    K::store(o, j.x);
    K::store(o + K::LIMBS, j.y);
    K::store(o + 2 * K::LIMBS, j.z);
}

extern "C" __global__ void xyzz_to_jacobian_kernel(const u32* in, u32 n, u32* out) {
    to_jacobian<Fp>(in, n, out);
}

extern "C" __global__ void xyzz_to_jacobian_kernel_g2(const u32* in, u32 n, u32* out) {
    to_jacobian<Fp2>(in, n, out);
}
