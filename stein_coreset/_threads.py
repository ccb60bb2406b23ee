"""The library's one threading policy: a user's ``n_threads`` turned into a team size once.

Modelled on scikit-learn's ``_openmp_effective_n_threads``: the default is the number of cores
this process may use — its CPU affinity, the cgroup CPU quota (containers), ``OMP_NUM_THREADS``
and any threadpoolctl limit on OpenMP — never the load average. The number is passed down to the
C++ loops as an argument; no process-wide OpenMP state is changed.
"""

from __future__ import annotations

import contextlib
import math
import os

import numpy as np

__all__ = ["effective_n_threads", "usable_cores", "new_scope", "call_scope", "cancel_scope"]


def _cgroup_cpu_limit() -> int | None:
    """CPUs allowed by a cgroup v2 (``cpu.max``) or v1 (``cfs_quota_us``) quota, or None."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            return max(1, math.ceil(int(quota) / int(period)))
        return None
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as f:
            quota = int(f.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
            period = int(f.read())
        if quota > 0 and period > 0:
            return max(1, math.ceil(quota / period))
    except (OSError, ValueError):
        pass
    return None


def _openmp_limit() -> int | None:
    """The OpenMP team-size limit in force: OMP_NUM_THREADS, or a threadpoolctl limit."""
    try:
        from .engine.cpu import bridge

        limit = bridge.omp_max_threads()  # 0: a build without OpenMP
        if limit > 0:
            return limit
    except (ImportError, AttributeError):
        pass
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(env) if env.isdigit() and int(env) > 0 else None


def usable_cores() -> int:
    """Cores this process may run on now: affinity, cgroup quota and OpenMP limits applied."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    for limit in (_cgroup_cpu_limit(), _openmp_limit()):
        if limit is not None:
            n = min(n, limit)
    return max(1, n)


def effective_n_threads(n_threads=None) -> int:
    """The team size for ``n_threads``: None or -1 -> :func:`usable_cores`; a positive int as is.

    Raises
    ------
    TypeError
        If ``n_threads`` is not an integer (booleans are refused).
    ValueError
        If it is 0 or below -1.
    """
    if n_threads is None:
        return usable_cores()
    if isinstance(n_threads, bool) or not isinstance(n_threads, (int, np.integer)):
        raise TypeError(f"n_threads must be an integer or None, got {type(n_threads).__name__}")
    n_threads = int(n_threads)
    if n_threads == -1:
        return usable_cores()
    if n_threads < 1:
        raise ValueError(f"n_threads must be a positive integer, -1 or None, got {n_threads}")
    cap = MAX_THREADS_PER_CPU * (os.cpu_count() or 1)
    if n_threads > cap:  # before: a raw OverflowError from the C++ wrapper (2**40)
        raise ValueError(
            f"n_threads = {n_threads} is more than {MAX_THREADS_PER_CPU} per CPU of this "
            f"machine ({cap}); each team member is an OS thread"
        )
    return n_threads


#: A team larger than this many threads per CPU only adds scheduling (and may fail to start).
MAX_THREADS_PER_CPU = 64


def new_scope() -> int:
    """A fresh cancellation scope: a random nonzero 62-bit id, unique across the processes of a
    cluster in practice (a Dask worker runs the tasks of several drivers)."""
    import secrets

    return secrets.randbits(62) + 1


@contextlib.contextmanager
def call_scope(scope: int):
    """Run this thread's library calls under the cancellation scope ``scope`` for the block:
    :func:`cancel_scope` of it stops them (and no other thread's calls). For the tasks of
    :func:`stein_coreset.distributed.compress`, which run on threads the driver does not own."""
    from .engine.cpu import bridge

    prev = bridge.set_call_scope(scope)
    try:
        yield scope
    finally:
        bridge.set_call_scope(prev)


def cancel_scope(scope: int) -> int:
    """Stop the C++ loops of the calls in flight under ``scope``, on any thread of this process
    (each raises KeyboardInterrupt in its thread within milliseconds), and refuse the calls
    begun under it later. Calls of other scopes, a main-thread call and the next calls of every
    thread are untouched: nothing stays set. Returns how many calls were in flight."""
    from .engine.cpu import bridge

    return bridge.cancel_scope(scope)
