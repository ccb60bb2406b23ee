"""The default kernel of ``compress`` is scale-free: M = diag(coordinate variances)."""

import numpy as np
import pytest

import stein_coreset as sc

DEBIASED = ("st", "skt", "lskt", "sr", "lsr", "sc", "lsc")


def _biased(n=1024, seed=3):
    rng = np.random.default_rng(seed)
    sd = np.array([1.0, 1.5, 0.7])
    X = 0.5 + rng.standard_normal((n, 3)) * sd
    return X, -X / sd**2


@pytest.mark.parametrize("method", DEBIASED)
def test_multiplying_a_coordinate_by_1000_selects_the_same_points(method):
    X, S = _biased()
    c = np.array([1.0, 1000.0, 1.0])
    a = sc.compress(X, S, size=32, method=method, seed=1)
    b = sc.compress(X * c, S / c, size=32, method=method, seed=1)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_allclose(a.weights, b.weights, rtol=1e-9, atol=1e-12)
    assert b.ksd == pytest.approx(a.ksd, rel=1e-9)
    assert a.info["preconditioner"] == "scale"
    assert b.info["scale"][1] == pytest.approx(1000 * a.info["scale"][1], rel=1e-12)


@pytest.mark.parametrize("method", DEBIASED)
def test_sd_1_and_1000_recovers_both_variances(method):
    # target N(0, diag(1, 1000^2)); the sample is biased (shifted, too wide)
    rng = np.random.default_rng(0)
    sd = np.array([1.0, 1000.0])
    X = (0.3 + 1.2 * rng.standard_normal((4096, 2))) * sd
    S = -X / sd**2
    res = sc.compress(X, S, size=64, method=method, seed=0)
    w, P = np.asarray(res.weights), np.asarray(res.points)
    var = w @ (P - w @ P) ** 2 / sd**2
    np.testing.assert_allclose(var, 1.0, rtol=0.2)
    if method in ("lsr", "lsc"):  # their low-rank weights happen to survive identity M here
        return
    # the identity preconditioner loses the small coordinate (what the scale-free default fixes)
    ident = sc.compress(X, S, size=64, method=method, seed=0, kernel=sc.SteinKernel(M=None))
    wi, Pi = np.asarray(ident.weights), np.asarray(ident.points)
    assert (wi @ (Pi - wi @ Pi) ** 2 / sd**2)[0] < 0.5
    assert ident.info["preconditioner"] == "identity"


def test_explicit_M_overrides_the_scale_default():
    X, S = _biased()
    M = np.diag([2.0, 3.0, 0.5])
    res = sc.compress(X, S, size=16, method="st", kernel=sc.SteinKernel(M=M))
    assert res.info["preconditioner"] == "given"
    diag = sc.SteinKernel(M=np.array([2.0, 3.0, 0.5]))
    ref = sc.compress(X, S, size=16, method="st", kernel=diag)
    np.testing.assert_array_equal(res.indices, ref.indices)


def test_info_stein_kernel_reproduces_res_ksd():
    X, S = _biased()
    res = sc.compress(X, S, size=16, method="sr", seed=0)
    k = res.info["stein_kernel"]
    got = sc.ksd(res.points, S[np.asarray(res.indices)], res.weights, kernel=k)
    assert got == pytest.approx(res.ksd, rel=1e-10)


def test_steinkernel_scale_is_resolved_per_call_and_not_in_place():
    X, S = _biased()
    k = sc.SteinKernel(M="scale")
    r = k.resolve(X)
    assert k.M == "scale" and k.base is None
    np.testing.assert_allclose(r.M, X.var(axis=0))
    K1 = k.matrix(X[:20], S[:20])
    K2 = k.matrix(X[:20] * [1, 1000, 1], S[:20] / [1, 1000, 1])
    np.testing.assert_allclose(K1, K2, rtol=1e-9)


def test_steinkernel_rejects_an_unknown_M_string():
    with pytest.raises(TypeError, match="scale"):
        sc.SteinKernel(M="auto")
