"""The built-in models (estimators.models): analytic derivatives against central differences,
samplers, constructors."""

import numpy as np
import pytest

from stein_coreset import estimators as est
from stein_coreset.estimators import derivatives as D


def _fd(f, t, h=1e-6):
    t = np.asarray(t, dtype=np.float64)
    cols = []
    for j in range(t.size):
        e = np.zeros_like(t)
        e[j] = h * max(1.0, abs(t[j]))
        cols.append((f(t + e) - f(t - e)) / (2 * e[j]))
    return np.stack(cols, axis=-1)


def _fd_x(f, x, h=1e-6):
    cols = []
    for j in range(x.shape[1]):
        e = np.zeros_like(x)
        e[:, j] = h
        cols.append((f(x + e) - f(x - e)) / (2 * h))
    return np.stack(cols, axis=-1)


CASES = [
    (est.Gaussian(d=2), np.array([0.3, -0.2, 1.4])),
    (est.StudentT(nu=5.0, d=1), np.array([0.2, 1.3])),
    (est.StudentT(nu=3.0, d=2), np.array([0.2, -0.1, 0.8])),
    (est.GeneralizedGamma(), np.array([0.1, 2.7])),
    (est.SymmetricBessel(s=1.3, d=1), np.array([0.1, 1.2])),
    (est.SymmetricBessel(s=2.0, d=2), np.array([0.1, -0.3, 0.9])),
    (est.Gamma(), np.array([3.0, 1.5])),
]


@pytest.mark.parametrize("model,theta", CASES, ids=lambda c: repr(c)[:30])
def test_model_score_dtheta_and_score_dx_match_central_differences(model, theta):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, model.d)) * 1.5 + 0.4
    if model.support is not None:
        x = np.abs(x) + 0.1
    J = model.score_dtheta(x, theta)
    np.testing.assert_allclose(J, _fd(lambda t: model.score(x, t), theta), rtol=1e-5, atol=1e-7)
    H = model.score_dx(x, theta)
    np.testing.assert_allclose(H, _fd_x(lambda z: model.score(z, theta), x), rtol=1e-5,
                               atol=1e-7)
    # the generic fallbacks agree with the analytic derivatives
    class Bare:
        score = staticmethod(model.score)

    np.testing.assert_allclose(D.score_dtheta(Bare, x, theta), J, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(D.score_dx(Bare, x, theta), H, rtol=1e-5, atol=1e-6)


def test_symmetric_bessel_s1_is_laplace():
    m = est.SymmetricBessel(s=1.0, d=1)
    x = np.array([[-2.0], [-0.3], [0.5], [3.0]])
    np.testing.assert_allclose(m.score(x, [0.0, 2.0]), -np.sign(x) / 2.0, rtol=1e-12)


def test_student_t_score_is_gradient_of_log_density():
    m = est.StudentT(nu=5.0, d=1)
    x = np.linspace(-4, 4, 9)[:, None]
    th = np.array([0.5, 1.5])

    def logp(z):
        return -3.0 * np.log1p((z - 0.5) ** 2 / (5 * 1.5**2))

    np.testing.assert_allclose(m.score(x, th), _fd_x(logp, x)[:, :, 0], rtol=1e-6)


def test_samplers_match_model_moments():
    rng = np.random.default_rng(1)
    g = est.Gaussian(d=1).sample(20000, [1.0, 2.0], rng)
    assert abs(g.mean() - 1.0) < 0.05 and abs(g.std() - 2.0) < 0.05
    lap = est.SymmetricBessel(s=1.0).sample(20000, [0.0, 1.5], rng)
    assert abs(np.abs(lap).mean() - 1.5) < 0.05  # Laplace(b): E|X| = b
    gg = est.GeneralizedGamma().sample(20000, [0.0, 2.0], rng)
    assert abs(gg.var() - 0.5) < 0.02  # exp(-x^2) is N(0, 1/2)
    ga = est.Gamma().sample(20000, [6.0, 2.0], rng)
    assert abs(ga.mean() - 3.0) < 0.05 and abs(ga.var() - 1.5) < 0.1  # shape / rate, / rate^2


def test_gamma_score_is_the_gradient_of_its_log_density_and_its_start_the_moments():
    m = est.Gamma()
    x = np.linspace(0.5, 6.0, 8)[:, None]

    def logp(z):
        return 5.0 * np.log(z) - 2.0 * z

    np.testing.assert_allclose(m.score(x, [6.0, 2.0]), _fd_x(logp, x)[:, :, 0], rtol=1e-6)
    X = m.sample(50000, [6.0, 2.0], np.random.default_rng(3))
    np.testing.assert_allclose(m.default_theta0(X), [6.0, 2.0], rtol=0.05)
    assert m.param_names == ("shape", "rate") and m.bounds == [(0.0, None), (0.0, None)]


def test_model_constructors_validate():
    with pytest.raises(ValueError, match="nu"):
        est.StudentT(nu=-1)
    with pytest.raises(ValueError, match="s must be"):
        est.SymmetricBessel(s=0.2, d=1)
    with pytest.raises(ValueError, match="every parameter is fixed"):
        est.Gaussian(loc=0.0, scale=1.0)
    with pytest.raises(ValueError, match="scale"):
        est.Gaussian(scale=-1.0)
    with pytest.raises(ValueError, match="rate must be > 0"):
        est.Gamma(rate=0.0)


@pytest.mark.parametrize("model", [est.Gaussian, est.StudentT, est.SymmetricBessel])
@pytest.mark.parametrize("d, err", [(1.5, TypeError), (True, TypeError), (0, ValueError),
                                    ("2", TypeError)])
def test_the_dimension_d_must_be_an_integer(model, d, err):
    # before: StudentT(d=1.5) silently became d = 1
    with pytest.raises(err, match="d must"):
        model(d=d)
