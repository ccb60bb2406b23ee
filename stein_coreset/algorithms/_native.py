"""The engine's loops: the serial steps of the algorithms, run by the backend the kernel
matrix chose (:attr:`~stein_coreset.engine.KernelMatrix.backend`): C++ (src_cpp/, through
``_core``) for "cpu" and "xp", CUDA kernels on the device (:mod:`stein_coreset._cuda`) for
"cuda" where one exists (Stein thinning, KT-SPLIT, KT-Swap). This module and
:class:`~stein_coreset.engine.KernelMatrix` are the only callers of ``_core`` and ``_cuda``;
algorithms never test the backend themselves.

Each function takes the kernel matrix (its cached ``_core.Kernel`` handle and its ``n_threads``)
and host NumPy arrays, and returns host NumPy arrays; the callers do the namespace conversion.
Functions without a kernel matrix take ``n_threads`` (already an int, see
:func:`stein_coreset._threads.effective_n_threads`). Every parallel loop runs on a team of that
size owned by the call (src_cpp/parallel.hpp); results do not depend on it.
"""

from __future__ import annotations

import numpy as np

from .. import _array_api as aa
from .. import _core
from .._cuda import WRPC_MAX_RANK, amd_lowrank_fits, amd_mode, loop_mode
from .._cuda import amd_lowrank as cuda_amd_lowrank
from .._cuda import dksd_pass as cuda_dksd_pass
from .._progress import counter_bar, polled
from ..engine import KernelMatrix, resolve_backend

#: Most coresets one KT-SPLIT round runs side by side on the device (CUDA's grid.y limit);
#: deeper splits run in C++.
MAX_CUDA_CORESETS = 65535

__all__ = [
    "stein_thinning",
    "kt_split",
    "kt_halvings",
    "kt_swap_refine",
    "kt_swap_ls",
    "recombination",
    "amd_lowrank",
    "lowrank_residual",
    "factor32",
    "lowrank_quad",
    "weighted_rpcholesky",
    "dksd_pass",
]


def _polled(desc: str, total: int, progress: bool, unit: str = "steps"):
    """A bar over ``total`` units of the C++ loop run inside the block (``_core``'s counter)."""
    return polled(desc, total, _core.progress_units, _core.progress_reset, progress, unit)


def stein_thinning(K: KernelMatrix, m: int, progress: bool = False) -> np.ndarray:
    """Greedy Stein thinning (Alg. D.1): (m,) int64 indices in selection order; a bar over the
    steps with ``progress``."""
    if K.backend == "cuda":
        bar = counter_bar("Stein thinning", m) if progress else None
        try:
            return K.cuda().stein_thinning(int(m), bar.advance_to if bar else None)
        finally:
            if bar is not None:
                bar.close()
    with _polled("Stein thinning", m, progress):
        out = _core.stein_thinning(K.handle(), int(m), K.n_threads)
    return np.asarray(out, dtype=np.int64)


def kt_split_units(N: int, t: int) -> int:
    """The progress units of a C++ KT-SPLIT of N points in t rounds (src_cpp/progress.hpp: pair k
    of a halving counts k + 1, its walk's length)."""
    units, size = 0, int(N)
    for j in range(int(t)):
        pairs = size // 2
        units += (1 << j) * pairs * (pairs + 1) // 2
        size = pairs
    return units


def kt_split(K: KernelMatrix, idx: np.ndarray, t: int, delta: float, seed: int, uniforms=None,
             progress: bool = False):
    """KT-SPLIT (Alg. D.2): (2^t, size) int64 coresets of the host index sequence ``idx``.

    Both backends use the same uniforms for a seed (``_core.kt_split_uniforms``), so they split
    alike up to the rounding of the walk's sums. ``progress``: a bar over the C++ walk."""
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    if K.backend == "cuda" and (1 << int(t)) <= MAX_CUDA_CORESETS:
        if uniforms is None:
            uniforms = _core.kt_split_uniforms(idx.size, int(t), seed)
        return K.cuda().kt_split(idx, int(t), float(delta), uniforms)
    with _polled("KT-SPLIT", kt_split_units(idx.size, t), progress, "entries"):
        return _core.kt_split(K.handle(), idx, int(t), float(delta), seed, uniforms, K.n_threads)


