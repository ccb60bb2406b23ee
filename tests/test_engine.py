"""The kernel engine (KernelMatrix + _core) and its threading policy
(engine/cpu/src_cpp/parallel.hpp).

Every C++ loop runs on a team of ``n_threads`` owned by the call and combines fixed chunks in
order, so results must not depend on the thread count, nor on other Python threads calling the
library at the same time.
"""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset.algorithms import kernel_thinning, kt_split, stein_thinning
from stein_coreset.engine.cpu import bridge

# n above the engine's parallel thresholds (2048 points per greedy step), not a multiple of the
# 256-point blocks, so the last, short block and the per-block combines are exercised
N, D, SIZE = 2500, 3, 32


def _chain(n=N, d=D, seed=3):
    rng = np.random.default_rng(seed)
    X = 0.7 + 1.5 * rng.standard_normal((n, d))
    return X, -X


@pytest.fixture(scope="module")
def chain():
    return _chain()


@pytest.mark.parametrize(
    "method", ["st", "skt", "kt", "lskt", "compresspp", "sr", "sc", "lsr", "lsc"]
)
def test_compress_selection_does_not_depend_on_n_threads(chain, method):
    X, S = chain
    runs = [
        sc.compress(X, S, size=SIZE, method=method, seed=11, n_threads=t) for t in (1, 2, 3)
    ]
    for r in runs[1:]:
        np.testing.assert_array_equal(np.asarray(r.indices), np.asarray(runs[0].indices))
        np.testing.assert_array_equal(np.asarray(r.weights), np.asarray(runs[0].weights))
        if runs[0].ksd is not None:
            assert r.ksd == runs[0].ksd


def test_kernel_primitives_are_bit_identical_across_n_threads():
    X, S = _chain(9000, 4, 5)  # big enough for every primitive's parallel path
    K1 = sc.SteinKernel(sc.IMQ(sigma=1.3)).bind(X, S, n_threads=1)
    K3 = K1.with_threads(3)
    # one host copy, one SoA layout
    assert K3.n_threads == 3 and bridge.handle(K3) is bridge.handle(K1)
    rows = np.array([0, 17, 4096, 8999])
    w = np.random.default_rng(0).dirichlet(np.ones(K1.n))
    np.testing.assert_array_equal(K1.column(4097), K3.column(4097))
    np.testing.assert_array_equal(bridge.gram(K1, rows), bridge.gram(K3, rows))
    np.testing.assert_array_equal(bridge.gram(K1, rows, rows[::-1]),
                                  bridge.gram(K3, rows, rows[::-1]))
    np.testing.assert_array_equal(bridge.matvec(K1, w), bridge.matvec(K3, w))
    np.testing.assert_array_equal(K1.row_means(rows), K3.row_means(rows))
    C = np.arange(0, 9000, 30, dtype=np.int64).reshape(2, -1)
    np.testing.assert_array_equal(K1.coreset_sums(C), K3.coreset_sums(C))
    # KT-SPLIT's walk is summed in parallel chunks only for long sequences
    idx = np.arange(K1.n)
    a = kt_split(K1, idx, 2, rng=4)
    b = kt_split(K1, idx, 2, rng=4, n_threads=3)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(stein_thinning(K1, 40), stein_thinning(K1, 40, n_threads=3))


