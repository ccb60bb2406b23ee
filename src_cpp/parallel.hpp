// The threading policy of the C++ loops: a small team of threads owned by one algorithm call.
//
// Every entry point with a parallel loop takes `int n_threads` (the caller's number, see
// stein_coreset/_threads.py) and builds a `Team` of that size for the duration of the call. A
// parallel loop is a *region*: a run of dependent steps, each a set of fixed chunks
// [0, nchunks(s)), and a `combine(s)` run once after step s by the member that finished its last
// chunk (the last arriver), before any chunk of step s + 1 starts. A plain loop is a region of one
// step (`for_chunks`). So a greedy algorithm pays one barrier per dependent step, and nothing
// else: no mutex, no second pass over per-chunk partials by a second region.
//
//  * Home ranges, then stealing. Member k of M owns chunks [k C / M, (k + 1) C / M) of every step
//    and claims them from its own counter (a cache line of its own, so an undisturbed member
//    touches no shared line until it reports), in the same order each step: the points a member
//    reads stay in its caches from step to step. A member whose range is exhausted steals from
//    the others' counters; so a member that the OS has not scheduled never holds up a step (the
//    running ones take its chunks: no collapse on a busy machine, unlike an OpenMP barrier, which
//    waits for every member). A member holding a chunk finishes it, as before.
//  * Completion: each member adds the number of chunks it ran to one counter, once for its own
//    range and once per range it stole from; the one that brings it to C runs combine(s) and
//    publishes step s + 1 (one store that the others spin on). Members that ran no chunk of a
//    step do not touch the counter.
//  * A team no larger than the work pays for: a region runs on `members` threads (the caller's
//    `members_for(ns per step, chunks)`), never more than the chunks of a step; the rest of the
//    team stays idle. Results never depend on it (below).
//  * No process-wide state: no omp_set_*, no shared pool; two Python threads calling the library
//    at once each own their team.
//  * Results do not depend on the number of threads as long as each chunk writes its own output,
//    chunk boundaries come from the work (never from the team), and combine() reduces per-chunk
//    partials in chunk order (the rule every loop here follows). Per-member partials are fine for
//    reductions whose value does not depend on the grouping (a first argmin).
//
// How an idle member waits (a worker between regions, a member for the next step, the caller for
// the workers at the end of a region): a 30 us spin, then by default it sleeps on a condition
// variable (a futex call per wake-up). With STEIN_CORESET_TEAM_WAIT=yield in the environment (read
// once) it first yields the CPU (std::this_thread::yield) for up to 2 ms and sleeps only after
// that: a tuning switch for busy machines, results do not depend on it (see
// tools/threads_check.py).
//
// A team is used by one thread at a time and is not re-entrant (a chunk body must not start a
// region on its own team; KT-SPLIT parallelises either over coresets or over the steps of a
// halving).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "cancel.hpp"

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

// STEIN_CORESET_TEAM_GRAIN (read once): a factor on the work that pays for one more member
// (default 1; 0: every loop on the whole team, as the tests use to exercise the parallel paths
// at small n; 2: half the members). Results never depend on it.
double team_grain();

// Entries of k_P (or comparable units of work) below which a loop is not worth a wake-up (the
// boolean form of for_chunks; the loops of this library size their teams with members_for).
constexpr int64_t kParallelWork = int64_t{1} << 14;

// Single-thread work that pays for one more member: per dependent step of a region (the members
// are awake and spinning; a step's barrier costs ~1 us at 16 threads, so each member gets several
// times that), and per one-off loop (a sleeping worker takes 5-50 us to wake).
constexpr double kStepNsPerMember = 6000.0;
constexpr double kLoopNsPerMember = 20000.0;

// Rough single-thread cost of one k_P entry in d dimensions (AVX2/AVX-512, IMQ Stein kernel:
// ~3 ns at d = 4); only the team size depends on it, never a result.
inline double entry_ns(int64_t d) { return 2.0 + 0.3 * static_cast<double>(d); }

// A value on a cache line of its own (per-member slots: no false sharing).
template <class T>
struct alignas(64) Padded {
    T v{};
};

class Team {
public:
    explicit Team(int n_threads)
        : nt_(n_threads < 1 ? 1 : n_threads),
          slots_(new Padded<std::atomic<uint64_t>>[static_cast<size_t>(nt_)]) {}
    Team(const Team&) = delete;
    Team& operator=(const Team&) = delete;

