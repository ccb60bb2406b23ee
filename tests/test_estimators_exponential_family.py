"""Exponential families (estimators.exponential_family): scores from T and b, the intractable
model of Sec. 4.4 and its sampler, names, bounds and supports declared by the user."""

import numpy as np
import pytest

from stein_coreset import estimators as est


def _fd_x(f, x, h=1e-6):
    cols = []
    for j in range(x.shape[1]):
        e = np.zeros_like(x)
        e[:, j] = h
        cols.append((f(x + e) - f(x - e)) / (2 * h))
    return np.stack(cols, axis=-1)


def test_intractable_model_score_and_sampler():
    model = est.intractable_model()
    X = est.sample_intractable(3000, theta=-1.0, seed=0)
    assert X.shape == (3000, 6)
    H = model.score_dx(X[:20], [-1.0])
    np.testing.assert_allclose(H, _fd_x(lambda z: model.score(z, [-1.0]), X[:20]), atol=1e-6)
    # Stein identity E[score] = 0 under the model (exact sampler)
    s = model.score(X, [-1.0])
    assert np.all(np.abs(s.mean(axis=0)) < 4 * s.std(axis=0) / np.sqrt(3000))


def test_exponential_family_from_T_and_b_by_finite_differences():
    # N(mu, 1) as exp(mu x - x^2/2): T = x, b = -x^2/2
    fam = est.ExponentialFamily(T=lambda x: x, b=lambda x: -0.5 * x[:, 0] ** 2)
    x = np.linspace(-2, 2, 7)[:, None]
    np.testing.assert_allclose(fam.score(x, [0.7]), 0.7 - x, atol=1e-8)
    np.testing.assert_allclose(fam.score_dx(x, [0.7])[:, 0, 0], -1.0, atol=1e-4)
    assert fam.n_params == 1



def test_exponential_family_takes_names_bounds_and_support():
    fam = est.ExponentialFamily(T=lambda x: np.concatenate([np.log(x), -x], axis=1),
                                param_names=["a_minus_1", "rate"],
                                bounds=[(-1.0, None), (0.0, None)], support=(0.0, None))
    assert fam.n_params == 2 and fam.param_names == ("a_minus_1", "rate")
    X = est.Gamma().sample(300, [4.0, 2.0], np.random.default_rng(0))
    f = est.fit(fam, X, discrepancy="ksd", optimizer="closed_form")
    assert list(f.params) == ["a_minus_1", "rate"]
    with pytest.raises(ValueError, match="outside the support"):
        est.fit(fam, np.vstack([X, [[-1.0]]]), discrepancy="ksd", optimizer="closed_form")
    with pytest.raises(ValueError, match=r"theta0\[1\] \(rate\) must satisfy rate > 0"):
        est.fit(fam, X, discrepancy="ksd", optimizer="lbfgs", theta0=[1.0, -1.0])
