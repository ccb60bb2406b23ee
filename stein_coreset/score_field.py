"""Is S a score field of X at all? A nearest-neighbour test that assumes nothing of the target.

A score s = grad log p is a continuous function of the point: two nearby points have nearby
scores, whatever the target (curved, heavy-tailed, multimodal, hierarchical) and however the
points were sampled (exact draws, a chain with its burn-in, a tempered or a short run). Rows of
S that do not belong to the rows of X (shuffled, from another run) break this, and it can be
tested without knowing p: :func:`score_field_test` pairs each of a few hundred query points with
its nearest neighbour in X and asks two questions of the pair's scores.

- ``nn_rank``: how often the neighbour's score is closer to the query's score than the score of
  a random point is (the fraction over queries and ``partners`` random points per query). A
  continuous field puts it near 1; for rows unrelated to X it is 1/2 exactly, since the
  neighbour's score is then one more random score.
- ``nn_sign``: the fraction of pairs with (s_i - s_j) . (x_i - x_j) < 0. Where log p is locally
  concave along the pair it is 1, and it is 1/2 for unrelated rows (the sign of s_i - s_j is then
  symmetric). It is unchanged by any linear change of coordinates (x -> A x, s -> A^-T s), so it
  holds for strongly correlated targets in high dimension, where a nearest neighbour in the
  coordinate metric need not be near in the directions the scores vary along; ``nn_rank`` holds
  where log p is convex (the tails of a Student-t), and the two together cover both.

Both come with ``_z``: their distance from 1/2 in standard deviations of what unrelated rows give
(sqrt((1/12 + 1/(6 K)) / q) and sqrt(1 / (4 q')) for q queries, K partners and q' distinct
pairs), so a threshold on them is a false-alarm rate for unrelated rows, the same at every n.

A third figure needs no statistics: an MCMC chain repeats its state after each rejected
proposal, and a function gives a repeated point the same score, so ``repeat_conflicts`` counts
the repeated rows whose score differs from the row before (0 for correct scores; shuffled or
shifted rows of a chain that rejects make many).

The points are first reduced to at most ``max_points`` evenly spaced rows, then to the rows that
differ from the row before (an MCMC chain repeats a state after each rejected proposal, and a
repeated state with its repeated score would be a trivial match). The metric is that of X's
coordinates, each divided by a robust scale (the interquartile range) and, up to
``WHITEN_MAX_D`` dimensions, decorrelated by the Cholesky factor L of their covariance; the
scores follow the same change of coordinates (s -> L^T s, the way a gradient transforms) and
are compared after the same robust scaling. Without the decorrelation a strongly correlated
posterior (a regression's intercept and slope) has neighbours that are near along its long
axis only, while its scores vary along the short ones: ``nn_rank`` then stays near 1/2 for
correct scores (measured on posteriordb: 0.56 for earnings-logearn_interaction's reference
draws), and only ``nn_sign`` tells them apart.

After the rows are gathered, the test runs in C++ (``engine/cpu/src_cpp/score_field.hpp``, which
states each step's formula); ``tests/test_diagnostics.py`` restates the test in NumPy from these
definitions and compares the figures.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from . import _array_api as aa
from .engine import score_field_figures, score_field_rows

__all__ = ["score_field_test", "MAX_POINTS", "QUERIES", "PARTNERS", "WHITEN_MAX_D"]

#: The test's rows: at most this many distinct rows of X, evenly spaced.
MAX_POINTS = 512
#: Query points (evenly spaced among those rows), each paired with its nearest neighbour.
QUERIES = 128
#: Random points per query whose scores the neighbour's score is compared with.
PARTNERS = 16
#: Up to this dimension the points are decorrelated (a d x d Cholesky factor) before the
#: neighbours are found; above it, each coordinate is only standardised.
WHITEN_MAX_D = 64


@functools.lru_cache(maxsize=32)
def _with_previous(n: int, max_points: int) -> np.ndarray:
    rows = aa.spaced_rows(n, min(n, max_points))
    idx = np.concatenate([rows, np.maximum(rows - 1, 0)])
    idx.setflags(write=False)
    return idx


@functools.lru_cache(maxsize=64)
def _partners(m: int, nq: int, partners: int, seed: int) -> np.ndarray:
    """The random partner rows of the nq evenly spaced queries among m rows (never the query
    itself): a deterministic function of its arguments, drawn once per shape."""
    q = aa.spaced_rows(m, nq)
    rng = np.random.default_rng(seed)
    part = (q[:, None] + rng.integers(1, m, size=(nq, partners))) % m
    part.setflags(write=False)
    return part


def score_field_test(X, S, *, max_points: int = MAX_POINTS, queries: int = QUERIES,
                     partners: int = PARTNERS, seed: int = 0) -> dict:
    """Nearest-neighbour test of whether the rows of S are a continuous function of those of X.

    Parameters
    ----------
    X, S : (n, d) arrays in one namespace
        Points and their (claimed) scores, finite.
    max_points : int
        At most this many distinct rows are used (evenly spaced).
    queries : int
        Query points, each paired with its nearest neighbour among those rows.
    partners : int
        Random rows per query whose scores the neighbour's is compared with.
    seed : int
        Seed of the random partners (the figures are a deterministic function of the input).

    Returns
    -------
    dict
        ``{"nn_rank", "nn_rank_z", "nn_sign", "nn_sign_z", "nn_queries", "nn_rows",
        "repeats", "repeat_conflicts"}``: Python floats (the ``nn_`` figures None when fewer
        than 8 distinct rows) and ints (``nn_rows``: the distinct rows searched). See the
        module docstring: ``nn_rank`` and ``nn_sign`` are near 1 for a score field of X and
        1/2 for unrelated rows; the ``_z`` figures are their distances from 1/2 in standard
        deviations of unrelated rows. ``repeats``: rows (of those tested) equal to the row
        before them; ``repeat_conflicts``: those of them whose score differs from the
        previous row's (by more than 1e-6 relative), which a score
        field never does.

    Notes
    -----
    O(m d^2 + d^3) to decorrelate (d <= ``WHITEN_MAX_D``), O(q m d) for the nearest
    neighbours of q queries among the m <= ``max_points`` rows, O(q K d) for the comparisons;
    whatever n, one host transfer of the m rows of X and of S and of the rows before them. The
    host work after the transfer is one compiled call (``engine/cpu/src_cpp/score_field.hpp``,
    serial, Ctrl-C seen between blocks of queries): at n = 2^15 the test takes 0.1-0.3 ms
    at d = 2 and about 3 ms at d = 50 (docs/diagnostics.md, "Cost").

    See Also
    --------
    stein_coreset.diagnostics.check_scores : calls S "misaligned" when neither figure is
        distinguishable from unrelated rows.

    Examples
    --------
    >>> import numpy as np
    >>> from stein_coreset.diagnostics import score_field_test
    >>> rng = np.random.default_rng(0)
    >>> x1 = 10.0 * rng.standard_normal(4000)                      # a banana: curved target
    >>> X = np.column_stack([x1, rng.standard_normal(4000) - 0.1 * (x1**2 - 100.0)])
    >>> u = X[:, 1] + 0.1 * (X[:, 0] ** 2 - 100.0)
    >>> S = np.column_stack([-X[:, 0] / 100.0 - 0.2 * X[:, 0] * u, -u])   # its scores
    >>> r = score_field_test(X, S)
    >>> round(r["nn_rank"], 2), r["nn_rank_z"] > 10
    (0.84, True)
    >>> r = score_field_test(X, S[rng.permutation(4000)])          # rows of S shuffled
    >>> abs(r["nn_rank_z"]) < 3, abs(r["nn_sign_z"]) < 3
    (True, True)
    """
    xp = aa.namespace(X=X, S=S)[0]
    n, d = int(X.shape[0]), int(X.shape[1])
    rows = aa.spaced_rows(n, min(n, int(max_points)))
    # each row with the row before it: a repeated point must come with the same score
    idx = aa.as_index_array(xp, _with_previous(n, int(max_points)), aa.device_of(X))
    Xb = np.ascontiguousarray(aa.to_host(aa.take_rows(xp, X, idx)), dtype=np.float64)
    Sb = np.ascontiguousarray(aa.to_host(aa.take_rows(xp, S, idx)), dtype=np.float64)
    # the rows that differ from the one before them (a chain repeats a state after a rejection)
    keep, repeats, conflicts = score_field_rows(Xb, Sb, int(rows[0] == 0))
    m = int(keep.size)
    out = {"nn_rank": None, "nn_rank_z": None, "nn_sign": None, "nn_sign_z": None,
           "nn_queries": 0, "nn_rows": m, "repeats": repeats, "repeat_conflicts": conflicts}
    if m < 8:
        return out
    nq = min(int(queries), m)
    q = aa.spaced_rows(m, nq)
    _, closer, pairs, signs = score_field_figures(
        Xb, Sb, keep, q, _partners(m, nq, int(partners), int(seed)),
        2 <= d <= WHITEN_MAX_D and m > 2 * d)
    rank = closer / (nq * int(partners))
    sign = signs / pairs
    sd_rank = math.sqrt((1.0 / 12.0 + 1.0 / (6.0 * partners)) / nq)
    sd_sign = math.sqrt(0.25 / pairs)
    out.update({"nn_rank": rank, "nn_rank_z": (rank - 0.5) / sd_rank, "nn_sign": sign,
                "nn_sign_z": (sign - 0.5) / sd_sign, "nn_queries": nq})
    return out
