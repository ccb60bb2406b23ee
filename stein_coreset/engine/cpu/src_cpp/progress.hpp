// Progress of the C++ loops, for a bar drawn while a loop runs without the GIL.
//
// One process-wide counter of work units done. The long loops add to it once per dependent
// step (Stein thinning, KT-Swap: one unit a step; KT-SPLIT: k + 1 units for pair k of a halving,
// the walk's length). A Python thread resets it before a loop and polls it while the loop runs
// (stein_coreset/_progress.py); nothing in the loops reads it, so results never depend on it.
// Loops running at once on several Python threads add to the same counter: a bar drawn then
// shows their sum.
#pragma once

#include <atomic>
#include <cstdint>

namespace sc {

inline std::atomic<int64_t> progress_units{0};

// Called by one thread per step (a region's combine) or per pair: one relaxed add.
inline void progress_add(int64_t units) noexcept {
    progress_units.fetch_add(units, std::memory_order_relaxed);
}

inline int64_t progress_read() noexcept {
    return progress_units.load(std::memory_order_relaxed);
}

inline void progress_reset() noexcept { progress_units.store(0, std::memory_order_relaxed); }

}  // namespace sc
