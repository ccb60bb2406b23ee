#include "cancel.hpp"

#include <algorithm>
#include <mutex>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <csignal>
#include <signal.h>
#define SC_HAVE_SIGACTION 1
#endif

namespace sc {

const char* Cancelled::what() const noexcept { return "stein_coreset: cancelled (SIGINT)"; }

namespace {

// The flag of the main thread's call: static, so the SIGINT hook may set it from any thread
// at any time (a signal may be delivered on a team member's thread).
CancelFlag g_main_flag{0};

struct Call {
    int64_t handle;
    int64_t scope;
    CancelFlag* flag;
    bool owned;  // a flag of its own (not g_main_flag), deleted at call_end
};

std::mutex g_mu;                        // guards everything below
std::vector<Call> g_calls;              // the calls in flight
int64_t g_next_handle = 1;
std::vector<int64_t> g_cancelled;       // the last kRememberedScopes cancelled scopes
size_t g_cancelled_next = 0;            // (a ring once full)

// The flag each call replaced on its thread, restored at call_end (a thread's calls nest).
thread_local std::vector<CancelFlag*> tl_prev;

bool remembered(int64_t scope) {
    return std::find(g_cancelled.begin(), g_cancelled.end(), scope) != g_cancelled.end();
}

}  // namespace

int64_t call_begin(int64_t scope, bool main_thread, bool preset) {
    CancelFlag* flag = main_thread ? &g_main_flag : new CancelFlag(0);
    std::lock_guard<std::mutex> lk(g_mu);
    if (main_thread) g_main_flag.store(0, std::memory_order_relaxed);
    if (preset || (scope != 0 && remembered(scope))) flag->store(1, std::memory_order_relaxed);
    const int64_t h = g_next_handle++;
    g_calls.push_back(Call{h, scope, flag, !main_thread});
    tl_prev.push_back(tl_cancel_flag);
    tl_cancel_flag = flag;
    return h;
}

void call_end(int64_t handle) noexcept {
    CancelFlag* owned = nullptr;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        for (size_t i = 0; i < g_calls.size(); ++i) {
            if (g_calls[i].handle == handle) {
                if (g_calls[i].owned) owned = g_calls[i].flag;
                g_calls.erase(g_calls.begin() + static_cast<std::ptrdiff_t>(i));
                break;
            }
        }
    }
    if (!tl_prev.empty()) {
        tl_cancel_flag = tl_prev.back();
        tl_prev.pop_back();
    } else {
        tl_cancel_flag = nullptr;
    }
    delete owned;  // no longer reachable: unregistered under the lock, off this thread
}

int64_t cancel_scope(int64_t scope) {
    if (scope == 0) return 0;
    std::lock_guard<std::mutex> lk(g_mu);
    if (!remembered(scope)) {
        if (g_cancelled.size() < static_cast<size_t>(kRememberedScopes)) {
            g_cancelled.push_back(scope);
        } else {
            g_cancelled[g_cancelled_next] = scope;
            g_cancelled_next = (g_cancelled_next + 1) % g_cancelled.size();
        }
    }
    int64_t k = 0;
    for (const Call& c : g_calls) {
        if (c.scope == scope) {
            c.flag->store(1, std::memory_order_relaxed);
            ++k;
        }
    }
    return k;
}

bool scope_cancelled(int64_t scope) {
    if (scope == 0) return false;
    std::lock_guard<std::mutex> lk(g_mu);
    return remembered(scope);
}

int64_t cancel_all() {
    std::lock_guard<std::mutex> lk(g_mu);
    for (const Call& c : g_calls) c.flag->store(1, std::memory_order_relaxed);
    return static_cast<int64_t>(g_calls.size());
}

bool any_cancel_requested() {
    std::lock_guard<std::mutex> lk(g_mu);
    for (const Call& c : g_calls)
        if (c.flag->load(std::memory_order_relaxed) != 0) return true;
    return false;
}

#ifdef SC_HAVE_SIGACTION
namespace {

struct sigaction g_prev;  // the handler the hook replaced (Python's), restored on removal
int g_depth = 0;          // nested installs (main thread only)

extern "C" void on_sigint(int sig, siginfo_t* info, void* ctx) {
    g_main_flag.store(1, std::memory_order_relaxed);  // the main thread's call, no other
    if (g_prev.sa_flags & SA_SIGINFO) {
        if (g_prev.sa_sigaction != nullptr) g_prev.sa_sigaction(sig, info, ctx);
    } else if (g_prev.sa_handler != SIG_DFL && g_prev.sa_handler != SIG_IGN &&
               g_prev.sa_handler != nullptr) {
        g_prev.sa_handler(sig);
    }
}

}  // namespace

bool sigint_hook_install() noexcept {
    if (g_depth > 0) {
        ++g_depth;
        return true;
    }
    struct sigaction cur;
    if (sigaction(SIGINT, nullptr, &cur) != 0) return false;
    const bool function = (cur.sa_flags & SA_SIGINFO) ? cur.sa_sigaction != nullptr
                                                      : (cur.sa_handler != SIG_DFL &&
                                                         cur.sa_handler != SIG_IGN);
    if (!function) return false;
    g_prev = cur;
    struct sigaction hook = cur;  // same mask and flags (SA_ONSTACK, ...) as Python's
    hook.sa_flags |= SA_SIGINFO;
    hook.sa_sigaction = on_sigint;
    if (sigaction(SIGINT, &hook, nullptr) != 0) return false;
    g_depth = 1;
    return true;
}

void sigint_hook_remove() noexcept {
    if (g_depth == 0) return;
    if (--g_depth == 0) sigaction(SIGINT, &g_prev, nullptr);
}
#else
bool sigint_hook_install() noexcept { return false; }
void sigint_hook_remove() noexcept {}
#endif

}  // namespace sc
