"""A model's own derivatives are checked against central differences of its score once per
fit (estimators.derivatives): a wrong one is an error naming it, on data of any scale a right
one passes."""

import numpy as np
import pytest
from support.estimator_models import CorrelatedGaussian

from stein_coreset import estimators as est
from stein_coreset.estimators.derivatives import check_derivatives


class _WrongScaleDerivative(est.Gaussian):
    """d score / d scale off by a factor 1/2 (the issue's: stderr half the true one)."""

    def score_dtheta(self, x, theta):
        J = super().score_dtheta(x, theta).copy()
        J[:, :, 1] *= 0.5
        return J


class _WrongHessian(est.Gaussian):
    def score_dx(self, x, theta):
        return 2.0 * super().score_dx(x, theta)


def test_a_wrong_score_dtheta_is_an_error_naming_it_and_the_parameter():
    X = np.random.default_rng(0).normal(0.5, 2.0, (200, 1))
    with pytest.raises(ValueError, match=r"model.score_dtheta does not match central "
                                         r"differences of model.score in scale"):
        est.fit(_WrongScaleDerivative(), X, discrepancy="ksd", optimizer="lbfgs")


def test_a_wrong_score_dx_is_an_error_naming_it():
    X = np.random.default_rng(0).normal(0.5, 2.0, (200, 1))
    with pytest.raises(ValueError, match=r"model.score_dx does not match .* in x\[0\]"):
        est.fit(_WrongHessian(), X, discrepancy="sm", optimizer="lbfgs")


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e6])
@pytest.mark.parametrize("model,theta,in_units", [
    (est.Gaussian(d=2), [0.1, -0.2, 1.0], [1, 1, 1]),
    (est.StudentT(nu=3.0), [0.2, 1.3], [1, 1]),
    (est.SymmetricBessel(s=1.0), [0.0, 1.0], [1, 1]),
    (CorrelatedGaussian(), [1.0, 2.0, 0.6], [1, 1, 0]),
    (est.Gamma(), [3.0, 1.0], [0, -1])], ids=repr)
def test_right_derivatives_pass_on_data_of_any_scale(model, theta, in_units, scale):
    # the data in units `scale`; each parameter carries scale ** (its power in in_units)
    rng = np.random.default_rng(1)
    X = rng.standard_normal((100, model.d))
    if getattr(model, "support", None) is not None:
        X = np.abs(X) + 0.1
    t = np.array(theta) * scale ** np.array(in_units, dtype=float)
    check_derivatives(model, X * scale, t, [f"t{j}" for j in range(t.size)],
                      bounds=getattr(model, "bounds", None))