    ~Team() {
        if (workers_.empty()) return;
        {
            std::lock_guard<std::mutex> lk(mu_);
            stop_.store(true, std::memory_order_seq_cst);
        }
        wake_cv_.notify_all();
        for (auto& t : workers_) t.join();
    }

    int size() const { return nt_; }

    // The members a loop pays for: one per `per_member` ns of single-thread work in `ns` (one
    // step's work for a region, the whole loop's for for_chunks), at least 1, at most the team and
    // the number of chunks.
    int members_for(double ns, int64_t nchunks, double per_member = kStepNsPerMember) const {
        const double unit = per_member * grain_;
        const double m = unit > 0.0 ? ns / unit : static_cast<double>(nt_);
        int k = m >= static_cast<double>(nt_) ? nt_ : (m >= 1.0 ? static_cast<int>(m) : 1);
        if (nchunks < k) k = nchunks < 1 ? 1 : static_cast<int>(nchunks);
        return k;
    }

    // body(c) for every chunk c in [0, nchunks): on the whole team when `parallel` (at most one
    // member per chunk), else in order on the caller. The body must write only chunk c's own
    // output. If a body throws (say std::bad_alloc), the remaining chunks are skipped, the loop
    // still waits for the chunks in flight, and the first exception is rethrown here.
    template <class F>
    void for_chunks(int64_t nchunks, F&& body, bool parallel = true) {
        for_chunks_on(parallel ? nt_ : 1, nchunks, body);
    }

    // The same on `members` threads (see members_for).
    template <class F>
    void for_chunks_on(int members, int64_t nchunks, F&& body) {
        if (nchunks <= 0) return;
        if (members <= 1 || nt_ == 1 || nchunks == 1) {
            for (int64_t c = 0; c < nchunks; ++c) {
                poll_cancel();
                body(c);
            }
            return;
        }
        if (members > nchunks) members = static_cast<int>(nchunks);
        steps(
            members, 1, [nchunks](int64_t) { return nchunks; },
            [&body](int64_t, int64_t c, int) { body(c); }, [](int64_t) { return true; });
    }

    // A region of `nsteps` dependent steps on `members` threads (the caller is member 0):
    // for s = 0, 1, ...: body(s, c, member) for every c in [0, max(1, nchunks(s))), in any order
    // and on any member, then combine(s) once; combine returning false ends the region. Whatever
    // body(s, .) wrote is visible to combine(s), and whatever combine(s) wrote to every body of
    // step s + 1. nchunks(s) must be a pure function of s, cheap (each member calls it each
    // step), below 2^24. Exceptions as in for_chunks.
    template <class NChunks, class Body, class Combine>
    void steps(int members, int64_t nsteps, NChunks&& nchunks, Body&& body, Combine&& combine) {
        if (nsteps <= 0) return;
        if (members > nt_) members = nt_;
        if (members <= 1) {
            for (int64_t s = 0; s < nsteps; ++s) {
                poll_cancel();  // Ctrl-C (cancel.hpp): once per dependent step
                const int64_t C = std::max<int64_t>(1, nchunks(s));
                for (int64_t c = 0; c < C; ++c) body(s, c, 0);
                if (!combine(s)) break;
            }
            return;
        }
        using Ctx = Region<typename std::remove_reference<NChunks>::type,
                           typename std::remove_reference<Body>::type,
                           typename std::remove_reference<Combine>::type>;
        Ctx ctx{&nchunks, &body, &combine, nsteps};
        start_workers(members);
        const uint64_t g = open(members, &ctx, &Team::run_member<Ctx>);
        run_member<Ctx>(this, &ctx, 0);
        close(g);
    }

private:
    static constexpr std::chrono::microseconds kSpin{30};
    static constexpr std::chrono::microseconds kYield{2000};
    static constexpr int kOffBits = 24;  // claim counter: (step + 1) << 24 | next offset
    static constexpr int64_t kStop = int64_t{1} << 62;

    template <class N, class B, class C>
    struct Region {
        N* nchunks;
        B* body;
        C* combine;
        int64_t nsteps;
    };
    using RunFn = void (*)(Team*, void*, int);

