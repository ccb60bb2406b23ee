"""The ``cuda`` backend: the CUDA kernels of :mod:`stein_coreset._cuda` (compiled at run time by
NVRTC) on CuPy arrays, the greedy loops on the device with the pick never leaving it.

It is what "auto" picks for CuPy arrays. Where the device has no version of a loop for the
sizes asked, the call is handed on: KT-SPLIT rounds of more than :data:`MAX_CUDA_CORESETS`
coresets, and KT-Swap-LS under ``STEIN_CORESET_CUDA_LOOP=graph``, run in C++ on a host copy;
weighted RPCholesky above rank ``WRPC_MAX_RANK`` (or under the graph loops), and AMD above
the fused kernel's rank (or under ``STEIN_CORESET_CUDA_AMD=xp``), run the array-API
reference on the device. Those two switches are the only choices between two device
implementations that no GPU timing has settled yet; they are read here and in
:mod:`stein_coreset._cuda` only (docs/gpu.md).
"""

from __future__ import annotations

import numpy as np

from .. import _array_api as aa
from .. import _cuda
from .._progress import counter_bar
from . import drivers, native
from .backend import Backend, get_backend, register
from .xp import XpBackend

__all__ = ["CudaBackend", "MAX_CUDA_CORESETS"]

#: Most coresets one KT-SPLIT round runs side by side on the device (CUDA's grid.y limit);
#: deeper splits run in C++.
MAX_CUDA_CORESETS = _cuda.MAX_GRID_Y


@register
class CudaBackend(XpBackend):
    """The CUDA kernels (see the module docstring)."""

    name = "cuda"
    compiled = True
    how = {
        "block": "CUDA",
        "column": "CUDA",
        "matvec": "CUDA",
        "quad": "CUDA",
        "row_means": "CUDA",
        "coreset_sums": "CUDA",
        "stein_thinning": "CUDA, persistent",
        "kt_split": "CUDA, a round per launch",
        "kt_swap": "CUDA",
        "kt_swap_ls": "CUDA, persistent",
        "weighted_rpcholesky": "CUDA, persistent",
        "amd": "CUDA, fused, float32 F",
        "dksd_pass": "CUDA, a thread per row",
    }

    def native_namespace(self, xp) -> bool:
        return aa.is_cupy(xp)

    def accepts(self, xp) -> str | None:
        return None if aa.is_cupy(xp) else "backend 'cuda' needs CuPy arrays"

    def supports(self, op: str, rank=None, coresets=None, **ctx) -> bool:
        if op == "kt_split" and coresets is not None and int(coresets) > MAX_CUDA_CORESETS:
            return False
        if op == "kt_swap_ls":
            return _cuda.loop_mode() == "persistent"
        if op == "weighted_rpcholesky":
            return _cuda.loop_mode() == "persistent" and (
                rank is None or int(rank) <= _cuda.WRPC_MAX_RANK)
        if op == "amd":
            return _cuda.amd_mode() == "fused" and (rank is None or _cuda.amd_lowrank_fits(rank))
        return super().supports(op, **ctx)

    def fallback(self, op: str) -> Backend:
        return get_backend("cpu" if op in ("kt_split", "kt_swap_ls") else "xp")

    def kernel(self, K) -> _cuda.CudaKernel:
        """The :class:`stein_coreset._cuda.CudaKernel` of K (cached)."""
        if "cuda" not in K._cache:
            K._cache["cuda"] = _cuda.CudaKernel(
                int(K.base.code), float(K.base.sigma), float(K.base.beta),
                K.U, K.T, K.mean, K.mean_all,
            )
        return K._cache["cuda"]

    def peak_arrays(self, K) -> int:
        return 1

    def block(self, K, rows, cols=None):
        rows = aa.as_index_array(K.xp, rows, K.device)
        cols = None if cols is None else aa.as_index_array(K.xp, cols, K.device)
        return self.kernel(K).gram(rows, cols)

    def dense(self, K):
        return self.block(K, K.xp.arange(K.n, dtype=K.xp.int64, device=K.device))

    def matvec(self, K, w, block_size: int | None = None):
        if w.ndim != 1:
            return super().matvec(K, w, block_size)
        return self.kernel(K).matvec(w)

    def stein_thinning(self, K, m: int, progress: bool = False) -> np.ndarray:
        bar = counter_bar("Stein thinning", m) if progress else None
        try:
            return self.kernel(K).stein_thinning(int(m), bar.advance_to if bar else None)
        finally:
            if bar is not None:
                bar.close()

    def kt_split(self, K, idx, t: int, delta: float, seed: int, uniforms=None,
                 progress: bool = False) -> np.ndarray:
        if not self.supports("kt_split", coresets=1 << int(t)):
            return super().kt_split(K, idx, t, delta, seed, uniforms, progress)
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        if uniforms is None:
            uniforms = native.kt_split_uniforms(idx.size, int(t), seed)
        return self.kernel(K).kt_split(idx, int(t), float(delta), uniforms)

    def kt_halvings(self, K, blocks, delta: float, seeds, progress: bool = False) -> np.ndarray:
        blocks = np.ascontiguousarray(blocks, dtype=np.int64)
        if not self.supports("kt_split", coresets=blocks.shape[0]):
            return super().kt_halvings(K, blocks, delta, seeds, progress)
        seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
        uniforms = native.kt_halving_uniforms(blocks.shape[1], seeds)
        return self.kernel(K).kt_halvings(blocks, float(delta), uniforms)

    def kt_swap_refine(self, K, I, passes: int, sorted_sweeps: bool = False,
                       progress: bool = False) -> int:
        return self.kernel(K).kt_swap_refine(I, int(passes), bool(sorted_sweeps))

    def kt_swap_ls(self, K, dense, order, fmt: int) -> float:
        if not self.supports("kt_swap_ls"):
            return super().kt_swap_ls(K, dense, order, fmt)
        return self.kernel(K).kt_swap_ls(dense, order, int(fmt) == 0)

    def weighted_rpcholesky(self, K, w, rank: int, rows: int, u: np.ndarray, progress: bool):
        if not self.supports("weighted_rpcholesky", rank=rank):
            return super().weighted_rpcholesky(K, w, rank, rows, u, progress)

        def steps(K, sw, d, Ft, pivots, i0, i1, u, tol):
            return self.kernel(K).weighted_rpcholesky(sw, d, Ft, pivots, int(i0), int(i1), u,
                                                      float(tol))

        return drivers.weighted_rpcholesky(K, w, rank, rows, u, progress, steps)

    def amd(self, op, steps: int, w0, eta: float, progress: bool, n_threads: int, track,
            check_every: int):
        """The fused persistent kernel (:func:`stein_coreset._cuda.amd_lowrank`) for a
        LowRankPlusDiagonal whose rank fits it; else the reference loop on the device."""
        if not (hasattr(op, "factor32") and self.supports("amd", rank=int(op.F.shape[1]))):
            return super().amd(op, steps, w0, eta, progress, n_threads, track, check_every)

        def lowrank_steps(F, res, w, v, t0, k, eta, n_threads):
            _cuda.amd_lowrank(F, res, w, v, int(t0), int(k), float(eta))

        return drivers.amd(op, steps, w0, eta, progress, n_threads, track, check_every,
                           self.factor32, lowrank_steps)

    def dksd_pass(self, U, V, kind, F, comps, need_grad, block_size=None, n_threads: int = 1):
        """The CUDA rows on the arrays' device (:func:`stein_coreset._cuda.dksd_pass`)."""
        return _cuda.dksd_pass(U, V, F, kind == "full", *native.dksd_components(comps),
                               bool(need_grad))
