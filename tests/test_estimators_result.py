"""FitResult read like a statsmodels result (estimators.result): named params, stderr,
conf_int, summary() and a short repr; SteinEstimator exposes the same."""

import numpy as np
import pytest
from support.estimator_models import CorrelatedGaussian

from stein_coreset import estimators as est


@pytest.fixture(scope="module")
def three_parameter_fit():
    model = CorrelatedGaussian()
    X = model.sample(400, [1.0, 2.0, 0.6], np.random.default_rng(0))
    return est.fit(model, X, discrepancy="ksd", optimizer="lbfgs")


def test_params_are_named_by_the_model(three_parameter_fit):
    f = three_parameter_fit
    assert f.converged, f.message
    assert list(f.params) == ["s1", "s2", "rho"] and f.param_names == ("s1", "s2", "rho")
    np.testing.assert_array_equal(list(f.params.values()), f.theta)
    # a model without names gets theta[j]
    fam = est.ExponentialFamily(T=lambda x: x)
    g = est.fit(fam, np.random.default_rng(1).normal(size=(50, 1)), discrepancy="ksd",
                optimizer="closed_form")
    assert list(g.params) == ["theta[0]"]


def test_conf_int_is_the_wald_interval_at_level_alpha(three_parameter_fit):
    f = three_parameter_fit
    ci = f.conf_int()
    np.testing.assert_allclose((ci[:, 1] - ci[:, 0]) / 2, 1.959963984540054 * f.stderr)
    np.testing.assert_allclose(ci.mean(axis=1), f.theta)
    assert np.all(f.conf_int(0.01)[:, 1] > ci[:, 1])
    with pytest.raises(ValueError, match="alpha"):
        f.conf_int(1.5)


def test_conf_int_without_standard_errors_says_why():
    X = np.random.default_rng(0).normal(size=(100, 1))
    f = est.fit(est.Gaussian(), X, discrepancy="sm", optimizer="lbfgs", stderr=False)
    with pytest.raises(ValueError, match=r"no standard errors for this fit: not computed"):
        f.conf_int()
    assert "n/a" in str(f.summary())


def test_summary_is_a_table_of_estimates_and_of_the_fit(three_parameter_fit):
    f = three_parameter_fit
    text = str(f.summary())
    for word in ("s1", "s2", "rho", "estimate", "std err", "[0.025", "0.975]",
                 "discrepancy: ksd", "n: 400", "optimizer:   lbfgs (deterministic)",
                 "converged:   True", "CorrelatedGaussian()", "stderr: asymptotic sandwich"):
        assert word in text, word
    rows = f.summary().rows
    assert [r["name"] for r in rows] == ["s1", "s2", "rho"]
    assert rows[2]["lower"] == pytest.approx(f.conf_int()[2, 0])


def test_the_repr_is_short(three_parameter_fit):
    # before: printing a FitResult dumped ~12,000 characters (history, losses, ...)
    r = repr(three_parameter_fit)
    assert len(r) < 160 and r.startswith("FitResult(ksd, lbfgs, n=400, converged=True")


def test_the_estimator_object_exposes_params_intervals_and_summary():
    model = est.Gaussian(d=1)
    X = model.sample(300, [0.5, 2.0], np.random.default_rng(0))
    m = est.SteinEstimator(model, discrepancy="sm", optimizer="lbfgs")
    with pytest.raises(est.NotFittedError):
        m.summary()
    m.fit(X)
    assert list(m.params_) == ["loc", "scale"]
    np.testing.assert_array_equal(m.conf_int(), m.result_.conf_int())
    assert str(m.summary()) == str(m.result_.summary())
    assert m.get_params()["polish"] is True
