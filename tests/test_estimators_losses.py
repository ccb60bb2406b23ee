"""DKSD / KSD / SM / DSM losses: definitions, the shared Stein kernel, gradients, bad input."""

import array_api_compat
import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset import estimators as est


def _data(n=60, d=2, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)) * 1.3 + 0.4


# --- brute force k0 from Eq. 6 by differentiating p m K m^T p numerically -------------------
def _brute_k0(score, mfun, Kfun, x, y, h=1e-4):
    """k0(x, y) = sum_{i,l} d_{x_i} d_{y_l} [ (m(x) K(x, y) m(y)^T)_{il} ] with the p factors.

    Uses (1/p(x)p(y)) d_x d_y (p(x) A p(y)) = A s_x s_y + s_x d_y A + s_y d_x A + d_x d_y A
    componentwise, all derivatives by central differences of A(x, y) = m(x) K(x, y) m(y)^T.
    """
    d = x.size

    def A(a, b):
        return mfun(a) @ Kfun(a, b) @ mfun(b).T

    sx, sy = score(x), score(y)
    E = np.eye(d) * h
    tot = np.einsum("il,i,l->", A(x, y), sx, sy)
    for i in range(d):
        dxA = (A(x + E[i], y) - A(x - E[i], y)) / (2 * h)
        tot += dxA[i, :] @ sy
        for l in range(d):
            dxdyA = (
                A(x + E[i], y + E[l]) - A(x + E[i], y - E[l])
                - A(x - E[i], y + E[l]) + A(x - E[i], y - E[l])
            ) / (4 * h * h)
            tot += dxdyA[i, l]
    for l in range(d):
        dyA = (A(x, y + E[l]) - A(x, y - E[l])) / (2 * h)
        tot += sx @ dyA[:, l]
    return tot


def test_dksd_matches_brute_force_stein_kernel_of_eq6():
    """Eq. 7 from the pass equals the U-statistic of k0 computed from Eq. 6 by differentiation."""
    X = _data(n=6, d=2)
    model = est.Gaussian(d=2)
    th = np.array([0.2, -0.1, 1.3])
    B = np.array([[1.5, 0.4], [0.4, 0.8]])
    base = sc.IMQ(sigma=1.2)

    def mfun(x):
        return np.array([[1 + x[0] ** 2, 0.3 * x[1]], [0.2 * np.sin(x[0]), 1.0 + 0.1 * x[1] ** 2]])

    def diff(x, t):
        return np.stack([mfun(r) for r in x])

    def Kfun(a, b):
        return B * base.radial(np, np.array(np.sum((a - b) ** 2)))[0]

    score = lambda x: model.score(x[None, :], th)[0]  # noqa: E731
    n = X.shape[0]
    brute = sum(
        _brute_k0(score, mfun, Kfun, X[i], X[j]) for i in range(n) for j in range(n) if i != j
    ) / (n * (n - 1))
    got = est.loss(model, th, X, discrepancy="dksd", kernel=est.SeparableKernel(base, B),
                   diffusion=diff)
    assert got == pytest.approx(brute, rel=1e-5)


class _Cauchy(sc.IMQ):
    """A user kernel that keeps IMQ's ``code`` but is (1 + r^2 / s^2)^-1: another radial."""

    def radial(self, xp, q):
        s2 = self.sigma**2
        ib = 1.0 / (1.0 + q / s2)
        return ib, -ib * ib / s2, 2.0 * (q / s2) * ib * ib * ib / s2


