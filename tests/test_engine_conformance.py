"""Every backend runs each operation it declares as the reference does.

Generated from the declarations: for every backend, every operation in its ``how`` and every
namespace it holds (NumPy and array_api_strict for ``cpu``; CuPy's stand-in on the tests' CPU
simulator for ``cuda``), the backend's own methods are called on a small problem and compared
with what the reference backend runs for that operation (``runner(xp, op)``: the array-API
reference, or the C++ where the reference hands the operation on). A backend that declares an
operation this file has no case for fails here, so a new declaration comes with its check; the
self-comparisons (the reference against itself, the C++ KT loops the reference hands to ``cpu``)
are not generated: those loops are held to their definitions in their own test files.
"""

import copy
import shutil

import array_api_strict
import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset import _array_api as aa
from stein_coreset.algorithms import LowRankPlusDiagonal, weighted_rpcholesky
from stein_coreset.engine import BACKENDS, OPERATIONS, drivers, get_backend, runner

REF = get_backend("xp")
N, D = 96, 3
BASE = sc.IMQ(sigma=1.5)


def _oracle(op):
    return runner(REF, op)


def _claims():
    """(backend, operation, namespace) of every declaration with another backend as oracle."""
    out = []
    for name in BACKENDS:
        b = get_backend(name)
        for op in b.how:
            if _oracle(op) is b:
                continue
            for ns in (("cudasim",) if name == "cuda" else ("numpy", "array_api_strict")):
                if ns == "array_api_strict" and (b.accepts(array_api_strict) is not None
                                                 or not b.supports(op, xp=array_api_strict)):
                    continue  # refused, or handed to the reference there: nothing to check
                out.append(pytest.param(name, op, ns, id=f"{name}-{op}-{ns}"))
    return out


def _problem(ns):
    rng = np.random.default_rng(11)
    X = 0.7 + 1.5 * rng.standard_normal((N, D))
    S = -X
    if ns == "array_api_strict":
        X, S = array_api_strict.asarray(X), array_api_strict.asarray(S)
    return sc.SteinKernel(BASE).bind(X, S, n_threads=2)


def _host(a):
    if isinstance(a, (tuple, list)):
        return [_host(x) for x in a]
    if isinstance(a, (float, int, np.integer, np.floating)) or a is None:
        return a
    return np.asarray(aa.to_host(a))


def _same(got, want, rtol=1e-10):
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w, rtol)
        return
    if want is None:
        assert got is None
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
    else:
        scale = float(np.max(np.abs(want))) if want.size else 1.0
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-13 * max(scale, 1.0))


ROWS = np.array([0, 5, N - 1, 5, 17], dtype=np.int64)
COLS = np.array([3, 3, 60], dtype=np.int64)


def _w(K, seed=0):
    w = np.random.default_rng(seed).random(K.n)
    return aa.from_host(w / w.sum(), xp=K.xp, device=K.device)


def _rpc_inputs(K):
    w = np.full(K.n, 1.0 / K.n)
    u = np.random.default_rng(3).random(12)
    return aa.from_host(w, xp=K.xp, device=K.device), u


def _lowrank(K):
    _, F = weighted_rpcholesky(K.with_backend("xp"), rank=9, rng=np.random.default_rng(4))
    return LowRankPlusDiagonal(F, K.diag(), backend=REF)


def _amd_start(K):
    w0 = np.random.default_rng(5).random(K.n)
    w0[::4] = 0.0
    return aa.from_host(w0 / w0.sum(), xp=K.xp, device=K.device)


def _dksd_inputs(K):
    rng = np.random.default_rng(6)
    xp, dev = K.xp, K.device
    U, V = rng.standard_normal((40, D)), rng.standard_normal((40, D))
    F = 0.5 + rng.random((40, D))
    comps = [(sc.IMQ(sigma=1.2), 1.0), (sc.Gaussian(sigma=0.8), 0.5), (sc.IMQ(sigma=2.0), 2.0)]
    return [aa.from_host(A, xp=xp, device=dev) for A in (U, V, F)], comps