    // next chunk of member o's home range in step s (C chunks, M members), or -1
    int64_t claim(int o, int M, int64_t s, int64_t C) {
        const int64_t lo = o * C / M, hi = (o + 1) * C / M;
        if (lo >= hi) return -1;
        std::atomic<uint64_t>& a = slots_[static_cast<size_t>(o)].v;
        const uint64_t tag = static_cast<uint64_t>(s + 1) << kOffBits;
        uint64_t v = a.load(std::memory_order_relaxed);
        for (;;) {
            if (v >= tag + (uint64_t{1} << kOffBits)) return -1;  // a later step: s is over
            const int64_t x = v < tag ? lo : static_cast<int64_t>(v - tag);
            if (x >= hi) return -1;
            if (a.compare_exchange_weak(v, tag + static_cast<uint64_t>(x + 1),
                                        std::memory_order_relaxed, std::memory_order_relaxed))
                return x;
        }
    }

    // wait until step s may start; false when the region is over
    bool wait_step(int64_t s) {
        int64_t r = ready_.load(std::memory_order_acquire);
        if (r <= s) {
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; (r = ready_.load(std::memory_order_acquire)) <= s; ++i) {
                SC_CPU_RELAX();
                if ((i & 63) == 63 && std::chrono::steady_clock::now() - t0 > kSpin) break;
            }
            if (r <= s && yields_) {
                while ((r = ready_.load(std::memory_order_acquire)) <= s &&
                       std::chrono::steady_clock::now() - t0 < kYield)
                    std::this_thread::yield();
            }
            if (r <= s) {
                std::unique_lock<std::mutex> lk(mu_);
                step_sleepers_.fetch_add(1, std::memory_order_seq_cst);
                while ((r = ready_.load(std::memory_order_seq_cst)) <= s) step_cv_.wait(lk);
                step_sleepers_.fetch_sub(1, std::memory_order_relaxed);
            }
        }
        return r < kStop;
    }

    void publish(int64_t r) {
        ready_.store(r, std::memory_order_seq_cst);
        if (step_sleepers_.load(std::memory_order_seq_cst) > 0) {
            { std::lock_guard<std::mutex> lk(mu_); }
            step_cv_.notify_all();
        }
    }

    template <class Ctx>
    static void run_member(Team* t, void* vctx, int k) {
        Ctx& x = *static_cast<Ctx*>(vctx);
        const int M = t->members_.load(std::memory_order_relaxed);
        // a late joiner starts at the step in progress
        int64_t s = k == 0 ? 0 : t->ready_.load(std::memory_order_acquire) - 1;
        try {
            for (; s < x.nsteps; ++s) {
                if (!t->wait_step(s)) break;
                poll_cancel();  // Ctrl-C (cancel.hpp): once per step on every member
                const int64_t C = std::max<int64_t>(1, (*x.nchunks)(s));
                // own range first, reported at once (in a balanced step the last member to
                // finish its range combines without looking further), then the others'
                for (int q = 0; q < M; ++q) {
                    const int o = k + q < M ? k + q : k + q - M;
                    int64_t did = 0;
                    for (int64_t c; (c = t->claim(o, M, s, C)) >= 0; ++did) (*x.body)(s, c, k);
                    if (did > 0 &&
                        t->done_.fetch_add(did, std::memory_order_acq_rel) + did == C) {
                        t->done_.store(0, std::memory_order_relaxed);
                        const bool go = (*x.combine)(s);
                        t->publish(go && s + 1 < x.nsteps ? s + 2 : kStop);
                        break;
                    }
                }
            }
        } catch (...) {
            {
                std::lock_guard<std::mutex> lk(t->mu_);
                if (!t->error_) t->error_ = std::current_exception();
            }
            t->publish(kStop);
        }
    }

    uint64_t open(int members, void* ctx, RunFn run) {
        members_.store(members, std::memory_order_relaxed);
        ctx_ = ctx;
        run_ = run;
        for (int k = 0; k < members; ++k)
            slots_[static_cast<size_t>(k)].v.store(0, std::memory_order_relaxed);
        done_.store(0, std::memory_order_relaxed);
        ready_.store(1, std::memory_order_relaxed);
        const uint64_t g = gen_.load(std::memory_order_relaxed) + 1;
        gen_.store(g, std::memory_order_seq_cst);
        if (sleepers_.load(std::memory_order_seq_cst) > 0) {
            { std::lock_guard<std::mutex> lk(mu_); }
            wake_cv_.notify_all();
        }
        return g;
    }

    // wait for the workers that joined region g (each finishes at most the chunk it holds)
    void close(uint64_t g) {
        closed_.store(g, std::memory_order_seq_cst);
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; active_.load(std::memory_order_seq_cst) != 0; ++i) {
            SC_CPU_RELAX();
            if ((i & 63) == 63 && std::chrono::steady_clock::now() - t0 > kSpin) break;
        }
        if (yields_) {
            while (active_.load(std::memory_order_seq_cst) != 0 &&
                   std::chrono::steady_clock::now() - t0 < kYield)
                std::this_thread::yield();
        }
        if (active_.load(std::memory_order_seq_cst) != 0) {
            std::unique_lock<std::mutex> lk(mu_);
            done_cv_.wait(lk, [&] { return active_.load(std::memory_order_seq_cst) == 0; });
        }
        std::exception_ptr e;
        {
            std::lock_guard<std::mutex> lk(mu_);
            std::swap(e, error_);
        }
        if (e) std::rethrow_exception(e);
    }

    void start_workers(int members) {
        // worker w (1-based) is member w of every region it joins
        while (static_cast<int>(workers_.size()) + 1 < members) {
            const int w = static_cast<int>(workers_.size()) + 1;
            workers_.emplace_back([this, w] { work(w); });
        }
    }

    void leave() {
        if (active_.fetch_sub(1, std::memory_order_seq_cst) == 1) {
            { std::lock_guard<std::mutex> lk(mu_); }
            done_cv_.notify_all();
        }
    }

    void work(int w) {
        uint64_t seen = 0;
        for (;;) {
            // a short spin (the next region of an algorithm is usually microseconds away),
            // then sleep
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; gen_.load(std::memory_order_acquire) == seen &&
                            !stop_.load(std::memory_order_acquire);
                 ++i) {
                SC_CPU_RELAX();
                if ((i & 63) == 63 && std::chrono::steady_clock::now() - t0 > kSpin) break;
            }
            if (yields_) {
                while (gen_.load(std::memory_order_acquire) == seen &&
                       !stop_.load(std::memory_order_acquire) &&
                       std::chrono::steady_clock::now() - t0 < kYield)
                    std::this_thread::yield();
            }
            if (gen_.load(std::memory_order_seq_cst) == seen && !stop_.load()) {
                std::unique_lock<std::mutex> lk(mu_);
                sleepers_.fetch_add(1, std::memory_order_seq_cst);
                while (gen_.load(std::memory_order_seq_cst) == seen && !stop_.load())
                    wake_cv_.wait(lk);
                sleepers_.fetch_sub(1, std::memory_order_relaxed);
            }
            if (stop_.load()) return;
            const uint64_t g = gen_.load(std::memory_order_acquire);
            seen = g;
            if (w >= members_.load(std::memory_order_relaxed)) continue;  // not needed
            active_.fetch_add(1, std::memory_order_seq_cst);
            if (closed_.load(std::memory_order_seq_cst) >= g) {  // woke too late for region g
                leave();
                continue;
            }
            run_(this, ctx_, w);
            leave();
        }
    }

    const int nt_;
    const bool yields_ = team_wait_yields();
    const double grain_ = team_grain();
    std::unique_ptr<Padded<std::atomic<uint64_t>>[]> slots_;  // per-member claim counters
    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable wake_cv_, step_cv_, done_cv_;
    alignas(64) std::atomic<int64_t> ready_{0};  // steps < ready_ - 1 are done; kStop: over
    alignas(64) std::atomic<int64_t> done_{0};   // chunks of the current step reported
    alignas(64) std::atomic<uint64_t> gen_{0};   // regions opened
    std::atomic<int> members_{1};
    void* ctx_ = nullptr;
    RunFn run_ = nullptr;
    alignas(64) std::atomic<uint64_t> closed_{0};  // regions closed
    std::atomic<int> active_{0};                   // workers inside a region
    std::atomic<int> sleepers_{0}, step_sleepers_{0};
    std::atomic<bool> stop_{false};
    std::exception_ptr error_;  // guarded by mu_
};

}  // namespace sc
