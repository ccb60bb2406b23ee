"""Resampling simplex weights to equal weights (Alg. E.1-E.3)."""

import numpy as np
import pytest

from stein_coreset.algorithms import resample


def _weights(n=50, seed=0, zeros=10):
    rng = np.random.default_rng(seed)
    w = rng.random(n) ** 3
    w[rng.choice(n, zeros, replace=False)] = 0.0
    return w / w.sum()


@pytest.mark.parametrize("method", ["stratified_residual", "residual", "iid"])
def test_resample_returns_m_indices_on_the_support(method, xp):
    w = _weights()
    idx = resample(xp.asarray(w), 37, rng=0, method=method)
    assert idx.shape == (37,) and idx.dtype == np.int64
    assert np.all(w[idx] > 0)  # never an index of zero weight


@pytest.mark.parametrize("method", ["stratified_residual", "residual"])
def test_residual_resampling_keeps_the_integer_part(method):
    w = _weights(seed=1)
    m = 64
    counts = np.bincount(resample(w, m, rng=3, method=method), minlength=w.size)
    floor = np.floor(m * w)
    assert np.all(counts >= floor) and np.all(counts <= floor + (m - floor.sum()))


def test_stratified_residual_adds_at_most_one_per_stratum():
    """With r residual draws in r strata of eta's CDF, no index gets more residual copies than
    the number of strata its residual mass meets: ceil(r eta_i) + 1."""
    w = _weights(seed=2)
    m = 40
    floor = np.floor(m * w)
    eta = m * w - floor
    r = int(m - floor.sum())
    counts = np.bincount(resample(w, m, rng=5), minlength=w.size) - floor
    assert np.all(counts <= np.ceil(r * eta / eta.sum()) + 1)


@pytest.mark.parametrize("method", ["stratified_residual", "residual", "iid"])
def test_resample_is_unbiased(method):
    w = _weights(n=12, seed=3, zeros=2)
    reps = 4000
    mean = np.zeros(w.size)
    rng = np.random.default_rng(0)
    for _ in range(reps):
        mean += np.bincount(resample(w, 9, rng=rng, method=method), minlength=w.size) / 9
    mean /= reps
    assert np.abs(mean - w).max() < 0.01


def test_resample_variance_ordering():
    """Stratified residual <= residual <= i.i.d. in the spread of the counts (Prop. E.1)."""
    w = _weights(n=30, seed=4, zeros=0)
    rng = np.random.default_rng(1)

    def spread(method):
        c = [
            np.bincount(resample(w, 20, rng=rng, method=method), minlength=30) / 20 - w
            for _ in range(1500)
        ]
        return np.mean(np.sum(np.square(c), axis=1))

    s, r, i = spread("stratified_residual"), spread("residual"), spread("iid")
    assert s < r < i


def test_resample_same_seed_same_result():
    w = _weights()
    np.testing.assert_array_equal(resample(w, 30, rng=8), resample(w, 30, rng=8))


def test_resample_bad_input():
    w = _weights()
    with pytest.raises(ValueError, match="method"):
        resample(w, 3, method="systematic")
    with pytest.raises(ValueError, match="m"):
        resample(w, 0)
    with pytest.raises(ValueError, match="w"):
        resample(-w, 3)
    with pytest.raises(ValueError, match="w"):
        resample(w * 2, 3)
    with pytest.raises(ValueError, match="w"):
        resample(np.ones((2, 2)) / 4, 3)
