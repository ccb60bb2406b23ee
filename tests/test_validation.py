"""Validation happens once, at the public boundary, and names the argument."""

import importlib

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset import _array_api, _validation
from stein_coreset._validation import check_bool, check_int, check_random_state

compress_mod = importlib.import_module("stein_coreset.compress")


@pytest.fixture
def sample():
    rng = np.random.default_rng(0)
    X = 0.5 + rng.standard_normal((200, 3))
    return X, -X


@pytest.mark.parametrize("method", ["st", "skt", "sr", "lskt"])
def test_one_compress_call_checks_points_and_scores_once(sample, monkeypatch, method):
    X, S = sample
    checked, scans, lookups, finite_checks = [], [], [], []
    check_points, nonfinite_rows, namespace, all_finite = (
        _validation.check_points, _validation.nonfinite_rows, _array_api.namespace,
        _validation.all_finite,
    )

    def spy_finite(xp, *arrays):
        finite_checks.append(len(arrays))
        return all_finite(xp, *arrays)

    def spy_points(A, xp, name="X", **kw):
        checked.append(name)
        return check_points(A, xp, name, **kw)

    def spy_scan(xp, A):
        scans.append(A.shape)
        return nonfinite_rows(xp, A)

    def spy_namespace(**arrays):
        lookups.append(tuple(arrays))
        return namespace(**arrays)

    monkeypatch.setattr(_validation, "check_points", spy_points)
    monkeypatch.setattr(_validation, "nonfinite_rows", spy_scan)
    monkeypatch.setattr(_validation, "all_finite", spy_finite)
    monkeypatch.setattr(_array_api, "namespace", spy_namespace)
    res = sc.compress(X, S, size=8, method=method, seed=0)
    assert len(res) <= 8
    assert checked == ["X", "S"]  # once each (S through check_scores)
    assert finite_checks == [2]  # one whole-array NaN/inf check of X and S, one host sync
    assert scans == []  # the per-row mask only when that check fails
    # compress's own lookup plus the engine's one per KernelMatrix built (target, res.ksd)
    assert lookups[0] == ("X", "S", "weights")
    assert sum(1 for names in lookups if "weights" in names) == 1
    # a NaN row: the masks of X and S find it (and nan_policy="omit" drops it)
    finite_checks.clear()
    Xn = X.copy()
    Xn[3, 0] = np.nan
    res = sc.compress(Xn, S, size=8, method=method, seed=0, nan_policy="omit")
    assert finite_checks == [2] and len(scans) == 2 and res.info["n_dropped"] == 1


def test_unknown_options_raise_before_any_work(sample, monkeypatch):
    X, S = sample

    def no_work(*a, **k):
        pytest.fail("the pipeline ran")

    row = compress_mod.METHODS["sr"]
    monkeypatch.setattr(
        compress_mod, "METHODS", {**compress_mod.METHODS, "sr": _replace(row, run=no_work)}
    )
    with pytest.raises(TypeError, match="unknown option.*'sr': foo"):
        sc.compress(X, S, size=8, method="sr", foo=1)
    with pytest.raises(TypeError, match="standard_thin"):
        sc.compress(X, S, size=8, method="skt", standard_thin="no")
    with pytest.raises(ValueError, match="delta"):
        sc.compress(X, S, size=8, method="skt", delta=1.5)


def _replace(row, **kw):
    import dataclasses

    return dataclasses.replace(row, **kw)


@pytest.mark.parametrize(
    "kw, exc",
    [
        (dict(seed=True), TypeError),
        (dict(seed=-1), ValueError),
        (dict(seed="x"), TypeError),
        (dict(seed=1.5), TypeError),
    ],
)
def test_bad_seeds_name_seed(sample, kw, exc):
    X, S = sample
    with pytest.raises(exc, match="seed"):
        sc.compress(X, S, size=8, method="st", **kw)


def test_booleans_must_be_booleans(sample):
    X, S = sample
    with pytest.raises(TypeError, match="progress"):
        sc.compress(X, S, size=8, method="st", progress="no")
    with pytest.raises(TypeError, match="standard_thin"):
        sc.compress(X, S, size=8, method="lskt", standard_thin="no")


def test_rank_for_a_method_without_rank_is_refused(sample):
    X, S = sample
    with pytest.raises(ValueError, match="rank: method 'st' has no rank"):
        sc.compress(X, S, size=8, method="st", rank=3)


def test_validation_helpers_name_the_argument():
    with pytest.raises(TypeError, match="n_steps must be an integer"):
        check_int(True, "n_steps")
    with pytest.raises(ValueError, match="n_steps must be between 1 and 4, got 5"):
        check_int(5, "n_steps", lo=1, hi=4)
    with pytest.raises(TypeError, match="flag must be True or False"):
        check_bool(1, "flag")
    g = np.random.default_rng(0)
    assert check_random_state(g) is g
    np.testing.assert_array_equal(
        check_random_state(3).integers(100, size=5),
        np.random.default_rng(3).integers(100, size=5),
    )


def test_one_stein_kernel_on_two_datasets_gives_each_its_own_bandwidth(sample):
    X, S = sample
    Y = 10.0 * X
    kern = sc.SteinKernel()
    r1 = sc.compress(X, S, size=8, method="st", kernel=kern)
    r2 = sc.compress(Y, S / 10.0, size=8, method="st", kernel=kern)
    assert r1.info["bandwidth"] == pytest.approx(sc.median_bandwidth(X))
    assert r2.info["bandwidth"] == pytest.approx(sc.median_bandwidth(Y))
    assert "IMQ" in r1.info["kernel"]
    # each run equals a run with the explicit bandwidth (selection and res.ksd alike)
    ref = sc.compress(Y, S / 10.0, size=8, method="st", kernel=sc.IMQ(r2.info["bandwidth"]))
    np.testing.assert_array_equal(r2.indices, ref.indices)
    assert r2.ksd == pytest.approx(ref.ksd, rel=1e-12)


@pytest.mark.parametrize("method", ["st", "kt"])
def test_the_users_kernel_is_unchanged_after_compress(sample, method):
    X, S = sample
    kern = sc.SteinKernel()
    before = dict(vars(kern))
    res = sc.compress(X, S, size=8, method=method, kernel=kern)
    assert vars(kern) == before and kern.base is None
    # the baseline's res.ksd uses the bandwidth of the whole input, as its selection does
    assert res.info["bandwidth"] == pytest.approx(sc.median_bandwidth(X))


def test_one_stein_kernel_shared_by_threads_gives_the_serial_results():
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(3)
    data = [(s * rng.standard_normal((150, 2)), s) for s in (0.5, 1.0, 2.0, 4.0)]
    kern = sc.SteinKernel()

    def run(item):
        X, s = item
        return sc.compress(X, -X / s**2, size=6, method="st", kernel=kern)

    serial = [run(item) for item in data]
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(run, data))
    for a, b in zip(serial, threaded, strict=True):
        np.testing.assert_array_equal(a.indices, b.indices)
        assert a.info["bandwidth"] == b.info["bandwidth"]
    assert kern.base is None
