"""Stein Thinning with sufficient statistics (paper Alg. D.1; Riabiz et al., 2022)."""

from __future__ import annotations

import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from ..engine import KernelMatrix, check_backend, check_kernel_matrix, with_threads
from .weights import equal_weights

__all__ = ["stein_thinning", "stein_thinning_weights", "stein_thinning_coreset"]


def stein_thinning(
    K: KernelMatrix,
    m: int,
    *,
    progress: bool = False,
    backend: str = "auto",
    check_input: bool = True,
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
        Show a progress bar over the steps, on every backend (the C++ loop's is drawn from a
        counter it updates; stages under half a second draw none).
    backend : {"auto", "cpu", "cuda", "xp"}
        "auto": the kernel matrix's own backend; a name runs the loop on that backend instead
        (:func:`stein_coreset.engine.get_backend`; "xp" is the array-API reference).
    check_input : bool
        Validate the arguments (default). ``False`` skips the checks, for callers that have
        validated them already (scikit-learn's ``check_input``).
    n_threads : int or None
        Threads of the C++ loops (None: ``K.n_threads``); results do not depend on it.

    Returns
    -------
    (m,) int64 NumPy array of indices into K's points, in selection order (with repeats).

    Notes
    -----
    O(n m) kernel evaluations (O(n m d) time for the Stein kernel), O(n) memory.
    """
    K = with_threads(K, n_threads)
    if check_input:
        check_kernel_matrix(K)
        m = val.check_int(m, "m", lo=1)
        val.check_buffer(8.0 * m, "m", f"{m} Stein thinning steps (8 bytes of output each)")
        progress = val.check_bool(progress, "progress")
        backend = check_backend(backend)
    return _stein_thinning(K, m, progress, backend)


def _stein_thinning(K: KernelMatrix, m: int, progress: bool = False, backend="auto"):
    """:func:`stein_thinning` on validated arguments."""
    K = K.using(backend)
    return K.backend.stein_thinning(K, m, progress)


def stein_thinning_weights(K: KernelMatrix, *, progress: bool = False):
    """Stein Thinning (Alg. D.1) run for n steps, as simplex weights (counts / n): the debiasing
    step of Stein Recombination and Stein Cholesky (Alg. 5, 7).

    Returns an (n,) float64 array in K's namespace. O(n^2) kernel evaluations.
    """
    check_kernel_matrix(K)
    idx = _stein_thinning(K, K.n, val.check_bool(progress, "progress"))
    w = np.bincount(idx, minlength=K.n) / float(K.n)
    return aa.from_host(w, xp=K.xp, device=K.device)


def stein_thinning_coreset(K: KernelMatrix, m: int, *, progress: bool = False):
    """The ``"st"`` method: ``m`` greedy Stein Thinning steps (Alg. D.1) as an equal-weighted
    coreset (repeats merged into weights count / m).

    Returns ``(indices, weights, info)``: distinct increasing host indices, host weights summing
    to 1, and ``{"steps": m}``. O(n m) kernel evaluations.
    """
    check_kernel_matrix(K)
    m = val.check_int(m, "m", lo=1)
    idx = _stein_thinning(K, m, val.check_bool(progress, "progress"))
    uniq, w = equal_weights(idx, m)
    return uniq, w, {"steps": m}
