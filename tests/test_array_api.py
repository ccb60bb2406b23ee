"""Namespace and device handling: results come back where the inputs live."""

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset import _array_api as aa


def test_compress_returns_coreset_in_caller_namespace_and_device(xp):
    rng = np.random.default_rng(0)
    Xh = rng.standard_normal((200, 2)) + 0.5
    X, S = xp.asarray(Xh), xp.asarray(-Xh)
    for method in ("standard", "iid"):
        res = sc.compress(X, S, size=20, method=method, seed=1)
        for a in (res.indices, res.weights, res.points):
            xp.same_place(a, X)
        idx = xp.to_numpy(res.indices).astype(np.int64)
        np.testing.assert_allclose(xp.to_numpy(res.points), Xh[idx])
        assert xp.to_numpy(res.weights).sum() == pytest.approx(1.0)
        dense = res.dense(200)
        xp.same_place(dense, X)
        assert xp.to_numpy(dense)[idx] == pytest.approx(xp.to_numpy(res.weights))
        ref = sc.compress(Xh, -Xh, size=20, method=method, seed=1)
        np.testing.assert_array_equal(idx, ref.indices)
        assert res.ksd == pytest.approx(ref.ksd, rel=1e-10)


def test_standard_thinning_keeps_every_n_over_m_th_point():
    X = np.arange(100.0)[:, None]
    res = sc.compress(X, size=10, method="standard")
    np.testing.assert_array_equal(res.indices, np.arange(9, 100, 10))
    assert res.kind == "equal" and res.ksd is None
    res = sc.compress(X, size=7, method="standard")  # n not a multiple of m
    assert len(res) == 7 and len(np.unique(res.indices)) == 7 and res.indices.max() < 100


def test_namespace_lookup_names_the_mixed_arguments():
    strict = pytest.importorskip("array_api_strict")
    with pytest.raises(TypeError, match=r"X: numpy.ndarray, S: array_api_strict"):
        aa.namespace(X=np.ones((2, 2)), S=strict.ones((2, 2)))


def test_host_transfers_are_explicit_and_counted():
    strict = pytest.importorskip("array_api_strict")
    x = strict.asarray(np.arange(6.0).reshape(3, 2), device=strict.Device("device1"))
    before = aa.TRANSFERS["to_host"]
    h = aa.to_host(x)
    assert isinstance(h, np.ndarray) and aa.TRANSFERS["to_host"] == before + 1
    back = aa.from_host(h, like=x)
    assert back.device == x.device
    # NumPy inputs cross for free
    n0 = aa.TRANSFERS["to_host"]
    aa.to_host(np.ones(3))
    assert aa.TRANSFERS["to_host"] == n0


def test_kernel_matrix_on_strict_namespace_does_not_touch_the_host(xp):
    rng = np.random.default_rng(1)
    Xh = rng.standard_normal((64, 3))
    X = xp.asarray(Xh)
    K = sc.SteinKernel(sc.IMQ(1.0)).bind(X, -X)
    before = dict(aa.TRANSFERS)
    w = xp.asarray(np.full(64, 1 / 64))
    K.matvec(w)
    K.quad(w)
    K.diag()
    if not aa.is_numpy(K.xp):
        assert aa.TRANSFERS["to_host"] == before.get("to_host", 0)
