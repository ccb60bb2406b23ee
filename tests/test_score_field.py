"""The nearest-neighbour score-field test (stein_coreset.score_field) against its definition:
the figures of the compiled test equal those of a NumPy restatement of each step
(engine/cpu/src_cpp/score_field.hpp states them), with the neighbours found by brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stein_coreset import score_field
from stein_coreset.engine import score_field_figures, score_field_rows


def _scale(A):
    m = A.shape[0]
    lo, hi = (m - 1) // 4, (3 * (m - 1)) // 4
    part = np.sort(A, axis=0)
    s = (part[hi] - part[lo]) / 1.349
    s = np.where(s > 0, s, A.std(axis=0))
    return np.where(s > 0, s, 1.0)


def _whitened(Z, T):
    m, d = Z.shape
    C = np.clip(Z - np.median(Z, axis=0), -5.0, 5.0)
    C = C.T @ C / m
    try:
        L = np.linalg.cholesky(C + 1e-9 * np.trace(C) / d * np.eye(d))
    except np.linalg.LinAlgError:
        return Z, T
    return np.linalg.solve(L, Z.T).T, T @ L


def _definition(X, S, max_points=512, queries=128, partners=16, seed=0):
    """score_field_test restated in NumPy from the module docstring and score_field.hpp."""
    n, d = X.shape
    k = min(n, max_points)
    rows = np.floor((np.arange(k) + 0.5) * (n / k)).astype(np.int64)
    prev = np.maximum(rows - 1, 0)
    same = np.all(X[rows] == X[prev], axis=1) & (rows >= 1)
    tol = 1e-6 * (np.abs(S[rows]) + np.abs(S[prev])) + 1e-300
    conflicts = int(np.sum(same & np.any(np.abs(S[rows] - S[prev]) > tol, axis=1)))
    Xm, Sm = X[rows], S[rows]
    keep = np.concatenate([[True], np.any(Xm[1:] != Xm[:-1], axis=1)])
    Xm, Sm = Xm[keep], Sm[keep]
    m = Xm.shape[0]
    out = {"repeats": int(same.sum()), "repeat_conflicts": conflicts, "nn_rows": m}
    if m < 8:
        return out
    a = _scale(Xm)
    Z, T = Xm / a, Sm * a
    if 2 <= d <= score_field.WHITEN_MAX_D and m > 2 * d:
        Z, T = _whitened(Z, T)
    T = T / _scale(T)
    nq = min(queries, m)
    q = np.floor((np.arange(nq) + 0.5) * (m / nq)).astype(np.int64)
    dist = ((Z[q, None, :] - Z[None, :, :]) ** 2).sum(axis=2)
    dist[np.arange(nq), q] = np.inf
    nn = np.argmin(dist, axis=1)
    rng = np.random.default_rng(seed)
    part = (q[:, None] + rng.integers(1, m, size=(nq, partners))) % m
    d_nn = ((T[q] - T[nn]) ** 2).sum(axis=1)[:, None]
    d_part = ((T[q, None, :] - T[part]) ** 2).sum(axis=2)
    rank = float(np.mean((d_nn < d_part) + 0.5 * (d_nn == d_part)))
    pairs = np.unique(np.stack([np.minimum(q, nn), np.maximum(q, nn)], axis=1), axis=0)
    i, j = pairs[:, 0], pairs[:, 1]
    dot = ((Sm[i] - Sm[j]) * (Xm[i] - Xm[j])).sum(axis=1)
    sign = float(np.mean((dot < 0) + 0.5 * (dot == 0)))
    out.update({"nn_rank": rank, "nn_sign": sign, "nn_queries": nq,
                "nn_rank_z": (rank - 0.5) / math.sqrt((1 / 12 + 1 / (6 * partners)) / nq),
                "nn_sign_z": (sign - 0.5) / math.sqrt(0.25 / len(pairs))})
    return out


def _case(kind, n, d, seed):
    rng = np.random.default_rng(seed)
    C = rng.standard_normal((d, d)) / np.sqrt(d) + np.eye(d)
    X = rng.standard_normal((n, d)) @ C.T
    S = -X @ np.linalg.inv(C @ C.T)
    if kind == "shuffled":
        S = S[rng.permutation(n)]
    elif kind == "chain":  # a third of the states repeated, as after rejections
        X[::3], S[::3] = np.roll(X, 1, 0)[::3], np.roll(S, 1, 0)[::3]
    elif kind == "shifted chain":  # the repeats carry the score of the state before
        X[::3] = np.roll(X, 1, 0)[::3]
    elif kind == "curved":
        X = X ** 3 if d == 1 else np.column_stack([10 * X[:, 0]] + [X[:, j] - 0.1 * X[:, 0] ** 2
                                                                     for j in range(1, d)])
    return X, S


@pytest.mark.parametrize("kind", ["field", "shuffled", "chain", "shifted chain", "curved"])
@pytest.mark.parametrize("n, d", [(12, 1), (300, 2), (700, 3), (5000, 2), (3000, 10),
                                  (2000, 64), (2000, 65), (600, 200)])
def test_the_compiled_test_gives_the_figures_of_its_definition(kind, n, d):
    X, S = _case(kind, n, d, seed=n + d)
    got = score_field.score_field_test(X, S)
    want = _definition(X, S)
    assert got.keys() >= want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key


def test_the_neighbour_is_the_first_of_equally_near_rows():
    # a grid: every interior query has four neighbours at distance 1; the first is the lowest row
    g = np.arange(8.0)
    X = np.array([(a, b) for a in g for b in g])
    q = np.array([9, 27, 36])
    part = np.zeros((3, 1), dtype=np.int64)
    nn, *_ = score_field_figures(X, -X, np.arange(64), q, part, False)
    assert nn.tolist() == [1, 19, 28]


def test_rows_repeating_the_row_before_are_counted_and_dropped():
    X = np.array([[0.0], [0.0], [1.0], [1.0], [2.0], [5.0]])
    S = np.array([[0.0], [0.5], [1.0], [1.0], [2.0], [5.0]])
    # rows 1 .. 5 and the row before each (row 0 has none: no_prev = 1)
    rows = np.arange(6)
    Xb = np.concatenate([X[rows], X[np.maximum(rows - 1, 0)]])
    Sb = np.concatenate([S[rows], S[np.maximum(rows - 1, 0)]])
    keep, repeats, conflicts = score_field_rows(Xb, Sb, 1)
    assert keep.tolist() == [0, 2, 4, 5] and repeats == 2 and conflicts == 1


def test_out_of_range_rows_are_refused_before_the_compiled_call():
    X = np.random.default_rng(0).standard_normal((20, 2))
    keep, q = np.arange(20), np.arange(4)
    with pytest.raises(ValueError, match="query"):
        score_field_figures(X, -X, keep, q + 17, np.ones((4, 2), dtype=np.int64), False)
    with pytest.raises(ValueError, match="partner"):
        score_field_figures(X, -X, keep, q, np.full((4, 2), 20, dtype=np.int64), False)
    with pytest.raises(ValueError, match="kept row"):
        score_field_figures(X, -X, keep + 1, q, np.ones((4, 2), dtype=np.int64), False)
