"""stein_coreset.distributed on real Dask (loopback LocalCluster), issue 13."""

import os
import signal
import threading
import time

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import stein_coreset as sc  # noqa: E402
from stein_coreset import distributed as scd  # noqa: E402


def biased(n, d=4, n_blocks=4, seed=0, burn=(0,)):
    """N(0, I) target; the blocks in ``burn`` are shifted far away and over-dispersed."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    b = n // n_blocks
    for k in burn:
        X[k * b:(k + 1) * b] = 1.5 * X[k * b:(k + 1) * b] + 6.0
    return X, -X


def as_dask(X, S, n_blocks):
    c = (X.shape[0] // n_blocks, X.shape[1])
    return da.from_array(X, chunks=c), da.from_array(S, chunks=c)


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=None) as c:
        yield c


def test_same_seed_same_result_threads_and_cluster(cluster):
    X, S = biased(2**12)
    Xd, Sd = as_dask(X, S, 4)
    ref = scd.compress(Xd, Sd, size=32, method="skt", seed=3, scheduler="threads")
    with distributed.Client(cluster):
        got = scd.compress(Xd, Sd, size=32, method="skt", seed=3)
    np.testing.assert_array_equal(ref.indices, got.indices)
    np.testing.assert_array_equal(ref.weights, got.weights)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 4])
def test_same_seed_same_result_any_worker_count(workers):
    X, S = biased(2**12)
    Xd, Sd = as_dask(X, S, 4)
    ref = scd.compress(Xd, Sd, size=32, method="skt", seed=3, scheduler="sync")
    with distributed.LocalCluster(n_workers=workers, processes=True, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=None) as c, \
            distributed.Client(c):
        got = scd.compress(Xd, Sd, size=32, method="skt", seed=3)
    np.testing.assert_array_equal(ref.indices, got.indices)


def test_indices_are_global_and_burn_in_block_gets_little_weight():
    X, S = biased(2**12, n_blocks=4, burn=(0,))
    Xd, Sd = as_dask(X, S, 4)
    res = scd.compress(Xd, Sd, size=32, method="skt", seed=0, scheduler="threads")
    np.testing.assert_array_equal(res.points, X[res.indices])
    assert res.weights[res.indices < 2**10].sum() < 0.05
    assert res.info["n_blocks"] == 4 and len(res.info["blocks"]) == 4


def test_tree_reduce_with_many_blocks():
    X, S = biased(2**12, n_blocks=16)
    Xd, Sd = as_dask(X, S, 16)
    res = scd.compress(Xd, Sd, size=16, method="st", seed=0, fan_in=2, scheduler="threads")
    assert len(res.info["reduce"]) == 15
    assert abs(res.weights.sum() - 1) < 1e-12


def test_nan_rows_spread_over_blocks_omitted_with_global_indices():
    X, S = biased(2**12)
    bad = np.array([5, 1500, 3000, 4000])
    X[bad, 1] = np.nan
    Xd, Sd = as_dask(X, S, 4)
    with pytest.raises(ValueError, match="nan_policy"):
        scd.compress(Xd, Sd, size=16, method="st", seed=0, scheduler="threads")
    res = scd.compress(Xd, Sd, size=16, method="st", seed=0, nan_policy="omit",
                       scheduler="threads")
    assert res.info["n_dropped"] == 4
    assert not np.isin(res.indices, bad).any()
    np.testing.assert_array_equal(res.points, X[res.indices])


def test_bad_input_names_the_argument(tmp_path):
    X, S = biased(2**10)
    Xd = da.from_array(X, chunks=(256, 4))
    with pytest.raises(ValueError, match="chunked alike"):
        scd.compress(Xd, da.from_array(S, chunks=(128, 4)), size=8, method="skt")
    with pytest.raises(ValueError, match="same shape"):
        scd.compress(Xd, da.from_array(S[:-1], chunks=(256, 4)), size=8, method="skt")
    with pytest.raises(ValueError, match="empty"):
        scd.compress([X, X[:0]], [S, S[:0]], size=8, method="skt")
    with pytest.raises(TypeError, match="X"):
        scd.compress(X, S, size=8, method="skt")
    with pytest.raises(ValueError, match="method"):
        scd.compress(Xd, da.from_array(S, chunks=(256, 4)), size=8, method="kt")


def test_run_cli_reads_chain_files_lazily(tmp_path):
    paths = []
    for i in range(3):
        X, S = biased(2**10, seed=i, burn=())
        p = tmp_path / f"chain{i}.npz"
        np.savez(p, X=X, S=S)
        paths.append(str(p))
    out = tmp_path / "core.npz"
    res = scd.run_cli(paths, size=16, method="skt", seed=0, out=str(out))
    assert res.indices.max() < 3 * 2**10 and out.exists()
    with np.load(out) as z:
        np.testing.assert_array_equal(z["indices"], res.indices)


@pytest.mark.slow
def test_killed_worker_is_rescheduled_and_result_unchanged():
    X, S = biased(2**12)
    Xd, Sd = as_dask(X, S, 4)
    ref = scd.compress(Xd, Sd, size=32, method="skt", seed=5, scheduler="sync")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=None) as c, \
            distributed.Client(c) as client:
        pids = list(client.run(os.getpid).values())
        killer = threading.Timer(1.0, os.kill, (pids[0], signal.SIGKILL))
        killer.start()
        t0 = time.time()
        got = scd.compress(Xd, Sd, size=32, method="skt", seed=5, _delay_s=2.0)
        killer.cancel()
        assert time.time() - t0 < 120
    np.testing.assert_array_equal(ref.indices, got.indices)
    np.testing.assert_array_equal(ref.weights, got.weights)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["skt", "lskt", "sr"])
def test_ksd_close_to_single_process(cluster, method):
    X, S = biased(2**16, n_blocks=8, burn=(0, 3))
    Xd, Sd = as_dask(X, S, 8)
    ratios = []
    with distributed.Client(cluster):
        for seed in range(3):
            r = scd.compress(Xd, Sd, size=256, method=method, seed=seed, block_size=512)
            k = sc.SteinKernel(sc.IMQ(sigma=r.info["sigma"]))
            one = sc.compress(X, S, size=256, method=method, seed=seed, kernel=k)
            ratios.append(r.ksd / one.ksd)
    assert np.median(ratios) < 1.2, ratios