@pytest.mark.parametrize("discrepancy", ["ksd", "dksd"])
def test_a_user_kernel_is_evaluated_by_its_own_formula_never_as_its_parent(discrepancy):
    """Before: the C++ pair pass read the subclass's inherited IMQ ``code`` and returned IMQ's
    DKSD for NumPy input (0.0358 where the Cauchy kernel gives 0.0310), silently."""
    X = _data(n=7, d=2, seed=4)
    model = est.Gaussian(d=2)
    th = np.array([0.3, -0.2, 1.1])
    user = _Cauchy(sigma=1.3)
    score = lambda x: model.score(x[None, :], th)[0]  # noqa: E731
    Kfun = lambda a, b: np.eye(2) / (1.0 + np.sum((a - b) ** 2) / 1.3**2)  # noqa: E731
    mfun = lambda x: np.eye(2)  # noqa: E731
    n = X.shape[0]
    brute = sum(_brute_k0(score, mfun, Kfun, X[i], X[j]) for i in range(n) for j in range(n)
                if i != j) / (n * (n - 1))
    imq = est.loss(model, th, X, discrepancy=discrepancy, kernel=sc.IMQ(sigma=1.3))
    assert abs(imq - brute) > 1e-3 * abs(brute)  # the two kernels tell apart here
    for backend in ("auto", "xp"):
        got = est.loss(model, th, X, discrepancy=discrepancy, kernel=user, backend=backend)
        assert got == pytest.approx(brute, rel=1e-5)
        val, grad = est.loss_and_grad(model, th, X, discrepancy=discrepancy, kernel=user,
                                      backend=backend)
        assert val == pytest.approx(brute, rel=1e-5)
        fd = est.loss_and_grad(model, th, X, discrepancy=discrepancy, kernel=user,
                               backend=backend, gradient="fd")[1]
        np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-8)
    # one user component among compiled ones is enough to leave the compiled pass
    mixed = est.DiagonalKernel([sc.IMQ(sigma=1.3), user])
    assert est.loss(model, th, X, discrepancy="dksd", kernel=mixed) == pytest.approx(
        est.loss(model, th, X, discrepancy="dksd", kernel=mixed, backend="xp"), rel=1e-12)
    for k in (user, mixed):
        with pytest.raises(ValueError, match="cannot evaluate _Cauchy.*backend='xp'"):
            est.loss(model, th, X, discrepancy="dksd", kernel=k, backend="cpu")


def test_losses_take_the_engines_backend_names():
    X = _data(n=30, d=2, seed=8)
    model = est.StudentT(nu=4.0, d=2)
    th = np.array([0.1, -0.2, 1.1])
    kw = dict(discrepancy="dksd", kernel=sc.IMQ(1.0), diffusion=DIFFUSIONS["diag"])
    assert est.loss(model, th, X, backend="cpu", **kw) == pytest.approx(
        est.loss(model, th, X, backend="xp", **kw), rel=1e-11)
    assert est.loss(model, th, X, **kw) == est.loss(model, th, X, backend="cpu", **kw)
    with pytest.raises(ValueError, match="'cuda' needs CuPy"):
        est.loss(model, th, X, backend="cuda", **kw)


def test_ksd_u_statistic_equals_compression_ksd_minus_diagonal():
    """KSD loss (m = I, K = I k) and sc.ksd / SteinKernel differ only by the diagonal."""
    X = _data(n=80, d=3)
    model = est.Gaussian(d=3)
    th = np.array([0.1, 0.2, 0.3, 1.4])
    for kern in [sc.IMQ(sigma=1.1), sc.SteinKernel(sc.Gaussian(1.3), M=np.diag([2.0, 1.0, 0.5]))]:
        S = model.score(X, th)
        K = kern if isinstance(kern, sc.SteinKernel) else sc.SteinKernel(kern)
        n = X.shape[0]
        v_stat = sc.ksd(X, S, kernel=K) ** 2  # (1/n^2) sum_ij k_p
        diag = float(np.sum(K.diag(X, S)))
        u_stat = (n * n * v_stat - diag) / (n * (n - 1))
        assert est.loss(model, th, X, discrepancy="ksd", kernel=kern) == pytest.approx(
            u_stat, rel=1e-10, abs=1e-14
        )
        # the general DKSD pass (blocked, gradient-capable) gives the same number
        assert est.loss(model, th, X, discrepancy="dksd", kernel=kern,
                        block_size=7) == pytest.approx(u_stat, rel=1e-10, abs=1e-14)


