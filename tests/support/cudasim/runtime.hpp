// A CPU simulator of the CUDA execution model, enough to run stein_coreset/engine/cuda/src_cuda/
// with g++ (tests/support/cudasim/__init__.py builds it). Each CUDA thread is an OS thread; a block's threads
// meet at __syncthreads() on a condition variable; __shared__ variables live in per-block
// slots (the Python side rewrites each declaration into a slot lookup). The device holds
// `slots` blocks at once (multiprocessors x blocks per multiprocessor), shared by every launch
// in the process as a GPU's multiprocessors are: a block starts only when it gets a slot and
// frees it when its last thread returns. A launch runs up to `slots` teams of blockDim threads,
// each taking blocks in turn; so a grid that fits runs all its blocks at once (the persistent
// kernels' grid barriers work) unless another launch holds slots, and a larger grid's last
// blocks wait for the first to finish (a grid barrier then never completes, as on a GPU). That
// two grids launched at once may each get part of the device is the conservative reading of
// CUDA's guarantee, which covers one cooperative grid's own blocks. clock64() is a steady clock
// in nanoseconds (the grid barrier's budget, SC_BARRIER_BUDGET, is set in those units). Atomics are the GCC builtins, sequentially consistent; __threadfence is a full
// fence. It checks the kernels' logic (indices, races the schedule exposes, barrier
// protocols), not their speed.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <math.h>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace sim {

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

constexpr int kSlots = 64;
#ifndef SC_WARP
#define SC_WARP 32
#endif
constexpr unsigned kMaxWarps = 64;

// The device's resident-block slots, shared by every launch of this build.
struct Slots {
    std::mutex m;
    std::condition_variable cv;
    unsigned free = 0;
    bool ready = false;
    void acquire(unsigned total) {
        std::unique_lock<std::mutex> lk(m);
        if (!ready) {
            free = total;
            ready = true;
        }
        cv.wait(lk, [&] { return free > 0; });
        --free;
    }
    void release() {
        std::lock_guard<std::mutex> lk(m);
        ++free;
        cv.notify_all();
    }
};

// internal linkage: each build (one per device shape) has its own slots (an inline function's
// static would be one GNU_UNIQUE object shared by every build loaded in the process)
static Slots& device_slots() {
    static Slots s;
    return s;
}

// The threads of one block: a barrier over its live threads, and its shared memory.
struct Block {
    std::mutex m;
    std::condition_variable cv;
    unsigned size = 0, live = 0, arrived = 0;
    unsigned long gen = 0, endgen = 0;
    void* slots[kSlots] = {};
    // warps: lanes tid / SC_WARP meet at a shuffle; each exchanges through its slot
    unsigned wlive[kMaxWarps] = {}, warrived[kMaxWarps] = {};
    unsigned long wgen[kMaxWarps] = {};
    unsigned long long wbuf[kMaxWarps * SC_WARP] = {};

    ~Block() {
        for (void* p : slots) std::free(p);
    }
    void release_locked() {
        arrived = 0;
        ++gen;
        cv.notify_all();
    }
    void sync() {
        std::unique_lock<std::mutex> lk(m);
        const unsigned long g = gen;
        if (++arrived == live) {
            release_locked();
        } else {
            cv.wait(lk, [&] { return gen != g; });
        }
    }
    void warp_sync_locked(std::unique_lock<std::mutex>& lk, unsigned w) {
        const unsigned long g = wgen[w];
        if (++warrived[w] == wlive[w]) {
            warrived[w] = 0;
            ++wgen[w];
            cv.notify_all();
        } else {
            cv.wait(lk, [&] { return wgen[w] != g; });
        }
    }
    // lane `lane` of warp w offers v and receives the value lane `src` offered
    unsigned long long exchange(unsigned w, unsigned lane, unsigned long long v, unsigned src) {
        std::unique_lock<std::mutex> lk(m);
        wbuf[w * SC_WARP + lane] = v;
        warp_sync_locked(lk, w);
        const unsigned long long out = wbuf[w * SC_WARP + (src < SC_WARP ? src : lane)];
        warp_sync_locked(lk, w);
        return out;
    }
    void reset_warps() {
        for (unsigned t = 0; t < size; ++t) {
            wlive[t / SC_WARP] = 0;
            warrived[t / SC_WARP] = 0;
        }
        for (unsigned t = 0; t < size; ++t) ++wlive[t / SC_WARP];
    }
    // A thread returned from the kernel: it no longer counts at __syncthreads, and the block
    // ends when every thread has returned (the next block then starts with all threads).
    void end_block(unsigned tid) {
        std::unique_lock<std::mutex> lk(m);
        const unsigned long eg = endgen;
        --live;
        const unsigned w = tid / SC_WARP;
        --wlive[w];
        if (live == 0) {
            live = size;
            arrived = 0;
            reset_warps();
            ++endgen;
            device_slots().release();
            cv.notify_all();
            return;
        }
        if (warrived[w] > 0 && warrived[w] == wlive[w]) {
            warrived[w] = 0;
            ++wgen[w];
            cv.notify_all();
        }
        if (arrived > 0 && arrived == live) release_locked();
        cv.wait(lk, [&] { return endgen != eg; });
    }
    void* slot(int id, std::size_t bytes) {
        std::lock_guard<std::mutex> lk(m);
        if (id < 0 || id >= kSlots) std::abort();
        if (!slots[id]) slots[id] = std::calloc(1, bytes + 64);
        return slots[id];
    }
};

