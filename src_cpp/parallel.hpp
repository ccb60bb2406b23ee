// The threading policy of the C++ loops: a small team of threads owned by one algorithm call.
//
// Every entry point with a parallel loop takes `int n_threads` (the caller's number, see
// stein_coreset/_threads.py) and builds a `Team` of that size for the duration of the call. A
// parallel loop is a set of fixed chunks [0, nchunks); the calling thread and the workers claim
// chunks from a shared counter, and the loop returns when every *claimed* chunk is done. So:
//
//  * no process-wide state: no omp_set_*, no shared pool; two Python threads calling the library
//    at once each own their team;
//  * no collapse on a busy machine: a worker that the OS has not scheduled yet never holds up a
//    loop (the running threads take its chunks; unlike an OpenMP team, whose barrier waits for
//    every member), and idle workers sleep on a condition variable after a short spin instead of
//    spinning through a time slice the computing threads need;
//  * results do not depend on the number of threads as long as each chunk writes its own output
//    and the caller combines per-chunk partials in chunk order (the rule every loop here follows).
//
// How an idle member waits (the worker between loops, the caller for a worker that holds a
// chunk): a 30 us spin, then by default it sleeps on a condition variable, so that a new loop
// wakes it (a futex call per loop when the worker slept). With STEIN_CORESET_TEAM_WAIT=yield in
// the environment (read once) it first yields the CPU (std::this_thread::yield) for up to 2 ms
// and sleeps only after that: no wake-up per loop, and a worker is never re-placed on the
// caller's CPU by the scheduler's wake-up; a tuning switch for busy machines, results do not
// depend on it (see asv_benchmarks/threads_check.py).
//
// Small loops stay serial: for_chunks(nchunks, body, parallel) with `parallel = work > threshold`.
// A team is used by one thread at a time and is not re-entrant (a chunk body must not call
// for_chunks on its own team; KT-SPLIT parallelises either over coresets or inside a halving).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
#include <immintrin.h>
#define SC_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define SC_CPU_RELAX() __asm__ __volatile__("yield")
#else
#define SC_CPU_RELAX() ((void)0)
#endif

namespace sc {

// omp_get_max_threads(): the OpenMP team-size limit in force for the calling thread
// (OMP_NUM_THREADS, a threadpoolctl limit), or 0 in a build without OpenMP. Read-only.
int omp_max_threads();

// True when STEIN_CORESET_TEAM_WAIT=yield (read once, on first use).
bool team_wait_yields();

// Entries of k_P (or comparable units of work) below which a loop is not worth a wake-up.
constexpr int64_t kParallelWork = int64_t{1} << 14;

class Team {
public:
    explicit Team(int n_threads) : nt_(n_threads < 1 ? 1 : n_threads) {}
    Team(const Team&) = delete;
    Team& operator=(const Team&) = delete;

    ~Team() {
        if (workers_.empty()) return;
        {
            std::lock_guard<std::mutex> lk(mu_);
            stop_.store(true, std::memory_order_release);
        }
        wake_cv_.notify_all();
        for (auto& t : workers_) t.join();
    }

    int size() const { return nt_; }

