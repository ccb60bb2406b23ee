"""Input diagnostics: do the scores S look like grad log p at the points X?

Two kinds of evidence, both cheap next to any compression:

- **Is S a score field of X at all?** A score is a continuous function of the point, whatever
  the target and however X was sampled: :func:`score_field_test` (module
  :mod:`stein_coreset.score_field`) pairs a few hundred points with their nearest neighbours and
  asks whether the neighbours' scores are closer than random rows' (``nn_rank``) and whether
  (s_i - s_j) . (x_i - x_j) is negative (``nn_sign``). Rows of S that are not those of X
  (shuffled, shifted, from another run) leave both at 1/2; correct scores of curved,
  heavy-tailed, multimodal and hierarchical targets put at least one far above. This replaces
  the linear fit of S on X that earlier versions judged, which is near 0 for correct scores of
  any target whose score is far from linear (a banana, a funnel, a centred hierarchical model).
- **Stein's identity** (integration by parts, for a smooth density p that vanishes at infinity):
  under P, E[s(x)] = 0 and E[s(x) (x - mu)^T] = -I. :func:`stein_residuals` computes, for the
  (weighted) sample, per coordinate and in O(n d):

  - ``stein_corr``: the mean over coordinates of corr(s_j, x_j), negative for correct scores
    (-1 for a Gaussian target), positive when the scores point away from the bulk (-grad log p
    passed, e.g. the gradient of a potential U = -log p);
  - ``stein_trace``: mean_j E[s_j (x_j - xbar_j)], exactly -1 under P for every target, -T for
    a chain tempered at T (dimensionless: s_j has the units of 1 / x_j);
  - ``mean_score``: the root mean square over coordinates of mean(s_j) sd(x_j), and
    ``mean_score_sd`` of mean(s_j) / sd(s_j): how far the sample's mean sits from where the
    scores point; 0 under P.

A biased chain (burn-in, a tempered or stochastic-gradient chain) breaks the identity on its
input too, so :func:`check_scores` judges the *debiased result* for it: a coreset that targets
P through correct scores satisfies the identity much better than its input, while X and S
swapped, or scores of another target far from the sample, leave the best coreset far from it.
What (X, S) alone cannot show -- a biased sample of the wrong target, X in a constrained space
with scores in an unconstrained one -- is in docs/diagnostics.md ("What cannot be detected").
:func:`check_scores` warns with :class:`DiagnosticWarning`, naming the likely cause; the figures
go to ``res.info["diagnostics"]``; :func:`thresholds` prints the rules with their constants.
"""

from __future__ import annotations

import math
import warnings

from . import _array_api as aa
from .engine import stein_moments
from .score_field import MAX_POINTS, score_field_test

__all__ = [
    "DiagnosticWarning",
    "stein_residuals",
    "score_field_test",
    "check_scores",
    "check_orientation",
    "thresholds",
    "INPUT_ROWS",
    "SIGN_FLIP_CORR",
    "SIGN_FLIP_TRACE",
    "MISALIGNED_Z",
    "MISALIGNED_MIN_ROWS",
    "MISALIGNED_CONFLICTS",
    "CORESET_MEAN_SCORE",
    "SWAP_MEAN_SCORE",
    "SWAP_RATIO",
    "SWAP_TRACE",
]

#: The input's Stein residuals are taken on at most this many evenly spaced rows.
INPUT_ROWS = 2048
#: Where the warnings send the reader for what the checks cannot see.
DOCS = "docs/diagnostics.md, 'What cannot be detected'"


