"""The ``cpu`` backend: the C++ of ``src_cpp/`` (through :mod:`.bridge`) on host copies of the
arrays, each call on a team of the kernel matrix's ``n_threads``.

It is what "auto" picks for NumPy arrays. On another namespace it works on one host copy of the
points and returns results in the caller's namespace; weighted RPCholesky's chunked loop, AMD's
fused loop, the low-rank operator's helpers and the median distance need NumPy arrays
(elsewhere they are handed to the reference), and so does a K w with several columns. It is
also the declared fallback of the loops that have no array-API form (KT-SPLIT, KT-Swap,
KT-Swap-LS, Recombination, the weights' QP).
"""

from __future__ import annotations

import numpy as np

from ... import _array_api as aa
from .. import drivers
from ..protocol import Backend, register
from . import bridge

__all__ = ["CpuBackend"]


@register
class CpuBackend(Backend):
    """The C++ evaluator and loops (see the module docstring)."""

    name = "cpu"
    compiled = True
    how = {
        "block": "C++, SIMD rows",
        "column": "C++",
        "matvec": "C++, K's upper triangle",
        "quad": "C++, K's upper triangle",
        "row_means": "C++",
        "coreset_sums": "C++",
        "stein_thinning": "C++",
        "kt_split": "C++",
        "kt_swap": "C++",
        "kt_swap_ls": "C++",
        "weighted_rpcholesky": "C++",
        "amd": "C++, fused, float32 F",
        "lowrank": "C++",
        "recombination": "C++",
        "simplex_weights": "C++",
        "median_distance": "C++",
        "dksd_pass": "C++",
        "stein_moments": "C++, two passes over the rows",
    }

    def native_namespace(self, xp) -> bool:
        return aa.is_numpy(xp)

    def supports(self, op: str, xp=None, ndim=None, lowrank=True, **ctx) -> bool:
        host_only = ("weighted_rpcholesky", "amd", "lowrank", "median_distance",
                     "stein_moments")
        if op in host_only and xp is not None and not aa.is_numpy(xp):
            return False
        if op == "amd" and not lowrank:
            return False
        if op == "matvec" and ndim is not None and ndim != 1:
            return False
        return super().supports(op, **ctx)

    # ---- kernel products ------------------------------------------------------------------
    def peak_arrays(self, K) -> int:
        """The output, and its copy into another namespace."""
        return 1 if isinstance(K.U, np.ndarray) else 2

    def block(self, K, rows, cols=None):
        out = bridge.gram(K, aa.host_indices(rows), None if cols is None else aa.host_indices(cols))
        return aa.from_host(out, xp=K.xp, device=K.device)

    def dense(self, K):
        return aa.from_host(bridge.gram(K, np.arange(K.n)), xp=K.xp, device=K.device)

    def column(self, K, j: int):
        return aa.from_host(bridge.column(K, j), xp=K.xp, device=K.device)

    def matvec(self, K, w, block_size: int | None = None):
        return aa.from_host(bridge.matvec(K, aa.to_host(w)), like=w)

    def quad(self, K, w) -> float:
        return bridge.quad(K, aa.to_host(w))

    def row_means(self, K, rows):
        return aa.from_host(bridge.row_means(K, rows), xp=K.xp, device=K.device)

    def coreset_sums(self, K, C: np.ndarray) -> np.ndarray:
        return bridge.coreset_sums(K, C)

    # ---- the greedy loops -----------------------------------------------------------------
    def stein_thinning(self, K, m: int, progress: bool = False) -> np.ndarray:
        return bridge.stein_thinning(K, m, progress)

    def kt_split(self, K, idx, t: int, delta: float, seed: int, uniforms=None,
                 progress: bool = False) -> np.ndarray:
        return bridge.kt_split(K, idx, t, delta, seed, uniforms, progress)

    def kt_halvings(self, K, blocks, delta: float, seeds, progress: bool = False) -> np.ndarray:
        return bridge.kt_halvings(K, blocks, delta, seeds, progress)

    def kt_swap_refine(self, K, I, passes: int, sorted_sweeps: bool = False,
                       progress: bool = False) -> int:
        return bridge.kt_swap_refine(K, I, passes, sorted_sweeps, progress)

    def kt_swap_ls(self, K, dense, order, fmt: int) -> float:
        return bridge.kt_swap_ls(K, dense, order, fmt)

    def weighted_rpcholesky(self, K, w, rank: int, rows: int, u: np.ndarray, progress: bool):
        return drivers.weighted_rpcholesky(K, w, rank, rows, u, progress,
                                           bridge.weighted_rpcholesky_steps)

    # ---- AMD on a low-rank-plus-diagonal operator -----------------------------------------
    def lowrank_residual(self, F, diag, n_threads: int):
        return bridge.lowrank_residual(F, diag, n_threads)

    def lowrank_quad(self, op, w, rows=None) -> float:
        return bridge.lowrank_quad(op.F, op.residual, w, rows, op.n_threads)

    def factor32(self, op):
        return bridge.factor32(op.F, op.n_threads)

    def amd(self, op, steps: int, w0, eta: float, progress: bool, n_threads: int, track,
            check_every: int):
        """The fused C++ loop (src_cpp/amd.cpp) on a LowRankPlusDiagonal of NumPy arrays: each
        step reads the float32 F once, parallel over fixed row chunks (results independent of
        the thread count)."""
        return drivers.amd(op, steps, w0, eta, progress, n_threads, track, check_every,
                           bridge.amd_lowrank)

    # ---- host-side steps with no matrix ---------------------------------------------------
    def recombination(self, A, x0, points_major: bool = False, n_threads: int = 1):
        return bridge.recombination(A, x0, points_major, n_threads)

    def simplex_qp(self, KJ, w0, max_iter: int):
        return bridge.simplex_qp(KJ, w0, max_iter)

    def affine_weights(self, KJ):
        return bridge.affine_weights(KJ)

    def median_pairwise_distance(self, U, n_threads: int = 1) -> float:
        """In C++ (src_cpp/pairwise.hpp), summed coordinate by coordinate exactly as the
        reference sums them: the same value bit for bit, for any ``n_threads``."""
        Uh = np.ascontiguousarray(aa.to_host(U), dtype=np.float64)
        return bridge.median_pairwise_distance(Uh, n_threads)

    # ---- the estimators' DKSD pass --------------------------------------------------------
    def dksd_pass(self, U, V, kind, F, comps, need_grad, block_size=None, n_threads: int = 1):
        """The C++ pass (src_cpp/dksd.hpp, a team of ``n_threads`` over row chunks) on host
        copies, one transfer each way (a no-op for NumPy); the value does not depend on
        ``n_threads``."""
        xp, dev = aa.namespace(U=U)
        total, Gv, Gf = bridge.dksd_pass(aa.to_host(U), aa.to_host(V), aa.to_host(F),
                                         kind == "full", *drivers.compiled_components(comps),
                                         bool(need_grad), n_threads)
        if not need_grad:
            return total, Gv, Gf
        return total, aa.from_host(Gv, xp=xp, device=dev), aa.from_host(Gf, xp=xp, device=dev)

    # ---- the input diagnostics ------------------------------------------------------------
    def stein_moments(self, X, S, w=None):
        """In C++ (src_cpp/stein_moments.hpp) on the host arrays, serial: the sums taken row by
        row (the reference's pairwise sums agree to rounding)."""
        return bridge.stein_moments(X, S, w)
