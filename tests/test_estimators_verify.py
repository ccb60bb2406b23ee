"""converged means a verified minimiser (estimators.verify, Barp et al., 2019, Eq. 4 with the
standard errors of Thms. 4 and 6): poor starts, data in any units, identifiability, data that
are the problem, reproducible defaults."""

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset import estimators as est
from stein_coreset.estimators import optimize, verify
from stein_coreset.estimators.domains import ParameterSpace
from stein_coreset.estimators.objective import Objective


@pytest.fixture(scope="module")
def gaussian_sample():
    return est.Gaussian(d=1).sample(500, [0.5, 2.0], np.random.default_rng(7))


def test_a_poor_start_is_polished_to_the_minimiser(gaussian_sample):
    # the reproducer: before, theta = (0.689, 1.951), 'RELATIVE REDUCTION OF F' and
    # converged=True, while the minimiser is (0.241, 1.874)
    X = gaussian_sample
    model, k = est.Gaussian(d=1), sc.IMQ(2.0)
    f = est.fit(model, X, discrepancy="ksd", kernel=k, optimizer="lbfgs", theta0=[-3, 1])
    ref = est.fit(model, X, discrepancy="ksd", kernel=k, optimizer="nelder_mead")
    assert f.converged and ref.converged
    assert np.all(np.abs(f.theta - ref.theta) <= 0.01 * f.stderr)
    assert f.loss < est.loss(model, [0.689, 1.951], X, kernel=k)
    assert f.newton_step <= verify.NEWTON_TOLERANCE and "verified minimiser" in f.message


def _objective(X, discrepancy="ksd"):
    model = est.Gaussian(d=1)
    obj = Objective(model, X, discrepancy, sc.IMQ(2.0) if discrepancy == "ksd" else None,
                    None)
    obj.started = True
    return obj, ParameterSpace.of(model, 2)


def test_the_first_order_check_rejects_a_point_half_a_standard_error_away(gaussian_sample):
    obj, space = _objective(gaussian_sample)
    ref = est.fit(est.Gaussian(d=1), gaussian_sample, discrepancy="ksd", kernel=sc.IMQ(2.0),
                  optimizer="lbfgs")
    at = verify.polish(obj, space, ref.theta, ref.loss, iterations=0)
    assert at.ok and at.local.ratio <= verify.NEWTON_TOLERANCE
    off = ref.theta + 0.5 * ref.stderr
    bad = verify.polish(obj, space, off, obj.value(off), iterations=0)
    assert not bad.ok and 0.2 < bad.local.ratio < 2 and "standard errors" in bad.reason
    fixed = verify.polish(obj, space, off, obj.value(off))
    assert fixed.ok and fixed.path and np.all(np.abs(fixed.local.theta - ref.theta)
                                              <= 0.01 * ref.stderr)


class _Saddle:
    """A loss whose Hessian has a negative eigenvalue everywhere: L = a^2 - b^2."""

    n = 10

    def value(self, t):
        return float(t[0] ** 2 - t[1] ** 2)

    def sandwich(self, t, steps=None):
        from stein_coreset.estimators.inference import Sandwich

        H = np.diag([2.0, -2.0])
        return Sandwich(None, np.zeros((10, 2)), H, "the Hessian of the loss at theta is not "
                        "positive definite", np.array([2 * t[0], -2 * t[1]]))


def test_a_saddle_is_not_a_verified_minimiser():
    space = ParameterSpace(["a", "b"])
    pol = verify.polish(_Saddle(), space, np.array([0.1, 0.2]), 0.0)
    assert not pol.ok and "no positive curvature in b" in pol.reason


def test_collinear_statistics_are_reported_as_not_identified():
    # T = (x, 2x): only theta_1 + 2 theta_2 is identified (before: converged=True)
    fam = est.ExponentialFamily(grad_T=lambda x: np.stack([np.ones_like(x), 2 * np.ones_like(x)],
                                                          axis=1), grad_b=lambda x: -x,
                                n_params=2)
    X = np.random.default_rng(0).normal(0.5, 1.0, (200, 1))
    f = est.fit(fam, X, discrepancy="sm", optimizer="lbfgs", theta0=[0.0, 0.0])
    assert not f.converged and "not identified" in f.message
    assert f.stderr is None and "not identified" in f.cov_message
    assert f.identifiability is not None and f.identifiability <= verify.SINGULAR
    with pytest.raises(ValueError, match="not identified"):
        est.fit(fam, X, discrepancy="sm", optimizer="closed_form")
    # T = (x, x + 0.01 x^3 / (1 + x^2)): identified, but barely: a warning names the direction
    fam2 = est.ExponentialFamily(
        T=lambda x: np.concatenate([x, x + 0.01 * x**3 / (1 + x * x)], axis=1), n_params=2,
        grad_b=lambda x: -x)
    with pytest.warns(est.IdentifiabilityWarning, match="nearly collinear"):
        g = est.fit(fam2, X, discrepancy="sm", optimizer="lbfgs", theta0=[0.0, 0.0])
    assert verify.SINGULAR < g.identifiability <= verify.NEAR_SINGULAR


