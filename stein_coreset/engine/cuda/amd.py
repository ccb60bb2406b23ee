"""The fused AMD kernel of the ``cuda`` backend (Alg. F.2 on K' = F F^T + diag(res), the steps
of ``engine/cpu/src_cpp/amd.cpp``; the kernel is ``src_cuda/amd.cu``): its grid, its launch and
the rounding tolerance that compares it with the C++."""

from __future__ import annotations

import numpy as np

from . import config
from .launch import launch_persistent, multiprocessors, persistent_grid
from .source import module

__all__ = ["amd_lowrank_fits", "amd_grid", "amd_launch", "amd_lowrank", "amd_rounding_tolerance"]


def amd_lowrank_fits(r: int) -> bool:
    """Whether the fused AMD kernel takes a factor of rank r (r <= warp * max(config.AMD_KPL))."""
    return 0 < int(r) <= config.CONFIG.warp * config.AMD_KPL[-1]


def amd_grid(n: int, sms: int, max_threads: int) -> tuple[int, int]:
    """(blocks, threads per block) of the fused AMD kernel for n rows: one block per
    multiprocessor (its grid barrier needs every block resident; fewer blocks when n is
    small), each of BLOCK threads, grown by whole warps up to config.AMD_MAX_BLOCK and to
    ``max_threads`` (the kernel's limit on the device, set by its registers) while every warp
    still gets about WARP rows (one batch: a lane loads one row's scalars)."""
    block, warp = config.CONFIG.block, config.CONFIG.warp
    wpb0 = block // warp
    nb = max(1, min(int(sms), -(-int(n) // wpb0)))
    most = max(1, min(config.AMD_MAX_BLOCK, int(max_threads)) // warp)
    want = -(-int(n) // (nb * warp))
    return nb, max(min(wpb0, most), min(most, want)) * warp


def _amd_kernel(r: int) -> str:
    """The fused AMD kernel for rank r: the smallest lanes-per-row count that covers r."""
    return f"amd_lowrank_k{next(k for k in config.AMD_KPL if config.CONFIG.warp * k >= r)}"


def amd_launch(n: int, r: int, device_id: int):
    """(function, blocks, threads per block) of the fused AMD kernel for an (n, r) factor on
    the device: the kernel instantiated for the smallest lanes-per-row count that covers r,
    and its grid (:func:`amd_grid`, at most what the device holds at once:
    :func:`persistent_grid`)."""
    name = _amd_kernel(r)
    fn = module(device_id).get_function(name)
    nb, threads = amd_grid(n, multiprocessors(device_id), fn.max_threads_per_block)
    return fn, persistent_grid(fn, name, threads, nb, device_id), threads


def amd_lowrank(F, res, w, v, t0: int, steps: int, eta: float, progress=None) -> None:
    """AMD steps t0+1..t0+steps (Alg. F.2) on K' = F F^T + diag(res), on the device, in place
    on (w, v): the steps of ``engine/cpu/src_cpp/amd.cpp`` (same updates, log domain, online-max
    sums), fused in one persistent kernel that reads each row of F once per step and synchronises
    the grid once per step, launched every ``config.PERSISTENT_STEPS`` steps (the host waits between
    launches: Ctrl-C, ``progress(steps done)``).

    F is a C-ordered (n, r) float32 CuPy array, res, w, v (n,) float64 CuPy arrays on F's
    device; r must satisfy :func:`amd_lowrank_fits`. The sums run in a fixed order set by the
    grid (:func:`amd_grid`: n, the device's multiprocessors and the kernel's registers), so a
    device gives the same weights every run; they differ from the C++ loop's by the order of
    the double sums only."""
    import cupy as cp

    n, r = int(F.shape[0]), int(F.shape[1])
    steps = int(steps)
    if not amd_lowrank_fits(r):
        most = config.CONFIG.warp * config.AMD_KPL[-1]
        raise ValueError(f"the fused AMD kernel takes rank 1..{most}, got {r}")
    if steps <= 0 or n == 0:
        return
    for name, a in (("w", w), ("v", v)):
        if a.dtype != np.float64 or a.shape != (n,) or not a.flags.c_contiguous:
            raise ValueError(f"{name} must be a contiguous ({n},) float64 array")
    device_id = int(F.device.id)
    with cp.cuda.Device(device_id):
        F = cp.ascontiguousarray(F, dtype=cp.float32)
        res = cp.ascontiguousarray(res, dtype=cp.float64)
        fn, nb, threads = amd_launch(n, r, device_id)
        wpb = threads // config.CONFIG.warp
        P = 2 * r + 2
        logv = cp.empty(n, dtype=cp.float64)
        Ftw = cp.zeros(r, dtype=cp.float64)
        Ftv = cp.zeros(r, dtype=cp.float64)
        part = cp.empty(2 * nb * P, dtype=cp.float64)
        wpart = cp.empty(nb * wpb * P, dtype=cp.float64)
        st = cp.zeros(2, dtype=cp.float64)
        bar = cp.zeros(2, dtype=cp.uint32)  # the grid barrier's word and its error word
        stream = cp.cuda.Stream(non_blocking=True)
        cp.cuda.Device(device_id).synchronize()  # w, v as the work queued before left them
        with stream:
            for s0 in range(0, steps, config.PERSISTENT_STEPS):
                s1 = min(steps, s0 + config.PERSISTENT_STEPS)
                launch_persistent(fn, _amd_kernel(r), nb, threads, (
                    F, res, np.int64(n), np.int32(r), w, v, logv, Ftw, Ftv, part, wpart, st,
                    bar, np.int64(t0), np.int64(s0), np.int64(s1), np.int64(steps),
                    np.float64(eta),
                ), stream, bar, device_id)
                if progress is not None:
                    progress(s1)


def amd_rounding_tolerance(F, res, steps: int, eta: float | None = None) -> float:
    """A relative tolerance for comparing AMD weights from two backends on K' = F F^T +
    diag(res) after ``steps`` steps of size ``eta`` (default AMD's ``1 / (8 max_i K'_ii)``):
    how far rounding F to float32 alone moves the weights, to first order.

    Every backend steps on F rounded to float32 (relative error u = 2^-24 an entry), and the
    device and the C++ then differ only by their double sums' order and the last bits of exp
    and log (~1e-16 relative, far below u), so a correct kernel is well inside this bound and a
    wrong one (a missed term, a skipped warp) far outside it. The derivation: with |dF_ik| <=
    u |F_ik| and z_t a probability vector, the step's gradient g = K' z_t moves by
    |dg_i| <= |dF_i . F^T z| + |F_i . dF^T z| <= 2 u A, A = max_i ||F_i||_1 max_jk |F_jk|; step t
    adds 2 t eta g_i to log v_i and its normaliser moves by at most as much, so log v_i moves by
    at most 8 t eta u A; summed over t = 1..T that is 4 eta u A T (T + 1), and v, and w (an
    average of v's), move by at most its expm1 relative. First order: the feedback of the
    moved weights on z_t is left out (mirror descent damps it)."""
    F = np.asarray(F, dtype=np.float64)
    res = np.asarray(res, dtype=np.float64)
    T = int(steps)
    if eta is None:
        eta = 1.0 / (8.0 * float(np.max(np.sum(F * F, axis=1) + res)))
    Fa = np.abs(F)
    A = float(np.max(np.sum(Fa, axis=1)) * np.max(Fa)) if F.size else 0.0
    return float(np.expm1(4.0 * float(eta) * 2.0 ** -24 * A * T * (T + 1)))