def test_building_blocks_accept_n_threads_without_changing_results(chain):
    X, S = chain
    K = sc.SteinKernel(sc.IMQ(sigma=1.0)).bind(X, S, n_threads=1)
    idx = np.arange(2048)  # KT needs len(indices) / m a power of two
    a = kernel_thinning(K, SIZE, indices=idx, rng=2)
    b = kernel_thinning(K, SIZE, indices=idx, rng=2, n_threads=2)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_column_equals_a_row_of_the_block():
    X, S = _chain(700, 3, 1)
    for K in (
        sc.SteinKernel(sc.IMQ(sigma=1.0)).bind(X, S),
        sc.SteinKernel(sc.Gaussian(sigma=2.0)).bind(X, S),
        sc.SteinKernel(sc.Matern(sigma=2.0, nu=2.5)).bind(X, S),
    ):
        for j in (0, 255, 256, 699):
            col = np.asarray(K.column(j))
            # the C++ column and one-row block are the same evaluation, bit for bit
            np.testing.assert_array_equal(col, np.asarray(K.block([j]))[0])
            # and agree with the array-API reference (and, by symmetry, the column)
            ref = K.with_backend("xp")
            np.testing.assert_allclose(col, np.asarray(ref.column(j)), rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(
                col, np.asarray(ref.block(np.arange(700), [j]))[:, 0], rtol=1e-12, atol=1e-12
            )


def test_quad_from_the_upper_triangle_is_the_quadratic_form_for_any_team():
    """On "cpu", K.quad(w) sums w_i (w_i k_ii + 2 sum_{j>i} w_j k_ij): half the evaluations of
    w . K w, the same value to rounding (Stein and centred kernels, zeros in w, n over two
    evaluator blocks and not a multiple of the row chunk), the same bits on 1 and 3 threads."""
    X, S = _chain(700, 3, 1)
    rng = np.random.default_rng(5)
    w = rng.random(700)
    w[::7] = 0.0
    w /= w.sum()
    signed = w - 1.0 / 700  # centring weights: a quadratic form with cancellation
    for K in (sc.SteinKernel(sc.IMQ(sigma=1.0)).bind(X, S),
              sc.SteinKernel(sc.Matern(sigma=2.0, nu=2.5)).bind(X, S),
              sc.kernels.centred_kernel_matrix(sc.Gaussian(sigma=2.0), X)):
        G = np.asarray(K.block(np.arange(700)))
        for v in (w, signed):
            dense = float(v @ G @ v)
            scale = float(np.abs(v) @ np.abs(G) @ np.abs(v))  # the rounding of the sum
            got = K.quad(v)
            assert got == pytest.approx(dense, rel=1e-12, abs=1e-15 * scale)
            assert K.with_threads(3).quad(v) == got == K.with_threads(1).quad(v)
        assert K.quad(np.zeros(700)) == 0.0


def test_matvec_from_the_upper_triangle_is_the_product_for_any_team():
    """On "cpu", K w below the accumulators' memory bound comes from K's upper triangle (each
    k_ij added to rows i and j: half the evaluations): the row-by-row product to rounding, for a
    base, a centred and a Stein kernel (n over two evaluator blocks, not a multiple of the row
    chunk, fewer chunks than slots too), the same bits on 1 and 3 threads."""
    from stein_coreset.engine import KernelMatrix
    from stein_coreset.engine.cpu import _core

    X, S = _chain(700, 3, 1)
    rng = np.random.default_rng(6)
    for n in (700, 90):
        w = rng.standard_normal(n)
        for K in (KernelMatrix(sc.IMQ(sigma=1.5), X[:n]),
                  sc.kernels.centred_kernel_matrix(sc.Gaussian(sigma=2.0), X[:n]),
                  sc.SteinKernel(sc.Matern(sigma=2.0, nu=2.5)).bind(X[:n], S[:n])):
            rows = _core.matvec_soa(bridge.handle(K), w, 1, False)
            G = np.asarray(K.block(np.arange(n)))
            scale = np.abs(G) @ np.abs(w)  # the rounding of each entry's sum
            got = np.asarray(K.matvec(w))
            np.testing.assert_array_equal(got, _core.matvec_soa(bridge.handle(K), w, 1, True))
            assert np.all(np.abs(got - rows) <= 1e-14 * scale)
            assert np.all(np.abs(got - G @ w) <= 1e-14 * scale)
            np.testing.assert_array_equal(np.asarray(K.with_threads(3).matvec(w)), got)


def test_four_python_threads_calling_compress_match_serial_calls(chain):
    X, S = chain
    jobs = [("st", 2), ("skt", 3), ("sr", 2), ("lskt", 1), ("kt", 2), ("sc", 3), ("st", 1)] * 2
    serial = [sc.compress(X, S, size=SIZE, method=m, seed=5, n_threads=t) for m, t in jobs]
    results = [None] * len(jobs)
    errors = []
    barrier = threading.Barrier(4)

    def worker(k):
        try:
            barrier.wait()
            for i in range(k, len(jobs), 4):
                m, t = jobs[i]
                results[i] = sc.compress(X, S, size=SIZE, method=m, seed=5, n_threads=t)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for (m, _), a, b in zip(jobs, serial, results, strict=True):
        np.testing.assert_array_equal(np.asarray(a.indices), np.asarray(b.indices), err_msg=m)
        np.testing.assert_array_equal(np.asarray(a.weights), np.asarray(b.weights), err_msg=m)


# ---- the median bandwidth on the engine (engine/cpu/src_cpp/pairwise.hpp)
# ------------------------------


def _numpy_median_distance(U):
    """The NumPy definition: numpy.median of the upper triangle of sqrt(squared_distances)."""
    import array_api_compat.numpy as np_xp

    from stein_coreset.engine import squared_distances

    D = np.sqrt(squared_distances(np_xp, U, U))
    return float(np.median(D[np.triu_indices(U.shape[0], 1)]))


def _median_inputs():
    rng = np.random.default_rng(21)
    yield rng.standard_normal((2, 1))  # one pair
    yield rng.standard_normal((3, 2))  # odd number of pairs
    yield rng.standard_normal((181, 3))  # below the bracketing threshold (N < 2^16)
    yield rng.standard_normal((1000, 4))  # N even, bracketed
    yield rng.standard_normal((999, 1))  # N odd, bracketed
    yield np.round(rng.standard_normal((700, 2)) * 3) / 3  # many tied distances
    yield 1e-150 * rng.standard_normal((400, 5))  # tiny squares (subnormal range)
    yield 1e3 * rng.standard_t(1.5, (800, 3))  # heavy tails
    yield 1e8 + rng.standard_normal((600, 4))  # far from the origin
    for _ in range(20):
        m, d = int(rng.integers(2, 1300)), int(rng.integers(1, 9))
        yield rng.uniform(0.01, 100) * rng.standard_normal((m, d))


def test_cpp_median_pairwise_distance_equals_the_numpy_definition_bit_for_bit():
    import array_api_compat.numpy as np_xp

    from stein_coreset.engine import squared_distances
    from stein_coreset.engine.cpu import _core

    for U in _median_inputs():
        m = U.shape[0]
        expect = _numpy_median_distance(U)
        q = _core.pairwise_sq_distances(U, 2)
        np.testing.assert_array_equal(q, squared_distances(np_xp, U, U)[np.triu_indices(m, 1)])
        for t in (1, 2, 3):
            assert _core.median_pairwise_distance(U, t) == expect, (m, U.shape[1], t)
        # the bracketing selection, its fallback and one nth_element over every pair agree
        assert _core.median_pairwise_distance(U, 1, 1) == expect
        assert _core.median_pairwise_distance(U, 2, 2) == expect


def test_median_bandwidth_is_the_numpy_value_for_any_n_threads_and_preconditioner():
    rng = np.random.default_rng(22)
    X = 0.7 + 1.5 * rng.standard_normal((5000, 3))
    A = rng.standard_normal((3, 3))
    for M in (None, A @ A.T + 3 * np.eye(3), np.array([0.5, 2.0, 4.0])):
        for max_points in (1000, 333, 2):
            kept = X[:: -(-5000 // max_points)]
            U = kept if M is None else sc.engine.Whitening(M, 3, np, None).points(kept)
            expect = _numpy_median_distance(np.asarray(U))
            got = [
                sc.median_bandwidth(X, M=M, max_points=max_points, n_threads=t)
                for t in (None, 1, 2, 3)
            ]
            assert got == [expect] * 4, (M, max_points)


def test_median_bandwidth_is_shift_invariant():
    rng = np.random.default_rng(23)
    # on a dyadic grid the shift is exact, and so is the invariance
    X = np.round(rng.standard_normal((3000, 4)) * 2**10) / 2**10
    base = sc.median_bandwidth(X)
    assert sc.median_bandwidth(X + 2.0**20) == base
    assert sc.median_bandwidth(X - 3.0 * 2**18) == base
    # far from the origin only the rounding of the shifted input is lost (no cancellation
    # from a |x|^2 + |y|^2 - 2 x.y expansion)
    Y = rng.standard_normal((3000, 4))
    assert sc.median_bandwidth(Y + 1e8) == pytest.approx(sc.median_bandwidth(Y), rel=1e-7)


def test_median_bandwidth_agrees_across_namespaces(xp):
    # NumPy points take the C++ path, other namespaces the array-API one: the same value
    rng = np.random.default_rng(24)
    X = rng.standard_normal((2400, 3)) * np.array([1.0, 3.0, 0.1])
    M = np.array([2.0, 1.0, 0.5])
    for Mx in (None, M):
        expect = sc.median_bandwidth(X, M=Mx)
        got = sc.median_bandwidth(xp.asarray(X), M=None if Mx is None else xp.asarray(Mx))
        assert isinstance(got, float) and got == expect


def test_median_bandwidth_of_equal_points_still_raises():
    with pytest.raises(ValueError, match="median pairwise distance of X is zero"):
        sc.median_bandwidth(np.ones((3000, 2)))


@pytest.mark.parametrize(
    "env, threads",
    [({"STEIN_CORESET_TEAM_WAIT": "yield"}, 2),
     # the tree-counted barrier on a team of 5 (3 groups; on 2 cores members are descheduled
     # mid-step and others steal their chunks), every region on the whole team
     ({"STEIN_CORESET_TEAM_BARRIER": "tree", "STEIN_CORESET_TEAM_GRAIN": "0"}, 5)],
    ids=["yield", "tree"],
)
def test_team_wait_and_barrier_switches_give_the_same_selections(chain, env, threads):
    # STEIN_CORESET_TEAM_WAIT=yield and STEIN_CORESET_TEAM_BARRIER=tree
    # (engine/cpu/src_cpp/parallel.hpp)
    # change how idle threads wait and how a step's end is counted, never what they compute
    X, S = chain
    code = (
        "import sys, numpy as np, stein_coreset as sc; "
        f"X = np.random.default_rng(3).standard_normal(({N}, {D})) * 1.5 + 0.7; "
        f"out = [np.asarray(sc.compress(X, -X, size=32, method=m, seed=11, n_threads={threads})"
        ".indices) for m in ('st', 'skt', 'sr')]; "
        "print(';'.join(','.join(map(str, o)) for o in out))"
    )
    got = _run(code, env=env)
    expect = [
        np.asarray(sc.compress(X, S, size=SIZE, method=m, seed=11, n_threads=2).indices)
        for m in ("st", "skt", "sr")
    ]
    assert got == ";".join(",".join(map(str, e)) for e in expect)


# ---- the threading policy: usable cores -----------------------------------------------------

_PRINT_CORES = "from stein_coreset._threads import usable_cores; print(usable_cores())"


def _run(code, env=None, preexec=None):
    e = dict(os.environ)
    e.update(env or {})
    out = subprocess.run(
        [sys.executable, "-c", code], env=e, capture_output=True, text=True, cwd="/",
        timeout=120, check=True,
    )
    return out.stdout.strip()


def test_usable_cores_honours_omp_num_threads():
    assert _run(_PRINT_CORES, env={"OMP_NUM_THREADS": "1"}) == "1"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity API")
def test_usable_cores_honours_cpu_affinity():
    cpu = min(os.sched_getaffinity(0))
    code = f"import os; os.sched_setaffinity(0, {{{cpu}}}); " + _PRINT_CORES
    env = {"OMP_NUM_THREADS": ""}
    assert _run(code, env=env) == "1"
    # and the default team of a kernel matrix follows
    code2 = (
        f"import os; os.sched_setaffinity(0, {{{cpu}}}); import numpy as np, stein_coreset as sc; "
        "X = np.random.default_rng(0).standard_normal((50, 2)); "
        "print(sc.SteinKernel().bind(X, -X).n_threads)"
    )
    assert _run(code2, env=env) == "1"


def test_usable_cores_honours_threadpoolctl_limits():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from stein_coreset._threads import usable_cores

    with threadpoolctl.threadpool_limits(limits=1, user_api="openmp"):
        assert usable_cores() == 1


def _bound(kind, base, X):
    """The Stein kernel, the base kernel or the centred base kernel of ``base`` on X."""
    from stein_coreset.kernels import centred_kernel_matrix

    if kind == "stein":
        return sc.SteinKernel(base).bind(X, -X, n_threads=2)
    if kind == "base":
        return sc.engine.KernelMatrix(base, X, n_threads=2)
    return centred_kernel_matrix(base, X, n_threads=2)


@pytest.mark.parametrize("d", [1, 3, 8, 13, 60])
@pytest.mark.parametrize("kind", ["stein", "base", "centred"])
def test_rows_evaluated_together_equal_a_row_at_a_time_bit_for_bit(d, kind):
    """The products evaluate four rows at once (their coordinate sums together); a Gram block
    of many rows must equal, entry for entry and bit for bit, the columns evaluated one row at
    a time, whatever the kernel, the dimension and a length that is no multiple of a vector."""
    rng = np.random.default_rng(d)
    n = 203
    X = 0.7 + 1.5 * rng.standard_normal((n, d))
    rows = np.array([0, 1, 2, 3, 5, 202, 100, 7, 9], dtype=np.int64)
    for base in (sc.IMQ(sigma=2.0), sc.IMQ(sigma=1.5, beta=-0.3), sc.Gaussian(sigma=3.0),
                 sc.Matern(sigma=3.0, nu=1.5), sc.Matern(sigma=3.0, nu=2.5)):
        K = _bound(kind, base, X)
        block = bridge.gram(K, rows)
        one_by_one = np.stack([bridge.column(K, int(i)) for i in rows])
        np.testing.assert_array_equal(block, one_by_one)


@pytest.mark.parametrize("d", [13, 300])  # 300: blocks too large for a thread to keep
@pytest.mark.parametrize("kind", ["stein", "base", "centred"])
def test_an_entry_does_not_depend_on_the_block_or_tile_that_evaluates_it(kind, d):
    """The products evaluate packed tiles of rows against blocks whose bounds depend on the
    product (a row's diagonal, a column subset, a tile's last short group); every entry must
    equal, bit for bit, the same entry of the full Gram matrix, including the entries the
    vector steps take at a block's end (zero-padded, never a scalar tail)."""
    rng = np.random.default_rng(11)
    n = 301
    X = 0.7 + 1.5 * rng.standard_normal((n, d))
    s = float(np.sqrt(d))
    for base in (sc.IMQ(sigma=s), sc.IMQ(sigma=s, beta=-0.8), sc.Gaussian(sigma=s)):
        K = _bound(kind, base, X)
        dense = bridge.gram(K, np.arange(n, dtype=np.int64))
        for nr, nc in ((1, 300), (3, 7), (5, 257), (70, 1), (66, 129)):
            rows = rng.choice(n, nr, replace=False).astype(np.int64)
            cols = rng.choice(n, nc, replace=False).astype(np.int64)
            np.testing.assert_array_equal(bridge.gram(K, rows, cols), dense[np.ix_(rows, cols)])
        for j in (0, 255, 256, 300):
            np.testing.assert_array_equal(bridge.column(K, j), dense[j])
        np.testing.assert_allclose(bridge.row_means(K, np.arange(n, dtype=np.int64)),
                                   dense.mean(axis=1), rtol=1e-12, atol=1e-13)


def test_quad_and_products_agree_with_the_dense_matrix_and_ignore_n_threads():
    rng = np.random.default_rng(3)
    X = 0.7 + 1.5 * rng.standard_normal((777, 20))
    w = rng.standard_normal(777)
    w[::5] = 0.0
    K1 = sc.SteinKernel(sc.IMQ(sigma=6.0)).bind(X, -X, n_threads=1)
    dense = K1.dense()
    assert K1.quad(w) == pytest.approx(w @ dense @ w, rel=1e-12)
    np.testing.assert_allclose(bridge.matvec(K1, w), dense @ w, rtol=1e-12, atol=1e-12)
    for nt in (2, 3):
        Kt = K1.with_threads(nt)
        assert Kt.quad(w) == K1.quad(w)
        np.testing.assert_array_equal(bridge.matvec(Kt, w), bridge.matvec(K1, w))