def test_dksd_scalar_diffusion_is_ksd_with_kernel_h_k_h():
    """m = h I, K = I k: DKSD is the KSD of the scalar kernel h(x) k(x, y) h(y) (Sec. 2.1)."""
    X = _data(n=7, d=2, seed=3)
    model = est.StudentT(nu=4.0, d=2)
    th = np.array([0.1, 0.0, 1.2])
    base = sc.Gaussian(sigma=1.0)

    def hfun(x):
        return 1.0 / (1.0 + np.sum(x * x))

    score = lambda x: model.score(x[None, :], th)[0]  # noqa: E731
    Kfun = lambda a, b: np.eye(2) * base.radial(np, np.array(np.sum((a - b) ** 2)))[0]  # noqa
    mfun = lambda x: hfun(x) * np.eye(2)  # noqa: E731
    n = X.shape[0]
    brute = sum(_brute_k0(score, mfun, Kfun, X[i], X[j]) for i in range(n) for j in range(n)
                if i != j) / (n * (n - 1))
    got = est.loss(model, th, X, discrepancy="dksd", kernel=base,
                   diffusion=lambda x, t: 1.0 / (1.0 + np.sum(x * x, axis=1)))
    assert got == pytest.approx(brute, rel=1e-5)


DIFFUSIONS = {
    "identity": None,
    "scalar_theta": lambda x, t: 1.0 + np.sum((x - t[:2]) ** 2, axis=1) / t[2] ** 2,
    "diag": lambda x, t: 1.0 / (1.0 + x**2),
    "full": lambda x, t: np.stack(
        [np.stack([1 + x[:, 0] ** 2, 0.3 * x[:, 1]], 1),
         np.stack([0.2 * np.sin(x[:, 0]), 1 + 0 * x[:, 0]], 1)], 1),
}
KERNELS = {
    "I_k": sc.IMQ(sigma=1.0),
    "B_k": est.SeparableKernel(sc.Gaussian(1.5), np.array([[2.0, 0.5], [0.5, 1.0]])),
    "diag_k": est.DiagonalKernel([sc.IMQ(1.0), sc.Matern(0.9, nu=2.5)], [1.0, 2.0]),
    "M": sc.SteinKernel(sc.IMQ(1.0), M=np.array([[2.0, 0.3], [0.3, 1.0]])),
}


@pytest.mark.parametrize("kname", list(KERNELS))
@pytest.mark.parametrize("mname", list(DIFFUSIONS))
def test_dksd_analytic_gradient_matches_finite_differences(mname, kname):
    X = _data(n=50, d=2, seed=1)
    model = est.Gaussian(d=2)
    th = np.array([0.3, 0.6, 1.2])
    kw = dict(discrepancy="dksd", kernel=KERNELS[kname], diffusion=DIFFUSIONS[mname])
    la, ga = est.loss_and_grad(model, th, X, **kw)
    lf, gf = est.loss_and_grad(model, th, X, gradient="fd", **kw)
    assert la == pytest.approx(lf, rel=1e-12)
    np.testing.assert_allclose(ga, gf, rtol=1e-5, atol=1e-6 * np.abs(gf).max())


def test_gradient_without_score_dtheta_falls_back_to_differences_of_the_score():
    X = _data(n=40, d=1)
    t = est.StudentT(nu=5.0)

    class NoDerivatives:
        n_params = 2
        d = 1
        score = staticmethod(t.score)

    th = np.array([0.2, 1.1])
    diff = lambda x, th: 1.0 + (x[:, 0] - th[0]) ** 2 / th[1] ** 2  # noqa: E731
    _, g1 = est.loss_and_grad(t, th, X, discrepancy="dksd", kernel=sc.IMQ(), diffusion=diff)
    _, g2 = est.loss_and_grad(NoDerivatives(), th, X, discrepancy="dksd", kernel=sc.IMQ(),
                              diffusion=diff)
    np.testing.assert_allclose(g1, g2, rtol=1e-6)


def test_dsm_with_identity_is_twice_sm_and_nnsm_is_dsm_with_diag_x():
    X = np.abs(_data(n=100, d=2)) + 0.1
    model = est.Gaussian(d=2)
    th = np.array([0.5, 0.4, 1.1])
    sm = est.loss(model, th, X, discrepancy="sm")
    # the paper's estimator (Eq. 8): mean(Laplacian log p + ||grad log p||^2 / 2)
    S = model.score(X, th)
    assert sm == pytest.approx(np.mean(-2 / 1.1**2 + 0.5 * np.sum(S * S, axis=1)), rel=1e-12)
    assert est.loss(model, th, X, discrepancy="dsm",
                    diffusion=lambda x, t: np.ones(x.shape[0])) == pytest.approx(2 * sm)
    nn = est.loss(model, th, X, discrepancy="nnsm")
    # m = diag(x) through the finite-difference divergence path
    assert est.loss(model, th, X, discrepancy="dsm",
                    diffusion=lambda x, t: x) == pytest.approx(nn, rel=1e-7)


