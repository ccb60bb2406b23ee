"""The ``cuda`` backend: the CUDA kernels of ``src_cuda/`` (compiled at run time by NVRTC,
:mod:`.source`) on CuPy arrays, the greedy loops on the device with the pick never leaving it.

It is what "auto" picks for CuPy arrays. Modules: :mod:`.config` (launch geometry and the two
switches below), :mod:`.source` (the sources and their compilation), :mod:`.launch` (persistent
launches), :mod:`.kernel` (:class:`~.kernel.CudaKernel`: k_P and the loops on one device),
:mod:`.amd` (the fused AMD kernel), :mod:`.dksd` (the estimators' DKSD pass), :mod:`.nvrtc`
(NVRTC without CuPy, for compile checks).

Where the device has no version of an operation for the sizes asked, its declared fallback runs
it: KT-SPLIT rounds of more than :data:`~.config.MAX_GRID_Y` coresets, and KT-Swap-LS under
``STEIN_CORESET_CUDA_LOOP=graph``, run in C++ on a host copy (``cpu``); weighted RPCholesky
above rank :data:`~.config.WRPC_MAX_RANK` (or under the graph loops), AMD above the fused
kernel's rank (or under ``STEIN_CORESET_CUDA_AMD=xp``), the products that combine blocks
(columns, w^T K w, row means, coreset sums, a K w of several columns), the low-rank operator's
helpers and the median distance run the reference on the device (``xp``), reading the CUDA
blocks. The two switches are the only choices between two device implementations that no GPU
timing has settled yet (docs/gpu.md).
"""

from __future__ import annotations

import numpy as np

from ... import _array_api as aa
from ..._progress import counter_bar
from .. import drivers
from ..cpu import bridge
from ..protocol import Backend, register
from . import config
from .amd import amd_lowrank, amd_lowrank_fits
from .dksd import dksd_pass
from .kernel import CudaKernel

__all__ = ["CudaBackend"]


@register
class CudaBackend(Backend):
    """The CUDA kernels (see the module docstring)."""

    name = "cuda"
    compiled = True
    how = {
        "block": "CUDA",
        "matvec": "CUDA",
        "stein_thinning": "CUDA, persistent",
        "kt_split": "CUDA, a round per launch",
        "kt_swap": "CUDA",
        "kt_swap_ls": "CUDA, persistent",
        "weighted_rpcholesky": "CUDA, persistent",
        "amd": "CUDA, fused, float32 F",
        "dksd_pass": "CUDA, a thread per row",
    }
    fallbacks = {"kt_split": "cpu", "kt_swap_ls": "cpu", "recombination": "cpu",
                 "simplex_weights": "cpu"}

    def native_namespace(self, xp) -> bool:
        return aa.is_cupy(xp)

    def accepts(self, xp) -> str | None:
        return None if aa.is_cupy(xp) else "backend 'cuda' needs CuPy arrays"

    def supports(self, op: str, rank=None, coresets=None, ndim=None, lowrank=True,
                 **ctx) -> bool:
        if op == "kt_split" and coresets is not None and int(coresets) > config.MAX_GRID_Y:
            return False
        if op == "kt_swap_ls" and config.loop_mode() != "persistent":
            return False
        if op == "weighted_rpcholesky" and not (config.loop_mode() == "persistent" and (
                rank is None or int(rank) <= config.WRPC_MAX_RANK)):
            return False
        if op == "amd" and not (lowrank and config.amd_mode() == "fused" and (
                rank is None or amd_lowrank_fits(rank))):
            return False
        if op == "matvec" and ndim is not None and ndim != 1:
            return False
        return super().supports(op, **ctx)

    def kernel(self, K) -> CudaKernel:
        """The :class:`~.kernel.CudaKernel` of K (cached in K)."""
        if "cuda" not in K._cache:
            K._cache["cuda"] = CudaKernel(
                int(K.base.code), float(K.base.sigma), float(K.base.beta),
                K.U, K.T, K.mean, K.mean_all,
            )
        return K._cache["cuda"]

    # ---- kernel products ------------------------------------------------------------------
    def peak_arrays(self, K) -> int:
        return 1

    def block(self, K, rows, cols=None):
        rows = aa.as_index_array(K.xp, rows, K.device)
        cols = None if cols is None else aa.as_index_array(K.xp, cols, K.device)
        return self.kernel(K).gram(rows, cols)

    def dense(self, K):
        return self.block(K, K.xp.arange(K.n, dtype=K.xp.int64, device=K.device))

    def matvec(self, K, w, block_size: int | None = None):
        return self.kernel(K).matvec(w)

    # ---- the greedy loops -----------------------------------------------------------------
    def stein_thinning(self, K, m: int, progress: bool = False) -> np.ndarray:
        bar = counter_bar("Stein thinning", m) if progress else None
        try:
            return self.kernel(K).stein_thinning(int(m), bar.advance_to if bar else None)
        finally:
            if bar is not None:
                bar.close()

    def kt_split(self, K, idx, t: int, delta: float, seed: int, uniforms=None,
                 progress: bool = False) -> np.ndarray:
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        if uniforms is None:  # the C++ random streams, so that both backends split alike
            uniforms = bridge.kt_split_uniforms(idx.size, int(t), seed)
        return self.kernel(K).kt_split(idx, int(t), float(delta), uniforms)

    def kt_halvings(self, K, blocks, delta: float, seeds, progress: bool = False) -> np.ndarray:
        blocks = np.ascontiguousarray(blocks, dtype=np.int64)
        seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
        uniforms = bridge.kt_halving_uniforms(blocks.shape[1], seeds)
        return self.kernel(K).kt_halvings(blocks, float(delta), uniforms)

    def kt_swap_refine(self, K, I, passes: int, sorted_sweeps: bool = False,
                       progress: bool = False) -> int:
        return self.kernel(K).kt_swap_refine(I, int(passes), bool(sorted_sweeps))

    def kt_swap_ls(self, K, dense, order, fmt: int) -> float:
        return self.kernel(K).kt_swap_ls(dense, order, int(fmt) == 0)

    def weighted_rpcholesky(self, K, w, rank: int, rows: int, u: np.ndarray, progress: bool):
        def steps(K, sw, d, Ft, pivots, i0, i1, u, tol):
            return self.kernel(K).weighted_rpcholesky(sw, d, Ft, pivots, int(i0), int(i1), u,
                                                      float(tol))

        return drivers.weighted_rpcholesky(K, w, rank, rows, u, progress, steps)

    # ---- AMD on a low-rank-plus-diagonal operator -----------------------------------------
    def amd(self, op, steps: int, w0, eta: float, progress: bool, n_threads: int, track,
            check_every: int):
        """The fused persistent kernel (:func:`.amd.amd_lowrank`) for a LowRankPlusDiagonal
        whose rank fits it."""

        def lowrank_steps(F, res, w, v, t0, k, eta, n_threads):
            amd_lowrank(F, res, w, v, int(t0), int(k), float(eta))

        return drivers.amd(op, steps, w0, eta, progress, n_threads, track, check_every,
                           lowrank_steps)

    # ---- the estimators' DKSD pass --------------------------------------------------------
    def dksd_pass(self, U, V, kind, F, comps, need_grad, block_size=None, n_threads: int = 1):
        """The CUDA rows on the arrays' device (:func:`.dksd.dksd_pass`)."""
        return dksd_pass(U, V, F, kind == "full", *drivers.compiled_components(comps),
                         bool(need_grad))
