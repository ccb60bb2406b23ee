"""Stein thinning with sufficient statistics (Alg. D.1) against its definition."""

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset.algorithms import stein_thinning
from stein_coreset.engine.cpu import bridge
from stein_coreset.kernels import centred_kernel_matrix


def _problem(n=200, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = 0.5 + 1.3 * rng.standard_normal((n, d))
    return X, -X


def _brute_force_greedy(Kd, m):
    """Greedy minimisation of the MMD^2 of the equal-weighted coreset, from the dense matrix."""
    sel = []
    for _ in range(m):
        best, best_v = -1, np.inf
        for i in range(Kd.shape[0]):
            idx = np.array(sel + [i])
            v = Kd[np.ix_(idx, idx)].sum()
            if v < best_v:
                best, best_v = i, v
        sel.append(best)
    return np.array(sel)


def test_stein_thinning_equals_brute_force_greedy():
    X, S = _problem()
    K = sc.SteinKernel(sc.IMQ(sigma=1.0)).bind(X, S)
    want = _brute_force_greedy(K.dense(), 25)
    got = stein_thinning(K, 25)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def test_stein_thinning_xp_backend_equals_cpp(xp):
    X, S = _problem(n=150, d=3, seed=1)
    K = sc.SteinKernel(sc.IMQ(sigma=1.2)).bind(xp.asarray(X), xp.asarray(S))
    got = stein_thinning(K, 30, backend="xp")
    want = stein_thinning(K, 30, backend="cpu")
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, stein_thinning(K, 30))  # "auto"


def test_stein_thinning_on_centred_kernel_equals_brute_force():
    X, _ = _problem(n=120)
    K = centred_kernel_matrix(sc.Gaussian(sigma=1.0), X)
    np.testing.assert_array_equal(stein_thinning(K, 15), _brute_force_greedy(K.dense(), 15))


def test_stein_thinning_is_prefix_consistent():
    X, S = _problem(n=300)
    K = sc.SteinKernel(sc.IMQ(sigma=1.0)).bind(X, S)
    long = stein_thinning(K, 60)
    np.testing.assert_array_equal(stein_thinning(K, 17), long[:17])


def test_stein_thinning_more_steps_than_points():
    X, S = _problem(n=20)
    K = sc.SteinKernel(sc.IMQ(sigma=1.0)).bind(X, S)
    idx = stein_thinning(K, 50)
    assert idx.shape == (50,) and idx.min() >= 0 and idx.max() < 20


def test_stein_thinning_matches_stein_thinning_package():
    """Same IMQ kernel (c = 1, beta = -1/2) and preconditioner as `stein_thinning.thin`:
    standardised coordinates x / s with s the mean absolute deviation, i.e. M = diag(s^2)."""
    thin = pytest.importorskip("stein_thinning.thinning").thin  # the `peers` extra

    X, S = _problem(n=600, d=3, seed=3)
    scl = np.mean(np.abs(X - X.mean(axis=0)), axis=0)
    K = sc.SteinKernel(sc.IMQ(sigma=1.0), M=np.diag(scl**2)).bind(X, S)
    np.testing.assert_array_equal(stein_thinning(K, 40), thin(X, S, 40).astype(np.int64))


def test_stein_thinning_bad_input():
    X, S = _problem(n=10)
    K = sc.SteinKernel(sc.IMQ(sigma=1.0)).bind(X, S)
    with pytest.raises(ValueError, match="m"):
        stein_thinning(K, 0)
    with pytest.raises(TypeError, match="m"):
        stein_thinning(K, 2.5)
    with pytest.raises(TypeError, match="K"):
        stein_thinning(np.eye(3), 2)
    with pytest.raises(ValueError, match="backend"):
        stein_thinning(K, 2, backend="gpu")


@pytest.mark.parametrize("d", [1, 2, 4, 7, 9])
def test_vectorised_kernel_columns_equal_the_entrywise_evaluator(d):
    """engine/cpu/src_cpp/soa_kernel (the inner loop of ST, KT-SPLIT, KT-Swap) against sc::eval,
    for every
    base kernel, with and without scores and centring."""
    from stein_coreset.engine.cpu import _core

    rng = np.random.default_rng(d)
    X = rng.normal(size=(300, d))
    w = rng.random(300)
    bases = [
        sc.IMQ(1.1),
        sc.IMQ(0.9, -0.3),
        sc.Gaussian(1.2),
        sc.Matern(1.0, 1.5),
        sc.Matern(1.0, 2.5),
    ]
    for base in bases:
        for K in (sc.SteinKernel(base).bind(X, -0.7 * X), centred_kernel_matrix(base, X)):
            dense = bridge.gram(K, np.arange(300))
            np.testing.assert_allclose(
                _core.matvec_soa(bridge.handle(K), w), dense @ w, rtol=1e-12, atol=1e-11
            )
            np.testing.assert_allclose(
                _core.kernel_column(bridge.handle(K), 17), dense[:, 17], rtol=1e-12, atol=1e-13
            )


@pytest.mark.parametrize("d", [3, 40])
def test_column_cache_gives_the_picks_of_the_uncached_loop(d):
    """Repeated picks read their column from the cache: with no cache, a cache of three columns
    (full after three distinct picks) and the default one, the same picks and the reference's."""
    from stein_coreset.engine.cpu import _core

    rng = np.random.default_rng(d)
    X = 0.7 + 1.5 * rng.standard_normal((700, d))
    K = sc.SteinKernel(sc.IMQ(sigma=float(np.sqrt(2 * d)))).bind(X, -X)
    m = 900
    h = bridge.handle(K)
    runs = [_core.stein_thinning(h, m, 2, cache_bytes=c) for c in (0.0, 3 * 8.0 * 700, -1.0)]
    assert len(np.unique(runs[0])) < m // 3  # repeats: the cache is used
    for got in runs[1:]:
        np.testing.assert_array_equal(got, runs[0])
    np.testing.assert_array_equal(runs[0], K.with_backend("xp").backend.stein_thinning(
        K.with_backend("xp"), m))


def test_the_column_cache_is_sized_from_the_run():
    """No cache where reading a column back costs about what evaluating it does (d < 8), room
    for the m / 2 columns a run of m steps can re-pick at most, and never more than 256 MiB."""
    from stein_coreset.engine.cpu import _core

    assert _core._column_cache_bytes(1 << 14, 1 << 14, 4) == 0.0
    assert _core._column_cache_bytes(1 << 14, 100, 50) == 8.0 * (1 << 14) * 50
    assert _core._column_cache_bytes(1 << 20, 1 << 20, 100) == 256.0 * 2**20


def test_stein_thinning_at_small_d_allocates_no_column_cache():
    """skt's first stage at n = 2^14, d = 4 once grew to 256 MiB of cached columns (3339 points
    picked twice), for a loop the cache made slower: its peak RSS is now what the points and
    scores take."""
    import subprocess
    import sys

    code = (
        "import resource, numpy as np, stein_coreset as sc\n"
        "from stein_coreset.engine.cpu import _core, bridge\n"
        "X = 0.7 + 1.5 * np.random.default_rng(0).standard_normal((1 << 14, 4))\n"
        "K = sc.SteinKernel(sc.IMQ(sigma=2.83)).bind(X, -X, n_threads=1)\n"
        "h = bridge.handle(K)\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "_core.stein_thinning(h, 1 << 14, 1)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n"
    )
    grew_kib = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  check=True, cwd="/").stdout.split()[-1])
    assert grew_kib < 16 * 1024, grew_kib  # before: ~256 MiB
