// Cancellation of the C++ loops (Ctrl-C stops them within a second).
//
// One process-wide flag. While the Python main thread is inside a call of the library, a SIGINT
// hook sits in front of Python's own SIGINT handler (installed by sigint_hook_install, removed by
// sigint_hook_remove, chaining to the handler it replaced); it sets the flag and then runs
// Python's handler, which records the signal as usual. Every long loop polls the flag with
// poll_cancel() every few milliseconds of work (one relaxed atomic load) and unwinds with
// sc::Cancelled; the Cython wrapper turns that into KeyboardInterrupt and clears the flag. A
// loop that is never cancelled computes exactly what it computed before: the poll reads, never
// writes.
//
// poll_cancel() may run on any member of a Team (parallel.hpp): the team catches the exception,
// skips the remaining chunks and rethrows it on the calling thread.
#pragma once

#include <atomic>
#include <exception>

namespace sc {

struct Cancelled : std::exception {
    const char* what() const noexcept override;
};

// The flag: lock-free, so the signal hook may set it.
inline std::atomic<int> cancel_flag{0};

inline bool cancel_requested() noexcept {
    return cancel_flag.load(std::memory_order_relaxed) != 0;
}

// Throws sc::Cancelled when a cancellation is pending. Call it once per step or chunk.
inline void poll_cancel() {
    if (cancel_requested()) throw Cancelled();
}

// Set / clear the flag (tests and the wrapper; async-signal-safe).
void cancel_request() noexcept;
void cancel_clear() noexcept;

// Put the hook in front of the current SIGINT handler; false (nothing installed) when the
// current handler is not a function (SIG_DFL, SIG_IGN) or the platform has no sigaction. Nested
// installs are counted. Main thread only, like every change of a signal handler in Python.
bool sigint_hook_install() noexcept;
void sigint_hook_remove() noexcept;

}  // namespace sc
