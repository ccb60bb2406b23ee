// The threading policy of the C++ loops: a small team of threads lent to one algorithm call.
//
// Every entry point with a parallel loop takes `int n_threads` (the caller's number, see
// stein_coreset/_threads.py) and builds a `Team` of that size for the duration of the call. A
// parallel loop is a *region*: a run of dependent steps, each a set of fixed chunks
// [0, nchunks(s)), and a `combine(s)` run once after step s by the member that finished its last
// chunk (the last arriver), before any chunk of step s + 1 starts. A plain loop is a region of one
// step (`for_chunks`). So a greedy algorithm pays one barrier per dependent step, and nothing
// else: no mutex, no second pass over per-chunk partials by a second region.
//
//  * Persistent workers, one crew per calling thread. A Team's threads come from the calling
//    thread's `Crew` (thread_local): worker threads started on first use and kept, idle and
//    asleep, between calls, so a call pays no thread creation. Two Python threads calling at once
//    each have a crew of their own; a Team built while the caller's crew is lent (a team inside a
//    team's region on the same thread) gets a private crew for its lifetime. A crew's workers
//    exit when its thread does (the main thread's at process exit); a forked child starts a new
//    crew (the parent's threads do not exist there).
//  * Wake only the members needed: each worker has its own slot (a cache line: state, job) and
//    its own condition variable, so a region on M members wakes M - 1 workers, not the crew.
//  * Home ranges, then stealing. Member k of M owns chunks [k C / M, (k + 1) C / M) of every step
//    and claims them from its own counter (a cache line of its own, so an undisturbed member
//    touches no shared line until it reports), in the same order each step: the points a member
//    reads stay in its caches from step to step. A member whose range is exhausted steals from
//    the others' counters; so a member that the OS has not scheduled never holds up a step (the
//    running ones take its chunks: no collapse on a busy machine, unlike an OpenMP barrier, which
//    waits for every member). A member holding a chunk finishes it, as before. A worker that has
//    not started when the region ends is called off (it never touches the team).
//  * Completion: each member adds the number of chunks it ran to one counter, once for its own
//    range and once per range it stole from; the one that brings it to C runs combine(s) and
//    publishes step s + 1 (one store that the others spin on). Members that ran no chunk of a
//    step do not touch the counter. With STEIN_CORESET_TEAM_BARRIER=tree (read once) the chunks
//    are counted per range, completed ranges per group of ~sqrt(M) ranges, completed groups at
//    the root (Team::report): on many cores, M updates of one cache line a step become a few
//    per line; an A/B switch until measured there, results do not depend on it.
//  * A team no larger than the work pays for: a region runs on `members` threads, chosen by
//    `team_members` (below) from a cost model of the region — a step of W ns of single-thread
//    work in C chunks costs ceil(C / M) W / C + kBarrierNs M on M members, plus kWakeNs once
//    for waking sleeping workers — the M that minimises it, never more than the chunks of a
//    step; the rest of the team stays asleep. Results never depend on it (below).
//  * No process-wide state: no omp_set_*, no shared pool.
//  * Results do not depend on the number of threads as long as each chunk writes its own output,
//    chunk boundaries come from the work (never from the team), and combine() reduces per-chunk
//    partials in chunk order (the rule every loop here follows). Per-member partials are fine for
//    reductions whose value does not depend on the grouping (a first argmin).
//
// How an idle thread waits (a worker between regions, a member for the next step, the caller for
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
#include <string>
#include <thread>
#include <type_traits>
#include <typeinfo>
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

#if defined(__GNUC__) || defined(__clang__)
#define SC_NOINLINE __attribute__((noinline))
#elif defined(_MSC_VER)
#define SC_NOINLINE __declspec(noinline)
#else
#define SC_NOINLINE
#endif

