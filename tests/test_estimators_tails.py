"""Standard errors that know their limits (estimators.tails): the generalised Pareto shape of
the sandwich's per-point contributions, and the warning when their variance is likely
infinite (Thms. 4 and 6 need it finite)."""

import warnings

import numpy as np
import pytest

from stein_coreset import estimators as est
from stein_coreset.estimators.tails import XI_INFINITE_VARIANCE, XI_WARN, gpd_shape, tail_shapes


@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0, 4.0])
def test_the_shape_of_a_pareto_tail_is_one_over_its_index(alpha):
    x = np.random.default_rng(0).pareto(alpha, 5000)
    assert gpd_shape(x) == pytest.approx(1 / alpha, abs=0.08)


def test_light_tails_have_shape_at_most_zero():
    rng = np.random.default_rng(1)
    assert abs(gpd_shape(rng.exponential(size=5000))) < 0.05
    assert gpd_shape(rng.uniform(size=5000)) < -0.8
    Z = np.stack([rng.normal(size=500), rng.standard_cauchy(500)], axis=1)
    xi = tail_shapes(Z)
    assert xi[0] < XI_INFINITE_VARIANCE < xi[1]
    assert np.all(np.isnan(tail_shapes(np.ones((100, 1))))) and np.isnan(tail_shapes(Z[:10])[0])


def _fit_warnings(model, X, **kw):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        f = est.fit(model, X, optimizer="lbfgs", **kw)
    return f, [str(x.message) for x in w if issubclass(x.category, est.StandardErrorWarning)]


def test_score_matching_on_cauchy_data_warns_that_its_standard_error_is_unreliable():
    # before: an sd with no word; SM's per-point gradient grows like x^2
    X = np.random.default_rng(0).standard_cauchy((500, 1))
    f, w = _fit_warnings(est.Gaussian(), X, discrepancy="sm")
    assert w and "variance is likely infinite, or at this n dominated by a few points" in w[0]
    assert f.warnings == w
    assert "not reliable" in f.cov_message and np.all(f.tail_shape > XI_WARN)


def test_score_matching_on_a_gamma_3_warns_and_on_gaussian_data_does_not():
    # Gamma(3, 1): SM's contributions grow like x^-2 near 0, variance infinite for shape <= 4
    X = est.Gamma().sample(500, [3.0, 1.0], np.random.default_rng(0))
    f, w = _fit_warnings(est.Gamma(), X, discrepancy="sm")
    assert w and "gradient in shape" in w[0] and f.tail_shape[0] > XI_WARN
    Y = est.Gaussian().sample(500, [0.5, 2.0], np.random.default_rng(3))
    g, none = _fit_warnings(est.Gaussian(), Y, discrepancy="sm")
    assert not none and not g.warnings and np.all(g.tail_shape < XI_INFINITE_VARIANCE)
    assert "a finite variance needs < 1/2" in g.cov_message
