"""Cholesky Thinning (Alg. 6) and its constant-preserving reweighting (Eq. 64)."""

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset.algorithms import cholesky_thinning, weighted_rpcholesky
from stein_coreset.algorithms.cholesky_thinning import _shifted
from stein_coreset.algorithms.weights import affine_weights
from stein_coreset.kernels import centred_kernel_matrix


def _stein(X, sigma=1.5):
    return sc.SteinKernel(sc.IMQ(sigma)).bind(X, -X)


def test_affine_weights_match_closed_form_eq64():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((25, 3))
    Kmat = sc.SteinKernel(sc.IMQ(1.0)).matrix(X, -X)
    u = np.linalg.solve(Kmat, np.ones(25))
    np.testing.assert_allclose(affine_weights(Kmat), u / u.sum(), rtol=1e-8, atol=1e-12)


def test_affine_weights_on_singular_matrix_reach_the_minimum():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((10, 2))
    X = np.vstack([X, X[:3]])  # repeated points: singular K_I
    Kmat = sc.SteinKernel(sc.IMQ(1.0)).matrix(X, -X)
    w = affine_weights(Kmat)
    assert np.all(np.isfinite(w)) and w.sum() == pytest.approx(1.0)
    # Optimality on the affine set: the gradient 2 K w is constant.
    g = Kmat @ w
    assert np.ptp(g) <= 1e-8 * np.abs(Kmat).max()
    # The value equals the minimum over the distinct points.
    u = np.linalg.solve(Kmat[:10, :10], np.ones(10))
    assert w @ Kmat @ w == pytest.approx(1.0 / u.sum(), rel=1e-7)


def test_shifted_kernel_adds_the_constant(xp):
    X = np.random.default_rng(2).standard_normal((30, 2))
    for K in (_stein(xp.asarray(X)), centred_kernel_matrix(sc.IMQ(1.0), xp.asarray(X))):
        Kc = _shifted(K, 0.37)
        np.testing.assert_allclose(
            xp.to_numpy(Kc.dense()), xp.to_numpy(K.dense()) + 0.37, rtol=1e-12, atol=1e-12
        )
        np.testing.assert_allclose(xp.to_numpy(Kc.diag()), xp.to_numpy(K.diag()) + 0.37)


def test_cholesky_thinning_returns_constant_preserving_optimal_weights(biased_gaussian, xp):
    X, S = biased_gaussian(n=500, seed=3)
    K = sc.SteinKernel(sc.IMQ(1.5)).bind(xp.asarray(X), xp.asarray(S))
    idx, w = cholesky_thinning(K, None, 20, rng=0)
    xp.same_place(w, K.U)
    wh = xp.to_numpy(w)
    assert idx.dtype == np.int64 and np.unique(idx).size == idx.size <= 20
    assert wh.sum() == pytest.approx(1.0, abs=1e-12)
    KI = sc.SteinKernel(sc.IMQ(1.5)).matrix(X[idx], S[idx])
    u = np.linalg.solve(KI, np.ones(idx.size))
    np.testing.assert_allclose(wh, u / u.sum(), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_cholesky_thinning_improves_on_its_rpcholesky_start(biased_gaussian, seed):
    # CT = (RPCholesky pivots on k_P + c, Eq. 64 weights) then KT-Swap-LS and Eq. 64 again:
    # the refinement never loses to the start built from the same pivot draws.
    X, S = biased_gaussian(n=400, seed=seed)
    K = _stein(X)
    m = 12
    idx, w = cholesky_thinning(K, None, m, rng=seed)
    c = float(np.mean(np.sort(K.diag())[-m:]))
    piv, _ = weighted_rpcholesky(
        _shifted(K, c), np.full(400, 1 / 400), m, np.random.default_rng(seed)
    )
    piv = np.sort(piv)
    Kd = K.dense()
    w0 = affine_weights(Kd[np.ix_(piv, piv)])
    start = w0 @ Kd[np.ix_(piv, piv)] @ w0
    assert w @ Kd[np.ix_(idx, idx)] @ w <= start * (1 + 1e-10)


def test_cholesky_thinning_unbiased_mmd_beats_iid():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((1024, 2))
    K = centred_kernel_matrix(sc.IMQ(1.0), X)
    m = 16
    idx, w = cholesky_thinning(K, None, m, rng=1)
    dense = np.zeros(1024)
    dense[idx] = w
    iid = []
    for s in range(20):
        u = np.zeros(1024)
        u[np.random.default_rng(s).choice(1024, m, replace=False)] = 1 / m
        iid.append(np.sqrt(K.quad(u)))
    assert np.sqrt(max(K.quad(dense), 0.0)) < 0.3 * np.median(iid)


@pytest.mark.parametrize(
    "kwargs,err,match",
    [
        (dict(m=51), ValueError, "m must be between"),
        (dict(m=5, rank=6), ValueError, "rank must be between 1 and m"),
        (dict(m=5, rank=0), ValueError, "rank must be between 1 and m"),
        (dict(m=5, w=-np.ones(50) / 50), ValueError, "w must be non-negative"),
    ],
)
def test_cholesky_thinning_bad_input(kwargs, err, match):
    X = np.random.default_rng(0).standard_normal((50, 2))
    K = _stein(X)
    w = kwargs.pop("w", None)
    with pytest.raises(err, match=match):
        cholesky_thinning(K, w, **kwargs)