class DiagnosticWarning(UserWarning):
    """The input looks like a misuse (e.g. scores that are not grad log p at the points).

    The result was computed, but is probably not what was meant; the message names the likely
    cause (sign-flipped, misaligned, swapped scores or the wrong target) and
    ``res.info["diagnostics"]`` has the figures. Silence it with
    ``warnings.filterwarnings("ignore", category=stein_coreset.DiagnosticWarning)``, or skip
    the checks with ``compress(..., diagnostics=False)``.

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


#: ``stein_corr`` positive and above this (and its noise, 4 / sqrt(n)), or positive with
#: ``stein_trace`` above :data:`SIGN_FLIP_TRACE`: the scores point away from the bulk.
SIGN_FLIP_CORR = 0.2
#: Under P ``stein_trace`` is -1 for every target (-T for a chain tempered at T).
SIGN_FLIP_TRACE = 0.5
#: ``nn_rank_z`` and ``|nn_sign_z|`` (:func:`score_field_test`) both below this: S is not a
#: function of X's rows (for unrelated rows each is about N(0, 1)). ``nn_sign_z`` below minus
#: this with a positive ``stein_trace``: sign-flipped.
MISALIGNED_Z = 4.0
#: The nearest-neighbour test judges S when it searched at least max(this, 5 d) distinct rows
#: (or all it reads, ``score_field.MAX_POINTS``).
MISALIGNED_MIN_ROWS = 100
#: Repeated rows of X with a different score (``repeat_conflicts``), at least this many and
#: 10% of the repeats: misaligned, whatever the nearest-neighbour test says.
MISALIGNED_CONFLICTS = 3
#: ``mean_score_sd`` of the debiased result above this: no weighting of X satisfies Stein's
#: identity for these scores (swapped X and S, scores of another target, or a sample that has
#: not reached P's mass).
CORESET_MEAN_SCORE = 0.5
#: The input's ``mean_score_sd`` above this and above :data:`SWAP_RATIO` times
#: ``mean_score_sd_swapped``: X and S are probably exchanged.
SWAP_MEAN_SCORE = 0.1
SWAP_RATIO = 4.0
#: ... and ``stein_trace`` below this: the sample spans its target's scale, as Stein's identity
#: says a sample of P does (-1); a short chain that covers a corner of P has a trace near 0,
#: and a mean score far from 0 that no swap explains.
SWAP_TRACE = -0.5


def stein_residuals(X, S, weights=None) -> dict:
    """How well the (weighted) sample satisfies Stein's identity E[s] = 0, E[s (x - mu)^T] = -I,
    coordinate by coordinate.

    ``stein_corr`` (mean corr(s_j, x_j): negative for correct scores, -1 for a Gaussian
    target), ``stein_trace`` (mean_j E[s_j (x_j - xbar_j)], -1 under P), ``mean_score`` (RMS_j
    mean(s_j) sd(x_j), 0 under P) and ``mean_score_sd`` (RMS_j mean(s_j) / sd(s_j)) are
    described in the module docstring; ``stein_trace_se`` is the standard error of
    ``stein_trace`` for independent rows; ``mean_score_swapped`` and ``mean_score_sd_swapped``
    are the last two with the roles of X and S exchanged (``mean_score_sd_swapped`` is how many
    of its sds the mean point sits from 0); ``n_eff`` is the effective sample size of the
    weights.

    Parameters
    ----------
    X, S : (n, d) arrays in one namespace
        Points and their scores.
    weights : (n,) array, optional
        Weights summing to 1 (signed weights allowed); default uniform.

    Returns
    -------
    dict
        ``{"stein_corr", "stein_trace", "stein_trace_se", "mean_score", "mean_score_sd",
        "mean_score_swapped", "mean_score_sd_swapped", "n_eff"}``, Python floats.

    Notes
    -----
    O(n d): per-coordinate means, variances and covariances (no d x d matrix), from
    ``stein_coreset.engine.stein_moments``: on NumPy arrays one C++ call (two passes over
    the rows, Ctrl-C seen every 4096 rows), on other namespaces array-API reductions in blocks
    of columns on the device, after which 5 d numbers leave it.

    See Also
    --------
    check_scores : judges these figures on the input and on a result.
    score_field_test : whether S is a function of X at all.
    stein_coreset.ksd : the kernel Stein discrepancy, a finer measure of the same fit.

    Examples
    --------
    >>> import numpy as np
    >>> import stein_coreset as sc
    >>> from stein_coreset.diagnostics import stein_residuals
    >>> X = 0.5 + np.random.default_rng(0).standard_normal((500, 2))   # biased for N(0, I)
    >>> r = stein_residuals(X, -X)
    >>> {k: round(v, 3) for k, v in r.items()}
    {'stein_corr': -1.0, 'stein_trace': -0.952, 'stein_trace_se': 0.045, 'mean_score': 0.442,
     'mean_score_sd': 0.466, 'mean_score_swapped': 0.442, 'mean_score_sd_swapped': 0.466,
     'n_eff': 500.0}
    >>> res = sc.compress(X, -X, size=16, method="skt", seed=0)   # the debiased coreset
    >>> round(stein_residuals(X[res.indices], -X[res.indices], res.weights)["mean_score"], 3)
    0.008
    """
    moments, spread, n_eff = stein_moments(X, S, weights)
    # d numbers per figure: Python floats (a NumPy call on a vector this short costs more than
    # the arithmetic); a variance below 0 (signed weights) counts by its size
    xbar, sbar, var_x, var_s, cov = moments.tolist()
    d = len(cov)
    sd_x = [math.sqrt(abs(v)) for v in var_x]
    sd_s = [math.sqrt(abs(v)) for v in var_s]
    corr = [c / (a * b) for c, a, b in zip(cov, sd_x, sd_s, strict=True) if a > 0 and b > 0]

    def rms(values) -> float:  # over all d coordinates; a coordinate with sd 0 counts as 0
        return math.sqrt(sum(v * v for v in values) / d)

    return {
        "stein_corr": sum(corr) / len(corr) if corr else 0.0,
        "stein_trace": sum(cov) / d,
        "stein_trace_se": math.sqrt(max(spread, 0.0) / max(n_eff, 1.0)),
        "mean_score": rms(m * a for m, a in zip(sbar, sd_x, strict=True)),
        "mean_score_sd": rms(m / a for m, a in zip(sbar, sd_s, strict=True) if a > 0),
        "mean_score_swapped": rms(m * a for m, a in zip(xbar, sd_s, strict=True)),
        "mean_score_sd_swapped": rms(m / a for m, a in zip(xbar, sd_x, strict=True) if a > 0),
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


def _judge(out: dict, d: int) -> tuple:
    """(suspect, message) from the figures of :func:`check_scores` for d-dimensional points,
    or (None, None)."""
    inp, field, cor = out["input"], out["field"], out["coreset"]
    if (field["repeat_conflicts"] >= MISALIGNED_CONFLICTS
            and field["repeat_conflicts"] >= 0.1 * field["repeats"]):
        return "misaligned", (
            f"S does not look like a function of X: {field['repeat_conflicts']} of the "
            f"{field['repeats']} rows of X tested that repeat the row before them (a chain "
            "that rejected a proposal) have a different score, which a score field never "
            "gives. Are the rows of S those of X, in the same order (not shuffled, shifted or "
            "from another run)?"
        )
    if (field["nn_rows"] >= min(max(MISALIGNED_MIN_ROWS, 5 * d), MAX_POINTS)
            and field["nn_rank_z"] < MISALIGNED_Z and abs(field["nn_sign_z"]) < MISALIGNED_Z):
        return "misaligned", (
            "S does not look like a function of X: the scores of nearest neighbours in X are "
            f"no closer than those of random rows ({field['nn_rank']:.0%} closer, 50% for "
            "unrelated rows; a score field is continuous, so correct scores put it near "
            "100%). Are the rows of S those of X, in the same order (not shuffled, shifted or "
            "from another run)?"
        )
    corr, trace = inp["stein_corr"], inp["stein_trace"]
    local = field["nn_sign_z"] is not None and field["nn_sign_z"] < -MISALIGNED_Z
    flat = trace > max(SIGN_FLIP_TRACE, 3.0 * inp["stein_trace_se"])
    if (corr > 0 and (flat or corr > max(SIGN_FLIP_CORR, _noise(inp["n_eff"])))
            or (local and trace > 0)):
        return "sign-flipped", (
            f"S looks sign-flipped: the scores point away from the bulk of X (mean corr(s_j, "
            f"x_j) = {corr:+.2f}, mean E[s_j (x_j - mean x_j)] = {trace:+.2f}; for "
            "s = grad log p both are negative, the second -1 under P for every target). Did "
            "you pass -grad log p, e.g. the gradient of a potential U = -log p?"
        )
    if cor is not None and cor["mean_score_sd"] > CORESET_MEAN_SCORE:
        return "wrong target", (
            "no weighting of X satisfies Stein's identity for these scores: the result's mean "
            f"score is {cor['mean_score_sd']:.2f} standard deviations of the scores from 0 (a "
            "debiased result of correct scores is near 0). Are X and S swapped, are the "
            "scores those of another density than the one X was sampled for, or has X not "
            "reached where P has its mass (a chain still in its burn-in, or too short)?"
        )
    if (inp["mean_score_sd"] > max(SWAP_MEAN_SCORE, _noise(inp["n_eff"]))
            and inp["mean_score_sd"] > SWAP_RATIO * inp["mean_score_sd_swapped"]
            and trace < SWAP_TRACE):
        return "swapped", (
            f"X and S look swapped: the mean score is {inp['mean_score_sd']:.2f} standard "
            "deviations of the scores from 0, and the mean point "
            f"{inp['mean_score_sd_swapped']:.2f} standard deviations of the points from 0 (with "
            "the roles of X and S exchanged; under P the mean score is 0). Did you pass the "
            "scores as X and the points as S, or the scores of another density?"
        )
    return None, None


def check_scores(X, S, coreset_weights=None, coreset_rows=None, *, warn: bool = True) -> dict:
    """Whether S is a score field of X, Stein's identity on the input and on the debiased
    result; a :class:`DiagnosticWarning` naming the likely cause when the scores do not look
    like grad log p at X.

    Parameters
    ----------
    X, S : (n, d) arrays
        The input points and scores, finite.
    coreset_weights, coreset_rows : optional
        The result's weights and its rows of X (an int index array), to check the result too.
    warn : bool
        Warn (default) or only return the figures.

    Returns
    -------
    dict
        ``{"input": stein_residuals(X, S), "field": score_field_test(X, S), "coreset":
        stein_residuals of the result or None, "suspect": str or None, "checked": True}``,
        stored as ``res.info["diagnostics"]``; the input's residuals are taken on at most
        :data:`INPUT_ROWS` evenly spaced rows.

    Notes
    -----
    The rules, in order (:func:`thresholds` prints them with their constants;
    docs/diagnostics.md measures them); the figures of the input unless said otherwise:

    1. ``repeat_conflicts`` >= :data:`MISALIGNED_CONFLICTS` and >= 10% of ``repeats``, or
       ``nn_rank_z`` < :data:`MISALIGNED_Z` and ``|nn_sign_z|`` < :data:`MISALIGNED_Z` (with
       ``nn_rows`` >= min(max(:data:`MISALIGNED_MIN_ROWS`, 5 d), 512)): "misaligned";
    2. ``stein_corr`` > 0 and (``stein_trace`` > max(:data:`SIGN_FLIP_TRACE`, 3
       ``stein_trace_se``) or ``stein_corr`` > max(:data:`SIGN_FLIP_CORR`, 4 / sqrt(n))), or
       ``nn_sign_z`` < -:data:`MISALIGNED_Z` and ``stein_trace`` > 0: "sign-flipped";
    3. the result's ``mean_score_sd`` > :data:`CORESET_MEAN_SCORE`: "wrong target" (X and S
       swapped, the scores of another density, or a sample that has not reached P's mass);
    4. ``mean_score_sd`` > max(:data:`SWAP_MEAN_SCORE`, 4 / sqrt(n)) and > :data:`SWAP_RATIO`
       times ``mean_score_sd_swapped``, with ``stein_trace`` < :data:`SWAP_TRACE`: "swapped".

    :func:`stein_coreset.compress` runs it on every call with scores (on the result too for
    the debiased methods) unless ``diagnostics=False``. Cost, whatever n: O(d) moments of at
    most :data:`INPUT_ROWS` rows, and :func:`score_field_test` on at most 512 rows.

    See Also
    --------
    stein_residuals, score_field_test : the figures judged.
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
    xp = aa.namespace(X=X, S=S)[0]
    n = int(X.shape[0])
    if n > INPUT_ROWS:  # evenly spaced rows: a chain's every stage, in proportion
        rows = aa.as_index_array(xp, aa.spaced_rows(n, INPUT_ROWS), aa.device_of(X))
        inp = stein_residuals(aa.take_rows(xp, X, rows), aa.take_rows(xp, S, rows))
    else:
        inp = stein_residuals(X, S)
    out = {"input": inp, "field": score_field_test(X, S), "coreset": None, "suspect": None,
           "checked": True}
    if coreset_rows is not None:
        out["coreset"] = stein_residuals(
            aa.take_rows(xp, X, coreset_rows), aa.take_rows(xp, S, coreset_rows), coreset_weights
        )
    suspect, msg = _judge(out, int(X.shape[1]))
    out["suspect"] = suspect
    if warn and suspect is not None:
        warnings.warn(f"{msg} (res.info['diagnostics'] has the figures; what these checks "
                      f"cannot see: {DOCS})", DiagnosticWarning, stacklevel=3)
    return out


