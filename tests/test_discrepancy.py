"""ksd, mmd and energy_distance against direct evaluations and known rates."""

import numpy as np
import pytest

import stein_coreset as sc


def test_ksd_equals_root_quadratic_form_of_stein_gram(xp):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3)) + 0.4
    w = rng.random(60)
    w /= w.sum()
    kern = sc.SteinKernel(sc.IMQ(sigma=1.2))
    K = kern.matrix(X, -X)
    val = sc.ksd(xp.asarray(X), xp.asarray(-X), xp.asarray(w), kernel=kern)
    assert isinstance(val, float)
    assert val == pytest.approx(np.sqrt(w @ K @ w), rel=1e-12)
    assert sc.ksd(X, -X, kernel=kern) == pytest.approx(np.sqrt(K.mean()), rel=1e-12)


def test_ksd_accepts_signed_weights_of_constant_preserving_coresets():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((20, 2))
    w = rng.standard_normal(20)
    w /= w.sum()
    K = sc.SteinKernel(sc.IMQ(1.0)).matrix(X, -X)
    assert sc.ksd(X, -X, w, kernel=sc.IMQ(1.0)) == pytest.approx(np.sqrt(w @ K @ w), rel=1e-12)


def test_ksd_of_iid_draws_shrinks_like_root_n():
    # KSD^2 of n i.i.d. draws ~ E k_p(x, x) / n: from n = 256 to 4096 it should fall about 4x.
    kern = sc.SteinKernel(sc.IMQ(sigma=1.0))
    ratios = []
    for seed in range(5):
        rng = np.random.default_rng(seed)
        small = rng.standard_normal((256, 2))
        big = rng.standard_normal((4096, 2))
        ratios.append(sc.ksd(small, -small, kernel=kern) / sc.ksd(big, -big, kernel=kern))
    assert 3.0 < np.median(ratios) < 5.3, ratios


def test_ksd_of_biased_sample_does_not_vanish(biased_gaussian):
    X, _ = biased_gaussian(n=2048)
    assert sc.ksd(X, -X) > 0.2  # scores of N(0, I) at points from N(0.7, 1.5^2)


def _mmd_direct(X, Y, wx, wy, kern):
    Kxx, Kyy, Kxy = kern(X), kern(Y), kern(X, Y)
    return np.sqrt(max(wx @ Kxx @ wx + wy @ Kyy @ wy - 2 * wx @ Kxy @ wy, 0.0))


def test_mmd_matches_direct_formula_and_is_zero_for_identical_samples(xp):
    rng = np.random.default_rng(2)
    X, Y = rng.standard_normal((50, 2)), rng.standard_normal((40, 2)) + 1.0
    wx = rng.random(50)
    wx /= wx.sum()
    kern = sc.Gaussian(sigma=0.8)
    got = sc.mmd(xp.asarray(X), xp.asarray(Y), wx=xp.asarray(wx), kernel=kern)
    assert got == pytest.approx(_mmd_direct(X, Y, wx, np.full(40, 1 / 40), kern), rel=1e-10)
    assert sc.mmd(X, X, kernel=kern) == pytest.approx(0.0, abs=1e-7)
    assert sc.mmd(X, Y) > 0.1


def test_energy_distance_matches_direct_formula(xp):
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((30, 3)), rng.standard_normal((45, 3)) * 2
    D = lambda A, B: np.sqrt(((A[:, None] - B[None]) ** 2).sum(-1))  # noqa: E731
    expect = 2 * D(X, Y).mean() - D(X, X).mean() - D(Y, Y).mean()
    got = sc.energy_distance(xp.asarray(X), xp.asarray(Y))
    assert got == pytest.approx(expect, rel=1e-9)
    assert sc.energy_distance(X, X) == pytest.approx(0.0, abs=1e-7)


def test_ksd_does_not_depend_on_n_threads():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 3))
    S = -X
    w = rng.random(300)
    ref = sc.ksd(X, S, w / w.sum(), n_threads=1)
    for n_threads in (None, 2, 3):
        assert sc.ksd(X, S, w / w.sum(), n_threads=n_threads) == ref
    with pytest.raises(ValueError, match="n_threads"):
        sc.ksd(X, S, n_threads=0)


def test_ksd_default_kernel_is_scale_free_like_compress():
    """ksd(X, S) with no kernel uses compress's default (M = per-coordinate variances): scaling
    one coordinate by 1000 (its score by 1/1000) leaves the value unchanged, and it equals the
    value ksd gives with that kernel spelled out."""
    rng = np.random.default_rng(3)
    X = 0.5 + 1.2 * rng.standard_normal((400, 3))
    S = -X
    c = np.array([1.0, 1000.0, 1.0])
    a = sc.ksd(X, S)
    b = sc.ksd(X * c, S / c)
    assert b == pytest.approx(a, rel=1e-9)
    assert a == pytest.approx(sc.ksd(X, S, kernel=sc.SteinKernel(M="scale")), rel=1e-12)
    # the identity-M kernel is still there when asked for, and is not scale-free
    ident = sc.SteinKernel(M=None)
    assert sc.ksd(X * c, S / c, kernel=ident) != pytest.approx(sc.ksd(X, S, kernel=ident), rel=0.1)


def test_median_bandwidth_scale_is_the_default_kernels_bandwidth():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((300, 2)) * np.array([1.0, 50.0])
    resolved = sc.SteinKernel(M="scale").resolve(X)
    assert sc.median_bandwidth(X, M="scale") == resolved.base.sigma
    assert sc.median_bandwidth(X) > 10 * sc.median_bandwidth(X, M="scale")
    with pytest.raises(ValueError, match="M must be"):
        sc.median_bandwidth(X, M="scaled")
