"""Stein kernels against their definition (Def. 1), and the properties the algorithms rely on."""

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset.engine import KernelMatrix
from stein_coreset.engine.cpu import bridge
from stein_coreset.kernels import centred_kernel_matrix

BASES = [
    pytest.param(lambda: sc.IMQ(sigma=1.3, beta=-0.5), id="imq"),
    pytest.param(lambda: sc.IMQ(sigma=0.8, beta=-0.3), id="imq-beta0.3"),
    pytest.param(lambda: sc.Gaussian(sigma=1.1), id="gaussian"),
    pytest.param(lambda: sc.Matern(sigma=1.2, nu=1.5), id="matern1.5"),
    pytest.param(lambda: sc.Matern(sigma=0.9, nu=2.5), id="matern2.5"),
]


def _preconditioner(d, diagonal_only):
    if diagonal_only:
        return None
    rng = np.random.default_rng(d)
    A = rng.standard_normal((d, d))
    return A @ A.T + 0.5 * np.eye(d)


def _log_p(x, A):
    """A non-Gaussian unnormalised log density and its score."""
    return -0.5 * x @ A @ x + np.sin(x[0]) + 0.3 * np.cos(x[-1])


def _score(x, A):
    g = -A @ x
    g[0] += np.cos(x[0])
    g[-1] -= 0.3 * np.sin(x[-1])
    return g


def _base_value(base, x, y, M):
    Minv = np.eye(len(x)) if M is None else np.linalg.inv(M)
    q = np.array([[(x - y) @ Minv @ (x - y)]])
    return float(base.radial(np, q)[0][0, 0])


def _stein_by_definition(base, x, y, M, A, h=1e-3):
    """(1 / p(x) p(y)) div_x div_y (p(x) M k(x, y) p(y)) by central finite differences."""
    d = len(x)
    Mm = np.eye(d) if M is None else M
    lpx, lpy = _log_p(x, A), _log_p(y, A)

    def f(xx, yy):  # p(x) k p(y) / (p(x0) p(y0)), scaled to O(1)
        return np.exp(_log_p(xx, A) - lpx + _log_p(yy, A) - lpy) * _base_value(base, xx, yy, M)

    total = 0.0
    E = np.eye(d) * h
    for i in range(d):
        for j in range(d):
            if Mm[i, j] == 0:
                continue
            dd = (
                f(x + E[i], y + E[j])
                - f(x + E[i], y - E[j])
                - f(x - E[i], y + E[j])
                + f(x - E[i], y - E[j])
            ) / (4 * h * h)
            total += Mm[i, j] * dd
    return total


@pytest.mark.parametrize("make_base", BASES)
@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("diagonal_only", [True, False], ids=["M=I", "M=full"])
def test_stein_kernel_entries_equal_finite_difference_of_definition(make_base, d, diagonal_only):
    base = make_base()
    M = _preconditioner(d, diagonal_only)
    rng = np.random.default_rng(10 + d)
    A = np.eye(d) + 0.2 * np.ones((d, d))
    X = 0.6 * rng.standard_normal((4, d))
    S = np.stack([_score(x, A) for x in X])
    Kp = sc.SteinKernel(base, M).matrix(X, S)
    for a in range(4):
        for b in range(4):
            if a == b:
                continue
            fd = _stein_by_definition(base, X[a], X[b], M, A)
            assert Kp[a, b] == pytest.approx(fd, rel=2e-5, abs=2e-6 * (1 + abs(fd)))


@pytest.mark.parametrize("make_base", [BASES[0], BASES[2], BASES[4]])
@pytest.mark.parametrize("diagonal_only", [True, False], ids=["M=I", "M=full"])
def test_stein_kernel_diagonal_equals_finite_difference_of_definition(make_base, diagonal_only):
    base, d = make_base(), 3
    M = _preconditioner(d, diagonal_only)
    A = np.eye(d) + 0.2 * np.ones((d, d))
    X = np.array([[0.3, -0.2, 0.5], [-0.7, 0.1, 0.2]])
    S = np.stack([_score(x, A) for x in X])
    kern = sc.SteinKernel(base, M)
    diag = kern.diag(X, S)
    np.testing.assert_allclose(diag, np.diag(kern.matrix(X, S)), rtol=1e-12)
    for a in range(2):
        fd = _stein_by_definition(base, X[a], X[a], M, A)
        assert diag[a] == pytest.approx(fd, rel=2e-5)


