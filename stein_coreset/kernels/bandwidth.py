"""The median bandwidth (Sec. 5) and the scale-free preconditioner M = "scale"."""

from __future__ import annotations

import math

import numpy as np

from .. import _array_api as aa
from .. import _validation as val
from .._threads import effective_n_threads
from ..engine import Whitening, median_pairwise_distance

__all__ = ["median_bandwidth", "median_bandwidth_of", "scale_preconditioner"]


def median_bandwidth(
    X,
    M=None,
    max_points: int = 1000,
    seed: int = 0,
    *,
    check_input: bool = True,
    n_threads: int | None = None,
) -> float:
    """Median pairwise M-distance among at most ``max_points`` standard-thinned rows (Sec. 5).

    The median is ``numpy.median`` of the m (m - 1) / 2 distances of the pairs i < j of the kept
    rows (the mean of the two middle values when their number is even).

    Parameters
    ----------
    X : (n, d) array
        The points.
    M : None, (d,) or (d, d) array, or "scale"
        None (identity, the Euclidean distance), a diagonal or SPD matrix, or ``"scale"``: the
        per-coordinate variances of X, the preconditioner of ``DEFAULT_KERNEL`` (so
        ``median_bandwidth(X, "scale")`` is its bandwidth on X).
    max_points : int
        Standard thinning keeps every ceil(n / max_points)-th row, as the paper does.
    seed : int
        Accepted for API stability; the thinning is deterministic, so it does not change the result.
    check_input : bool
        Validate X (default); ``False`` trusts a float64, finite (n, d) array.
    n_threads : int, optional
        Threads of the compiled evaluation (default: the usable cores); the value does not depend on
        it.

    Returns
    -------
    float

    Notes
    -----
    O(max_points^2 d) time.

    See Also
    --------
    IMQ : the base kernel whose bandwidth this sets.
    SteinKernel : ``SteinKernel()`` (no base) uses this bandwidth on each call's points.

    Raises
    ------
    ValueError
        If every kept point is the same (the median distance is zero).

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> X = np.random.default_rng(0).standard_normal((500, 2))
    >>> round(sc.median_bandwidth(X), 4)
    1.6144
    >>> round(sc.median_bandwidth(10.0 * X, M="scale"), 4)  # in units of each coordinate's sd
    1.6538
    """
    xp, dev = aa.namespace(X=X)
    if check_input:  # False: X is trusted (float64, finite, 2-D), as compress passes it
        X = val.check_points(X, xp, "X")
        max_points = val.check_int(max_points, "max_points", lo=2)
    if isinstance(M, str):
        if M != "scale":
            raise ValueError(f"M must be an array, a number, 'scale' or None, got {M!r}")
        M = scale_preconditioner(X, xp)
    return median_bandwidth_of(X, M, max_points, xp, dev, effective_n_threads(n_threads))


def scale_preconditioner(X, xp) -> np.ndarray:
    """M = "scale" on X: the (d,) host per-coordinate variances (1 where a coordinate is
    constant)."""
    with np.errstate(over="ignore", invalid="ignore"):
        M = aa.to_host(xp.var(X, axis=0))
    if not np.all(np.isfinite(M)):  # before: "M has NaN or inf entries", an M never given
        j = int(np.flatnonzero(~np.isfinite(M))[0])
        raise ValueError(
            f"X: the variance of its coordinate {j} overflows (|X| up to "
            f"{float(np.max(np.abs(aa.to_host(X[:, j])))):.3g}), so the default kernel's "
            "preconditioner M = 'scale' cannot be formed; rescale X (and S by the inverse "
            "factor), or pass a kernel with an explicit M"
        )
    return np.where(M > 0, M, 1.0)


def median_bandwidth_of(X, M, max_points: int, xp, dev, n_threads: int = 1) -> float:
    """:func:`median_bandwidth` on validated points (X float64, finite)."""
    n = X.shape[0]
    step = max(1, math.ceil(n / max_points))
    Xs = X[::step, ...]
    U = Whitening(M, X.shape[1], xp, dev).points(Xs)
    if U.shape[0] < 2:
        raise ValueError(
            "X: the median bandwidth needs at least two points; give the kernel an explicit sigma"
        )
    med = median_pairwise_distance(U, n_threads)
    if not med > 0:
        raise ValueError(
            "the median pairwise distance of X is zero (the points are (nearly) all equal); "
            "give the kernel an explicit sigma"
        )
    return med