def test_dsm_is_the_quadratic_of_its_definition():
    """DSM(theta) = E||m (s_p - s_q)||^2 + const (Eq. 9-11): for a Gaussian location model
    (s_p - s_q = theta when Q = N(0, 1)) the estimator's curvature is exactly mean(m^2), and its
    slope at 0 is mean-zero noise."""
    rng = np.random.default_rng(2)
    n = 200000
    X = rng.standard_normal((n, 1))
    model = est.Gaussian(d=1, scale=1.0)
    diff = lambda x, t: 1.0 / (1.0 + x[:, 0] ** 2)  # noqa: E731
    L = lambda t: est.loss(model, [t], X, discrepancy="dsm", diffusion=diff)  # noqa: E731
    m2 = 1.0 / (1.0 + X[:, 0] ** 2) ** 2
    a = 0.7
    curvature = (L(a) + L(-a) - 2 * L(0.0)) / (2 * a * a)
    assert curvature == pytest.approx(np.mean(m2), rel=1e-8)
    z = np.linspace(-12, 12, 200001)
    Em2 = np.trapezoid(np.exp(-z * z / 2) / np.sqrt(2 * np.pi) / (1 + z * z) ** 2, z)
    assert abs(np.mean(m2) - Em2) < 4 * np.std(m2) / np.sqrt(n)
    slope = (L(a) - L(-a)) / (2 * a)
    assert abs(slope) < 4 * 2.5 / np.sqrt(n)  # 2 |x m^2 - d(m^2)| <= 2.5


def test_information_tensor_is_psd_and_matches_dsm_formula():
    X = _data(n=60, d=2)
    model = est.StudentT(nu=5.0, d=2)
    th = np.array([0.2, 0.1, 1.2])
    for disc, kw in [("ksd", {}), ("dksd", {"diffusion": DIFFUSIONS["full"],
                                            "kernel": KERNELS["B_k"]}),
                     ("dsm", {"diffusion": DIFFUSIONS["diag"]}), ("sm", {})]:
        g = est.information(model, th, X, discrepancy=disc, **kw)
        assert g.shape == (3, 3)
        np.testing.assert_allclose(g, g.T, atol=1e-14)
        assert np.linalg.eigvalsh(g).min() > -1e-12
    J = model.score_dtheta(X, th)
    mJ = DIFFUSIONS["diag"](X, th)[:, :, None] * J
    np.testing.assert_allclose(
        est.information(model, th, X, discrepancy="dsm", diffusion=DIFFUSIONS["diag"]),
        np.einsum("nrp,nrq->pq", mJ, mJ) / X.shape[0], rtol=1e-12)


def test_ksd_information_is_v_statistic_of_eq14():
    X = _data(n=30, d=1)
    model = est.Gaussian(d=1)
    th = np.array([0.1, 1.3])
    k = sc.IMQ(sigma=1.0)
    J = model.score_dtheta(X, th)[:, 0, :]
    Kb = k(X)
    np.testing.assert_allclose(est.information(model, th, X, kernel=k), J.T @ Kb @ J / 900,
                               rtol=1e-12)


def test_array_api_namespaces_give_the_numpy_answer(xp):
    Xh = _data(n=40, d=2)
    X = xp.asarray(Xh)
    model = est.StudentT(nu=5.0, d=2)
    th = np.array([0.2, 0.1, 1.2])

    def diag(x, t):
        return 1.0 / (1.0 + x * x)

    def scal(x, t):
        ns = array_api_compat.array_namespace(x)
        return 1.0 + ns.sum((x - ns.asarray(t[:2], device=array_api_compat.device(x))) ** 2,
                            axis=1) / float(t[2]) ** 2

    for disc, kw in [
        ("ksd", {"kernel": sc.IMQ(1.0)}),
        ("dksd", {"kernel": KERNELS["diag_k"], "diffusion": diag}),
        ("dksd", {"kernel": KERNELS["B_k"], "diffusion": scal}),
        ("dksd", {"kernel": KERNELS["M"], "diffusion": None}),
    ]:
        l1, g1 = est.loss_and_grad(model, th, X, discrepancy=disc, **kw)
        l0, g0 = est.loss_and_grad(model, th, Xh, discrepancy=disc, **kw)
        assert l1 == pytest.approx(l0, rel=1e-10)
        np.testing.assert_allclose(g1, g0, rtol=1e-7)
        assert est.loss(model, th, X, discrepancy=disc, **kw) == pytest.approx(l0, rel=1e-10)
    for disc, kw in [("sm", {}), ("dsm", {"diffusion": diag})]:
        assert est.loss(model, th, X, discrepancy=disc, **kw) == pytest.approx(
            est.loss(model, th, Xh, discrepancy=disc, **kw), rel=1e-8)
    np.testing.assert_allclose(est.information(model, th, X, kernel=sc.IMQ(1.0)),
                               est.information(model, th, Xh, kernel=sc.IMQ(1.0)), rtol=1e-10)


