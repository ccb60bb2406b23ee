#include "cancel.hpp"

#if defined(__unix__) || defined(__APPLE__)
#include <csignal>
#include <signal.h>
#define SC_HAVE_SIGACTION 1
#endif

namespace sc {

const char* Cancelled::what() const noexcept { return "stein_coreset: cancelled (SIGINT)"; }

void cancel_request() noexcept { cancel_flag.store(1, std::memory_order_relaxed); }

void cancel_clear() noexcept { cancel_flag.store(0, std::memory_order_relaxed); }

#ifdef SC_HAVE_SIGACTION
namespace {

struct sigaction g_prev;  // the handler the hook replaced (Python's), restored on removal
int g_depth = 0;          // nested installs (main thread only)

extern "C" void on_sigint(int sig, siginfo_t* info, void* ctx) {
    cancel_flag.store(1, std::memory_order_relaxed);
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