#: operation -> case(backend, K): the values the backend's methods of that operation give.
CASES = {
    "block": lambda b, K: [b.block(K, ROWS), b.block(K, ROWS, COLS), b.dense(K)],
    "column": lambda b, K: b.column(K, 7),
    "matvec": lambda b, K: b.matvec(K, _w(K)),
    "quad": lambda b, K: b.quad(K, _w(K)),
    "row_means": lambda b, K: b.row_means(K, ROWS),
    "coreset_sums": lambda b, K: b.coreset_sums(K, np.stack([ROWS[:4], np.arange(4)])),
    "stein_thinning": lambda b, K: b.stein_thinning(K, 25),
    "kt_split": lambda b, K: [
        b.kt_split(K, np.arange(64, dtype=np.int64), 3, 0.5, 17),
        b.kt_halvings(K, np.arange(96, dtype=np.int64).reshape(3, 32), 0.5,
                      np.array([1, 2, 3], dtype=np.uint64))],
    "kt_swap": lambda b, K: _kt_swap(b, K),
    "kt_swap_ls": lambda b, K: _kt_swap_ls(b, K),
    "weighted_rpcholesky": lambda b, K: _rpc(b, K),
    "amd": lambda b, K: _amd(b, K),
    "lowrank": lambda b, K: _lowrank_case(b, K),
    "recombination": lambda b, K: b.recombination(
        np.random.default_rng(7).standard_normal((4, 30)), np.full(30, 1.0 / 30)),
    "simplex_weights": lambda b, K: _qp(b, K),
    "median_distance": lambda b, K: b.median_pairwise_distance(K.U, 2),
    "dksd_pass": lambda b, K: b.dksd_pass(*_dksd_inputs(K)[0][:2], "diag",
                                          _dksd_inputs(K)[0][2], _dksd_inputs(K)[1], True),
    "stein_moments": lambda b, K: _moments(b, K),
}


def _moments(b, K):
    S = 1.0 - 0.5 * K.U + 0.1 * K.U ** 2  # signed weights too: a variance may dip below 0
    signed = aa.from_host(np.linspace(-0.5, 1.5, K.n) / K.n, xp=K.xp, device=K.device)
    return [list(b.stein_moments(K.U, S, w)) for w in (None, _w(K), signed)]


def _kt_swap(b, K):
    I = np.arange(0, 64, 4, dtype=np.int64)
    swaps = b.kt_swap_refine(K, I, 2, True)
    return [np.int64(swaps), I]


def _kt_swap_ls(b, K):
    dense = np.zeros(K.n)
    dense[::8] = 1.0 / dense[::8].size
    value = b.kt_swap_ls(K, dense, np.arange(0, K.n, 8, dtype=np.int64), 0)
    return [value, dense]


def _rpc(b, K):
    w, u = _rpc_inputs(K)
    piv, Ft, scale, _ = b.weighted_rpcholesky(K, w, 12, 12, u, False)
    return [piv, Ft, scale]


def _amd(b, K):
    op = _lowrank(K)
    op.backend = b
    w, steps = b.amd(op, 40, _amd_start(K), 0.05, False, 2, None, 32)
    return [w, np.int64(steps)]


def _lowrank_case(b, K):
    op = _lowrank(K)
    op.backend = b
    G, e = b.factor32(op)
    return [b.lowrank_residual(op.F, K.diag(), 2), b.lowrank_quad(op, _w(K)), G, np.int64(e)]


def _qp(b, K):
    KJ = np.asarray(aa.to_host(K.with_backend("xp").block(ROWS[:3], ROWS[:3])))
    KJ = KJ + np.eye(3)
    w, steps = b.simplex_qp(KJ, np.full(3, 1.0 / 3), 100)
    return [w, b.affine_weights(KJ)]