struct Ctx {
    dim3 tid, bid, bdim, gdim;
    Block* block = nullptr;
};

inline thread_local Ctx ctx;

template <class T>
T& shared(int id) {
    return *reinterpret_cast<T*>(ctx.block->slot(id, sizeof(T)));
}

// stagger_us: team g asks for its first slot g * stagger_us microseconds after the launch, as a
// GPU's block scheduler places a grid's blocks one after another, so that two grids launched at
// once interleave on the device (the cooperative launches use it; it only costs time)
template <class F>
void launch(unsigned gx, unsigned gy, unsigned bx, unsigned slots, unsigned stagger_us,
            F&& body) {
    const unsigned nblocks = gx * gy;
    if (nblocks == 0 || bx == 0) return;
    const unsigned groups = nblocks <= slots ? nblocks : slots;
    std::vector<std::unique_ptr<Block>> blocks;
    for (unsigned g = 0; g < groups; ++g) {
        blocks.emplace_back(new Block);
        blocks.back()->size = blocks.back()->live = bx;
        blocks.back()->reset_warps();
    }
    std::vector<std::thread> team;
    for (unsigned g = 0; g < groups; ++g) {
        for (unsigned tx = 0; tx < bx; ++tx) {
            team.emplace_back([&, g, tx] {
                for (unsigned b = g; b < nblocks; b += groups) {
                    // thread 0 takes a resident slot for the block; its threads start together
                    if (tx == 0) {
                        if (b == g && stagger_us > 0)
                            std::this_thread::sleep_for(std::chrono::microseconds(g * stagger_us));
                        device_slots().acquire(slots);
                    }
                    blocks[g]->sync();
                    ctx.tid = dim3{tx, 0, 0};
                    ctx.bid = dim3{b % gx, b / gx, 0};
                    ctx.bdim = dim3{bx, 1, 1};
                    ctx.gdim = dim3{gx, gy, 1};
                    ctx.block = blocks[g].get();
                    body();
                    blocks[g]->end_block(tx);
                }
            });
        }
    }
    for (auto& t : team) t.join();
}

template <class T>
T shfl(T v, unsigned src) {
    static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
    unsigned long long b = 0, r;
    std::memcpy(&b, &v, sizeof(T));
    const unsigned tid = ctx.tid.x;
    r = ctx.block->exchange(tid / SC_WARP, tid % SC_WARP, b, src);
    T out;
    std::memcpy(&out, &r, sizeof(T));
    return out;
}

template <class T>
T atomic_add(T* p, T v) {
    if constexpr (std::is_floating_point_v<T>) {
        static_assert(sizeof(T) == 8, "atomicAdd on double only");
        auto* q = reinterpret_cast<unsigned long long*>(p);
        unsigned long long old = __atomic_load_n(q, __ATOMIC_SEQ_CST), upd;
        double o;
        do {
            std::memcpy(&o, &old, 8);
            const double nv = o + v;
            std::memcpy(&upd, &nv, 8);
        } while (!__atomic_compare_exchange_n(q, &old, upd, false, __ATOMIC_SEQ_CST,
                                              __ATOMIC_SEQ_CST));
        return o;
    } else {
        return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
    }
}

template <class T>
T atomic_max(T* p, T v) {
    static_assert(std::is_integral_v<T>, "atomicMax on integers only");
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (old < v &&
           !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return old;
}

inline long long clock64() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace sim

using sim::dim3;
using sim::clock64;
#define threadIdx (sim::ctx.tid)
#define blockIdx (sim::ctx.bid)
#define blockDim (sim::ctx.bdim)
#define gridDim (sim::ctx.gdim)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __syncthreads() (sim::ctx.block->sync())
#define __threadfence() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define atomicAdd(p, v) sim::atomic_add((p), (v))
#define atomicMax(p, v) sim::atomic_max((p), (v))
#define __shfl_sync(mask, v, src) sim::shfl((v), (unsigned)(src))
#define __shfl_down_sync(mask, v, d) \
    sim::shfl((v), (unsigned)(threadIdx.x % SC_WARP) + (unsigned)(d))
#define __shfl_xor_sync(mask, v, x) \
    sim::shfl((v), (unsigned)(threadIdx.x % SC_WARP) ^ (unsigned)(x))
#define atomicExch(p, v) __atomic_exchange_n((p), (v), __ATOMIC_SEQ_CST)

// the shared C++ text's function qualifier (what stein_coreset.engine.cuda.source.nvrtc_prelude defines for
// NVRTC); its primitives SC_SQRT, ... take their C++ defaults, the base kernels come with the
// source (engine/shared/base_kernels.inc)
#define SC_TARGET