@pytest.mark.parametrize("make_base", BASES)
def test_stein_gram_is_symmetric_psd(make_base):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((120, 3)) * 1.5 + 0.5
    K = sc.SteinKernel(make_base(), _preconditioner(3, False)).matrix(X, -X)
    np.testing.assert_allclose(K, K.T, rtol=0, atol=1e-12 * np.abs(K).max())
    lam_min = np.linalg.eigvalsh(0.5 * (K + K.T)).min()
    assert lam_min >= -1e-8 * np.trace(K)


@pytest.mark.parametrize("make_base", BASES)
@pytest.mark.parametrize("diagonal_only", [True, False], ids=["M=I", "M=full"])
def test_cpp_and_array_api_gram_agree(make_base, diagonal_only):
    rng = np.random.default_rng(2)
    d = 4
    X = rng.standard_normal((90, d)) * 1.5 + 0.7
    K = sc.SteinKernel(make_base(), _preconditioner(d, diagonal_only)).bind(X, -X + 0.1)
    assert K.backend.name == "cpu"
    K = K.with_backend("xp")
    rows = np.arange(0, 90, 7)
    cols = rng.permutation(90)[:40]
    ref = K.block(rows, cols)
    scale = np.abs(ref).max()
    np.testing.assert_allclose(bridge.gram(K, rows, cols), ref, rtol=0, atol=1e-12 * scale)
    full = K.dense()
    np.testing.assert_allclose(bridge.gram(K, np.arange(90)), full, rtol=0, atol=1e-12 * scale)
    w = rng.random(90)
    np.testing.assert_allclose(bridge.matvec(K, w), full @ w, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(K.matvec(w, block_size=13), full @ w, rtol=1e-12)
    np.testing.assert_allclose(K.diag(), np.diag(full), rtol=1e-12)


def test_centred_kernel_cpp_and_array_api_agree_and_rows_sum_to_zero():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((70, 2))
    K = centred_kernel_matrix(sc.Gaussian(sigma=0.9), X).with_backend("xp")
    full = K.dense()
    np.testing.assert_allclose(bridge.gram(K, np.arange(70)), full, atol=1e-13)
    # centred at its own input: every row of k_P sums to zero
    np.testing.assert_allclose(full.sum(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(K.diag(), np.diag(full), atol=1e-14)


def test_stein_kernel_has_mean_zero_under_target_monte_carlo():
    # P = N(mu, Sigma): E_{Y ~ P} k_p(x, Y) = 0 for every x (Assum. 1)
    rng = np.random.default_rng(4)
    mu = np.array([0.5, -1.0])
    C = np.array([[1.0, 0.6], [0.6, 2.0]])
    L = np.linalg.cholesky(C)
    Y = mu + rng.standard_normal((200_000, 2)) @ L.T
    T = -(Y - mu) @ np.linalg.inv(C)
    x = np.array([[0.0, 0.0], [1.5, -2.0], [-1.0, 1.0]])
    s = -(x - mu) @ np.linalg.inv(C)
    for base in (sc.IMQ(sigma=1.0), sc.Gaussian(sigma=1.0), sc.Matern(sigma=1.0, nu=2.5)):
        vals = sc.SteinKernel(base, M=C).matrix(x, s, Y, T)
        mean = vals.mean(axis=1)
        se = vals.std(axis=1) / np.sqrt(vals.shape[1])
        assert np.all(np.abs(mean) < 5 * se), (base, mean, se)


def test_stein_kernel_matrix_cross_block_matches_full():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((30, 3))
    kern = sc.SteinKernel(sc.IMQ(sigma=1.0), _preconditioner(3, False))
    full = kern.matrix(X, -X)
    np.testing.assert_allclose(
        kern.matrix(X[:10], -X[:10], X[10:], -X[10:]), full[:10, 10:], rtol=1e-12, atol=1e-14
    )


def test_default_stein_kernel_resolves_median_bandwidth_per_call_without_mutation():
    # the bandwidth is resolved per call, not fixed at first use: a kernel object is never changed
    rng = np.random.default_rng(6)
    X = rng.standard_normal((500, 2)) * 3.0
    kern = sc.SteinKernel()
    K1 = kern.bind(X, -X)
    assert kern.base is None
    assert K1.base.sigma == pytest.approx(sc.median_bandwidth(X))
    K2 = kern.bind(X[:50] * 0.01, -X[:50])
    assert K2.base.sigma == pytest.approx(sc.median_bandwidth(X[:50] * 0.01))
    resolved = kern.resolve(X)
    assert resolved is not kern and resolved.base.sigma == K1.base.sigma
    given = sc.SteinKernel(sc.IMQ(sigma=2.0))
    # nothing to resolve: the same kernel, as a snapshot (a later change of the caller's base
    # does not reach a result that recorded it)
    snap = given.resolve(X)
    assert snap.base == given.base and snap.base is not given.base and snap.M is None


def test_median_bandwidth_is_median_pairwise_distance_of_standard_thinned_points():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((2500, 2))
    kept = X[::3]  # ceil(2500 / 1000) = 3
    D = np.sqrt(((kept[:, None, :] - kept[None, :, :]) ** 2).sum(-1))
    expect = np.median(D[np.triu_indices(len(kept), 1)])
    assert sc.median_bandwidth(X) == pytest.approx(expect, rel=1e-12)
    M = np.array([[4.0, 0.0], [0.0, 1.0]])
    Dm = np.sqrt((((kept[:, None, :] - kept[None, :, :]) ** 2) / np.diag(M)).sum(-1))
    assert sc.median_bandwidth(X, M=M) == pytest.approx(
        np.median(Dm[np.triu_indices(len(kept), 1)])
    )


def test_kernel_matrix_take_is_the_submatrix():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((40, 2))
    for K in (sc.SteinKernel(sc.IMQ(1.0)).bind(X, -X), centred_kernel_matrix(sc.IMQ(1.0), X)):
        idx = np.array([3, 7, 7, 20])
        np.testing.assert_allclose(K.take(idx).dense(), K.dense()[np.ix_(idx, idx)], atol=1e-13)
        assert isinstance(K.take(idx), KernelMatrix)


def test_matern_radial_derivatives_match_finite_differences():
    q = np.array([0.05, 0.4, 1.7, 3.0])
    h = 1e-6
    for base in (sc.Matern(1.1, 1.5), sc.Matern(0.7, 2.5), sc.IMQ(0.9, -0.7), sc.Gaussian(1.3)):
        k0, k1, qk2 = base.radial(np, q)
        k0p = base.radial(np, q + h)[0]
        k0m = base.radial(np, q - h)[0]
        np.testing.assert_allclose(k1, (k0p - k0m) / (2 * h), rtol=1e-6)
        k1p = base.radial(np, q + h)[1]
        k1m = base.radial(np, q - h)[1]
        np.testing.assert_allclose(qk2, q * (k1p - k1m) / (2 * h), rtol=1e-5)


def test_stein_kernel_runs_in_every_namespace_and_keeps_device(xp):
    rng = np.random.default_rng(9)
    Xh = rng.standard_normal((25, 3))
    X, S = xp.asarray(Xh), xp.asarray(-Xh)
    M = _preconditioner(3, False)
    kern = sc.SteinKernel(sc.IMQ(sigma=1.0), M=M)
    K = kern.matrix(X, S)
    xp.same_place(K, X)
    ref = sc.SteinKernel(sc.IMQ(sigma=1.0), M=M).matrix(Xh, -Xh)
    np.testing.assert_allclose(xp.to_numpy(K), ref, rtol=1e-12, atol=1e-13)
    dg = kern.diag(X, S)
    xp.same_place(dg, X)
    np.testing.assert_allclose(xp.to_numpy(dg), np.diag(ref), rtol=1e-12)
    Km = kern.bind(X, S)
    w = xp.asarray(rng.random(25))
    np.testing.assert_allclose(
        xp.to_numpy(Km.matvec(w, block_size=4)), ref @ xp.to_numpy(w), rtol=1e-12
    )
    G = sc.Gaussian(sigma=0.7)(X)
    xp.same_place(G, X)


def test_blocked_matvec_never_holds_more_than_one_slab(monkeypatch):
    from stein_coreset.engine import ReferenceBackend, matrix

    monkeypatch.setattr(matrix, "SLAB_ENTRIES", 1000)
    rng = np.random.default_rng(11)
    X = rng.standard_normal((300, 2))
    K = sc.SteinKernel(sc.IMQ(1.0)).bind(X, -X).with_backend("xp")
    shapes = []
    orig = ReferenceBackend.block

    def spy(self, K, rows, cols=None):
        out = orig(self, K, rows, cols)
        shapes.append(out.shape)
        return out

    monkeypatch.setattr(ReferenceBackend, "block", spy)
    w = rng.random(300)
    got = K.matvec(w)
    assert shapes and all(r * c <= 1000 for r, c in shapes)
    np.testing.assert_allclose(got, K.with_backend("cpu").matvec(w), rtol=1e-12)


@pytest.mark.parametrize("scale", [1.0, 1e100, 1e149, 1e150, 1e151, 1e154, 1e160, 1e200])
@pytest.mark.parametrize("sigma", [1e-3, 1.0, 1e3])
def test_diag_is_finite_agrees_with_the_diagonal(scale, sigma):
    # the bound d max|T|^2 |k0| + 2 d |k1| decides most cases without the diagonal; near
    # overflow it falls back to the diagonal itself, so both answers must agree everywhere
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 3))
    with np.errstate(over="ignore", invalid="ignore"):
        K = sc.SteinKernel(sc.IMQ(sigma)).bind(X, -X * scale)
        expect = bool(np.all(np.isfinite(sc.SteinKernel(sc.IMQ(sigma)).bind(X, -X * scale)
                                         .diag())))
        assert K.diag_is_finite() is expect


# ---- parameters set after construction ------------------------------------------------------


@pytest.mark.parametrize("make, name, value, exc, needle", [
    (lambda: sc.IMQ(1.0), "sigma", float("inf"), ValueError, "sigma must be positive and finite"),
    (lambda: sc.IMQ(1.0), "sigma", 0.0, ValueError, "sigma must be positive and finite"),
    (lambda: sc.Gaussian(1.0), "sigma", 1e200, ValueError, "sigma = 1e\\+200 is outside"),
    (lambda: sc.Matern(1.0), "sigma", "2", TypeError, "sigma must be a real number"),
    (lambda: sc.IMQ(1.0), "beta", 0.5, ValueError, "beta must lie in \\(-1, 0\\)"),
    (lambda: sc.Matern(1.0), "nu", 3.5, ValueError, "nu must be 1.5 or 2.5"),
])
def test_a_kernel_parameter_set_after_construction_is_checked(make, name, value, exc, needle):
    # before: k.sigma = inf gave a KSD of 0.0, k.sigma = 0 a ZeroDivisionError in the evaluation
    k = make()
    before = getattr(k, name)
    with pytest.raises(exc, match=needle):
        setattr(k, name, value)
    assert getattr(k, name) == before
    setattr(k, name, before)  # a valid value is taken


def test_a_kernel_changed_after_construction_computes_with_its_new_value():
    X = np.random.default_rng(0).standard_normal((300, 2))
    k = sc.IMQ(1.0)
    k.sigma = 2.0
    assert sc.ksd(X, -X, kernel=k) == sc.ksd(X, -X, kernel=sc.IMQ(2.0))


@pytest.mark.parametrize("M", [np.eye(2) * (1 + 1j), 1j, [[1 + 0j, 0], [0, 1]]])
def test_a_complex_preconditioner_is_refused_naming_M(M):
    # before: NumPy's ComplexWarning only, and the real part kept
    with pytest.raises(TypeError, match="M must be real"):
        sc.SteinKernel(sc.IMQ(1.0), M=M)
    k = sc.SteinKernel(sc.IMQ(1.0))
    with pytest.raises(TypeError, match="M must be real"):
        k.M = M
    assert k.M is None
    with pytest.raises(TypeError, match="base must be IMQ, Gaussian or Matern"):
        k.base = "IMQ"


def test_a_result_keeps_the_kernel_that_computed_it_when_the_callers_kernel_changes():
    X = 0.5 + np.random.default_rng(1).standard_normal((400, 2))
    k = sc.SteinKernel(sc.IMQ(1.0))
    res = sc.compress(X, -X, size=16, method="skt", seed=0, kernel=k)
    K = k.bind(X, -X)
    w = np.full(400, 1 / 400)
    q = K.quad(w)
    k.base.sigma = 3.0
    kept = res.info["stein_kernel"]
    assert kept.base.sigma == 1.0  # before: the caller's object, now saying 3.0
    assert sc.ksd(res.points, -res.points, res.weights, kernel=kept) == pytest.approx(res.ksd)
    assert K.quad(w) == q and K.base.sigma == 1.0  # the bound matrix is a snapshot too


def test_the_default_kernel_shared_by_every_call_cannot_be_changed():
    # before: DEFAULT_KERNEL.M = None changed the kernel of every later call given none
    from stein_coreset.kernels import DEFAULT_KERNEL

    with pytest.raises(AttributeError, match=r"DEFAULT_KERNEL\.M cannot be set"):
        DEFAULT_KERNEL.M = None
    with pytest.raises(AttributeError, match=r"DEFAULT_KERNEL\.base cannot be set"):
        DEFAULT_KERNEL.base = sc.IMQ(2.0)
    assert DEFAULT_KERNEL.M == "scale" and DEFAULT_KERNEL.base is None
    assert DEFAULT_KERNEL.snapshot().M == "scale"  # a copy is the user's
    k = DEFAULT_KERNEL.snapshot()
    k.M = None
