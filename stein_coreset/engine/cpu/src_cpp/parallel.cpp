#include "parallel.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

#if defined(__GNUG__) && __has_include(<cxxabi.h>)
#include <cxxabi.h>
#endif

#ifdef _WIN32
#include <process.h>
#define getpid _getpid
#else
#include <unistd.h>
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

namespace sc {

int omp_max_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 0;
#endif
}

bool team_wait_yields() {
    static const bool yields = [] {
        const char* v = std::getenv("STEIN_CORESET_TEAM_WAIT");
        return v != nullptr && std::strcmp(v, "yield") == 0;
    }();
    return yields;
}

bool team_tree_barrier() {
    static const bool tree = [] {
        const char* v = std::getenv("STEIN_CORESET_TEAM_BARRIER");
        return v != nullptr && std::strcmp(v, "tree") == 0;
    }();
    return tree;
}

double team_grain() {
    static const double grain = [] {
        const char* v = std::getenv("STEIN_CORESET_TEAM_GRAIN");
        if (v == nullptr || *v == '\0') return 1.0;
        char* end = nullptr;
        const double g = std::strtod(v, &end);
        return (end != v && g >= 0.0) ? g : 1.0;
    }();
    return grain;
}

// ---- the team-size model ------------------------------------------------------------------------

int team_members(int nt, double step_ns, int64_t nchunks, int64_t nsteps) {
    if (nt <= 1 || nchunks <= 1) return 1;
    const int hi = nchunks < nt ? static_cast<int>(nchunks) : nt;
    const double g = team_grain();
    if (g <= 0.0) return hi;
    const double C = static_cast<double>(nchunks), S = static_cast<double>(nsteps < 1 ? 1 : nsteps);
    const double W = step_ns > 0.0 ? step_ns : 0.0;
    int best = 1;
    double best_t = S * W;
    for (int M = 2; M <= hi; ++M) {
        const double per_member = std::ceil(C / M);
        const double t = S * (per_member * W / C + g * kBarrierNs * M) + g * kWakeNs;
        if (t < best_t) {
            best_t = t;
            best = M;
        }
    }
    return best;
}

// ---- region accounting ------------------------------------------------------------------------

namespace {

std::atomic<bool> g_stats_on{false};
std::mutex g_stats_mu;
std::vector<SiteStats> g_stats;  // guarded by g_stats_mu

std::string demangle(const char* name) {
#if defined(__GNUG__) && __has_include(<cxxabi.h>)
    int status = 0;
    char* p = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (status == 0 && p != nullptr) {
        std::string out(p);
        std::free(p);
        return out;
    }
#endif
    return name;
}

}  // namespace

void team_stats_enable(bool on) { g_stats_on.store(on, std::memory_order_relaxed); }

bool team_stats_on() { return g_stats_on.load(std::memory_order_relaxed); }

int& region_depth() {
    thread_local int depth = 0;
    return depth;
}

void team_stats_add(const char* type_name, bool loop, int team, int members, bool nested,
                    const RegionStats& r) {
    const std::string site = demangle(type_name);
    std::lock_guard<std::mutex> lk(g_stats_mu);
    for (SiteStats& e : g_stats) {
        if (e.site == site && e.loop == loop && e.team == team && e.members == members &&
            e.nested == nested) {
            e.s.regions += r.regions;
            e.s.steps += r.steps;
            e.s.chunks += r.chunks;
            e.s.wall_ns += r.wall_ns;
            e.s.busy_ns += r.busy_ns;
            e.s.combine_ns += r.combine_ns;
            return;
        }
    }
    g_stats.push_back(SiteStats{site, loop, team, members, nested, r});
}

std::vector<SiteStats> team_stats_take() {
    std::lock_guard<std::mutex> lk(g_stats_mu);
    std::vector<SiteStats> out;
    out.swap(g_stats);
    return out;
}

// ---- the crews ----------------------------------------------------------------------------------

namespace {

// The calling thread's crew. A forked child finds its parent's crew here (without its threads):
// it leaks that one (its threads cannot be joined there) and starts its own.
thread_local std::unique_ptr<Crew> tl_crew;

}  // namespace

Crew::Crew() : pid_(static_cast<long>(getpid())), yields_(team_wait_yields()) {}

Crew::~Crew() {
    if (static_cast<long>(getpid()) != pid_) {  // a forked child: the threads are not ours
        for (auto& w : ws_) w.release();  // the slots may still be named by those threads
        return;
    }
    for (size_t i = 0; i < ws_.size(); ++i) {
        Worker& w = *ws_[i];
        {
            std::lock_guard<std::mutex> lk(w.mu);
            w.state.store(Worker::kQuit, std::memory_order_seq_cst);
        }
        w.cv.notify_one();
    }
    for (std::thread* t : th_) {
        t->join();
        delete t;
    }
}

Crew* Crew::lease() {
    if (tl_crew && static_cast<long>(getpid()) != tl_crew->pid_)
        (void)tl_crew.release();  // forked: see tl_crew
    if (!tl_crew) tl_crew.reset(new Crew());
    if (tl_crew->lent_) return nullptr;
    tl_crew->lent_ = true;
    return tl_crew.get();
}

