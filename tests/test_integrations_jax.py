"""scores_from_logdensity: jax.vmap(jax.grad(log p)) at every row."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import stein_coreset as sc  # noqa: E402
from stein_coreset.integrations.jax import scores_from_logdensity  # noqa: E402


def gaussian_logdensity(x):
    A = jnp.array([[2.0, 0.5], [0.5, 1.0]])
    return -0.5 * x @ A @ x


def test_scores_equal_the_analytic_gaussian_score_in_float64():
    X = np.random.default_rng(0).normal(size=(50, 2))
    A = np.array([[2.0, 0.5], [0.5, 1.0]])
    S = scores_from_logdensity(gaussian_logdensity, X, batch_size=7)
    assert S.dtype == np.float64
    np.testing.assert_allclose(S, -X @ A, rtol=1e-13)
    assert jnp.asarray([1.0]).dtype == jnp.float32 or jax.config.jax_enable_x64  # config untouched


def test_scores_feed_compress_and_nan_rows_are_left_for_nan_policy():
    X = np.random.default_rng(1).normal(size=(200, 2)) + 3.0  # biased sample
    X[5] = np.nan
    S = scores_from_logdensity(gaussian_logdensity, X)
    assert np.isnan(S[5]).all()
    res = sc.compress(X, S, size=10, method="skt", seed=0, nan_policy="omit")
    assert res.info["n_dropped"] == 1


def test_a_logdensity_of_the_wrong_shape_is_an_error():
    with pytest.raises(ValueError, match="X must be"):
        scores_from_logdensity(gaussian_logdensity, np.zeros(3))
    with pytest.raises(TypeError, match="callable"):
        scores_from_logdensity(None, np.zeros((2, 2)))