namespace sc {

// How an idle thread waits (header comment), its first two phases: spin for kSpinWait, then, with
// STEIN_CORESET_TEAM_WAIT=yield, yield the CPU until kYieldWait has passed since the start. True
// once done() holds; false: the caller goes to sleep (on its condition variable, rechecking
// done() under its mutex).
constexpr std::chrono::microseconds kSpinWait{30};
constexpr std::chrono::microseconds kYieldWait{2000};

template <class Done>
bool spin_then_yield(Done&& done, bool yields) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; !done(); ++i) {
        SC_CPU_RELAX();
        if ((i & 63) == 63 && std::chrono::steady_clock::now() - t0 > kSpinWait) break;
    }
    if (yields) {
        while (!done() && std::chrono::steady_clock::now() - t0 < kYieldWait)
            std::this_thread::yield();
    }
    return done();
}

// omp_get_max_threads(): the OpenMP team-size limit in force for the calling thread
// (OMP_NUM_THREADS, a threadpoolctl limit), or 0 in a build without OpenMP. Read-only.
int omp_max_threads();

// True when STEIN_CORESET_TEAM_WAIT=yield (read once, on first use).
bool team_wait_yields();

// True when STEIN_CORESET_TEAM_BARRIER=tree (read once): a step's completion is counted in a
// tree (Team::report) instead of on one counter that every member updates — an A/B switch for
// the barrier's cost on many cores (tools/threads_table.py); results never depend on it.
bool team_tree_barrier();

// STEIN_CORESET_TEAM_GRAIN (read once): a factor on the synchronisation costs of the team-size
// model (default 1; 0: every loop on the whole team, as the tests use to exercise the parallel
// paths at small n; 2: fewer members). Results never depend on it.
double team_grain();

// Entries of k_P (or comparable units of work) below which a loop is not worth a wake-up (the
// boolean form of for_chunks; the loops of this library size their teams with team_members).
constexpr int64_t kParallelWork = int64_t{1} << 14;

// The team-size model (see the header comment; tools/threads_table.py --probe-only measures both
// on the machine at hand): the cost of one step's barrier per member (~180 ns a step on 2
// members of a 2-core machine; more across sockets), and of waking sleeping workers for a loop.
constexpr double kBarrierNs = 400.0;
constexpr double kWakeNs = 75000.0;
// members_for's default: a region of many steps, whose one wake-up is paid for by all of them
constexpr int64_t kManySteps = int64_t{1} << 20;

// The members, out of a team of `nt`, that run fastest a region of `nsteps` steps of `step_ns`
// ns of single-thread work each, split into `nchunks` chunks a step: the M in [1, min(nt,
// nchunks)] that minimises nsteps (ceil(C / M) W / C + kBarrierNs M) + kWakeNs (M = 1: nsteps
// W), the smallest M on ties. A pure function of its arguments and STEIN_CORESET_TEAM_GRAIN.
int team_members(int nt, double step_ns, int64_t nchunks, int64_t nsteps);

// Region accounting, for tools/threads_table.py --profile: off (one relaxed load a region) until
// team_stats_enable(true). Then every region adds, to the totals of its call site (the type of
// its body, demangled), its wall time on the caller, its members' time from each step's start
// to their last chunk of it (busy), its last arrivers' time in combine (serial: the others wait),
// its steps and chunks. A region started inside another's chunk counts as nested (its wall is
// within its parent's busy time). Never changes what a region computes.
struct RegionStats {
    int64_t regions = 0, steps = 0, chunks = 0;
    double wall_ns = 0.0, busy_ns = 0.0, combine_ns = 0.0;
};
struct SiteStats {
    std::string site;  // the demangled type of the body (a loop: of for_chunks_on's body)
    bool loop = false;
    int team = 1, members = 1;
    bool nested = false;
    RegionStats s;
};
void team_stats_enable(bool on);
bool team_stats_on();
void team_stats_add(const char* type_name, bool loop, int team, int members, bool nested,
                    const RegionStats& r);
// the totals since the last call (and resets them), one entry per (site, team, members, nested)
std::vector<SiteStats> team_stats_take();
// the calling thread's depth of regions being run (0 outside any)
int& region_depth();

// Rough single-thread cost of one k_P entry in d dimensions (AVX2/AVX-512, IMQ Stein kernel:
// ~3 ns at d = 4); only the team size depends on it, never a result.
inline double entry_ns(int64_t d) { return 2.0 + 0.3 * static_cast<double>(d); }