def kt_halvings(K: KernelMatrix, blocks: np.ndarray, delta: float, seeds: np.ndarray,
                progress: bool = False) -> np.ndarray:
    """B independent KT-SPLIT halvings (Alg. D.2, t = 1) of the rows of the (B, N) host index
    array ``blocks`` as one round, row l as ``kt_split(K, blocks[l], 1, delta, seeds[l])``
    halves it: (B, 2, N // 2) int64 halves. ``progress``: a bar over the C++ walks."""
    blocks = np.ascontiguousarray(blocks, dtype=np.int64)
    seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
    B, N = blocks.shape
    if K.backend == "cuda" and B <= MAX_CUDA_CORESETS:
        return K.cuda().kt_halvings(blocks, float(delta), _core.kt_halving_uniforms(N, seeds))
    with _polled("KT-SPLIT", B * kt_split_units(N, 1), progress, "entries"):
        return _core.kt_halvings(K.handle(), blocks, float(delta), seeds, K.n_threads)


def kt_swap_refine(
    K: KernelMatrix, I: np.ndarray, passes: int, sorted_sweeps: bool = False,
    progress: bool = False,
) -> int:
    """Greedy KT-Swap (Alg. D.3) on the int64 coreset ``I``, in place (sorted before every sweep
    when ``sorted_sweeps``); the number of swaps. ``progress``: a bar over the C++ swaps (a
    sweep without a swap ends the loop and fills the bar)."""
    if K.backend == "cuda":
        return K.cuda().kt_swap_refine(I, int(passes), bool(sorted_sweeps))
    with _polled("KT-Swap", int(passes) * I.size, progress, "swaps"):
        return _core.kt_swap_refine(K.handle(), I, int(passes), K.n_threads, bool(sorted_sweeps))


def kt_swap_ls(K: KernelMatrix, dense: np.ndarray, order: np.ndarray, fmt: int) -> float:
    """KT-Swap-LS (Alg. G.2) in place on the dense (n,) weights; returns w^T K w. On the
    device with the persistent loops; else in C++ (a host copy of the points for CuPy)."""
    if K.backend == "cuda" and loop_mode() == "persistent":
        return K.cuda().kt_swap_ls(dense, order, int(fmt) == 0)
    return _core.kt_swap_ls(
        K.handle(), dense, np.ascontiguousarray(order, dtype=np.int64), int(fmt), K.n_threads
    )


def recombination(A: np.ndarray, x0: np.ndarray, points_major: bool = False,
                  n_threads: int = 1) -> np.ndarray:
    """Recombination (Alg. G.1): x >= 0 with A x = A x0 and at most rank(A) nonzeros."""
    return _core.recombination(A, np.ascontiguousarray(x0, dtype=np.float64), bool(points_major),
                               int(n_threads))


def simplex_qp(KJ: np.ndarray, w0: np.ndarray, max_iter: int):
    """The active-set QP of ``weights.simplex_weights`` in C++ (serial, updated Cholesky):
    ``(w, steps)``, or ``(None, -1)`` when it needs the eigendecomposition fallback."""
    return _core.simplex_qp(np.ascontiguousarray(KJ, dtype=np.float64),
                            np.ascontiguousarray(w0, dtype=np.float64), int(max_iter))


def affine_weights(KJ: np.ndarray):
    """The Cholesky path of ``weights.affine_weights`` in C++ (serial); None: use the
    eigendecomposition fallback."""
    return _core.affine_weights(np.ascontiguousarray(KJ, dtype=np.float64))


def amd_backend(backend: str, xp, r: int) -> str:
    """Who runs AMD's steps (Alg. F.2) on a rank-r F F^T + diag(res) held in namespace ``xp``,
    asked for ``backend`` (the engine's, :func:`stein_coreset.engine.resolve_backend`: "cuda"
    on arrays other than CuPy's is refused): "cpu" (the C++ loop, NumPy arrays), "cuda" (the
    fused kernel, CuPy arrays, when :func:`stein_coreset._cuda.amd_mode` is "fused", its
    default, and the rank fits) or "xp" (the array-API loop, two products with F per step;
    also what "cpu" gets on arrays that are not NumPy's, which :func:`amd` refuses)."""
    name = resolve_backend(backend, xp)
    if name == "cpu" and aa.is_numpy(xp):
        return "cpu"
    if name == "cuda" and amd_mode() == "fused" and amd_lowrank_fits(r):
        return "cuda"
    return "xp"


