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
    small = np.flatnonzero(M < np.finfo(np.float64).tiny)
    if small.size:  # zero or subnormal: a constant coordinate, or one whose variance underflows
        lo = aa.to_host(xp.min(X, axis=0))[small]
        hi = aa.to_host(xp.max(X, axis=0))[small]
        moving = small[hi > lo]
        if moving.size:  # before: scale 1 for it, then "the points are (nearly) all equal"
            j = int(moving[0])
            raise ValueError(
                f"X: the variance of its coordinate {j} underflows (its values span "
                f"{float(hi[moving == j][0] - lo[moving == j][0]):.3g}), so the default "
                "kernel's preconditioner M = 'scale' cannot be formed; rescale X (and S by the "
                "inverse factor), or pass a kernel with an explicit M"
            )
    return np.where(M > 0, M, 1.0)


def median_bandwidth_of(X, M, max_points: int, xp, dev, n_threads: int = 1, *,
                        for_kernel: bool = False, name: str = "X",
                        advice: str | None = None) -> float:
    """:func:`median_bandwidth` on validated points (X float64, finite). ``for_kernel``: the
    bandwidth of a kernel about to be built (:meth:`SteinKernel.resolve`, :func:`mmd`), so a
    value outside [1e-75, 1e75] (``SIGMA_RANGE``) is refused naming ``name``
    (the points' scale), not the sigma the user never gave, with ``advice`` (default: rescale
    X and S, or standardise the coordinates with M = "scale")."""
    n = X.shape[0]
    step = max(1, math.ceil(n / max_points))
    Xs = X[::step, ...]
    U = Whitening(M, X.shape[1], xp, dev).points(Xs)
    if U.shape[0] < 2:
        raise ValueError(
            "X: the median bandwidth needs at least two points; give the kernel an explicit sigma"
        )
    med = _scale_free_median(U, xp, n_threads)
    if not math.isfinite(med):  # |U| near the largest double: the distance itself overflows
        raise ValueError(
            f"{name}: the median pairwise distance of the points overflows (|X| up to "
            f"{float(xp.max(xp.abs(Xs))):.3g}); rescale X (and S by the inverse factor)"
        )
    if not med > 0:
        raise ValueError(
            "the median pairwise distance of X is zero (the points are (nearly) all equal); "
            "give the kernel an explicit sigma"
        )
    lo, hi = val.SIGMA_RANGE
    if for_kernel and not lo <= med <= hi:
        if advice is None:
            advice = f"rescale {name} (and S by the inverse factor)" + (
                "" if M is not None else
                ", or standardise the coordinates with M = 'scale' (the default kernel's)")
        raise ValueError(
            f"{name}: the median pairwise distance of the points is {med:.3g}, outside "
            f"[{lo:g}, {hi:g}], where the kernel's derivatives (sigma^-4) stay finite; {advice}"
        )
    return med


#: Binary exponents of max |U| within which the pairwise distances are formed as they are:
#: their squares (summed over d coordinates) neither overflow nor underflow.
SAFE_EXPONENT = 400


def _scale_free_median(U, xp, n_threads: int) -> float:
    """The median pairwise distance of the rows of U, formed on U scaled by a power of two
    when its entries are so large or small that their squared distances would overflow (inf:
    ``median_bandwidth(1e160 * X)`` was inf) or underflow (0: points near 1e-300 were "all
    equal"). A power of two scales every difference, square and square root exactly, so the
    value is the unscaled one's, bit for bit, wherever that one is finite and nonzero."""
    top = float(xp.max(xp.abs(U)))
    e = math.frexp(top)[1] if top > 0 and math.isfinite(top) else 0
    if abs(e) <= SAFE_EXPONENT:
        return median_pairwise_distance(U, n_threads)
    half = -e // 2  # in two factors: 2^-e alone overflows for subnormal entries
    scaled = (U * math.ldexp(1.0, half)) * math.ldexp(1.0, -e - half)
    return math.ldexp(median_pairwise_distance(scaled, n_threads), e)