@pytest.mark.parametrize("name,op,ns", _claims())
def test_a_backend_runs_each_operation_it_declares_as_the_reference_does(name, op, ns, request):
    assert op in CASES, f"no conformance case for the operation {op!r} that {name!r} declares"
    if ns == "cudasim":
        _check_on_the_simulator(op, request)
        return
    b, oracle = get_backend(name), _oracle(op)
    K = _problem(ns)
    got = _host(CASES[op](b, K.with_backend(b)))
    want = _host(CASES[op](oracle, K.with_backend(oracle)))
    _same(got, want)


def test_every_operation_has_a_case():
    assert set(OPERATIONS) == set(CASES)


def test_the_generator_covers_every_compiled_declaration():
    """Each compiled backend's declarations are all checked somewhere: against the reference
    here, or (the KT loops, Recombination, the QP the reference hands to ``cpu``) against their
    definitions in their own test files."""
    ids = {p.id for p in _claims()}
    cuda = get_backend("cuda")
    for op in cuda.how:
        assert f"cuda-{op}-cudasim" in ids
    cpu = get_backend("cpu")
    for op in cpu.how:
        assert f"cpu-{op}-numpy" in ids or _oracle(op) is cpu


# ---- cuda, on the CPU simulator (tests/support/cudasim) --------------------------------------

def _on_device(K, cp):
    """K for the cuda backend's methods: the simulated CudaKernel of K's points in its cache."""
    from stein_coreset.engine.cuda.kernel import CudaKernel

    Kd = copy.copy(K)
    Kd.backend = get_backend("cuda")
    Kd._cache = {"cuda": CudaKernel(int(K.base.code), float(K.base.sigma), float(K.base.beta),
                                    cp.asarray(K.U), cp.asarray(K.T), None, K.mean_all)}
    return Kd


def _check_on_the_simulator(op, request):
    if shutil.which("g++") is None:
        pytest.skip("the simulator needs g++")
    from support import cudasim

    cp = cudasim.install(request.getfixturevalue("monkeypatch"))
    cuda, oracle = get_backend("cuda"), _oracle(op)
    K = _problem("numpy")
    Kd = _on_device(K, cp)
    want = _host(CASES[op](oracle, K.with_backend(oracle)))
    if op == "matvec":
        got = _host(cuda.matvec(Kd, cp.asarray(_host(_w(K)))))
    elif op == "weighted_rpcholesky":
        got = _host(_rpc_on_device(K, Kd, cp))
    elif op == "amd":
        got = _host(_amd_on_device(K, cp))
    elif op == "dksd_pass":
        (U, V, F), comps = _dksd_inputs(K)
        got = _host(cuda.dksd_pass(cp.asarray(U), cp.asarray(V), "diag", cp.asarray(F), comps,
                                   True))
    else:  # the loops that take host indices and the matrix
        got = _host(CASES[op](cuda, Kd))
    _same(got, want, rtol=1e-9)


def _rpc_on_device(K, Kd, cp):
    """The device loop on the state the shared driver sets up, run over every step."""
    w, u = _rpc_inputs(K)
    sw = np.sqrt(w)
    d = np.asarray(K.diag()) * w
    scale = float(np.sum(d))
    Ft, piv = cp.zeros((12, K.n)), cp.zeros(12, dtype=np.int64)
    kg = Kd._cache["cuda"]
    r = kg.weighted_rpcholesky(cp.asarray(sw), cp.asarray(d), Ft, piv, 0, 12, u, 1e-14 * scale)
    return [np.asarray(piv)[:r], np.asarray(Ft), scale]


def _amd_on_device(K, cp):
    """The shared AMD driver (drivers.amd, as the cuda backend runs it) with the device
    kernel's steps."""
    from stein_coreset.engine.cuda import amd as cuda_amd

    op = _lowrank(K)

    def steps(F, res, w, v, t0, k, eta, n_threads):
        wd, vd = cp.asarray(w), cp.asarray(v)
        cuda_amd.amd_lowrank(cp.asarray(F), cp.asarray(res), wd, vd, int(t0), int(k), eta)
        w[...], v[...] = np.asarray(wd), np.asarray(vd)

    w, run = drivers.amd(op, 40, np.asarray(_amd_start(K)), 0.05, False, 2, None, 32, steps)
    return [w, np.int64(run)]