// A value on a cache line of its own (per-member slots: no false sharing).
template <class T>
struct alignas(64) Padded {
    T v{};
};

// The start of the message of a thread that could not be started (Crew::ensure); the Cython
// wrapper turns it into an error naming n_threads.
constexpr const char* kThreadStartError = "stein_coreset: thread start: ";

class Team;
using RunFn = void (*)(Team*, void*, int);

// One persistent worker thread's slot: its state and job on a cache line of their own, and its
// own condition variable (so a wake-up is for this worker only).
struct alignas(64) Worker {
    enum : int { kIdle = 0, kPosted = 1, kRunning = 2, kQuit = 3 };
    std::atomic<int> state{kIdle};
    std::atomic<bool> sleeping{false};
    Team* team = nullptr;
    void* ctx = nullptr;
    RunFn run = nullptr;
    int member = 0;
    std::mutex mu;
    std::condition_variable cv;
};

// The worker threads lent to the Teams of one calling thread (see the header comment).
class Crew {
public:
    Crew();
    ~Crew();
    Crew(const Crew&) = delete;
    Crew& operator=(const Crew&) = delete;

    // The calling thread's crew, marked lent; nullptr when it is lent already (a nested Team).
    static Crew* lease();
    void release() { lent_ = false; }

    // At least `n` worker threads running. A thread the system refuses to start (a limit on
    // threads or on memory: ulimit -u, ulimit -v, a container's pids.max) is a
    // std::runtime_error whose message starts with kThreadStartError and names it; the threads
    // started so far are kept.
    void ensure(int n);
    // Give worker w (0-based) the job run(team, ctx, member) and wake it if it sleeps.
    void post(int w, Team* team, void* ctx, RunFn run, int member);
    // After a region: call off worker w if it has not started its job, else wait until it ends.
    void retire(int w);

private:
    void work(Worker& w);

    std::vector<std::unique_ptr<Worker>> ws_;
    std::vector<std::thread*> th_;  // never destroyed in a forked child (see ~Crew)
    long pid_;
    bool lent_ = false;
    const bool yields_;
    std::mutex done_mu_;  // a caller waiting in retire() for a running worker
    std::condition_variable done_cv_;
    std::atomic<int> done_waiters_{0};
};

class Team {
public:
    explicit Team(int n_threads) : nt_(n_threads < 1 ? 1 : n_threads) {
        if (nt_ > 1) {
            slots_.reset(new Padded<std::atomic<uint64_t>>[static_cast<size_t>(nt_)]);
            if (tree_) {
                rdone_.reset(new Padded<std::atomic<int64_t>>[static_cast<size_t>(nt_)]);
                gdone_.reset(new Padded<std::atomic<int>>[static_cast<size_t>(nt_)]);
            }
            crew_ = Crew::lease();
            if (crew_ == nullptr) {  // the caller's crew is lent (a team inside a region)
                own_.reset(new Crew());
                crew_ = own_.get();
            }
        }
    }
    Team(const Team&) = delete;
    Team& operator=(const Team&) = delete;

    ~Team() {
        if (crew_ != nullptr && !own_) crew_->release();
    }

    int size() const { return nt_; }

