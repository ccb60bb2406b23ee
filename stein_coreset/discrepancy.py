"""Discrepancies: kernel Stein discrepancy, two-sample MMD and energy distance.

All three are computed blockwise (one (block x n) slab at a time), so they fit in memory for
n in the hundreds of thousands, and return Python floats.
"""

from __future__ import annotations

import math

from . import _array_api as aa
from . import _validation as val
from ._threads import effective_n_threads
from .engine import KernelMatrix, squared_distances
from .kernels import DEFAULT_KERNEL, IMQ, RadialKernel, SteinKernel
from .kernels.bandwidth import median_bandwidth_of

__all__ = ["ksd", "mmd", "energy_distance", "finite_discrepancy"]


def _stein(kernel) -> SteinKernel:
    if kernel is None:
        return DEFAULT_KERNEL
    if isinstance(kernel, SteinKernel):
        return kernel
    if isinstance(kernel, RadialKernel):
        return SteinKernel(kernel)
    raise TypeError(f"kernel must be a SteinKernel or a base kernel, got {type(kernel).__name__}")


def ksd(X, S, weights=None, kernel=None, n_threads: int | None = None) -> float:
    """Kernel Stein discrepancy MMD_{k_p}(sum_i w_i delta_{x_i}, P) = sqrt(w^T K_p w) >= 0.

    Parameters
    ----------
    X, S : (n, d) arrays
        Points and the scores grad log p at them.
    weights : (n,) array, optional
        Weights (default uniform); signed weights (constant-preserving coresets) are allowed.
    kernel : SteinKernel or base kernel, optional
        Default ``stein_coreset.kernels.DEFAULT_KERNEL``, the one ``compress`` uses: the
        Stein kernel of IMQ(beta=-1/2) at the median bandwidth with M = diag(per-coordinate
        variance), both taken from *this* X — so two calls on different point sets use two
        kernels. To compare coresets, pass one fixed kernel, e.g. ``res.info["stein_kernel"]``.
        A base kernel alone: identity M.
    n_threads : int, optional
        Threads of the compiled evaluation (default: the usable cores). The value does not
        depend on it.

    Returns
    -------
    float
        The KSD, 0 for a sample that matches P in the kernel's sense.

    Notes
    -----
    O(n^2 d) time: n (n + 1) / 2 Stein-kernel evaluations (the upper triangle of the
    symmetric Gram matrix; n^2 on some backends, docs/engine.md); O(n) memory beyond one slab.

    See Also
    --------
    compress : ``res.ksd`` is this discrepancy of the coreset, with ``res.info["stein_kernel"]``.
    mmd : the two-sample version, with a base kernel.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> X = np.random.default_rng(0).standard_normal((500, 2))   # a sample of P = N(0, I)
    >>> kern = sc.SteinKernel(sc.IMQ(sigma=1.0))                 # one kernel for both calls
    >>> round(sc.ksd(X, -X, kernel=kern), 4)                     # scores of P: -x
    0.0859
    >>> round(sc.ksd(X + 1.0, -(X + 1.0), kernel=kern), 4)       # a sample shifted off P
    1.0088
    """
    X, S, weights = aa.as_arrays(X=X, S=S, weights=weights)
    xp, dev = aa.namespace(X=X, S=S, weights=weights)
    K = _stein(kernel).bind(X, S, n_threads=n_threads)
    w = val.check_weights(weights, K.n, xp, device=dev, sum_to_one=True)
    return finite_discrepancy(K.quad(w), "ksd")


def finite_discrepancy(sq: float, what: str) -> float:
    """sqrt(max(sq, 0)) of a squared discrepancy, or a ValueError when the kernel overflowed:
    finite input can still give inf/NaN when the scores are huge or the bandwidth extreme."""
    if not math.isfinite(sq):
        raise ValueError(
            f"{what}: the kernel evaluations overflowed (the squared discrepancy is {sq}); the "
            "scores S or the bandwidth sigma are too extreme — rescale X and S, or pass a kernel "
            "with another sigma"
        )
    return math.sqrt(max(sq, 0.0))


def _two_sample(X, Y, wx, wy):
    X, Y, wx, wy = aa.as_arrays(X=X, Y=Y, wx=wx, wy=wy)
    xp, dev = aa.namespace(X=X, Y=Y, wx=wx, wy=wy)
    X = val.check_points(X, xp, "X")
    Y = val.check_points(Y, xp, "Y")
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"X and Y must have the same dimension, got {X.shape[1]} and {Y.shape[1]}")
    # weights sum to one; signs are free (constant-preserving coresets are signed measures, and
    # both distances are >= 0 between signed measures of equal total mass)
    wx = val.check_weights(wx, X.shape[0], xp, "wx", sum_to_one=True, device=dev)
    wy = val.check_weights(wy, Y.shape[0], xp, "wy", sum_to_one=True, device=dev)
    return xp, dev, X, Y, wx, wy


#: Default ``max_pairs`` of :func:`energy_distance`: (n + n')^2 pair evaluations; 2^32 is
#: (n + n') = 65,536 points, about a minute per few coordinates.
MAX_PAIRS = 2**32
#: Default ``max_pairs`` of :func:`mmd`, whose kernel the engine evaluates (from the upper
#: triangle on NumPy arrays): 2^34 is (n + n') = 131,072 points.
MMD_MAX_PAIRS = 2**34


