// A CPU simulator of the CUDA execution model, enough to run stein_coreset/_cuda/kernels.cu
// with g++ (tests/cudasim.py builds it). Each CUDA thread is an OS thread; a block's threads
// meet at __syncthreads() on a condition variable; __shared__ variables live in per-block
// slots (cudasim.py rewrites each declaration into a slot lookup). A grid of at most
// `concurrent` blocks runs all its blocks at once, so the persistent kernels' grid barriers
// work; larger grids run their blocks one after another on one team of blockDim threads (as a
// GPU may). Atomics are the GCC builtins, sequentially consistent; __threadfence is a full
// fence. It checks the kernels' logic (indices, races the schedule exposes, barrier
// protocols), not their speed.
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

// The threads of one block: a barrier over its live threads, and its shared memory.
struct Block {
    std::mutex m;
    std::condition_variable cv;
    unsigned size = 0, live = 0, arrived = 0;
    unsigned long gen = 0, endgen = 0;
    void* slots[kSlots] = {};

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
    // A thread returned from the kernel: it no longer counts at __syncthreads, and the block
    // ends when every thread has returned (the next block then starts with all threads).
    void end_block() {
        std::unique_lock<std::mutex> lk(m);
        const unsigned long eg = endgen;
        --live;
        if (live == 0) {
            live = size;
            arrived = 0;
            ++endgen;
            cv.notify_all();
            return;
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

template <class F>
void launch(unsigned gx, unsigned gy, unsigned bx, unsigned concurrent, F&& body) {
    const unsigned nblocks = gx * gy;
    if (nblocks == 0 || bx == 0) return;
    const unsigned groups = nblocks <= concurrent ? nblocks : 1;
    std::vector<std::unique_ptr<Block>> blocks;
    for (unsigned g = 0; g < groups; ++g) {
        blocks.emplace_back(new Block);
        blocks.back()->size = blocks.back()->live = bx;
    }
    std::vector<std::thread> team;
    for (unsigned g = 0; g < groups; ++g) {
        for (unsigned tx = 0; tx < bx; ++tx) {
            team.emplace_back([&, g, tx] {
                for (unsigned b = g; b < nblocks; b += groups) {
                    ctx.tid = dim3{tx, 0, 0};
                    ctx.bid = dim3{b % gx, b / gx, 0};
                    ctx.bdim = dim3{bx, 1, 1};
                    ctx.gdim = dim3{gx, gy, 1};
                    ctx.block = blocks[g].get();
                    body();
                    blocks[g]->end_block();
                }
            });
        }
    }
    for (auto& t : team) t.join();
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

}  // namespace sim

using sim::dim3;
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
#define atomicExch(p, v) __atomic_exchange_n((p), (v), __ATOMIC_SEQ_CST)

#define SC_TARGET
enum BaseKind { IMQ = 0, GAUSSIAN = 1, MATERN15 = 2, MATERN25 = 3 };