def _scale_free_fits():
    def m_theta(x, t):  # DKSD's theta-dependent diffusion, in the data's units
        return 1.0 + ((x[:, 0] - t[0]) / t[1]) ** 2

    return {
        "sm": {},
        "ksd": {},  # the median-heuristic kernel follows the data
        "dksd": {"diffusion": m_theta},
        "dsm": {},  # m(x) = 1 / (1 + (x / sd(X))^2), set per sample below
    }


@pytest.mark.parametrize("discrepancy", ["sm", "ksd", "dksd", "dsm"])
@pytest.mark.parametrize("optimizer", ["lbfgs", "nelder_mead", "riemannian_sgd"])
def test_a_fit_of_data_in_other_units_is_the_same_fit_rescaled(discrepancy, optimizer):
    # before: data x 1000 stopped after one L-BFGS iteration at the start, converged=True
    X = est.Gaussian(d=1).sample(200, [0.5, 2.0], np.random.default_rng(1))
    kw = _scale_free_fits()[discrepancy]

    def fit(Y):
        if discrepancy == "dsm":
            s0 = float(Y.std())
            kw["diffusion"] = lambda x, t: 1.0 / (1.0 + (x[:, 0] / s0) ** 2)
        return est.fit(est.Gaussian(d=1), Y, discrepancy=discrepancy, optimizer=optimizer,
                       **kw)

    ref = fit(X)
    assert ref.converged, ref.message
    for k in (-3, 3, 6):
        f = fit(X * 10.0**k)
        assert f.converged, (k, f.message)
        assert np.all(np.abs(f.theta / 10.0**k - ref.theta) <= 0.01 * ref.stderr), k
        np.testing.assert_allclose(f.stderr / 10.0**k, ref.stderr, rtol=1e-3)


def test_nnsm_on_constant_data_is_not_converged_and_blames_the_data():
    # before: converged=True at scale 0.133 (loss -890) while the loss at 1e-3 is -1.8e7
    f = est.fit(est.Gaussian(d=1), np.full((100, 1), 3.0), discrepancy="nnsm",
                optimizer="lbfgs")
    assert not f.converged and "X has no spread" in f.message


def test_data_at_1e200_are_blamed_on_x_not_theta0():
    X = est.Gaussian(d=1).sample(300, [0.5, 2.0], np.random.default_rng(0)) * 1e200
    with pytest.raises(ValueError, match=r"^X: .*rescale X"):
        est.fit(est.Gaussian(d=1), X)
    f = est.fit(est.Gaussian(d=1), X, discrepancy="sm", optimizer="lbfgs")
    assert not f.converged and "rescale X" in f.message and "theta0" not in f.message


def test_a_start_that_overflows_is_blamed_on_theta0_when_the_data_are_fine():
    X = np.random.default_rng(0).normal(0.0, 1.0, (100, 1))
    with pytest.raises(ValueError, match=r"^theta0: .*start closer to the data"):
        est.fit(est.Gaussian(d=1), X, discrepancy="sm", optimizer="lbfgs",
                theta0=[0.0, 1e-170])


def test_optimiser_messages_are_words():
    assert optimize.in_words("L-BFGS-B", "ABNORMAL: ") == (
        "L-BFGS-B stopped: its line search found no lower loss along the search direction")
    assert optimize.in_words("L-BFGS-B", "CONVERGENCE: RELATIVE REDUCTION OF F <= "
                             "FACTR*EPSMCH") == "L-BFGS-B stopped: the loss stopped decreasing"
    X = np.random.default_rng(2).normal(0.0, 1.0, (100, 1))
    for opt in ("lbfgs", "nelder_mead"):
        f = est.fit(est.Gaussian(d=1), X, discrepancy="sm", optimizer=opt)
        assert "ABNORMAL" not in f.message and "stopped:" in f.message


def test_the_default_fit_is_reproducible_and_the_stochastic_path_says_so():
    # before: DKSD with Riemannian SGD and seed=None gave 0.4034 and 0.4091
    X = est.Gaussian(d=1).sample(300, [0.5, 2.0], np.random.default_rng(0))
    a, b = est.fit(est.Gaussian(d=1), X), est.fit(est.Gaussian(d=1), X)
    assert a.optimizer == "riemannian_sgd" and a.seed == 0
    np.testing.assert_array_equal(a.theta, b.theta)
    np.testing.assert_array_equal(a.history, b.history)
    c = est.fit(est.Gaussian(d=1), X, seed=np.random.default_rng(5))
    assert c.seed is None and not np.array_equal(c.history[:50], a.history[:50])
    assert "stochastic, seed 0" in str(a.summary())
    assert "a Generator passed as seed" in str(c.summary())
    # the polish ends both at the minimiser of the same loss
    assert np.all(np.abs(c.theta - a.theta) <= 0.01 * a.stderr)
