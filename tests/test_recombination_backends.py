"""Recombination Thinning across backends: what agrees exactly and what only in distribution.

Recombination (Alg. G.1) is a deterministic function of the bits of its input but not a
continuous one, so rt / sr / lsr on the C++ ("cpu") and array-API ("xp") backends, whose test
vectors F agree only to rounding, may keep different points. What holds on every backend: each
result matches the moments of its own F exactly, and bit-identical input gives bit-identical
output.
"""

import importlib

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset import _array_api as aa
from stein_coreset.algorithms import recombination, weighted_rpcholesky

rec = importlib.import_module("stein_coreset.algorithms.recombination")


def test_recombination_output_is_bit_identical_for_bit_identical_input(xp):
    rng = np.random.default_rng(4)
    A = rng.standard_normal((12, 700))
    A[0] = 1.0
    x0 = rng.random(700) ** 3
    ref = recombination(A, x0)
    x = recombination(xp.asarray(A), xp.asarray(x0))
    np.testing.assert_array_equal(xp.to_numpy(x), ref)


def _backends():
    rng = np.random.default_rng(2)
    X = 0.7 + 1.5 * rng.standard_normal((512, 3))
    kern = sc.SteinKernel(sc.IMQ(sigma=2.0))
    K = kern.bind(X, -X)
    out = {"cpu": K, "xp": K.with_backend("xp")}
    strict = pytest.importorskip("array_api_strict")
    dev = strict.Device("device1")
    out["strict"] = kern.bind(strict.asarray(X, device=dev), strict.asarray(-X, device=dev))
    return out


def test_recombination_thinning_backends_each_match_their_own_moments_exactly():
    """RT's Recombination step on each backend: at most rank + 1 points of the resampled
    support, non-negative weights summing to 1, and F^T x = F^T ws for that backend's own test
    vectors F to rounding. The backends' F agree to ~1e-15 (same pivots), and Recombination of
    one backend's F gives the same points whichever namespace holds it."""
    supp = np.arange(0, 512, 2)
    ws = np.random.default_rng(3).random(supp.size) ** 2
    ws /= ws.sum()
    rank = 15
    factors, kept = {}, {}
    for name, K in _backends().items():
        piv, F = weighted_rpcholesky(K.take(supp), aa.from_host(ws, like=K.diag()), rank,
                                     np.random.default_rng(8))
        factors[name] = (piv, aa.to_host(F))
        idx, x = rec._recombine(K, supp, ws, rank, np.random.default_rng(8))
        assert idx.size <= rank + 1 and np.all(x > 0) and x.sum() == pytest.approx(1.0)
        dense = np.zeros(supp.size)
        dense[np.searchsorted(supp, idx)] = x
        Fh = factors[name][1]
        scale = np.abs(Fh).T @ ws
        assert np.max(np.abs(Fh.T @ dense - Fh.T @ ws) / scale) < 1e-12, name
        kept[name] = idx
    p_cpu, F_cpu = factors["cpu"]
    for name in ("xp", "strict"):
        np.testing.assert_array_equal(factors[name][0], p_cpu)
        np.testing.assert_allclose(factors[name][1], F_cpu, rtol=1e-12,
                                   atol=1e-13 * np.abs(F_cpu).max())
    # bit-identical input: the same points, in any namespace
    P = np.hstack([F_cpu, np.ones((supp.size, 1))]).T
    x_np = recombination(P, ws)
    strict = pytest.importorskip("array_api_strict")
    x_st = recombination(strict.asarray(P), strict.asarray(ws))
    np.testing.assert_array_equal(aa.to_host(x_st), x_np)
    np.testing.assert_array_equal(supp[x_np > 0], kept["cpu"])
