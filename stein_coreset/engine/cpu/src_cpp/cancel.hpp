// Cancellation of the C++ loops (Ctrl-C stops them within a second), scoped to one call.
//
// Every call into the library's loops runs under its own flag (call_begin / call_end, which the
// Cython wrapper's _Interruptible brackets each call with): the calling thread reads it through
// a thread-local pointer, and a Team hands its caller's pointer to its members for the region,
// so a call's whole team polls the call's flag and no other. Every long loop polls it with
// poll_cancel() every few milliseconds of work (a thread-local read and one relaxed atomic
// load) and unwinds with sc::Cancelled; the Cython wrapper turns that into KeyboardInterrupt. A
// loop that is never cancelled computes exactly what it computed before: the poll reads, never
// writes.
//
// Who sets a flag:
// - Ctrl-C. While the Python main thread is inside a call, a SIGINT hook sits in front of
//   Python's own SIGINT handler (sigint_hook_install / sigint_hook_remove, chaining to the
//   handler it replaced); it sets the flag of the main thread's call only (one static flag,
//   async-signal-safe), then runs Python's handler, which records the signal as usual. Calls on
//   other threads (a thread pool's, a Dask worker's) are not touched.
// - cancel_scope(s): the flags of every call in flight that was begun under scope s (a nonzero
//   id the caller chooses: distributed.compress gives its tasks one, and cancels it when its
//   driver is interrupted). The scope is remembered as cancelled (the last kRememberedScopes
//   of them), so a call begun under it later is refused too (scope_cancelled).
// - cancel_all(): every call in flight (tests, and a process that is going away).
// Nothing is left set for the next call: a flag lives as long as its call.
//
// poll_cancel() may run on any member of a Team (parallel.hpp): the team catches the exception,
// skips the remaining chunks and rethrows it on the calling thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>

namespace sc {

struct Cancelled : std::exception {
    const char* what() const noexcept override;
};

// A call's flag: lock-free, so the signal hook may set it.
using CancelFlag = std::atomic<int>;

// The flag this thread's loops poll (its call's, or on a team member its caller's); nullptr
// outside a call (nothing polls then).
inline thread_local CancelFlag* tl_cancel_flag = nullptr;

inline bool cancel_requested() noexcept {
    const CancelFlag* f = tl_cancel_flag;
    return f != nullptr && f->load(std::memory_order_relaxed) != 0;
}

// Throws sc::Cancelled when this thread's call is cancelled. Call it once per step or chunk.
inline void poll_cancel() {
    if (cancel_requested()) throw Cancelled();
}

// Run this thread's loops under `flag` until the object goes out of scope (a team member for
// its caller's region).
class CancelScope {
public:
    explicit CancelScope(CancelFlag* flag) noexcept : prev_(tl_cancel_flag) {
        tl_cancel_flag = flag;
    }
    ~CancelScope() { tl_cancel_flag = prev_; }
    CancelScope(const CancelScope&) = delete;
    CancelScope& operator=(const CancelScope&) = delete;

private:
    CancelFlag* prev_;
};

// A call begins on this thread: a fresh flag (the main thread's static one, cleared, when
// `main_thread`), registered under `scope` (0: none) and made this thread's; returns its handle
// for call_end. Starts set when `preset` (tests: the loop's first poll throws).
int64_t call_begin(int64_t scope, bool main_thread, bool preset = false);
// The call ends: its flag is unregistered and this thread's previous flag restored.
void call_end(int64_t handle) noexcept;

// Cancel the calls in flight under `scope` (and the calls begun under it later); returns how
// many were in flight.
int64_t cancel_scope(int64_t scope);
// Whether `scope` was cancelled (one of the last kRememberedScopes).
bool scope_cancelled(int64_t scope);
constexpr int kRememberedScopes = 256;
// Cancel every call in flight, on any thread; returns how many.
int64_t cancel_all();
// Whether any call in flight has its flag set (tests).
bool any_cancel_requested();

// Put the hook in front of the current SIGINT handler; false (nothing installed) when the
// current handler is not a function (SIG_DFL, SIG_IGN) or the platform has no sigaction. Nested
// installs are counted. Main thread only, like every change of a signal handler in Python.
bool sigint_hook_install() noexcept;
void sigint_hook_remove() noexcept;

}  // namespace sc