void Crew::ensure(int n) {
    while (static_cast<int>(ws_.size()) < n) {
        // a worker is counted only once its thread runs (a failed start leaves none behind)
        ws_.reserve(ws_.size() + 1);
        th_.reserve(th_.size() + 1);
        std::unique_ptr<Worker> w(new Worker());
        Worker* p = w.get();
        try {
            th_.push_back(new std::thread([this, p] { work(*p); }));
        } catch (const std::system_error& e) {
            throw std::runtime_error(std::string(kThreadStartError) + "the system refused to " +
                                     "start worker thread " + std::to_string(ws_.size() + 1) +
                                     " of the " + std::to_string(n) + " a team of " +
                                     std::to_string(n + 1) + " threads needs (" +
                                     e.code().message() + ")");
        }
        ws_.push_back(std::move(w));
    }
}

void Crew::post(int i, Team* team, void* ctx, RunFn run, int member) {
    Worker& w = *ws_[static_cast<size_t>(i)];
    w.team = team;
    w.ctx = ctx;
    w.run = run;
    w.member = member;
    w.state.store(Worker::kPosted, std::memory_order_seq_cst);
    if (w.sleeping.load(std::memory_order_seq_cst)) {
        { std::lock_guard<std::mutex> lk(w.mu); }
        w.cv.notify_one();
    }
}

void Crew::retire(int i) {
    Worker& w = *ws_[static_cast<size_t>(i)];
    int st = Worker::kPosted;
    if (w.state.compare_exchange_strong(st, Worker::kIdle, std::memory_order_seq_cst))
        return;  // called off before it started: it never touches the team
    // running: it finishes at most the chunk it holds
    if (!spin_then_yield(
            [&w] { return w.state.load(std::memory_order_acquire) == Worker::kIdle; }, yields_)) {
        std::unique_lock<std::mutex> lk(done_mu_);
        done_waiters_.fetch_add(1, std::memory_order_seq_cst);
        while (w.state.load(std::memory_order_seq_cst) != Worker::kIdle) done_cv_.wait(lk);
        done_waiters_.fetch_sub(1, std::memory_order_relaxed);
    }
}

void Crew::work(Worker& w) {
    for (;;) {
        int st = w.state.load(std::memory_order_acquire);
        if (st == Worker::kIdle) {
            // a short spin (the next region of an algorithm is usually microseconds away),
            // then sleep on this worker's own condition variable
            if (spin_then_yield(
                    [&w] { return w.state.load(std::memory_order_acquire) != Worker::kIdle; },
                    yields_))
                continue;
            std::unique_lock<std::mutex> lk(w.mu);
            w.sleeping.store(true, std::memory_order_seq_cst);
            while (w.state.load(std::memory_order_seq_cst) == Worker::kIdle) w.cv.wait(lk);
            w.sleeping.store(false, std::memory_order_relaxed);
            continue;
        }
        if (st == Worker::kQuit) return;
        if (st == Worker::kPosted &&
            w.state.compare_exchange_strong(st, Worker::kRunning, std::memory_order_seq_cst)) {
            w.run(w.team, w.ctx, w.member);  // catches everything (Team::run_member)
            w.state.store(Worker::kIdle, std::memory_order_seq_cst);
            // from here on the team may be gone: only the crew is touched
            if (done_waiters_.load(std::memory_order_seq_cst) > 0) {
                { std::lock_guard<std::mutex> lk(done_mu_); }
                done_cv_.notify_all();
            }
        }
    }
}

// ---- probes -------------------------------------------------------------------------------------

namespace {

// about `units` x 1 ns of arithmetic that the compiler cannot drop
void busy(int64_t units) {
    volatile double x = 1.0;
    for (int64_t i = 0; i < units; ++i) x = x * 1.0000001 + 1e-9;
}

}  // namespace

double team_probe_step_ns(int members, int64_t nsteps, int64_t chunk_units) {
    if (members < 1) members = 1;
    if (nsteps < 3) nsteps = 3;
    Team team(members);
    std::vector<std::chrono::steady_clock::time_point> at(static_cast<size_t>(nsteps));
    // `members` chunks of equal work a step, on M = 1 or `members` threads (every member takes
    // part in every step); the median step
    // (a step in which a member was preempted by another process is an outlier, not the rule)
    auto median_step = [&](int M) {
        auto run = [&](int64_t s) {
            team.steps(
                M, s, [members](int64_t) { return members; },
                [chunk_units](int64_t, int64_t, int) { busy(chunk_units); },
                [&at](int64_t q) {
                    at[static_cast<size_t>(q)] = std::chrono::steady_clock::now();
                    return true;
                });
        };
        run(std::min<int64_t>(nsteps, 1000));  // warm: threads started, awake
        run(nsteps);
        std::vector<double> d(static_cast<size_t>(nsteps - 1));
        for (size_t q = 1; q < at.size(); ++q)
            d[q - 1] = std::chrono::duration<double, std::nano>(at[q] - at[q - 1]).count();
        std::nth_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2), d.end());
        return d[d.size() / 2];
    };
    const double t1 = median_step(1);  // the same chunks on one thread
    const double tm = members > 1 ? median_step(members) : t1;
    // what a step costs beyond its work divided among the members
    return tm - t1 / members;
}

double team_probe_wake_ns(int members, int reps) {
    if (members < 1) members = 1;
    if (reps < 1) reps = 1;
    Team team(members);
    auto loop = [&] { team.for_chunks_on(members, members, [](int64_t) {}); };
    loop();  // threads started
    double total = 0.0;
    for (int r = 0; r < reps; ++r) {
        std::this_thread::sleep_for(std::chrono::milliseconds(3));  // the workers fall asleep
        const auto t0 = std::chrono::steady_clock::now();
        loop();
        const std::chrono::duration<double, std::nano> dt = std::chrono::steady_clock::now() - t0;
        total += dt.count();
    }
    return total / reps;
}

}  // namespace sc
