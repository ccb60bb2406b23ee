"""Input diagnostics: do the scores S look like grad log p at the points X?

Stein's identity (integration by parts, for a smooth density p that vanishes at infinity) says
that under P

    E[s(x)] = 0          and          E[s(x) (x - mu)^T] = -I,

with s = grad log p. Both are cheap to check on a sample (O(n d)): :func:`stein_residuals`
computes, for the (weighted) sample,

- ``stein_corr``: the mean over coordinates of corr(s_j, x_j). It is negative for any pair of
  points and their own scores (exactly -1 for a Gaussian target, whatever the chain's spread:
  s is then a decreasing linear function of x), about 0 when the rows of S are not those of X
  (shuffled, shifted, from another run), and positive when the scores point away from the bulk
  (-grad log p passed, e.g. the gradient of a potential U = -log p).
- ``stein_trace``: mean_j E[s_j (x_j - xbar_j)], -1 under P (dimensionless: s_j has the units
  of 1 / x_j).
- ``mean_score``: the root mean square over coordinates of mean(s_j) sd(x_j): how many standard
  deviations the sample's mean sits from where the scores point; 0 under P.

A biased chain (burn-in, a tempered or stochastic-gradient chain) breaks the identity on its
input too, so :func:`check_scores` judges the *debiased result* as well: a coreset that
targets P through correct scores satisfies the identity much better than its input, while the
common mistakes (X and S swapped, scores of another target) leave the best coreset far from it.
:func:`check_scores` warns with :class:`DiagnosticWarning`, naming the likely cause; the
figures go to ``res.info["diagnostics"]``. docs/diagnostics.md has the detection and
false-alarm rates the thresholds were chosen from.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from . import _array_api as aa

__all__ = [
    "DiagnosticWarning",
    "stein_residuals",
    "check_scores",
    "check_orientation",
    "SIGN_FLIP_CORR",
    "SIGN_FLIP_TRACE",
    "MISALIGNED_R2",
    "MISALIGNED_MIN_ROWS",
    "CORESET_MEAN_SCORE",
    "SWAP_MEAN_SCORE",
    "SWAP_RATIO",
]


class DiagnosticWarning(UserWarning):
    """The input looks like a misuse (e.g. scores that are not grad log p at the points).

    The result was computed, but is probably not what was meant; the message names the likely
    cause (sign-flipped, misaligned, swapped scores or the wrong target) and
    ``res.info["diagnostics"]`` has the figures. Silence it with
    ``warnings.filterwarnings("ignore", category=stein_coreset.DiagnosticWarning)``.

    See Also
    --------
    stein_coreset.diagnostics.check_scores : the checks that raise it.
    stein_coreset.diagnostics.stein_residuals : the figures they judge.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((500, 2))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     res = sc.compress(X, X, size=16, method="st", seed=0)   # +x: not grad log p
    >>> [w.category.__name__ for w in caught], res.info["diagnostics"]["suspect"]
    (['DiagnosticWarning'], 'sign-flipped')
    >>> with warnings.catch_warnings():
    ...     warnings.filterwarnings("error")
    ...     warnings.filterwarnings("ignore", category=sc.DiagnosticWarning)
    ...     res = sc.compress(X, X, size=16, method="st", seed=0)   # silent
    """


#: ``stein_corr`` above its noise level and above this, or ``stein_trace`` above
#: :data:`SIGN_FLIP_TRACE`: the scores point away from the bulk.
SIGN_FLIP_CORR = 0.2
#: Under P ``stein_trace`` is -1; a biased chain of a log-concave target keeps it negative.
SIGN_FLIP_TRACE = 0.5
#: ``linear_r2`` below this (or below 3 d / n, three times its mean for unrelated rows): S is
#: not a function of X's rows. Judged from :data:`MISALIGNED_MIN_ROWS` d rows on.
MISALIGNED_R2 = 0.05
MISALIGNED_MIN_ROWS = 20
#: ``mean_score`` of the debiased result above this: no weighting of X satisfies Stein's
#: identity for these scores (swapped X and S, scores of another target).
CORESET_MEAN_SCORE = 0.5
#: The input's ``mean_score`` above this and above :data:`SWAP_RATIO` times the
#: ``mean_score_swapped``: X and S are probably exchanged.
SWAP_MEAN_SCORE = 0.3
SWAP_RATIO = 2.0


def stein_residuals(X, S, weights=None) -> dict:
    """How well the (weighted) sample satisfies Stein's identity E[s] = 0, E[s (x - mu)^T] = -I.

    ``stein_corr`` (mean corr(s_j, x_j): negative for correct scores, -1 for a Gaussian
    target), ``stein_trace`` (mean_j E[s_j (x_j - xbar_j)], -1 under P) and ``mean_score``
    (0 under P) are described in the module docstring; ``linear_r2`` is the share of the
    variance of S that a linear function of X explains (1 for a Gaussian target, about d / n
    for unrelated rows); ``mean_score_swapped`` is ``mean_score`` with the roles of X and S
    exchanged; ``n_eff`` is the effective sample size of the weights.

    Parameters
    ----------
    X, S : (n, d) arrays in one namespace
        Points and their scores.
    weights : (n,) array, optional
        Weights summing to 1 (signed weights allowed); default uniform.

    Returns
    -------
    dict
        ``{"stein_corr", "stein_trace", "mean_score", "mean_score_swapped", "linear_r2",
        "n_eff"}``, Python floats.

    Notes
    -----
    O(n d^2); only the (2d, 2d) moments leave the device.

    See Also
    --------
    check_scores : judges these figures on the input and on a result.
    stein_coreset.ksd : the kernel Stein discrepancy, a finer measure of the same fit.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.diagnostics import stein_residuals
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((500, 2))   # biased for N(0, I)
    >>> r = stein_residuals(X, -X)
    >>> {k: round(v, 3) for k, v in r.items()}
    {'stein_corr': -1.0, 'stein_trace': -0.952, 'linear_r2': 1.0, 'mean_score': 0.442,
     'mean_score_swapped': 0.442, 'n_eff': 500.0}
    >>> res = sc.compress(X, -X, size=16, method="skt", seed=0)   # the debiased coreset
    >>> round(stein_residuals(X[res.indices], -X[res.indices], res.weights)["mean_score"], 3)
    0.008
    """
    xp, dev = aa.namespace(X=X, S=S)
    n, d = X.shape
    Z = xp.concat([X, S], axis=1)  # one pass over the rows gives every moment
    if weights is None:
        mean = xp.mean(Z, axis=0)
        Zc = Z - mean[None, :]
        moments = xp.matmul(xp.matrix_transpose(Zc), Zc) / n
        n_eff = float(n)
    else:
        w = xp.astype(weights, xp.float64)
        mean = xp.matmul(w, Z)
        Zc = Z - mean[None, :]
        moments = xp.matmul(xp.matrix_transpose(Zc * w[:, None]), Zc)
        w_abs = xp.abs(w)
        n_eff = float(xp.sum(w_abs)) ** 2 / float(xp.sum(w_abs * w_abs))
    moments = aa.to_host(moments)
    mean = aa.to_host(mean)
    return _residuals(moments, mean[:d], mean[d:], n_eff)


def _residuals(moments: np.ndarray, xbar: np.ndarray, sbar: np.ndarray, n_eff: float) -> dict:
    d = xbar.shape[0]  # moments: the (2d, 2d) covariance of [X, S]
    Cxx, Cxs, Css = moments[:d, :d], moments[:d, d:], moments[d:, d:]
    var_x = np.abs(np.diag(Cxx))
    var_s = np.abs(np.diag(Css))
    cov = np.diag(Cxs)
    ok = (var_x > 0) & (var_s > 0)
    corr = cov[ok] / np.sqrt(var_x[ok] * var_s[ok])
    explained = np.einsum("ij,ij->j", Cxs, np.linalg.pinv(Cxx, hermitian=True) @ Cxs)
    sd_x, sd_s = np.sqrt(var_x), np.sqrt(var_s)
    return {
        "stein_corr": float(corr.mean()) if ok.any() else 0.0,
        "stein_trace": float(cov.mean()),
        "linear_r2": float(np.mean(explained[var_s > 0] / var_s[var_s > 0]))
        if (var_s > 0).any() else 0.0,
        "mean_score": float(np.sqrt(np.mean((sbar * sd_x) ** 2))),
        "mean_score_swapped": float(np.sqrt(np.mean((xbar * sd_s) ** 2))),
        "n_eff": float(n_eff),
    }


def check_orientation(n: int, d: int, name: str = "X") -> None:
    """Refuse n <= d: too few points to say anything of a d-dimensional target, and the usual
    sign of a transposed array.

    Parameters
    ----------
    n, d : int
        Rows and columns of the array.
    name : str
        The array's argument name, for the message.

    Raises
    ------
    ValueError
        When n <= d, suggesting the transpose.

    See Also
    --------
    check_scores : the checks of the scores themselves.
    stein_coreset.compress : which runs this check on X.

    Examples
    --------
    >>> from stein_coreset.diagnostics import check_orientation
    >>> check_orientation(500, 2)             # fine: returns None
    >>> check_orientation(2, 500)
    Traceback (most recent call last):
    ...
    ValueError: X has n = 2 rows (points) and d = 500 columns (dimensions); ...
    """
    if n <= d:
        raise ValueError(
            f"{name} has n = {n} rows (points) and d = {d} columns (dimensions); n <= d leaves "
            f"too few points for a {d}-dimensional target. Each row must be one point: if your "
            f"array is (d, n), pass its transpose ({name}.T, and S.T)"
        )


def _noise(n_eff: float) -> float:
    return 4.0 / math.sqrt(max(n_eff, 1.0))


def check_scores(X, S, coreset_weights=None, coreset_rows=None, *, warn: bool = True) -> dict:
    """Stein's identity on the input and on the debiased result; a :class:`DiagnosticWarning`
    naming the likely cause when the scores do not look like grad log p at X.

    Parameters
    ----------
    X, S : (n, d) arrays
        The input points and scores.
    coreset_weights, coreset_rows : optional
        The result's weights and its rows of X (an int index array), to check the result too.
    warn : bool
        Warn (default) or only return the figures.

    Returns
    -------
    dict
        ``{"input": stein_residuals(X, S), "coreset": ... or None, "suspect": str or None}``,
        stored as ``res.info["diagnostics"]``.

    Notes
    -----
    The rules, in order (docs/diagnostics.md measures them):

    1. input ``stein_corr`` beyond its noise (4 / sqrt(n)) and > :data:`SIGN_FLIP_CORR`, or
       ``stein_trace`` > :data:`SIGN_FLIP_TRACE`: "sign-flipped";
    2. input ``linear_r2`` < :data:`MISALIGNED_R2` (or 3 d / n), given at least
       :data:`MISALIGNED_MIN_ROWS` d rows: "misaligned";
    3. the result's ``mean_score`` > :data:`CORESET_MEAN_SCORE`: "wrong target" (X and S
       swapped, or the scores of another density);
    4. input ``mean_score`` > :data:`SWAP_MEAN_SCORE` and > :data:`SWAP_RATIO` times
       ``mean_score_swapped``: "swapped".

    :func:`stein_coreset.compress` runs it on every call (on the result too for the debiased
    methods). Cost: at most two :func:`stein_residuals` calls, O(n d^2).

    See Also
    --------
    stein_residuals : the figures judged.
    DiagnosticWarning : the warning.
    check_orientation : the shape check before these.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.diagnostics import check_scores
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((500, 2))   # biased for N(0, I)
    >>> res = sc.compress(X, -X, size=16, method="skt", seed=0)
    >>> out = check_scores(X, -X, res.weights, res.indices)
    >>> out["suspect"], round(out["input"]["mean_score"], 3), round(out["coreset"]["mean_score"], 3)
    (None, 0.442, 0.008)
    >>> shuffled = -X[np.random.default_rng(1).permutation(500)]   # rows of S not those of X
    >>> check_scores(X, shuffled, warn=False)["suspect"]
    'misaligned'
    """
    out = {"input": stein_residuals(X, S), "coreset": None, "suspect": None}
    inp = out["input"]
    noise = _noise(inp["n_eff"])
    len_d = X.shape[1]
    if coreset_rows is not None:
        xp = aa.namespace(X=X)[0]
        out["coreset"] = stein_residuals(
            xp.take(X, coreset_rows, axis=0), xp.take(S, coreset_rows, axis=0), coreset_weights
        )
    if inp["stein_corr"] > noise and (inp["stein_corr"] > SIGN_FLIP_CORR
                                      or inp["stein_trace"] > SIGN_FLIP_TRACE):
        out["suspect"] = "sign-flipped"
        msg = (
            f"S looks sign-flipped: the scores point away from the bulk of X (mean corr(s_j, "
            f"x_j) = {inp['stein_corr']:+.2f}; for s = grad log p it is negative). Did you pass "
            "-grad log p, e.g. the gradient of a potential U = -log p?"
        )
    elif (inp["n_eff"] >= MISALIGNED_MIN_ROWS * len_d
          and inp["linear_r2"] < max(MISALIGNED_R2, 3.0 * len_d / inp["n_eff"])):
        out["suspect"] = "misaligned"
        msg = (
            f"S does not look like a function of X: a linear function of X explains "
            f"{inp['linear_r2']:.1%} of the variance of S, as for unrelated rows (a score field "
            "is a smooth function of its points). Are the rows of S those of X, in the same "
            "order (not shuffled, shifted or from another run)?"
        )
    elif out["coreset"] is not None and out["coreset"]["mean_score"] > CORESET_MEAN_SCORE:
        out["suspect"] = "wrong target"
        msg = (
            "no weighting of X satisfies Stein's identity for these scores: the result's mean "
            f"score is {out['coreset']['mean_score']:.2f} standard deviations from 0 (a "
            "debiased result of correct scores is near 0). Are X and S swapped, are the "
            "scores those of another density than the one X was sampled for, or has X not "
            "reached where P has its mass (a chain still in its burn-in)?"
        )
    elif (inp["mean_score"] > SWAP_MEAN_SCORE
          and inp["mean_score"] > SWAP_RATIO * inp["mean_score_swapped"]):
        out["suspect"] = "swapped"
        msg = (
            f"X and S look swapped: the mean score sits {inp['mean_score']:.2f} standard "
            f"deviations from 0, and {inp['mean_score_swapped']:.2f} with the roles of X and S "
            "exchanged (under P the mean score is 0). Did you pass the scores as X and the "
            "points as S, or the scores of another density?"
        )
    else:
        return out
    if warn:
        warnings.warn(msg + " (res.info['diagnostics'] has the figures)", DiagnosticWarning,
                      stacklevel=3)
    return out