def amd_lowrank(F, res, w, v, t0: int, steps: int, eta: float, n_threads: int) -> None:
    """AMD steps t0+1..t0+steps (Alg. F.2) on F F^T + diag(res); (w, v) updated in place: in
    C++ for NumPy arrays, by the fused CUDA kernel for CuPy arrays (:func:`amd_backend`)."""
    if isinstance(F, np.ndarray):
        _core.amd_lowrank(F, res, w, v, int(t0), int(steps), float(eta), int(n_threads))
    else:
        cuda_amd_lowrank(F, res, w, v, int(t0), int(steps), float(eta))


def lowrank_residual(F, diag, n_threads: int):
    """``diag - rowsum(F * F)`` for host arrays, in C++ on the thread team (src_cpp/amd.hpp),
    without an (n, r) temporary."""
    return _core.lowrank_residual(np.asarray(F, dtype=np.float64),
                                  np.ascontiguousarray(diag, dtype=np.float64), int(n_threads))


def factor32(F, n_threads: int):
    """``(G, e)`` of :meth:`~stein_coreset.algorithms.amd.LowRankPlusDiagonal.factor32` for a
    host F, in C++ on the thread team (src_cpp/amd.hpp): the same bits as NumPy's."""
    G, e = _core.factor32(np.asarray(F, dtype=np.float64), int(n_threads))
    return G, int(e)


def lowrank_quad(F, res, c, rows, n_threads: int) -> float:
    """``c^T K'_JJ c`` of K' = F F^T + diag(res) on host arrays (J = rows, or all rows when
    None), summed in C++ in a fixed order (src_cpp/amd.hpp)."""
    return float(_core.lowrank_quad(np.asarray(F, dtype=np.float64),
                                    np.ascontiguousarray(res, dtype=np.float64),
                                    np.ascontiguousarray(c, dtype=np.float64), rows,
                                    int(n_threads)))


def has_rpcholesky_loop(K: KernelMatrix, rank: int) -> bool:
    """Whether weighted RPCholesky's steps at this rank run as a compiled loop on K's backend:
    the C++ ("cpu"), or the persistent CUDA kernel ("cuda" with the persistent loops,
    :func:`stein_coreset._cuda.loop_mode`, and rank <= WRPC_MAX_RANK). Else the caller runs
    the array-API loop."""
    if K.backend == "cpu":
        return True
    return K.backend == "cuda" and loop_mode() == "persistent" and int(rank) <= WRPC_MAX_RANK


def weighted_rpcholesky(K: KernelMatrix, sw, d, Ft, pivots, i0: int, i1: int, u, tol: float) -> int:
    """Steps i0..i1-1 of weighted RPCholesky (Alg. F.1) on diag(sw) K diag(sw), in place on the
    state (residual diagonal d, F^T of shape (rank, n), pivots) in K's namespace; the step it
    stopped at."""
    if K.backend == "cuda":
        return K.cuda().weighted_rpcholesky(sw, d, Ft, pivots, int(i0), int(i1), u, float(tol))
    return int(_core.weighted_rpcholesky(K.handle(), sw, d, Ft, pivots, int(i0), int(i1), u,
                                         float(tol), K.n_threads))


def dksd_pass(U, V, F, full, base, sigma, beta, lam, need_grad, n_threads: int):
    """The DKSD U-statistic pass and its adjoints (src_cpp/dksd.hpp): in C++ on the thread
    team for NumPy arrays (F flattened), by the CUDA rows on the device for CuPy arrays
    (:func:`stein_coreset._cuda.dksd_pass`); ``(total, Gv, Gf)`` in the arrays' namespace."""
    if isinstance(U, np.ndarray):
        return _core.dksd_pass(U, V, np.ascontiguousarray(F).reshape(-1), full, base, sigma,
                               beta, lam, need_grad, int(n_threads))
    return cuda_dksd_pass(U, V, F, full, base, sigma, beta, lam, need_grad)
