"""The demo's test beds: exact scores (finite differences) and samplers with the right laws."""

import numpy as np
import pytest

from stein_coreset import datasets as ds


def _fd_grad(f, x, h):
    g = np.empty_like(x)
    for i in range(x.shape[0]):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.fixture(scope="module")
def goodwin_tight():
    # tight ODE tolerances so that the finite differences of the log posterior are accurate
    return ds.Goodwin(rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize(
    "offset", [(0.0, 0.0, 0.0, 0.0), (0.3, -0.2, 0.1, 0.2), (-0.5, 0.4, -0.3, 0.1)]
)
def test_goodwin_score_equals_finite_difference_gradient_of_log_posterior(goodwin_tight, offset):
    q = goodwin_tight.q_true + np.array(offset)
    lp, s = goodwin_tight.log_density_and_score(q)
    fd = _fd_grad(lambda z: goodwin_tight.log_density_and_score(z)[0], q, 1e-5)
    assert np.isfinite(lp)
    np.testing.assert_allclose(s, fd, rtol=1e-5, atol=1e-5 * np.max(np.abs(fd)))


def test_goodwin_vectorised_score_matches_pointwise(goodwin_tight):
    Q = goodwin_tight.q_true + 0.1 * np.random.default_rng(0).standard_normal((3, 4))
    S = goodwin_tight.score(Q)
    for q, s in zip(Q, S, strict=True):
        np.testing.assert_array_equal(s, goodwin_tight.log_density_and_score(q)[1])
    assert goodwin_tight.log_density(Q).shape == (3,)


def test_goodwin_data_are_reproducible_and_laplace_covariance_is_spd():
    a, b = ds.Goodwin(seed=3), ds.Goodwin(seed=3)
    np.testing.assert_array_equal(a.y, b.y)
    assert not np.array_equal(a.y, ds.Goodwin(seed=4).y)
    C = a.laplace_covariance()
    np.testing.assert_allclose(C, C.T)
    assert np.all(np.linalg.eigvalsh(C) > 0)


def test_goodwin_rejects_bad_parameters():
    with pytest.raises(ValueError, match="theta"):
        ds.Goodwin(theta=(1.0, -3.0, 2.0, 0.5))
    with pytest.raises(ValueError, match="sigma"):
        ds.Goodwin(sigma=0.0)


def test_gmm_score_equals_finite_difference_and_draws_have_mixture_mean():
    gm = ds.GaussianMixture()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5, 2)) * 2
    S = gm.score(X)
    for x, s in zip(X, S, strict=True):
        fd = _fd_grad(lambda z: gm.log_density(z[None])[0], x, 1e-6)
        np.testing.assert_allclose(s, fd, rtol=1e-6, atol=1e-8)
    # the density is normalised: a grid integral is 1
    g = np.linspace(-7, 7, 401)
    G = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    assert abs(np.exp(gm.log_density(G)).sum() * (g[1] - g[0]) ** 2 - 1.0) < 1e-3
    Y = gm.sample(200_000, rng)
    np.testing.assert_allclose(Y.mean(0), gm.weights @ gm.means, atol=0.01)


def test_logistic_regression_scores_full_data_and_unbiased_minibatch():
    lr = ds.LogisticRegression(n_data=300, p=3, seed=1)
    b = np.random.default_rng(2).standard_normal(lr.d) * 0.5
    fd = _fd_grad(lambda z: lr.log_density(z[None])[0], b, 1e-6)
    np.testing.assert_allclose(lr.score(b[None])[0], fd, rtol=1e-6, atol=1e-6)
    # averaging the minibatch estimate over a partition of the data gives the full-data score
    parts = np.array_split(np.arange(lr.n_data), 10)
    est = np.mean([lr.minibatch_score(b, idx) * len(idx) / (lr.n_data / 10) for idx in parts], 0)
    np.testing.assert_allclose(est, lr.score(b[None])[0], rtol=1e-10, atol=1e-10)
    mode, _ = lr.mode()
    assert np.max(np.abs(lr.score(mode[None])[0])) < 1e-8


def test_mala_stationary_law_is_the_target_where_ula_would_be_biased():
    # N(0, 1) with step h = 1: the unadjusted Langevin chain has stationary variance
    # 1 / (1 - h/4) = 4/3, MALA's Metropolis correction must bring it back to 1.
    target = ds.Gaussian(np.zeros(1), np.eye(1))
    ch = ds.mala(target.log_density_and_score, np.zeros(1), 40_000, 1.0, rng=0)
    assert 0.5 < ch.acceptance_rate < 0.99
    assert abs(ch.X.mean()) < 0.05
    assert abs(ch.X.var() - 1.0) < 0.06
    np.testing.assert_allclose(ch.S, target.score(ch.X))


def test_preconditioned_mala_on_correlated_gaussian_recovers_covariance():
    target = ds.Gaussian.correlated(d=2, rho=0.9, scales=[1.0, 3.0])
    x0 = target.sample(1, 0)[0]
    ch = ds.mala(target.log_density_and_score, x0, 30_000, 1.0, precond=target.cov, rng=1)
    np.testing.assert_allclose(np.cov(ch.X.T), target.cov, atol=0.1 * 9, rtol=0.08)
    np.testing.assert_allclose(ch.log_density, target.log_density(ch.X))


def test_mala_rejects_bad_arguments():
    target = ds.Gaussian(np.zeros(2), np.eye(2))
    with pytest.raises(ValueError, match="step"):
        ds.mala(target.log_density_and_score, np.zeros(2), 10, 0.0)
    with pytest.raises(ValueError, match="precond"):
        ds.mala(target.log_density_and_score, np.zeros(2), 10, 0.1, precond=np.eye(3))


@pytest.mark.slow
def test_goodwin_chain_starts_far_and_reaches_the_posterior():
    ch = ds.goodwin_chain(700, seed=0, n_reference=200, reference_chains=2)
    assert ch.X.shape == ch.S.shape == (700, 4)
    np.testing.assert_allclose(ch.X[0], np.log(ds.GOODWIN_START))
    # burn-in: the start is thousands of nats below the posterior mass, the end is inside it
    assert ch.log_density[0] < ch.log_density[-100:].min() - 1000
    assert ch.reference.shape == (200, 4)
    # scores recorded along the chain are the target's
    g = ds.Goodwin()
    np.testing.assert_allclose(ch.S[[0, 350, 699]], g.score(ch.X[[0, 350, 699]]), rtol=1e-10)


def test_gmm_chain_reference_is_exact_draws_and_chain_is_biased_at_start():
    ch = ds.gmm_chain(500, seed=0, n_reference=300)
    assert ch.reference.shape == (300, 2)
    assert np.linalg.norm(ch.X[0]) > 10 and np.linalg.norm(ch.X[-1]) < 5


def test_burn_in_oracle_finds_a_shifted_prefix():
    rng = np.random.default_rng(0)
    chains = [rng.standard_normal((2000, 2)) for _ in range(6)]
    for c, shift in zip(chains, [8, -8, 5, -5, 8, -8], strict=True):
        c[:400] += shift
    b = ds.burn_in_oracle(chains)
    # R-hat misses a window [b, 2b) whose first ~15% is still shifted, and the grid is
    # geometric (~10% steps): most of the burn-in goes, almost nothing after it
    assert 300 <= b <= 440
    assert ds.burn_in_oracle([rng.standard_normal((2000, 2)) for _ in range(6)]) < 50
    with pytest.raises(ValueError, match="2 chains"):
        ds.burn_in_oracle(chains[:1])
