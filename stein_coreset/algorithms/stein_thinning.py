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
        Show a progress bar over the steps (none for runs under half a second).
    backend : {"auto", "cpu", "cuda", "xp"}
        "auto": the kernel matrix's own backend; a name runs the loop on that backend instead
        ("xp" is the array-API reference; docs/engine.md).
    check_input : bool
        Validate the arguments (default). ``False`` skips the checks, for callers that have
        validated them already (scikit-learn's ``check_input``).
    n_threads : int or None
        Threads of the compiled loop (None: ``K.n_threads``); the result does not depend on
        it.

    Returns
    -------
    (m,) int64 NumPy array of indices into K's points, in selection order (with repeats).

    Notes
    -----
    O(n m) kernel evaluations (O(n m d) time for the Stein kernel), O(n) memory. Runs on the
    kernel matrix's engine backend (docs/engine.md).

    See Also
    --------
    stein_thinning_coreset : the ``"st"`` method, the same picks as weights.
    stein_kernel_thinning : SKT, which thins these picks further with Kernel Thinning.
    stein_coreset.compress : the same through the one entry point.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import stein_thinning
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((256, 2))  # biased for P = N(0, I)
    >>> kern = sc.SteinKernel(sc.IMQ(1.0))
    >>> K = kern.bind(X, -X)                                         # -x: the scores of P
    >>> idx = stein_thinning(K, 16)
    >>> idx[:6]
    array([  8, 172,  63,  80, 117, 248])
    >>> round(sc.ksd(X, -X, kernel=kern), 4), round(sc.ksd(X[idx], -X[idx], kernel=kern), 4)
    (0.5183, 0.2195)
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
    return K.stein_thinning(m, progress)


def stein_thinning_weights(K: KernelMatrix, *, progress: bool = False):
    """Stein Thinning (Alg. D.1) run for n steps, as simplex weights (counts / n): the debiasing
    step of Stein Recombination and Stein Cholesky (Alg. 5, 7).

    Parameters
    ----------
    K : KernelMatrix
        The P-mean-zero kernel k_P on the n input points.
    progress : bool
        Show a progress bar over the n steps.

    Returns
    -------
    (n,) float64 array in K's namespace: non-negative weights summing to 1.

    Notes
    -----
    O(n^2) kernel evaluations, O(n) memory.

    See Also
    --------
    stein_thinning : the greedy picks themselves.
    low_rank_debias : sub-quadratic debiasing weights (Alg. 2).
    weighted_compression : the pipelines that thin these weights.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import stein_thinning_weights
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((256, 2))
    >>> w = stein_thinning_weights(sc.SteinKernel(sc.IMQ(1.0)).bind(X, -X))
    >>> w.shape, round(float(w.sum()), 4), int((w > 0).sum())   # support of 131 of 256 points
    ((256,), 1.0, 131)
    """
    check_kernel_matrix(K)
    idx = _stein_thinning(K, K.n, val.check_bool(progress, "progress"))
    w = np.bincount(idx, minlength=K.n) / float(K.n)
    return aa.from_host(w, xp=K.xp, device=K.device)


def stein_thinning_coreset(K: KernelMatrix, m: int, *, progress: bool = False):
    """The ``"st"`` method: ``m`` greedy Stein Thinning steps (Alg. D.1) as an equal-weighted
    coreset (repeats merged into weights count / m).

    Parameters
    ----------
    K : KernelMatrix
        The P-mean-zero kernel k_P on the n input points.
    m : int
        Number of steps; the coreset has at most m distinct points.
    progress : bool
        Show a progress bar over the steps.

    Returns
    -------
    indices, weights, info
        Distinct increasing NumPy indices, NumPy weights (count / m) summing to 1, and
        ``{"steps": m}``.

    Notes
    -----
    O(n m) kernel evaluations, O(n) memory.

    See Also
    --------
    stein_thinning : the picks in selection order, with repeats.
    stein_coreset.compress : ``method="st"``.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.algorithms import stein_thinning_coreset
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((256, 2))
    >>> idx, w, info = stein_thinning_coreset(sc.SteinKernel(sc.IMQ(1.0)).bind(X, -X), 16)
    >>> idx.size <= 16, round(float(w.sum()), 4), info
    (True, 1.0, {'steps': 16})
    """
    check_kernel_matrix(K)
    m = val.check_int(m, "m", lo=1)
    idx = _stein_thinning(K, m, val.check_bool(progress, "progress"))
    uniq, w = equal_weights(idx, m)
    return uniq, w, {"steps": m}