@pytest.mark.parametrize("backend", ["cpu", "xp"])
def test_blocked_pass_keeps_memory_linear_in_n(backend):
    """n = 10^4: the loss + gradient never holds an n x n array (peak << n^2 doubles)."""
    import tracemalloc

    n = 10000
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 1))
    model = est.Gaussian(d=1)
    diff = lambda x, t: 1.0 / (1.0 + x**2)  # noqa: E731
    tracemalloc.start()
    est.loss_and_grad(model, [0.0, 1.0], X[:2000], discrepancy="dksd", kernel=sc.IMQ(1.0),
                      diffusion=diff, backend=backend)  # warm up imports / caches
    tracemalloc.reset_peak()
    val, g = est.loss_and_grad(model, [0.0, 1.0], X, discrepancy="dksd", kernel=sc.IMQ(1.0),
                               diffusion=diff, backend=backend)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert np.isfinite(val) and np.all(np.isfinite(g))
    assert peak < 0.05 * n * n * 8, f"peak {peak / 1e6:.1f} MB"


@pytest.mark.parametrize(
    "kwargs,exc,msg",
    [
        ({"X": np.array([[0.0], [np.nan], [1.0]])}, ValueError, "NaN or inf in 1"),
        ({"X": np.zeros((5, 2))}, ValueError, "columns"),
        ({"X": np.zeros(5)}, ValueError, "2-D"),
        ({"theta": [0.0, -1.0]}, ValueError, "scale"),
        ({"theta": [0.0, 1.0, 2.0]}, ValueError, "2 entries"),
        ({"diffusion": lambda x, t: np.ones((x.shape[0], 3))}, ValueError, "diffusion must"),
        ({"diffusion": lambda x, t: np.full(x.shape[0], np.nan)}, ValueError, "diffusion"),
        ({"diffusion": "x"}, TypeError, "diffusion"),
        ({"discrepancy": "kl"}, ValueError, "ksd, dksd"),
        ({"kernel": "imq"}, TypeError, "kernel"),
        ({"discrepancy": "sm", "kernel": sc.IMQ()}, ValueError, "no kernel"),
        ({"discrepancy": "ksd", "diffusion": lambda x, t: x[:, 0]}, ValueError, "dksd"),
        ({"discrepancy": "dsm", "diffusion": lambda x, t: 1 + (x[:, 0] - t[0]) ** 2},
         ValueError, "does not depend on theta"),
        ({"X": np.zeros((1, 1))}, ValueError, "at least 2"),
    ],
)
def test_bad_input_raises_naming_the_argument(kwargs, exc, msg):
    args = dict(model=est.StudentT(), theta=[0.0, 1.0], X=_data(n=20, d=1),
                discrepancy="dksd", kernel=sc.IMQ())
    args.update(kwargs)
    model, theta, X = args.pop("model"), args.pop("theta"), args.pop("X")
    with pytest.raises(exc, match=msg):
        est.loss(model, theta, X, **args)


