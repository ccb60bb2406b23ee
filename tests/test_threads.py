"""The threading policy (engine/cpu/src_cpp/parallel.hpp, stein_coreset._threads): every C++
loop runs on a team of ``n_threads`` owned by the call and combines fixed chunks in order, so
results must not depend on the thread count, nor on other Python threads calling the library
at the same time; the default team is the cores this process may use.
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
