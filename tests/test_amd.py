"""AMD (Alg. F.2): accelerated entropic mirror descent for min_w w^T K w over the simplex."""

import math

import numpy as np
import pytest
import scipy.optimize

import stein_coreset as sc
from stein_coreset.algorithms import LowRankPlusDiagonal, amd, weighted_rpcholesky


def simplex_qp(K):
    """Exact min of w^T K w on the simplex: NNLS on [L^T; lam 1^T] w = [0; lam], K = L L^T
    (an active-set method, exact up to the O(1/lam^2) penalty on sum(w) = 1)."""
    n = K.shape[0]
    ev, U = np.linalg.eigh(K)
    Lt = (U * np.sqrt(np.clip(ev, 0.0, None))).T
    lam = 1e3 * math.sqrt(np.abs(K).max())
    w, _ = scipy.optimize.nnls(np.vstack([Lt, np.full((1, n), lam)]), np.r_[np.zeros(n), lam],
                               maxiter=50 * n)
    return w / w.sum()


@pytest.fixture(scope="module")
def stein_300():
    rng = np.random.default_rng(0)
    X = 0.7 + 1.5 * rng.standard_normal((300, 2))
    Km = sc.SteinKernel(sc.IMQ(sigma=1.5)).bind(X, -X)
    K = Km.dense()
    w_opt = simplex_qp(K)
    return Km, K, w_opt, float(w_opt @ K @ w_opt)


def test_simplex_qp_reference_satisfies_kkt(stein_300):
    """The reference is optimal: K w* >= lambda everywhere, = lambda on its support."""
    _, K, w, f = stein_300
    g = K @ w
    assert np.all(w >= 0) and math.isclose(w.sum(), 1.0)
    np.testing.assert_allclose(g[w > 0], f, rtol=1e-5)
    assert g.min() >= f * (1 - 1e-5)


def test_amd_objective_matches_qp_optimum(stein_300):
    _, K, _, f_opt = stein_300
    w0 = amd(K, 2000)
    w = amd(K, 30000, w0, agg=True)
    assert np.all(w >= 0) and math.isclose(float(w.sum()), 1.0, rel_tol=1e-12)
    assert (w @ K @ w - f_opt) / f_opt < 1e-3


def test_amd_meets_its_convergence_bound(stein_300):
    """Lem. F.3: f(w_T) - f* <= 16 log(n) max_i K_ii / T^2 with the default step."""
    _, K, _, f_opt = stein_300
    n = K.shape[0]
    for T in (10, 50, 200):
        w = amd(K, T)
        assert w @ K @ w - f_opt <= 16 * math.log(n) * K.diagonal().max() / T**2


def test_amd_keeps_the_support_of_its_start(stein_300):
    _, K, _, _ = stein_300
    w0 = np.zeros(300)
    w0[::3] = 1.0 / 100
    w = amd(K, 200, w0, agg=True)
    assert np.all(w[w0 == 0] == 0.0) and math.isclose(w.sum(), 1.0)
    assert w @ K @ w < w0 @ K @ w0


def test_amd_on_low_rank_plus_diagonal_matches_dense(xp, stein_300):
    """Running on F F^T + diag(K - F F^T) through O(n r) products = running on that dense matrix."""
    Km, _, _, _ = stein_300
    X = np.asarray(Km.U)
    Kx = sc.SteinKernel(Km.base).bind(xp.asarray(X), xp.asarray(-X))
    _, F = weighted_rpcholesky(Kx, rank=20, rng=np.random.default_rng(1))
    op = LowRankPlusDiagonal(F, Kx.diag())
    D = xp.to_numpy(op.dense())
    np.testing.assert_allclose(np.diag(D), xp.to_numpy(Kx.diag()), rtol=1e-12)
    z = np.random.default_rng(2).random(300)
    np.testing.assert_allclose(xp.to_numpy(op.matvec(xp.asarray(z))), D @ z, rtol=1e-10)
    w = amd(op, 100, backend="xp")
    xp.same_place(w, F)
    # AMD steps on the operator with F rounded to float32 (what the C++ loop reads), with the
    # step size of the true diagonal
    Dr = xp.to_numpy(op.rounded().dense())
    eta = 1.0 / (8.0 * float(xp.to_numpy(op.diag()).max()))
    np.testing.assert_allclose(xp.to_numpy(w), amd(Dr, 100, step_size=eta), rtol=1e-13,
                               atol=1e-16)
    w_auto = amd(op, 100)  # the C++ engine on NumPy, the same loop elsewhere
    xp.same_place(w_auto, F)
    np.testing.assert_allclose(xp.to_numpy(w_auto), xp.to_numpy(w), rtol=1e-13, atol=1e-16)
    assert math.isclose(op.quad(w), float(xp.to_numpy(w) @ D @ xp.to_numpy(w)), rel_tol=1e-10)