def _check_pairs(X, Y, max_pairs, what: str) -> None:
    """Refuse, before the work starts, more than ``max_pairs`` pair evaluations (None: no
    limit); the slabs are bounded, so it is time, not memory, that this bounds."""
    if max_pairs is None:
        return
    max_pairs = val.check_int(max_pairs, "max_pairs", lo=1)
    n, m = int(X.shape[0]), int(Y.shape[0])
    pairs = (n + m) ** 2
    if pairs > max_pairs:
        raise ValueError(
            f"X, Y: {what} of n = {n} and n' = {m} points needs (n + n')^2 = {pairs:.3g} pair "
            f"evaluations of O(d) each, more than max_pairs = {max_pairs:.3g}; subsample X and "
            "Y (e.g. X[::k]), or pass max_pairs=None to run it anyway"
        )


def _weighted_pair_sum(xp, A, wa, B, wb, f):
    """sum_ij wa_i wb_j f(||a_i - b_j||^2), blocked over rows of A."""
    b = max(1, (1 << 22) // max(B.shape[0], 1))
    total = 0.0
    for s in range(0, A.shape[0], b):
        e = min(A.shape[0], s + b)
        total += float(xp.sum(wa[s:e] * (f(squared_distances(xp, A[s:e, ...], B)) @ wb)))
    return total


def mmd(X, Y, wx=None, wy=None, kernel=None, *, max_pairs: int | None = MMD_MAX_PAIRS,
        n_threads: int | None = None) -> float:
    """Two-sample MMD_k(sum w_x delta_x, sum w_y delta_y) with a base kernel k.

    MMD^2 is v^T K v for the kernel matrix K of the pooled points and the signed weights
    v = (w_x, -w_y).

    Parameters
    ----------
    X : (n, d) array
        The first sample.
    Y : (n', d) array
        The second sample, in X's namespace.
    wx, wy : arrays, optional
        Weights of the two samples, each summing to 1 (default uniform).
    kernel : RadialKernel, optional
        The base kernel (default IMQ(beta=-1/2) at the median bandwidth of the pooled sample).
    max_pairs : int or None
        Refuse, with a ValueError before the work starts, more than this many pair
        evaluations ((n + n')^2; default ``MMD_MAX_PAIRS``); None for no limit.
    n_threads : int, optional
        Threads of the compiled evaluation (default: the usable cores); the value does not
        depend on it.

    Returns
    -------
    float

    Notes
    -----
    O((n + n')^2 d) time: (n + n')(n + n' + 1) / 2 kernel evaluations on NumPy arrays,
    (n + n')^2 on other namespaces; O(n + n') memory beyond one slab.

    See Also
    --------
    ksd : the discrepancy to P itself, through its scores.
    energy_distance : a kernel-free two-sample distance.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> X = np.random.default_rng(0).standard_normal((500, 2))
    >>> Y = np.random.default_rng(1).standard_normal((400, 2))
    >>> round(sc.mmd(X, Y), 4), round(sc.mmd(X, Y + 1.0), 4)   # same law, then shifted
    (0.0212, 0.3643)
    """
    xp, dev, X, Y, wx, wy = _two_sample(X, Y, wx, wy)
    _check_pairs(X, Y, max_pairs, "mmd")
    if kernel is None:  # the pooled sample's median distance (a scale out of range: "X, Y")
        kernel = IMQ(sigma=median_bandwidth_of(xp.concat([X, Y], axis=0), None, 1000, xp, dev,
                                               effective_n_threads(n_threads), for_kernel=True,
                                               name="X, Y", advice="rescale X and Y, or pass "
                                               "kernel=IMQ(sigma=...)"))
    if isinstance(kernel, SteinKernel):
        raise TypeError("mmd takes a base kernel; for the Stein kernel use ksd")
    if not isinstance(kernel, RadialKernel):
        raise TypeError(f"kernel must be IMQ, Gaussian or Matern, got {type(kernel).__name__}")
    K = KernelMatrix(kernel, xp.concat([X, Y], axis=0), n_threads=n_threads)
    return finite_discrepancy(K.quad(xp.concat([wx, -wy], axis=0)), "mmd")


def energy_distance(X, Y, wx=None, wy=None, *, max_pairs: int | None = MAX_PAIRS) -> float:
    """Energy distance 2 E||X - Y|| - E||X - X'|| - E||Y - Y'|| >= 0 (Riabiz et al., 2022, Eq. 11).

    Parameters
    ----------
    X : (n, d) array
        The first sample.
    Y : (n', d) array
        The second sample, in X's namespace.
    wx, wy : arrays, optional
        Weights, used as the laws of X and Y (default uniform).
    max_pairs : int or None
        Refuse, with a ValueError before the work starts, more than this many pair
        evaluations ((n + n')^2; default ``MAX_PAIRS``); None for no limit.

    Returns
    -------
    float

    Notes
    -----
    O((n + n')^2 d) time, one (block x n') slab of memory at a time.

    See Also
    --------
    mmd : the kernel two-sample distance.
    ksd : the distance to P itself, through its scores.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> X = np.random.default_rng(0).standard_normal((500, 2))
    >>> Y = np.random.default_rng(1).standard_normal((400, 2))
    >>> round(sc.energy_distance(X, Y), 4), round(sc.energy_distance(X, Y + 1.0), 4)
    (0.003, 0.832)
    """
    xp, dev, X, Y, wx, wy = _two_sample(X, Y, wx, wy)
    _check_pairs(X, Y, max_pairs, "energy_distance")
    f = xp.sqrt
    val = (
        2.0 * _weighted_pair_sum(xp, X, wx, Y, wy, f)
        - _weighted_pair_sum(xp, X, wx, X, wx, f)
        - _weighted_pair_sum(xp, Y, wy, Y, wy, f)
    )
    finite_discrepancy(val, "energy_distance")
    return max(val, 0.0)
