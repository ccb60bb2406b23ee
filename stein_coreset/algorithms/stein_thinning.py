"""Stein Thinning with sufficient statistics (paper Alg. D.1; Riabiz et al., 2022)."""

from __future__ import annotations

import numpy as np

from .. import _array_api as aa
from ..kernels import KernelMatrix

__all__ = ["stein_thinning"]


def _check_kernel(K):
    if not isinstance(K, KernelMatrix):
        raise TypeError(f"K must be a KernelMatrix, got {type(K).__name__}")


def _check_m(m, name="m") -> int:
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(m).__name__}")
    m = int(m)
    if m < 1:
        raise ValueError(f"{name} must be >= 1, got {m}")
    return m


def stein_thinning(
    K: KernelMatrix,
    m: int,
    *,
    progress: bool = False,
    backend: str = "auto",
    n_threads: int | None = None,
):
    """Greedy Stein thinning of the n points of K to m points, with repeats (Alg. D.1).

    Step t picks ``j = argmin_i { k_P(x_i, x_i) + 2 sum_{s<t} k_P(x_i, x_{j_s}) }``, which is
    Alg. D.1's ``argmin_i { t g_i + k_P(x_i, x_i) }`` with the sufficient statistic
    ``g = 2 K w`` kept as the running sum of the selected columns. Each step is the greedy
    minimiser of MMD_{k_P} of the equal-weighted coreset to P. The first ``m'`` picks of a run
    with ``m >= m'`` are the run with ``m'``. Ties go to the smallest index.

    Parameters
    ----------
    K : KernelMatrix
        The P-mean-zero kernel k_P on the n input points.
    m : int
        Number of greedy steps (output size); may exceed n.
    progress : bool
        Show a progress bar (``backend="xp"`` only; the C++ loop is not interruptible).
    backend : {"auto", "cpp", "xp"}
        "cpp": the C++ loop on host copies of the points (one transfer); "xp": one kernel
        column per step in K's array namespace (on its device), one scalar host transfer per
        step. "auto": "cpp" for NumPy, "xp" otherwise.
    n_threads : int or None
        Threads of the C++ loops (None: ``K.n_threads``); results do not depend on it.

    Returns
    -------
    (m,) int64 NumPy array of indices into K's points, in selection order (with repeats).

    Notes
    -----
    O(n m) kernel evaluations (O(n m d) time for the Stein kernel), O(n) memory.
    """
    K = K if n_threads is None else K.with_threads(n_threads)
    _check_kernel(K)
    m = _check_m(m)
    if backend not in ("auto", "cpp", "xp"):
        raise ValueError(f"backend must be 'auto', 'cpp' or 'xp', got {backend!r}")
    if backend == "auto":
        backend = "cpp" if aa.is_numpy(K.xp) else "xp"
    if backend == "cpp":
        from ._native import stein_thinning as native_stein_thinning

        return native_stein_thinning(K, m)
    xp, n = K.xp, K.n
    score = xp.asarray(K.diag(), copy=True)
    out = np.empty(m, dtype=np.int64)
    it = range(m)
    if progress:
        from .._progress import progress_bar

        it = progress_bar(it, desc="Stein thinning", total=m)
    for t in it:
        j = xp.argmin(score)
        out[t] = int(j)
        if t + 1 < m:
            col = K.block(xp.reshape(xp.astype(j, xp.int64), (1,)))
            score = score + 2.0 * xp.reshape(col, (n,))
    return out