    // The members a region of `nsteps` steps of `ns` single-thread ns each (nchunks chunks a
    // step) pays for: team_members on this team. A one-off loop is nsteps = 1 (its wake-up
    // counts); the default, a region of many steps.
    int members_for(double ns, int64_t nchunks, int64_t nsteps = kManySteps) const {
        return team_members(nt_, ns, nchunks, nsteps);
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
            if (!team_stats_on()) {
                serial_chunks(nchunks, body);
                return;
            }
            const Clock::time_point t0 = Clock::now();
            ++region_depth();
            serial_chunks(nchunks, body);
            RegionStats r;
            r.regions = r.steps = 1;
            r.chunks = nchunks;
            r.wall_ns = r.busy_ns = ns_since(t0);
            team_stats_add(typeid(F).name(), true, nt_, 1, --region_depth() > 0, r);
            return;
        }
        if (members > nchunks) members = static_cast<int>(nchunks);
        auto one = [nchunks](int64_t) { return nchunks; };
        auto run = [&body](int64_t, int64_t c, int) { body(c); };
        auto done = [](int64_t) { return true; };
        run_steps(typeid(F).name(), true, members, 1, one, run, done);
    }

    // A region of `nsteps` dependent steps on `members` threads (the caller is member 0):
    // for s = 0, 1, ...: body(s, c, member) for every c in [0, max(1, nchunks(s))), in any order
    // and on any member, then combine(s) once; combine returning false ends the region. Whatever
    // body(s, .) wrote is visible to combine(s), and whatever combine(s) wrote to every body of
    // step s + 1. nchunks(s) must be a pure function of s, cheap (each member calls it each
    // step), below 2^24. Exceptions as in for_chunks.
    template <class NChunks, class Body, class Combine>
    void steps(int members, int64_t nsteps, NChunks&& nchunks, Body&& body, Combine&& combine) {
        run_steps(typeid(Body).name(), false, members, nsteps, nchunks, body, combine);
    }