def test_amd_underflowing_weights_stay_valid():
    """Huge steps drive most weights to exp(-1e4): the log-domain update keeps a valid simplex."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((50, 5))
    K = A @ A.T + np.diag(rng.random(50))
    w = amd(K, 50, step_size=1e3)
    assert np.all(np.isfinite(w)) and math.isclose(w.sum(), 1.0) and np.all(w >= 0)


def test_amd_rejects_bad_input(stein_300):
    _, K, _, _ = stein_300
    with pytest.raises(ValueError, match="steps"):
        amd(K, -1)
    with pytest.raises(ValueError, match="w0"):
        amd(K, 5, np.ones(300))
    with pytest.raises(ValueError, match="step_size"):
        amd(K, 5, step_size=0.0)
    with pytest.raises(TypeError, match="K must be"):
        amd("not a matrix", 5)


def test_amd_cpp_engine_matches_array_api_loop(stein_300):
    """The fused C++ steps (one pass over a float32 F per step) and the array-API loop step on
    the same float32-rounded F, so they give the same iterates up to the order of their double
    sums (they differed by ~1e-8 while the array-API loop read F in float64)."""
    Km, _, _, _ = stein_300
    _, F = weighted_rpcholesky(Km, rank=17, rng=np.random.default_rng(4))
    op = LowRankPlusDiagonal(F, Km.diag())
    w0 = np.random.default_rng(5).random(300)
    w0[::4] = 0.0
    w0 /= w0.sum()
    for agg in (False, True):
        a = amd(op, 150, w0, agg=agg, backend="xp")
        b = amd(op, 150, w0, agg=agg, backend="cpu")
        c = amd(op, 150, w0, agg=agg, backend="cpu", progress=True)  # run in chunks
        np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-17)
        assert abs(op.quad(b) - op.quad(a)) <= 1e-14 * op.quad(a)
        np.testing.assert_allclose(c, b, rtol=1e-13, atol=1e-17)
        assert np.all(b[w0 == 0] == 0.0)
    # a dense matrix has no fused C++ loop: "cpu" hands it to the reference, as the capability
    # table says (before, the call raised while the table named the reference)
    dense = Km.dense()
    np.testing.assert_array_equal(amd(dense, 5, backend="cpu"), amd(dense, 5, backend="xp"))


def test_amd_weights_stay_on_the_simplex_when_v_underflows_between_chunks():
    """Far from P (a burn-in block) most mirror weights v_i underflow to 0 while w_i > 0, and
    w_i must still decay as (1 - beta) w_i. Run in chunks (each restart reads log v_i from
    v_i = 0), the C++ loop once froze such w_i: the weights summed to 1 + 9e-4 here."""
    X = 1.5 * np.random.default_rng(0).standard_normal((1024, 4)) + 6.0
    K = sc.SteinKernel(sc.IMQ(sigma=3.66)).bind(X, -X)
    _, F = weighted_rpcholesky(K, rank=16, rng=np.random.default_rng(1))
    op = LowRankPlusDiagonal(F, K.diag())
    w0 = np.full(1024, 1.0 / 1024)
    a = amd(op, 600, w0, backend="xp")
    b = amd(op, 600, w0, backend="cpu")
    c = amd(op, 600, w0, backend="cpu", progress=True)  # chunks of 24 steps
    for w in (a, b, c):
        assert abs(w.sum() - 1.0) < 1e-12
    np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(c, b, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("backend", ["xp", "cpu"])
def test_amd_monitor_returns_best_checked_iterate_and_stops(stein_300, backend):
    """With a monitor, AMD returns the checked iterate with the smallest monitored value (the
    same iterate a plain run of that many steps ends at) and stops after `patience` checks that
    did not improve on it; without improvement it would run to the cap."""
    Km, K, _, _ = stein_300
    _, F = weighted_rpcholesky(Km, rank=12, rng=np.random.default_rng(2))
    op = LowRankPlusDiagonal(F, Km.diag())
    calls = []

    def monitor(w):  # the true objective w^T K w, which AMD on the surrogate does not minimise
        calls.append(1)
        return float(w @ K @ w)

    info = {}
    w = amd(op, 4000, backend=backend, monitor=monitor, check_every=10, patience=3, info=info)
    checks = info["checks"]
    assert [t for t, _ in checks] == list(range(10, 10 * len(checks) + 1, 10))
    values = [v for _, v in checks]
    best = int(np.argmin(values))
    assert info["best_step"] == checks[best][0]
    plain = amd(op, info["best_step"], backend=backend)
    np.testing.assert_allclose(w, plain, rtol=1e-12, atol=1e-300)
    assert math.isclose(float(w @ K @ w), min(values), rel_tol=1e-12)
    if info["steps_run"] < 4000:  # stopped early: exactly `patience` non-improving checks
        assert len(values) - 1 - best == 3
        assert all(v >= values[best] for v in values[best + 1 :])
    else:
        assert len(values) - 1 - best < 3
    assert len(calls) == len(checks)


def test_amd_without_monitor_runs_every_step(stein_300):
    Km, _, _, _ = stein_300
    info = {}
    amd(Km.dense(), 37, info=info)
    assert info == {"steps_run": 37}
    with pytest.raises(ValueError, match="check_every"):
        amd(Km.dense(), 5, monitor=lambda w: 0.0, check_every=0)
    with pytest.raises(ValueError, match="patience"):
        amd(Km.dense(), 5, monitor=lambda w: 0.0, patience=0)


def test_rounded_factor_is_float32_at_the_storage_scale():
    """rounded_factor() = 2^e float64(float32(2^-e F)) with 2^-e max|F| in [0.5, 1): exactly
    single-precision values at that scale, within 2^-24 of F, and unchanged by a power-of-two
    rescaling of F (plain float32 rounding would flush a factor of scale 2^-140 to subnormals
    and lose its digits)."""
    rng = np.random.default_rng(0)
    F = rng.standard_normal((200, 7))
    F[::9] *= 1e-30  # tiny rows keep their relative precision too
    op = LowRankPlusDiagonal(F, np.sum(F * F, axis=1) + 1.0)
    e = op.storage_exponent()
    assert 0.5 <= np.abs(F).max() * 2.0**-e < 1.0
    Fr = op.rounded_factor()
    np.testing.assert_array_equal(Fr, np.ldexp(np.ldexp(F, -e).astype(np.float32), e))
    assert np.all(np.abs(Fr - F) <= 2.0**-24 * np.abs(F))
    tiny = LowRankPlusDiagonal(np.ldexp(F, -140), op.diag())
    np.testing.assert_array_equal(tiny.rounded_factor(), np.ldexp(Fr, -140))
    G, ge = op.factor32()
    assert G.dtype == np.float32 and G.flags.c_contiguous and ge == e
    # the operator AMD steps on keeps the residual of the unrounded F
    np.testing.assert_array_equal(op.rounded().residual, op.residual)
    np.testing.assert_array_equal(op.rounded().F, Fr)
    zero = LowRankPlusDiagonal(np.zeros((4, 2)), np.ones(4))
    assert zero.storage_exponent() == 0 and not np.any(zero.rounded_factor())


@pytest.mark.parametrize("layout", ["transposed", "c", "fortran", "reversed"])
def test_factor32_in_cpp_is_numpys_rounding_for_any_layout_and_team(layout):
    """On NumPy, factor32 rounds F in C++ on the thread team: the very bits of NumPy's
    ``float32(2^-e F)`` (C-ordered) and the frexp exponent of max|F|, for any strides of F
    (RPCholesky's factor is the transpose of a C-ordered array), over several row chunks, on 1
    and 3 threads; e = 0 for a zero, non-finite or empty factor, as storage_exponent says."""
    rng = np.random.default_rng(8)
    Ft = rng.standard_normal((11, 1500)) * 3.0
    Ft[:, ::7] *= 1e-30
    Ft[4, 1234] = -40.0  # the largest |F| is negative
    F = {"transposed": Ft.T, "c": np.ascontiguousarray(Ft.T), "fortran": np.asfortranarray(Ft.T),
         "reversed": Ft.T[::-1, ::-1]}[layout]
    e_ref = math.frexp(float(np.abs(F).max()))[1]
    want = (F * math.ldexp(1.0, -e_ref)).astype(np.float32)
    for t in (1, 3):
        G, e = LowRankPlusDiagonal(F, np.ones(1500), n_threads=t).factor32()
        assert e == e_ref == 6
        assert G.dtype == np.float32 and G.flags.c_contiguous
        np.testing.assert_array_equal(G, want)
    for bad in (np.zeros((600, 3)), np.full((600, 3), np.nan), np.full((600, 3), np.inf),
                np.zeros((600, 0))):
        op = LowRankPlusDiagonal(bad, np.ones(600))
        G, e = op.factor32()
        assert e == op.storage_exponent() == 0 and G.shape == bad.shape


@pytest.mark.parametrize("layout", ["transposed", "c", "reversed"])
def test_residual_in_cpp_sums_each_row_in_column_order_for_any_team(layout):
    """On NumPy the residual diag - rowsum(F * F) is summed in C++ on the thread team, not by
    the BLAS (whose order depends on the machine's OpenBLAS kernel): each row's squares added
    one by one in increasing column order (bit for bit on x86-64, whose baseline has no fused
    multiply-add the compiler could form), the same bits for any strides of F and on 1 and 3
    threads; the array-API reference agrees to rounding of diag."""
    import platform

    rng = np.random.default_rng(9)
    Ft = rng.standard_normal((13, 1300))
    F = {"transposed": Ft.T, "c": np.ascontiguousarray(Ft.T), "reversed": Ft.T[::-1, ::-1]}[layout]
    dg = rng.random(1300) + 20.0
    want = np.zeros(1300)
    for k in range(F.shape[1]):
        want = want + F[:, k] * F[:, k]
    want = dg - want
    got = LowRankPlusDiagonal(F, dg, n_threads=1).residual
    if platform.machine().lower() in ("x86_64", "amd64"):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-14 * dg.max())
    np.testing.assert_array_equal(LowRankPlusDiagonal(F, dg, n_threads=3).residual, got)
    for other in (np.ascontiguousarray(F), np.asfortranarray(F)):
        np.testing.assert_array_equal(LowRankPlusDiagonal(other, dg).residual, got)
    ref = LowRankPlusDiagonal(F, dg, backend="xp").residual  # the BLAS's order
    np.testing.assert_allclose(ref, want, rtol=0, atol=1e-14 * dg.max())
    np.testing.assert_array_equal(LowRankPlusDiagonal(F[:, :0], dg).residual, dg)


def test_amd_on_any_namespace_matches_the_cpp_loop_to_rounding(xp, stein_300):
    """The array-API loop on any namespace (array_api_strict here; CuPy on a GPU) and the C++
    loop on NumPy give the same weights to ~1e-14 on the same factor: both read F rounded to
    float32 at the same scale. Before, the array-API loop read F in float64 and the weights
    differed by ~1e-8 relative, which flipped later random draws (pivots, resampling)."""
    Km, _, _, _ = stein_300
    _, F = weighted_rpcholesky(Km, rank=17, rng=np.random.default_rng(4))
    F = np.asarray(F) * 3.0  # a factor not scaled near 1
    dg = np.asarray(Km.diag()) * 9.0
    ref = amd(LowRankPlusDiagonal(F, dg), 400, backend="cpu")
    op = LowRankPlusDiagonal(xp.asarray(F), xp.asarray(dg))
    for backend in ("auto", "xp"):
        w = amd(op, 400, backend=backend)
        xp.same_place(w, op.F)
        np.testing.assert_allclose(xp.to_numpy(w), ref, rtol=1e-13, atol=1e-300)
    with pytest.raises(ValueError, match="backend"):
        amd(op, 5, backend="gpu")


@pytest.mark.parametrize("layout", ["transposed", "c", "fortran"])
def test_low_rank_quad_in_cpp_is_the_quadratic_form_and_thread_independent(layout):
    """``quad`` of a NumPy LowRankPlusDiagonal runs in C++ (not through the BLAS, whose
    threads spin and fight the C++ team): w^T K' w and, on rows J, c^T K'_JJ c, to rounding
    of the dense form, for any layout of F, bit-identical for 1 and 3 threads, and equal to
    the array-API reference to rounding."""
    rng = np.random.default_rng(6)
    Ft = rng.standard_normal((23, 5000))  # more than two row chunks of the C++ loop
    F = {"transposed": Ft.T, "c": np.ascontiguousarray(Ft.T), "fortran": np.asfortranarray(Ft.T)}
    dg = np.sum(Ft * Ft, axis=0) + rng.random(5000)
    w = rng.random(5000)
    J = np.sort(rng.choice(5000, 300, replace=False))
    c = rng.random(300)
    ops = [LowRankPlusDiagonal(F[layout], dg, n_threads=t) for t in (1, 3)]
    ref = LowRankPlusDiagonal(F[layout], dg, backend="xp")
    dense_w = float(np.sum((Ft @ w) ** 2) + np.sum(ops[0].residual * w * w))
    dense_c = float(np.sum((Ft[:, J] @ c) ** 2) + np.sum(ops[0].residual[J] * c * c))
    for value, dense, xp_value in ((lambda op: op.quad(w), dense_w, ref.quad(w)),
                                   (lambda op: op.quad(c, rows=J), dense_c, ref.quad(c, rows=J))):
        a, b = value(ops[0]), value(ops[1])
        assert a == b
        assert math.isclose(a, dense, rel_tol=1e-13) and math.isclose(a, xp_value, rel_tol=1e-13)


def test_rounding_the_factor_slab_by_slab_gives_the_whole_rounding(xp, monkeypatch):
    """Off NumPy, factor32 and rounded_factor round F one bounded slab of rows at a time (the
    temporaries of a whole-array pass were a second (n, r) float64 array on the device); the
    result is the whole-array rounding, whatever the slab."""
    import importlib

    from stein_coreset._array_api import to_host

    amd_mod = importlib.import_module("stein_coreset.algorithms.amd")  # the module, not amd()

    rng = np.random.default_rng(3)
    F = rng.standard_normal((203, 9))
    ref = LowRankPlusDiagonal(F, np.sum(F * F, axis=1) + 1.0)
    want = ref.rounded_factor()
    G0, e0 = ref.factor32()
    for slab in (amd_mod.SLAB_ENTRIES, 40, 9, 1):
        monkeypatch.setattr(amd_mod, "SLAB_ENTRIES", slab)
        op = LowRankPlusDiagonal(xp.asarray(F), xp.asarray(ref.diag()))
        np.testing.assert_array_equal(to_host(op.rounded_factor()), want)
        G, e = op.factor32()
        assert e == e0
        np.testing.assert_array_equal(to_host(G, np.float32), G0)


def test_factor_bytes_follow_the_copy_amd_steps_on(monkeypatch):
    """compress's memory check counts LD's float64 factor and the copy AMD steps on: the float32
    factor of the fused loops (C++ on NumPy; the CUDA kernel on CuPy, its default, up to rank
    1024), else the float64 rounding of the array-API loop."""
    import types

    import array_api_strict

    from stein_coreset.algorithms.amd import factor_bytes

    cupy_like = types.ModuleType("cupy")  # what array_api_compat takes for CuPy's namespace
    n = 1000
    monkeypatch.delenv("STEIN_CORESET_CUDA_AMD", raising=False)
    assert factor_bytes(n, 30, np) == 12.0 * n * 30
    assert factor_bytes(n, 30, array_api_strict) == 16.0 * n * 30
    assert factor_bytes(n, 1024, cupy_like) == 12.0 * n * 1024
    assert factor_bytes(n, 1025, cupy_like) == 16.0 * n * 1025
    monkeypatch.setenv("STEIN_CORESET_CUDA_AMD", "xp")
    assert factor_bytes(n, 30, cupy_like) == 16.0 * n * 30