def thresholds() -> str:
    """The rules of :func:`check_scores` with the constants in force, as a Markdown table.

    docs/diagnostics.md shows this table, and its test compares the page with what this
    prints, so the page cannot quote a threshold the code does not use.

    Returns
    -------
    str

    See Also
    --------
    check_scores : applies the rules in this order.

    Examples
    --------
    >>> from stein_coreset.diagnostics import thresholds
    >>> print(thresholds().splitlines()[0])
    | rule | suspect | fires when |
    """
    z = f"{MISALIGNED_Z:g}"
    rows = [
        ("1", "misaligned", f"`repeat_conflicts` ≥ {MISALIGNED_CONFLICTS} and ≥ 10% of "
         f"`repeats`; or `nn_rank_z` < {z} and abs(`nn_sign_z`) < {z} (with `nn_rows` ≥ "
         f"min(max({MISALIGNED_MIN_ROWS}, 5 d), {MAX_POINTS}))"),
        ("2", "sign-flipped", f"`stein_corr` > 0 and (`stein_trace` > max({SIGN_FLIP_TRACE:g}, "
         f"3 `stein_trace_se`) or `stein_corr` > max({SIGN_FLIP_CORR:g}, 4/√n)); or "
         f"`nn_sign_z` < -{z} and `stein_trace` > 0"),
        ("3", "wrong target", f"the debiased result's `mean_score_sd` > {CORESET_MEAN_SCORE:g}"),
        ("4", "swapped", f"`mean_score_sd` > max({SWAP_MEAN_SCORE:g}, 4/√n) and > {SWAP_RATIO:g} × "
         f"`mean_score_sd_swapped`, and `stein_trace` < {SWAP_TRACE:g}"),
    ]
    lines = ["| rule | suspect | fires when |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)
