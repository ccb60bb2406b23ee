"""Every documented way of using an equal-weighted result gives the coreset's weighted mean:
a point picked k times out of m counts k times."""

import numpy as np
import pytest

import stein_coreset as sc

EQUAL = ("st", "skt", "lskt", "standard", "iid", "kt", "compresspp")


@pytest.fixture(scope="module")
def chain():
    from stein_coreset import datasets

    c = datasets.gmm_chain(1024, seed=0)
    return c.X, c.S


@pytest.mark.parametrize("method", EQUAL)
def test_draws_mean_is_the_weighted_mean_with_repeats_kept(chain, method):
    X, S = chain
    res = sc.compress(X, S, size=64, method=method, seed=0)
    assert res.kind == "equal" and res.draws.shape[1] == 2
    m = res.draws.shape[0]
    assert m == res.info.get("size_used", 64)
    np.testing.assert_allclose(res.draws.mean(axis=0), res.weights @ res.points, rtol=1e-12)
    np.testing.assert_array_equal(res.draws, X[res.draw_indices])
    counts = np.bincount(res.draw_indices, minlength=X.shape[0])[res.indices]
    np.testing.assert_allclose(counts / m, res.weights, rtol=1e-12)


def test_st_repeats_make_the_points_mean_differ_from_the_draws_mean(chain):
    # why res.points must not be averaged plainly: ST picks some points several times
    X, S = chain
    res = sc.compress(X, S, size=64, method="st", seed=0)
    assert len(res) < 64
    assert not np.allclose(res.points.mean(axis=0), res.draws.mean(axis=0))


def test_unflatten_of_the_draws_recipe(chain):
    xr = pytest.importorskip("xarray")
    from stein_coreset.integrations.arviz import flatten, unflatten

    X, S = chain
    post = xr.Dataset({"a": (("chain", "draw"), X[:, 0].reshape(2, 512)),
                       "b": (("chain", "draw"), X[:, 1].reshape(2, 512))})
    Xf, layout = flatten(post)
    np.testing.assert_array_equal(Xf, X)
    res = sc.compress(Xf, S, size=40, method="skt", seed=0)
    ds = unflatten(res.draws, layout)
    want = res.weights @ res.points
    assert ds.sizes["draw"] == 40
    np.testing.assert_allclose([float(ds["a"].mean()), float(ds["b"].mean())], want, rtol=1e-12)
    chain_i, draw_i = layout.source(res.draw_indices)
    np.testing.assert_array_equal(post["a"].values[chain_i, draw_i], ds["a"].values[0])


@pytest.mark.parametrize("method", ["sr", "lsr"])
def test_resample_equal_draws_mean_is_its_weighted_mean_and_close_to_the_source(chain, method):
    X, S = chain
    res = sc.compress(X, S, size=32, method=method, seed=0)
    eq = res.resample_equal(64, seed=1)
    assert eq.kind == "equal" and eq.draws.shape == (64, 2)
    np.testing.assert_allclose(eq.draws.mean(axis=0), eq.weights @ eq.points, rtol=1e-12)
    assert set(np.asarray(eq.indices).tolist()) <= set(np.asarray(res.indices).tolist())
    # stratified residual resampling: floor(64 w) copies plus at most two residual draws
    dense = res.dense(X.shape[0])
    assert np.max(np.abs(eq.dense(X.shape[0]) - dense)) <= 2 / 64 + 1e-12
    a = res.resample_equal(64, seed=1)
    np.testing.assert_array_equal(a.draw_indices, eq.draw_indices)


def test_resample_equal_refuses_signed_weights(chain):
    X, S = chain
    res = sc.compress(X, S, size=32, method="sc", seed=0)
    if (np.asarray(res.weights) < 0).any():
        with pytest.raises(ValueError, match="negative weights"):
            res.resample_equal(32)


def test_distributed_equal_result_carries_its_draws(chain):
    pytest.importorskip("dask")
    from stein_coreset import distributed as scd

    X, S = chain
    res = scd.compress([X[:512], X[512:]], [S[:512], S[512:]], size=32, method="skt", seed=0,
                       scheduler="sync")
    assert res.draws.shape == (32, 2)
    np.testing.assert_allclose(res.draws.mean(axis=0), res.weights @ res.points, rtol=1e-12)
