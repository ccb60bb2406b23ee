"""Inputs people have: lists, pandas, xarray and masked arrays at the public boundary,
converted once on the host; device arrays are never converted."""

import numpy as np
import pytest

import stein_coreset as sc


@pytest.fixture(scope="module")
def sample():
    rng = np.random.default_rng(0)
    X = 0.4 + rng.standard_normal((200, 3))
    return X, -X


def test_lists_give_the_same_coreset_as_arrays(sample):
    X, S = sample
    a = sc.compress(X, S, size=16, method="skt", seed=0)
    b = sc.compress(X.tolist(), S.tolist(), size=16, method="skt", seed=0)
    np.testing.assert_array_equal(a.indices, b.indices)
    assert sc.ksd(X.tolist(), S) == pytest.approx(sc.ksd(X, S), rel=1e-12)
    assert sc.energy_distance(X[:20].tolist(), X[20:40]) == pytest.approx(
        sc.energy_distance(X[:20], X[20:40]), rel=1e-12)


def test_pandas_dataframes_are_read_with_na_as_nan(sample):
    pd = pytest.importorskip("pandas")
    X, S = sample
    dX = pd.DataFrame(X, columns=["a", "b", "c"]).astype("Float64")  # nullable: pd.NA
    dS = pd.DataFrame(S, columns=["a", "b", "c"])
    ref = sc.compress(X, S, size=16, method="sr", seed=0)
    got = sc.compress(dX, dS, size=16, method="sr", seed=0)
    np.testing.assert_array_equal(ref.indices, got.indices)
    dX.iloc[5, 1] = pd.NA
    with pytest.raises(ValueError, match="NaN or inf in 1 of its 200 rows"):
        sc.compress(dX, dS, size=16, method="st")
    out = sc.compress(dX, dS, size=16, method="st", nan_policy="omit")
    assert out.info["n_dropped"] == 1 and 5 not in np.asarray(out.indices)
    with pytest.raises(TypeError, match="non-numeric"):
        sc.compress(pd.DataFrame({"a": ["x"] * 200}), S[:, :1], size=4, method="st")


def test_xarray_dataarray_is_accepted_and_a_dataset_refused(sample):
    xr = pytest.importorskip("xarray")
    X, S = sample
    da = xr.DataArray(X, dims=("draw", "dim"))
    got = sc.compress(da, xr.DataArray(S, dims=("draw", "dim")), size=16, method="st")
    np.testing.assert_array_equal(got.indices, sc.compress(X, S, size=16, method="st").indices)
    with pytest.raises(TypeError, match="Dataset.*flatten"):
        sc.compress(xr.Dataset({"x": da}), S, size=4, method="st")


def test_a_masked_array_is_refused_when_masked_and_never_ignored(sample):
    X, S = sample
    m = np.ma.masked_array(X, mask=np.zeros_like(X, bool))
    np.testing.assert_array_equal(
        sc.compress(m, S, size=8, method="st").indices,
        sc.compress(X, S, size=8, method="st").indices,
    )
    m[3, 0] = np.ma.masked
    with pytest.raises(ValueError, match="masked array with 1 masked rows.*nan_policy='omit'"):
        sc.compress(m, S, size=8, method="st")
    out = sc.compress(m.filled(np.nan), S, size=8, method="st", nan_policy="omit")
    assert out.info["n_dropped"] == 1


def test_device_arrays_are_not_converted(sample):
    strict = pytest.importorskip("array_api_strict")
    X, S = sample
    dev = strict.Device("device1")
    res = sc.compress(strict.asarray(X, device=dev), strict.asarray(S, device=dev), size=8,
                      method="st")
    assert res.indices.device == dev and res.draws.device == dev


def test_the_stein_kernel_takes_lists_too(sample):
    X, S = sample
    k = sc.SteinKernel(sc.IMQ(1.0))
    np.testing.assert_allclose(k.matrix(X[:5].tolist(), S[:5].tolist()), k.matrix(X[:5], S[:5]))
    np.testing.assert_allclose(k.diag(X[:5].tolist(), S[:5]), k.diag(X[:5], S[:5]))


def test_dataframe_labels_are_kept_in_points_and_draws(sample):
    pd = pytest.importorskip("pandas")
    X, S = sample
    index = pd.Index([f"draw{i}" for i in range(len(X))], name="draw")
    dX = pd.DataFrame(X, index=index, columns=["a", "b", "c"])
    res = sc.compress(dX, S, 16, "skt", seed=0)
    assert isinstance(res.points, pd.DataFrame) and isinstance(res.draws, pd.DataFrame)
    assert list(res.points.columns) == ["a", "b", "c"]
    assert list(res.points.index) == [f"draw{i}" for i in np.asarray(res.indices)]
    np.testing.assert_array_equal(res.points.to_numpy(), X[np.asarray(res.indices)])
    assert list(res.draws.index) == [f"draw{i}" for i in np.asarray(res.draw_indices)]
    np.testing.assert_allclose(res.draws.mean().to_numpy(),
                               np.asarray(res.weights) @ X[np.asarray(res.indices)])
    eq = sc.compress(dX, S, 16, "sr", seed=0).resample_equal(seed=0)
    assert list(eq.draws.columns) == ["a", "b", "c"]


def test_dataarray_labels_are_kept_in_points(sample):
    xr = pytest.importorskip("xarray")
    X, S = sample
    da = xr.DataArray(X, dims=("draw", "dim"),
                      coords={"draw": np.arange(100, 100 + len(X)), "dim": ["a", "b", "c"]})
    res = sc.compress(da, S, 16, "st")
    assert isinstance(res.points, xr.DataArray) and res.points.dims == ("draw", "dim")
    np.testing.assert_array_equal(res.points["draw"].values, 100 + np.asarray(res.indices))
    assert list(res.points["dim"].values) == ["a", "b", "c"]
