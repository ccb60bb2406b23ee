"""Where a model lives (estimators.domains): parameter bounds (lower, upper, both) and their
transforms, checks of theta, and the data's support, refused by name."""

import numpy as np
import pytest
from support.estimator_models import CorrelatedGaussian

from stein_coreset import estimators as est
from stein_coreset.estimators.domains import ParameterSpace, check_theta


@pytest.mark.parametrize(
    "make,theta,msg",
    [
        (lambda: est.StudentT(), [0.0, -1.0], "scale"),
        (lambda: est.Gaussian(d=2), [0.0, 1.0], "3 entries"),
        (lambda: est.GeneralizedGamma(), [0.0, 0.5], "power"),
        (lambda: est.Gaussian(), [np.nan, 1.0], "NaN"),
        (lambda: CorrelatedGaussian(), [1.0, 1.0, 1.0],
         r"theta0\[2\] \(rho\) must satisfy -1 < rho < 1"),
        (lambda: CorrelatedGaussian(), [1.0, 0.0, 0.5], r"s2 > 0"),
    ],
)
def test_check_theta_rejects_bad_parameters(make, theta, msg):
    with pytest.raises(ValueError, match=msg):
        check_theta(make(), theta, "theta0")


@pytest.mark.parametrize("bounds,theta", [
    ((None, None), 3.5), ((0.0, None), 1e-3), ((None, 2.0), -7.0), ((-1.0, 1.0), 0.999),
    ((-1.0, 1.0), -0.3), ((2.0, 5.0), 4.0)])
def test_the_optimisers_transforms_round_trip_and_stay_inside(bounds, theta):
    space = ParameterSpace(["t"], [bounds])
    t = np.array([theta])
    np.testing.assert_allclose(space.from_free(space.to_free(t)), t, rtol=1e-12)
    for phi in (-30.0, 0.0, 30.0):
        assert space.inside(space.from_free(np.array([phi]))) or bounds == (None, None)
    # the Jacobian is d theta / d phi
    phi = space.to_free(t)
    h = 1e-6
    fd = (space.from_free(phi + h) - space.from_free(phi - h)) / (2 * h)
    np.testing.assert_allclose(space.jacobian(t), fd, rtol=1e-6)


def test_bounds_must_be_an_interval():
    with pytest.raises(ValueError, match="empty"):
        ParameterSpace(["rho"], [(1.0, -1.0)])
    with pytest.raises(ValueError, match="2 bounds for 1 parameters"):
        ParameterSpace(["rho"], [(0, 1), (0, 1)])


def test_a_correlation_bounded_on_both_sides_is_fitted_inside_its_interval():
    model = CorrelatedGaussian()
    X = model.sample(400, [1.0, 2.0, 0.95], np.random.default_rng(0))
    f = est.fit(model, X, discrepancy="sm", optimizer="lbfgs", theta0=[1.0, 1.0, -0.9])
    assert f.converged, f.message
    assert -1 < f.theta[2] < 1 and abs(f.theta[2] - 0.95) < 0.03
    f.stderr = 1e4 * f.stderr  # a very wide interval is cut at the bounds
    assert f.conf_int()[2].tolist() == [-1.0, 1.0] and f.conf_int()[0, 0] == 0.0
    assert list(f.params) == ["s1", "s2", "rho"]


def test_an_upper_bound_alone_is_respected():
    class Reflected(est.Gaussian):
        """N(mu, 1) with mu < 0.2 declared: the estimate must stay below."""

        def __init__(self):
            super().__init__(scale=1.0)

        bounds = [(None, 0.2)]

    X = np.random.default_rng(1).normal(1.0, 1.0, (300, 1))
    f = est.fit(Reflected(), X, discrepancy="sm", optimizer="lbfgs", theta0=[0.0])
    assert f.theta[0] < 0.2 and not f.converged  # the minimiser is outside: the bound is hit
    assert "bound 0.2" in f.message


def test_data_outside_the_models_support_are_refused_by_name():
    # before: a negative point in a Gamma sample was fitted, converged=True
    X = est.Gamma().sample(200, [3.0, 1.0], np.random.default_rng(0))
    X[17] = -0.3
    with pytest.raises(ValueError, match=r"X has 1 of 200 rows outside the support of "
                                         r"Gamma\(shape=free, rate=free\) \(x\[0\] > 0; first: "
                                         r"row 17"):
        est.fit(est.Gamma(), X, discrepancy="ksd", optimizer="lbfgs")
    with pytest.raises(ValueError, match="outside the support"):
        est.loss(est.Gamma(), [3.0, 1.0], X, discrepancy="sm")
    X[17] = 0.3  # inside: accepted
    assert np.isfinite(est.loss(est.Gamma(), [3.0, 1.0], X, discrepancy="sm"))


def test_a_support_per_coordinate_names_the_coordinate():
    class Boxed(est.Gaussian):
        support = [(None, None), (-1.0, 1.0)]

    X = np.zeros((10, 2))
    X[4, 1] = 1.0  # on the boundary of the open interval
    with pytest.raises(ValueError, match=r"-1 < x\[1\] < 1; first: row 4"):
        est.loss(Boxed(d=2), [0.0, 0.0, 1.0], X, discrepancy="sm")
