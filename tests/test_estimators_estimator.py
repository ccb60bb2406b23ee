"""SteinEstimator: the scikit-learn style wrapper of estimators.fit."""

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset import estimators as est


@pytest.fixture(scope="module")
def data():
    model = est.Gaussian(d=1)
    return model, model.sample(300, [0.5, 2.0], np.random.default_rng(0))


def test_stein_estimator_gives_the_same_theta_and_stderr_as_fit(data):
    model, X = data
    kw = dict(discrepancy="ksd", kernel=sc.IMQ(sigma=2.0), optimizer="lbfgs")
    m = est.SteinEstimator(model, **kw).fit(X)
    f = est.fit(model, X, **kw)
    np.testing.assert_allclose(m.theta_, f.theta)
    np.testing.assert_allclose(m.stderr_, f.stderr)
    assert m.converged_ and m.n_features_in_ == 1 and m.result_.discrepancy == "ksd"


def test_stein_estimator_score_is_minus_loss_with_the_kernel_fixed_at_fit(data):
    model, X = data
    m = est.SteinEstimator(model, discrepancy="ksd", optimizer="lbfgs").fit(X)
    assert m.kernel_.sigma == pytest.approx(sc.kernels.median_bandwidth(X))
    Y = X[:100] + 3.0  # another sample's median bandwidth must not change the yardstick
    assert m.score(Y) == pytest.approx(-est.loss(model, m.theta_, Y, discrepancy="ksd",
                                                 kernel=m.kernel_))
    assert m.score(X.tolist()) > m.score(Y)


def test_stein_estimator_params_round_trip_and_refuse_unknown_names(data):
    model, _ = data
    m = est.SteinEstimator(model, discrepancy="sm")
    p = m.get_params()
    assert p["discrepancy"] == "sm" and p["model"] is model and p["optimizer"] == "riemannian_sgd"
    assert m.set_params(optimizer="lbfgs") is m and m.optimizer == "lbfgs"
    with pytest.raises(ValueError, match="invalid parameter"):
        m.set_params(lengthscale=1.0)
    assert "discrepancy='sm'" in repr(m)


def test_stein_estimator_refuses_score_before_fit_and_bad_data(data):
    model, X = data
    m = est.SteinEstimator(model, discrepancy="sm", optimizer="lbfgs")
    with pytest.raises(est.NotFittedError, match="not fitted"):
        m.score(X)
    with pytest.raises(ValueError, match="NaN"):
        m.fit(np.full((10, 1), np.nan))


def test_stein_estimator_clones_with_scikit_learn(data):
    base = pytest.importorskip("sklearn.base")
    model, X = data
    m = est.SteinEstimator(model, discrepancy="sm", optimizer="lbfgs")
    c = base.clone(m).fit(X)
    assert c.get_params()["discrepancy"] == "sm" and not hasattr(m, "theta_")
