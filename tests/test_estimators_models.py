"""Models of stein_coreset.estimators: analytic derivatives against central differences."""

import numpy as np
import pytest

from stein_coreset import estimators as est
from stein_coreset.estimators import models as M


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
]


@pytest.mark.parametrize("model,theta", CASES, ids=lambda c: repr(c)[:30])
def test_model_score_dtheta_and_score_dx_match_central_differences(model, theta):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, model.d)) * 1.5 + 0.4
    J = model.score_dtheta(x, theta)
    np.testing.assert_allclose(J, _fd(lambda t: model.score(x, t), theta), rtol=1e-5, atol=1e-7)
    H = model.score_dx(x, theta)
    np.testing.assert_allclose(H, _fd_x(lambda z: model.score(z, theta), x), rtol=1e-5,
                               atol=1e-7)
    # the generic fallbacks agree with the analytic derivatives
    class Bare:
        score = staticmethod(model.score)

    np.testing.assert_allclose(M.score_dtheta(Bare, x, theta), J, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(M.score_dx(Bare, x, theta), H, rtol=1e-5, atol=1e-6)


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


@pytest.mark.parametrize(
    "make,theta,msg",
    [
        (lambda: est.StudentT(), [0.0, -1.0], "scale"),
        (lambda: est.Gaussian(d=2), [0.0, 1.0], "3 entries"),
        (lambda: est.GeneralizedGamma(), [0.0, 0.5], "power"),
        (lambda: est.Gaussian(), [np.nan, 1.0], "NaN"),
    ],
)
def test_check_theta_rejects_bad_parameters(make, theta, msg):
    with pytest.raises(ValueError, match=msg):
        M.check_theta(make(), theta, "theta0")


def test_model_constructors_validate():
    with pytest.raises(ValueError, match="nu"):
        est.StudentT(nu=-1)
    with pytest.raises(ValueError, match="s must be"):
        est.SymmetricBessel(s=0.2, d=1)
    with pytest.raises(ValueError, match="every parameter is fixed"):
        est.Gaussian(loc=0.0, scale=1.0)
    with pytest.raises(ValueError, match="scale"):
        est.Gaussian(scale=-1.0)


@pytest.mark.parametrize("model", [est.Gaussian, est.StudentT, est.SymmetricBessel])
@pytest.mark.parametrize("d, err", [(1.5, TypeError), (True, TypeError), (0, ValueError),
                                    ("2", TypeError)])
def test_the_dimension_d_must_be_an_integer(model, d, err):
    # before: StudentT(d=1.5) silently became d = 1
    with pytest.raises(err, match="d must"):
        model(d=d)