    // body(c) for every chunk c in [0, nchunks), in parallel when `parallel` and the team has more
    // than one thread. The body must write only chunk c's own output. If a body throws (say
    // std::bad_alloc), the remaining chunks are skipped, the loop still waits for the chunks in
    // flight, and the first exception is rethrown here.
    template <class F>
    void for_chunks(int64_t nchunks, F&& body, bool parallel = true) {
        if (nchunks <= 0) return;
        if (!parallel || nt_ == 1 || nchunks == 1) {
            for (int64_t c = 0; c < nchunks; ++c) body(c);
            return;
        }
        start_workers();
        using Fn = typename std::remove_reference<F>::type;
        Fn* fp = &body;
        {
            std::lock_guard<std::mutex> lk(mu_);
            call_ = [](void* ctx, int64_t c) { (*static_cast<Fn*>(ctx))(c); };
            ctx_ = static_cast<void*>(fp);
            nchunks_ = nchunks;
            next_.store(0, std::memory_order_relaxed);
            open_ = true;
            gen_.store(gen_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
        }
        if (sleepers_.load(std::memory_order_acquire) > 0) wake_cv_.notify_all();
        claim(fp, nchunks);
        {
            std::lock_guard<std::mutex> lk(mu_);
            open_ = false;  // late risers go back to sleep without touching this loop
        }
        // wait only for workers that joined (each finishes at most the chunk it holds)
        const auto t0 = std::chrono::steady_clock::now();
        for (int s = 0; active_.load(std::memory_order_acquire) != 0; ++s) {
            SC_CPU_RELAX();
            if ((s & 63) == 63 && std::chrono::steady_clock::now() - t0 > kSpin) break;
        }
        if (yields_) {
            while (active_.load(std::memory_order_acquire) != 0 &&
                   std::chrono::steady_clock::now() - t0 < kYield)
                std::this_thread::yield();
        }
        if (active_.load(std::memory_order_acquire) != 0) {
            std::unique_lock<std::mutex> lk(mu_);
            done_cv_.wait(lk, [&] { return active_.load(std::memory_order_relaxed) == 0; });
        }
        if (error_) {
            std::exception_ptr e = error_;
            error_ = nullptr;
            std::rethrow_exception(e);
        }
    }

private:
    static constexpr std::chrono::microseconds kSpin{30};
    static constexpr std::chrono::microseconds kYield{2000};

    // claim and run chunks until none is left; an exception ends the loop for everybody
    template <class Fn>
    void claim(Fn* fp, int64_t nchunks) {
        try {
            for (;;) {
                const int64_t c = next_.fetch_add(1, std::memory_order_relaxed);
                if (c >= nchunks) break;
                (*fp)(c);
            }
        } catch (...) {
            next_.store(nchunks, std::memory_order_relaxed);
            std::lock_guard<std::mutex> lk(mu_);
            if (!error_) error_ = std::current_exception();
        }
    }

    void start_workers() {
        if (!workers_.empty()) return;
        workers_.reserve(static_cast<size_t>(nt_ - 1));
        for (int k = 1; k < nt_; ++k) workers_.emplace_back([this] { work(); });
    }

    void work() {
        uint64_t seen = 0;
        for (;;) {
            // a short spin (the next loop of a greedy algorithm is usually microseconds away),
            // then sleep
            const auto t0 = std::chrono::steady_clock::now();
            for (int s = 0; gen_.load(std::memory_order_acquire) == seen &&
                            !stop_.load(std::memory_order_acquire);
                 ++s) {
                SC_CPU_RELAX();
                if ((s & 63) == 63 && std::chrono::steady_clock::now() - t0 > kSpin) break;
            }
            if (yields_) {
                while (gen_.load(std::memory_order_acquire) == seen &&
                       !stop_.load(std::memory_order_acquire) &&
                       std::chrono::steady_clock::now() - t0 < kYield)
                    std::this_thread::yield();
            }
            std::unique_lock<std::mutex> lk(mu_);
            while (gen_.load(std::memory_order_relaxed) == seen &&
                   !stop_.load(std::memory_order_relaxed)) {
                sleepers_.fetch_add(1, std::memory_order_acq_rel);
                wake_cv_.wait(lk);
                sleepers_.fetch_sub(1, std::memory_order_acq_rel);
            }
            if (stop_.load(std::memory_order_relaxed)) return;
            seen = gen_.load(std::memory_order_relaxed);
            if (!open_) continue;
            active_.fetch_add(1, std::memory_order_acq_rel);
            void (*call)(void*, int64_t) = call_;
            void* ctx = ctx_;
            const int64_t n = nchunks_;
            lk.unlock();
            try {
                for (;;) {
                    const int64_t c = next_.fetch_add(1, std::memory_order_relaxed);
                    if (c >= n) break;
                    call(ctx, c);
                }
            } catch (...) {
                next_.store(n, std::memory_order_relaxed);
                lk.lock();
                if (!error_) error_ = std::current_exception();
                lk.unlock();
            }
            lk.lock();
            if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1 && !open_) {
                done_cv_.notify_one();
            }
        }
    }

    const int nt_;
    const bool yields_ = team_wait_yields();
    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable wake_cv_, done_cv_;
    std::atomic<uint64_t> gen_{0};
    std::atomic<bool> stop_{false};
    std::atomic<int> sleepers_{0}, active_{0};
    std::atomic<int64_t> next_{0};
    bool open_ = false;
    void (*call_)(void*, int64_t) = nullptr;
    void* ctx_ = nullptr;
    int64_t nchunks_ = 0;
    std::exception_ptr error_;  // guarded by mu_
};

}  // namespace sc