private:
    // steps(), its region accounted to `site` (a loop of for_chunks_on when `loop`)
    template <class NChunks, class Body, class Combine>
    void run_steps(const char* site, bool loop, int members, int64_t nsteps, NChunks& nchunks,
                   Body& body, Combine& combine) {
        if (nsteps <= 0) return;
        if (members > nt_) members = nt_;
        const bool stats = team_stats_on();
        if (members <= 1) {
            if (!stats) {
                serial_steps(nsteps, nchunks, body, combine);
                return;
            }
            RegionStats r;
            const Clock::time_point t0 = Clock::now();
            ++region_depth();
            serial_steps(nsteps, nchunks, body, combine, &r);
            r.regions = 1;
            r.wall_ns = ns_since(t0);
            r.busy_ns = r.wall_ns - r.combine_ns;
            team_stats_add(site, loop, nt_, 1, --region_depth() > 0, r);
            return;
        }
        using Ctx = Region<NChunks, Body, Combine>;
        Ctx ctx{&nchunks, &body, &combine, nsteps, stats};
        const Clock::time_point t0 = stats ? Clock::now() : Clock::time_point();
        if (stats) ++region_depth();
        open(members, &ctx, &Team::run_member<Ctx>);
        run_member<Ctx>(this, &ctx, 0);
        close();
        if (stats) {
            ctx.acc.regions = 1;
            ctx.acc.wall_ns = ns_since(t0);
            team_stats_add(site, loop, nt_, members, --region_depth() > 0, ctx.acc);
        }
    }

    static constexpr int kOffBits = 24;  // claim counter: (step + 1) << 24 | next offset
    static constexpr int64_t kStop = int64_t{1} << 62;

    // The serial paths, not inlined into the caller either (see run_member)
    template <class F>
    SC_NOINLINE static void serial_chunks(int64_t nchunks, F& body) {
        for (int64_t c = 0; c < nchunks; ++c) {
            poll_cancel();
            body(c);
        }
    }
    template <class NChunks, class Body, class Combine>
    SC_NOINLINE static void serial_steps(int64_t nsteps, NChunks& nchunks, Body& body,
                                         Combine& combine, RegionStats* acc = nullptr) {
        for (int64_t s = 0; s < nsteps; ++s) {
            poll_cancel();  // Ctrl-C (cancel.hpp): once per dependent step
            const int64_t C = std::max<int64_t>(1, nchunks(s));
            for (int64_t c = 0; c < C; ++c) body(s, c, 0);
            if (acc == nullptr) {
                if (!combine(s)) break;
                continue;
            }
            const Clock::time_point t0 = Clock::now();
            const bool go = combine(s);
            acc->combine_ns += ns_since(t0);
            ++acc->steps;
            acc->chunks += C;
            if (!go) break;
        }
    }

    using Clock = std::chrono::steady_clock;
    static double ns_since(Clock::time_point t0) {
        return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    }

    template <class N, class B, class C>
    struct Region {
        N* nchunks;
        B* body;
        C* combine;
        int64_t nsteps;
        bool stats;
        RegionStats acc{};  // (stats) busy: added by each member once; the rest by combine
        std::mutex mu{};
    };

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

    // Member-range o's `did` chunks of a step of C chunks on M members are done: true for the
    // one report that completes the step (it then runs combine), with the counters it used set
    // back to zero for the next step. Flat: one counter of chunks for the whole team. Tree: a
    // counter per range (chunks), one per group of G consecutive ranges (ranges completed) and
    // the root (groups completed): a member updates its own range's line, the lines of its
    // group and the root only when it completes those; the acquire-release chain carries every
    // chunk's writes to the combining member in both.
    bool report(int o, int M, int64_t C, int64_t did) {
        if (!tree_) {
            if (done_.fetch_add(did, std::memory_order_acq_rel) + did != C) return false;
            done_.store(0, std::memory_order_relaxed);
            return true;
        }
        auto lo = [C, M](int q) { return q * C / M; };
        std::atomic<int64_t>& r = rdone_[static_cast<size_t>(o)].v;
        if (r.fetch_add(did, std::memory_order_acq_rel) + did != lo(o + 1) - lo(o)) return false;
        r.store(0, std::memory_order_relaxed);
        const int G = group_size(M), g = o / G;
        auto ranges = [&](int h) {  // the non-empty ranges of group h
            int k = 0;
            for (int q = h * G; q < std::min(M, (h + 1) * G); ++q) k += lo(q + 1) > lo(q);
            return k;
        };
        std::atomic<int>& gc = gdone_[static_cast<size_t>(g)].v;
        if (gc.fetch_add(1, std::memory_order_acq_rel) + 1 != ranges(g)) return false;
        gc.store(0, std::memory_order_relaxed);
        int groups = 0;
        for (int h = 0; h * G < M; ++h) groups += ranges(h) > 0;
        if (groups == 1) return true;  // one group: its completion is the step's
        if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 != groups) return false;
        done_.store(0, std::memory_order_relaxed);
        return true;
    }

    // members per group of the tree: about sqrt(M), at least 2
    static int group_size(int M) {
        int G = 2;
        while ((G + 1) * (G + 1) <= M) ++G;
        return G;
    }

    // wait until step s may start; false when the region is over
    bool wait_step(int64_t s) {
        int64_t r = ready_.load(std::memory_order_acquire);
        if (r <= s) {
            if (!spin_then_yield([&] { return (r = ready_.load(std::memory_order_acquire)) > s; },
                                 yields_)) {
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

    // not inlined into the caller: member 0 runs the same compiled body as the workers (inlined
    // into a large caller, a chunk body's accumulator was spilled to the stack in its inner
    // loop: soa_matvec's chunks ran 1.5x slower on the calling thread)
    template <class Ctx>
    SC_NOINLINE static void run_member(Team* t, void* vctx, int k) {
        Ctx& x = *static_cast<Ctx*>(vctx);
        const CancelScope call(t->cancel_);  // the caller's call: its flag, on every member
        const int M = t->members_;
        // a late joiner starts at the step in progress
        int64_t s = k == 0 ? 0 : t->ready_.load(std::memory_order_acquire) - 1;
        double busy = 0.0;  // (x.stats) this member's
        if (x.stats && k != 0) ++region_depth();  // a region in a chunk here is nested
        try {
            for (; s < x.nsteps; ++s) {
                if (!t->wait_step(s)) break;
                const Clock::time_point t0 = x.stats ? Clock::now() : Clock::time_point();
                poll_cancel();  // Ctrl-C (cancel.hpp): once per step on every member
                const int64_t C = std::max<int64_t>(1, (*x.nchunks)(s));
                // own range first, reported at once (in a balanced step the last member to
                // finish its range combines without looking further), then the others'
                bool combined = false;
                for (int q = 0; q < M && !combined; ++q) {
                    const int o = k + q < M ? k + q : k + q - M;
                    int64_t did = 0;
                    for (int64_t c; (c = t->claim(o, M, s, C)) >= 0; ++did) {
                        // Ctrl-C (cancel.hpp) once per chunk too: a one-step region (every
                        // for_chunks loop) would otherwise poll once, at its start
                        poll_cancel();
                        (*x.body)(s, c, k);
                    }
                    if (did > 0 && t->report(o, M, C, did)) {
                        combined = true;
                        if (!x.stats) {
                            const bool go = (*x.combine)(s);
                            t->publish(go && s + 1 < x.nsteps ? s + 2 : kStop);
                            continue;
                        }
                        const Clock::time_point t1 = Clock::now();
                        busy += std::chrono::duration<double, std::nano>(t1 - t0).count();
                        const bool go = (*x.combine)(s);
                        x.acc.combine_ns += ns_since(t1);  // one combine at a time
                        ++x.acc.steps;
                        x.acc.chunks += C;
                        t->publish(go && s + 1 < x.nsteps ? s + 2 : kStop);
                    }
                }
                if (x.stats && !combined) busy += ns_since(t0);
            }
        } catch (...) {
            {
                std::lock_guard<std::mutex> lk(t->mu_);
                if (!t->error_) t->error_ = std::current_exception();
            }
            t->publish(kStop);
        }
        if (x.stats) {
            if (k != 0) --region_depth();
            std::lock_guard<std::mutex> lk(x.mu);
            x.acc.busy_ns += busy;
        }
    }

    void open(int members, void* ctx, RunFn run) {
        members_ = members;
        cancel_ = tl_cancel_flag;
        for (int k = 0; k < members; ++k) {
            slots_[static_cast<size_t>(k)].v.store(0, std::memory_order_relaxed);
            if (tree_) {  // (a region ended by an exception may leave them partly counted)
                rdone_[static_cast<size_t>(k)].v.store(0, std::memory_order_relaxed);
                gdone_[static_cast<size_t>(k)].v.store(0, std::memory_order_relaxed);
            }
        }
        done_.store(0, std::memory_order_relaxed);
        ready_.store(1, std::memory_order_seq_cst);
        crew_->ensure(members - 1);
        for (int w = 1; w < members; ++w) crew_->post(w - 1, this, ctx, run, w);
    }

    // wait for the workers that joined the region (each finishes at most the chunk it holds);
    // those that had not started are called off
    void close() {
        for (int w = 1; w < members_; ++w) crew_->retire(w - 1);
        std::exception_ptr e;
        {
            std::lock_guard<std::mutex> lk(mu_);
            std::swap(e, error_);
        }
        if (e) std::rethrow_exception(e);
    }

    const int nt_;
    const bool yields_ = team_wait_yields();
    std::unique_ptr<Padded<std::atomic<uint64_t>>[]> slots_;  // per-member claim counters
    const bool tree_ = team_tree_barrier();
    std::unique_ptr<Padded<std::atomic<int64_t>>[]> rdone_;  // (tree) chunks done per range
    std::unique_ptr<Padded<std::atomic<int>>[]> gdone_;      // (tree) ranges done per group
    Crew* crew_ = nullptr;
    std::unique_ptr<Crew> own_;  // a private crew (nested team), joined with the team
    int members_ = 1;
    CancelFlag* cancel_ = nullptr;  // the flag of the caller's call (cancel.hpp), for the members
    std::mutex mu_;
    std::condition_variable step_cv_;
    alignas(64) std::atomic<int64_t> ready_{0};  // steps < ready_ - 1 are done; kStop: over
    alignas(64) std::atomic<int64_t> done_{0};   // chunks (tree: groups) of the step reported
    alignas(64) std::atomic<int> step_sleepers_{0};
    std::exception_ptr error_;  // guarded by mu_
};

// Probes of the model's constants on this machine (tools/threads_table.py --probe-only): the
// median wall ns a step of a region on `members` awake threads costs beyond its work divided
// among them (its barrier; each step `members` chunks of `chunk_units` ~ns of arithmetic; the
// median, so that steps in which another process preempted a member do not count), and the ns
// of an empty one-off loop on `members` threads whose workers were asleep (the wake-up).
double team_probe_step_ns(int members, int64_t nsteps, int64_t chunk_units);
double team_probe_wake_ns(int members, int reps);

}  // namespace sc