def test_matrix_kernel_arguments_are_validated():
    X = _data(n=20, d=2)
    model = est.Gaussian(d=2)
    with pytest.raises(ValueError, match="positive definite"):
        est.loss(model, [0, 0, 1.0], X, discrepancy="dksd",
                 kernel=est.SeparableKernel(sc.IMQ(), np.array([[1.0, 2.0], [2.0, 1.0]])))
    with pytest.raises(ValueError, match="shape"):
        est.loss(model, [0, 0, 1.0], X, discrepancy="dksd",
                 kernel=est.SeparableKernel(sc.IMQ(), np.eye(3)))
    with pytest.raises(ValueError, match="base kernels"):
        est.loss(model, [0, 0, 1.0], X, discrepancy="dksd",
                 kernel=est.DiagonalKernel([sc.IMQ()] * 3))
    with pytest.raises(ValueError, match="positive"):
        est.DiagonalKernel(sc.IMQ(), [1.0, -1.0])
    with pytest.raises(TypeError, match="for discrepancy='ksd'"):
        est.loss(model, [0, 0, 1.0], X, discrepancy="ksd", kernel=est.SeparableKernel())


@pytest.mark.parametrize("kind", ["diag", "full"])
@pytest.mark.parametrize("kernels", ["shared", "shared_lam", "distinct"])
def test_cpp_pass_and_array_api_passes_agree(kind, kernels):
    """The C++ pass (NumPy default), the vectorised array-API pass (shared kernel, diagonal m)
    and the per-component loop give the same loss and adjoints, duplicates included."""
    from stein_coreset.engine.reference import dksd as A
    from stein_coreset.estimators import dksd as D

    rng = np.random.default_rng(4)
    n, d = 37, 3
    U, V = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    F = rng.random((n, d)) + 0.5 if kind == "diag" else rng.standard_normal((n, d, d))
    U[5] = U[9]  # a duplicate point: q = 0 off the diagonal
    m15 = sc.Matern(1.1, nu=1.5)
    comps = {
        "shared": [(m15, 1.0)] * d,
        "shared_lam": [(m15, lam) for lam in (1.0, 0.5, 2.0)],
        "distinct": [(sc.IMQ(0.8, beta=-0.3), 1.0), (sc.Gaussian(1.2), 0.7), (m15, 2.0)],
    }[kernels]
    ref = A.pair_pass(U, V, kind, F, comps, True, block_size=5, vectorise=False)
    others = [D.pair_pass(U, V, kind, F, comps, True, backend="cpu"),
              D.pair_pass(U, V, kind, F, comps, True, block_size=8, backend="xp")]
    for out in others:
        assert out[0] == pytest.approx(ref[0], rel=1e-11)
        np.testing.assert_allclose(out[1], ref[1], rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(out[2], ref[2], rtol=1e-10, atol=1e-13)
    val, gv, gf = D.pair_pass(U, V, kind, F, comps, False, backend="cpu")
    assert val == pytest.approx(ref[0], rel=1e-11) and gv is None and gf is None
    for n_threads in (2, 3):  # rows in fixed chunks, summed in order: bit for bit
        out = D.pair_pass(U, V, kind, F, comps, True, backend="cpu", n_threads=n_threads)
        one = D.pair_pass(U, V, kind, F, comps, True, backend="cpu", n_threads=1)
        assert out[0] == one[0]
        np.testing.assert_array_equal(out[1], one[1])
        np.testing.assert_array_equal(out[2], one[2])


def _dksd_pair_by_pair(U, V, F, full, comps):
    """The pair pass as the scalar C++ pass before blocking computed it: row i against every
    j != i, component by component (Eq. 7), radial terms from kernels.py's own ``radial``."""
    n, d = U.shape
    c = 1.0 / (n * (n - 1))
    total, Gv, Gf = 0.0, np.zeros_like(V), np.zeros_like(F)
    for i in range(n):
        du = U[i] - U
        q = np.sum(du * du, axis=1)
        keep = np.arange(n) != i
        for r, (base, lam) in enumerate(comps):
            k0, k1, qk2 = base.radial(np, q)
            k2 = np.where(q > 0, qk2 / np.where(q > 0, q, 1.0), 0.0)
            if full:
                P, Q, R = du @ F[i][:, r], np.sum(F[:, :, r] * du, axis=1), F[:, :, r] @ F[i][:, r]
            else:
                P, Q, R = F[i, r] * du[:, r], F[:, r] * du[:, r], F[i, r] * F[:, r]
            vi, vj = V[i, r], V[:, r]
            T = lam * (k0 * vi * vj - 2 * k1 * (vi * Q - P * vj + R) - 4 * k2 * P * Q)
            total += c * np.sum(T[keep])
            g = 2 * c * lam
            Gv[i, r] = np.sum((g * (k0 * vj - 2 * k1 * Q))[keep])
            AP, AR = g * (2 * k1 * vj - 4 * k2 * Q), -2 * g * k1
            if full:
                Gf[i, :, r] = np.sum((AP[:, None] * du + AR[:, None] * F[:, :, r])[keep], axis=0)
            else:
                Gf[i, r] = np.sum((AP * du[:, r] + AR * F[:, r])[keep])
    return total, Gv, Gf


_BASES = {"imq": sc.IMQ(0.9), "imq_beta": sc.IMQ(1.3, beta=-0.3), "gaussian": sc.Gaussian(1.1),
          "matern15": sc.Matern(1.2, nu=1.5), "matern25": sc.Matern(0.8, nu=2.5)}


@pytest.mark.parametrize("kind", ["diag", "full"])
@pytest.mark.parametrize("kernels", [*_BASES, "mixed"])
def test_blocked_cpp_pass_equals_the_pair_by_pair_formula(kind, kernels):
    """The blocked, vectorised C++ pass (256 columns a block, 8 to a vector) against Eq. 7 pair
    by pair, for every base kernel and mixed kernels, at n across the block and vector tails and
    d across the small and large cases, duplicates included: loss and adjoints to rounding,
    and bit for bit whatever n_threads."""
    from stein_coreset.estimators import dksd as D

    rng = np.random.default_rng(11)
    sizes = [(2, 1), (9, 2), (263, 3), (37, 8), (300, 9)] if kind == "diag" else \
        [(2, 1), (9, 2), (263, 3), (37, 5)]
    if kind == "diag":
        sizes.append((23, 17))
    for n, d in sizes:
        U, V = rng.standard_normal((n, d)), rng.standard_normal((n, d))
        F = rng.random((n, d)) + 0.5 if kind == "diag" else rng.standard_normal((n, d, d))
        if n > 4:
            U[3] = U[1]  # a duplicate point: q = 0 off the diagonal
        names = list(_BASES)
        comps = [(_BASES[names[r % len(names)]] if kernels == "mixed" else _BASES[kernels],
                  0.5 + r / d) for r in range(d)]
        ref = _dksd_pair_by_pair(U, V, F, kind == "full", comps)
        got = D.pair_pass(U, V, kind, F, comps, True, backend="cpu")
        assert got[0] == pytest.approx(ref[0], rel=1e-12, abs=1e-15), (n, d)
        for g, r in zip(got[1:], ref[1:], strict=True):
            np.testing.assert_allclose(g, r, rtol=1e-11, atol=1e-13 * np.max(np.abs(r)),
                                       err_msg=f"n={n}, d={d}")
        assert D.pair_pass(U, V, kind, F, comps, False, backend="cpu")[0] == got[0]
        for n_threads in (2, 3):
            out = D.pair_pass(U, V, kind, F, comps, True, backend="cpu", n_threads=n_threads)
            assert out[0] == got[0]
            np.testing.assert_array_equal(out[1], got[1])
            np.testing.assert_array_equal(out[2], got[2])


@pytest.mark.parametrize("kind", ["diag", "full"])
@pytest.mark.parametrize("kernels", ["shared", "mixed"])
def test_array_api_product_pass_equals_the_pair_by_pair_formula(kind, kernels):
    """The xp pass's matrix-product form (one group per base kernel, the diagonal masked in
    each slab's square block) against Eq. 7 pair by pair, at several slab sizes."""
    from stein_coreset.engine.reference import dksd as A

    rng = np.random.default_rng(12)
    n, d = 53, 5
    U, V = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    F = rng.random((n, d)) + 0.5 if kind == "diag" else rng.standard_normal((n, d, d))
    U[7] = U[2]
    names = list(_BASES)
    comps = [(_BASES[names[r % len(names)]] if kernels == "mixed" else _BASES["imq"], 1.0 + r)
             for r in range(d)]
    ref = _dksd_pair_by_pair(U, V, F, kind == "full", comps)
    for block_size in (None, 1, 7, 60):
        got = A.pair_pass(U, V, kind, F, comps, True, block_size=block_size)
        assert got[0] == pytest.approx(ref[0], rel=1e-12)
        for g, r in zip(got[1:], ref[1:], strict=True):
            np.testing.assert_allclose(g, r, rtol=1e-11, atol=1e-13 * np.max(np.abs(r)))


@pytest.mark.parametrize("discrepancy", ["ksd", "dksd"])
def test_loss_grad_and_fit_do_not_depend_on_n_threads(discrepancy):
    X = _data(n=150, d=2, seed=8)
    model = est.StudentT(nu=4.0, d=2)
    th = np.array([0.1, -0.2, 1.1])
    diff = (lambda x, t: 1.0 + 0.1 * x * x) if discrepancy == "dksd" else None
    kw = dict(discrepancy=discrepancy, diffusion=diff)
    ref = est.loss(model, th, X, n_threads=1, **kw)
    ref_g = est.loss_and_grad(model, th, X, n_threads=1, **kw)
    ref_fit = est.fit(model, X, steps=5, seed=0, n_threads=1, **kw)
    for n_threads in (None, 2, 4):
        assert est.loss(model, th, X, n_threads=n_threads, **kw) == ref
        v, g = est.loss_and_grad(model, th, X, n_threads=n_threads, **kw)
        assert v == ref_g[0]
        np.testing.assert_array_equal(g, ref_g[1])
        res = est.fit(model, X, steps=5, seed=0, n_threads=n_threads, **kw)
        np.testing.assert_array_equal(res.theta, ref_fit.theta)
        assert res.loss == ref_fit.loss


def test_n_threads_is_checked_at_the_door():
    X = _data(n=20, d=2, seed=8)
    model = est.StudentT(nu=4.0, d=2)
    with pytest.raises(ValueError, match="n_threads"):
        est.loss(model, [0.0, 0.0, 1.0], X, n_threads=0)
    with pytest.raises(TypeError, match="n_threads"):
        est.loss_and_grad(model, [0.0, 0.0, 1.0], X, n_threads=1.5)


def test_backends_agree_through_the_public_functions():
    X = _data(n=45, d=2, seed=6)
    model = est.StudentT(nu=4.0, d=2)
    th = np.array([0.1, -0.2, 1.1])
    for kw in [dict(discrepancy="ksd", kernel=sc.IMQ(1.0)),
               dict(discrepancy="dksd", kernel=KERNELS["M"], diffusion=DIFFUSIONS["full"]),
               dict(discrepancy="dksd", kernel=KERNELS["diag_k"], diffusion=DIFFUSIONS["diag"])]:
        a = est.loss_and_grad(model, th, X, backend="cpu", **kw)
        b = est.loss_and_grad(model, th, X, backend="xp", **kw)
        assert a[0] == pytest.approx(b[0], rel=1e-11)
        np.testing.assert_allclose(a[1], b[1], rtol=1e-9)
    with pytest.raises(ValueError, match="backend"):
        est.loss(model, th, X, backend="gpu")


# ---- no silent answer from loss / loss_and_grad / information ---------------------------------


@pytest.mark.parametrize("block_size, err", [(-1, ValueError), (0, ValueError),
                                             (2.5, TypeError), (True, TypeError)])
@pytest.mark.parametrize("backend", ["auto", "xp"])
def test_a_bad_block_size_is_refused(block_size, err, backend):
    # before: block_size=-1 with the array-API backend returned 0.0
    X = np.random.default_rng(0).standard_normal((40, 1))
    theta = np.array([0.0, 1.0])
    for f in (est.loss, est.loss_and_grad):
        with pytest.raises(err, match="block_size"):
            f(est.Gaussian(), theta, X, discrepancy="ksd", block_size=block_size,
              backend=backend)
    with pytest.raises(err, match="block_size"):
        est.information(est.Gaussian(), theta, X, discrepancy="ksd", block_size=block_size)


@pytest.mark.parametrize("theta", [[1e300, 1.0], [0.0, 1e-200]])
@pytest.mark.parametrize("discrepancy", ["ksd", "dksd", "sm"])
def test_a_theta_where_the_loss_overflows_gives_an_error_naming_theta(theta, discrepancy):
    # before: a NaN / inf gradient returned as an answer, or a raw ZeroDivisionError
    X = np.random.default_rng(0).standard_normal((40, 1))
    for f in (est.loss, est.loss_and_grad, est.information):
        with pytest.raises(ValueError, match="theta"):
            f(est.Gaussian(), np.array(theta), X, discrepancy=discrepancy)
