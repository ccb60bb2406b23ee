"""The ``cpu`` backend: the C++ of src_cpp/ (:mod:`stein_coreset.engine.native`) on host
copies of the arrays, each call on a team of the kernel matrix's ``n_threads``.

It is what "auto" picks for NumPy arrays. On another namespace it works on one host copy of the
points and returns results in the caller's namespace; AMD's fused loop needs NumPy arrays.
"""

from __future__ import annotations

import numpy as np

from .. import _array_api as aa
from . import drivers, native
from .backend import register
from .xp import XpBackend

__all__ = ["CpuBackend"]


@register
class CpuBackend(XpBackend):
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
        "dksd_pass": "C++",
    }

    def native_namespace(self, xp) -> bool:
        return aa.is_numpy(xp)

    def supports(self, op: str, xp=None, **ctx) -> bool:
        if op == "amd" and xp is not None and not aa.is_numpy(xp):
            return False
        return super().supports(op, **ctx)

    def peak_arrays(self, K) -> int:
        """The output, and its copy into another namespace."""
        return 1 if isinstance(K.U, np.ndarray) else 2

    def block(self, K, rows, cols=None):
        out = native.gram(K, aa.host_indices(rows), None if cols is None else aa.host_indices(cols))
        return aa.from_host(out, xp=K.xp, device=K.device)

    def dense(self, K):
        return aa.from_host(native.gram(K, np.arange(K.n)), xp=K.xp, device=K.device)

    def column(self, K, j: int):
        return aa.from_host(native.column(K, j), xp=K.xp, device=K.device)

    def matvec(self, K, w, block_size: int | None = None):
        if w.ndim != 1:
            return super().matvec(K, w, block_size)
        return aa.from_host(native.matvec(K, aa.to_host(w)), like=w)

    def quad(self, K, w) -> float:
        return native.quad(K, aa.to_host(w))

    def row_means(self, K, rows):
        return aa.from_host(native.row_means(K, rows), xp=K.xp, device=K.device)

    def coreset_sums(self, K, C: np.ndarray) -> np.ndarray:
        return native.coreset_sums(K, C)

    def stein_thinning(self, K, m: int, progress: bool = False) -> np.ndarray:
        return native.stein_thinning(K, m, progress)

    def weighted_rpcholesky(self, K, w, rank: int, rows: int, u: np.ndarray, progress: bool):
        return drivers.weighted_rpcholesky(K, w, rank, rows, u, progress,
                                           native.weighted_rpcholesky_steps)

    def lowrank_residual(self, F, diag, n_threads: int):
        if not isinstance(F, np.ndarray):
            return super().lowrank_residual(F, diag, n_threads)
        return native.lowrank_residual(F, diag, n_threads)

    def lowrank_quad(self, op, w, rows=None) -> float:
        if not isinstance(op.F, np.ndarray):
            return super().lowrank_quad(op, w, rows)
        return native.lowrank_quad(op.F, op.residual, w, rows, op.n_threads)

    def factor32(self, op):
        if not isinstance(op.F, np.ndarray):
            return super().factor32(op)
        return native.factor32(op.F, op.n_threads)

    def amd(self, op, steps: int, w0, eta: float, progress: bool, n_threads: int, track,
            check_every: int):
        """The fused C++ loop (src_cpp/amd.cpp): each step reads the float32 F once, parallel
        over fixed row chunks (results independent of the thread count)."""
        if not (hasattr(op, "factor32") and isinstance(op.F, np.ndarray)):
            raise ValueError("backend='cpu' needs a LowRankPlusDiagonal on NumPy arrays")
        return drivers.amd(op, steps, w0, eta, progress, n_threads, track, check_every,
                           self.factor32, native.amd_lowrank)

    def dksd_pass(self, U, V, kind, F, comps, need_grad, block_size=None, n_threads: int = 1):
        """The C++ pass (src_cpp/dksd.hpp, a team of ``n_threads`` over row chunks) on host
        copies, one transfer each way (a no-op for NumPy); the value does not depend on
        ``n_threads``."""
        xp, dev = aa.namespace(U=U)
        total, Gv, Gf = native.dksd_pass(aa.to_host(U), aa.to_host(V), aa.to_host(F),
                                         kind == "full", *native.dksd_components(comps),
                                         bool(need_grad), n_threads)
        if not need_grad:
            return total, Gv, Gf
        return total, aa.from_host(Gv, xp=xp, device=dev), aa.from_host(Gf, xp=xp, device=dev)
