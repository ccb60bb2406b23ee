"""Does the sandwich have a variance to estimate? A tail index of the per-point contributions.

The sandwich standard error (Thms. 4 and 6) rests on the per-point gradient contributions c_i
having a finite variance: Sigma = Var c is what it estimates, and the central limit theorem
behind the interval needs it. When a coordinate of c has a power-law tail
P(|c| > t) ~ t^-alpha with alpha <= 2 (score matching on a Gamma with shape <= 4, whose
contributions grow like x^-2 near 0; score matching on Cauchy data, whose contributions grow
like x and x^2), the sample variance does not converge and the intervals do not cover, however
large n is.

We estimate each coordinate's tail shape xi = 1 / alpha by a generalised Pareto fit to the
largest M = min(n / 5, 3 sqrt(n)) values of |c - median c| (the Zhang & Stephens (2009)
estimator with the weakly informative prior of Vehtari et al.'s Pareto-smoothed importance
sampling, their k-hat diagnostic). A finite variance needs xi < 1/2; :func:`fit` warns above
XI_WARN = 0.7, the threshold Vehtari et al. give for a reliable estimate, because at n = 500
the estimate of a tail with xi = 1/3 (the Gamma(6, 2) under SM, whose variance is finite) still
exceeds 1/2 about half the time. Light tails give xi <= 0 (exponential ~ 0, bounded < 0).

Why the contributions c and not the influence values H^-1 c: a linear combination has the
heaviest tail of its terms, so c answers the question; but H^-1 cancels the bulk of strongly
correlated columns and leaves the few points where they do not cancel, which a fit to 3 sqrt(n)
points reads as a heavy tail (KSD on Gamma(6, 2) data: xi-hat of H^-1 c above 1/2 in 39 of 40
samples, of c in none; docs/estimators.md). Cost O(n log n + 30 M) per parameter, no loss
evaluations.
"""

from __future__ import annotations

import numpy as np

__all__ = ["gpd_shape", "tail_shapes", "XI_INFINITE_VARIANCE", "XI_WARN"]

#: xi above this: the contributions' variance is infinite (alpha = 1 / xi < 2).
XI_INFINITE_VARIANCE = 0.5
#: fit warns above this estimated xi (Vehtari et al.'s threshold of a reliable estimate).
XI_WARN = 0.7


def gpd_shape(exceedances) -> float:
    """Shape xi of a generalised Pareto fit to positive exceedances (Zhang & Stephens, 2009,
    with Vehtari et al.'s prior pulling xi towards 1/2 with the weight of 10 observations).

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset.estimators.tails import gpd_shape
    >>> rng = np.random.default_rng(0)
    >>> round(gpd_shape(rng.pareto(1.0, 2000)), 1), round(gpd_shape(rng.exponential(size=2000)), 1)
    (1.0, 0.0)
    """
    x = np.sort(np.asarray(exceedances, dtype=np.float64))
    n = x.size
    if n < 5 or not x[-1] > 0:
        return float("nan")
    prior_bs, prior_k = 3.0, 10.0
    m = 30 + int(np.sqrt(n))
    b = 1.0 - np.sqrt(m / (np.arange(1, m + 1, dtype=np.float64) - 0.5))
    q = x[max(0, int(n / 4 + 0.5) - 1)]
    b = b / (prior_bs * (q if q > 0 else x[-1])) + 1.0 / x[-1]
    with np.errstate(all="ignore"):
        k = np.mean(np.log1p(-b[:, None] * x[None, :]), axis=1)
        ll = n * (np.log(-b / k) - k - 1.0)
        w = 1.0 / np.sum(np.exp(ll[None, :] - ll[:, None]), axis=1)
    ok = np.isfinite(w) & (w >= 10 * np.finfo(float).eps)
    if not np.any(ok):
        return float("nan")
    w, b = w[ok] / np.sum(w[ok]), b[ok]
    b_post = float(np.sum(b * w))
    k_post = float(np.mean(np.log1p(-b_post * x)))
    return (n * k_post + prior_k * 0.5) / (n + prior_k)


def tail_shapes(contributions) -> np.ndarray:
    """xi of each column of the (n, p) per-point contributions (NaN where n < 25 or the column
    is constant)."""
    Z = np.asarray(contributions, dtype=np.float64)
    n, p = Z.shape
    out = np.full(p, np.nan)
    if n < 25:
        return out
    M = int(min(0.2 * n, 3.0 * np.sqrt(n)))
    for j in range(p):
        a = np.sort(np.abs(Z[:, j] - np.median(Z[:, j])))
        top, u = a[-M:], a[-M - 1]
        exc = top - u
        if exc[-1] > 0:
            out[j] = gpd_shape(exc)
    return out
