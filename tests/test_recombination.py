"""Recombination (Alg. G.1), Resample (Alg. E.3) and Recombination Thinning (Alg. 4)."""

import importlib

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset.algorithms import recombination, recombination_thinning
from stein_coreset.algorithms.weights import simplex_weights
from stein_coreset.kernels import centred_kernel_matrix


def _row_rel_err(A, x, x0):
    """max over rows of |(A x - A x0)_r| / (|A_r| x0): error relative to each row's scale."""
    scale = np.abs(A) @ x0
    return float(np.max(np.abs(A @ x - A @ x0) / scale))


def _random_problem(m, n, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((m, n))
    A[0] = 1.0  # the constant test function: an all-positive row
    return A, rng.random(n)


@pytest.mark.parametrize("m,n", [(1, 7), (2, 10), (5, 6), (8, 1000), (64, 1000), (64, 100_000)])
def test_recombination_preserves_image_with_at_most_m_nonzeros(m, n):
    A, x0 = _random_problem(m, n, seed=m + n)
    x = recombination(A, x0)
    assert x.shape == (n,)
    assert np.all(x >= 0)
    assert np.count_nonzero(x) <= m
    assert _row_rel_err(A, x, x0) <= 1e-9
    assert np.isclose(x.sum(), x0.sum(), rtol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_recombination_exact_for_weights_spanning_twelve_orders(seed):
    # Skewed x0 makes some block columns tiny; a null vector living on them once sent the ratio
    # test on a rounding-level entry (relative error 1e-8). Rows of very different scales and
    # smooth, nearly dependent kernel-like rows (as RPCholesky factors are) as well.
    rng = np.random.default_rng(seed)
    m, n = 64, 20_000
    x0 = 10 ** rng.uniform(-12, 0, n)
    A = rng.standard_normal((m, n)) * np.exp(rng.normal(0, 3, (m, 1)))
    A[0] = 1.0
    X, C = rng.standard_normal((n, 2)), rng.standard_normal((m - 1, 2))
    G = np.vstack([np.ones(n), np.exp(-((X[None] - C[:, None]) ** 2).sum(-1))])
    for B in (A, G):
        x = recombination(B, x0)
        assert np.all(x >= 0) and np.count_nonzero(x) <= m
        assert _row_rel_err(B, x, x0) <= 1e-9


def test_recombination_rank_deficient_leaves_at_most_rank_nonzeros():
    rng = np.random.default_rng(1)
    n, m, r = 5000, 32, 10
    A = rng.standard_normal((m, r)) @ rng.standard_normal((r, n))
    A[0] = 1.0 + rng.random(n)  # positive row; rank(A) <= r + 1
    x0 = rng.random(n)
    x = recombination(A, x0)
    assert np.all(x >= 0)
    assert np.count_nonzero(x) <= r + 1
    assert _row_rel_err(A, x, x0) <= 1e-9


def test_recombination_exact_for_repeated_and_badly_scaled_rows():
    rng = np.random.default_rng(2)
    n = 3000
    base = np.vstack([np.ones(n), rng.standard_normal((5, n))])
    # Duplicated rows, and a copy scaled by 1e-8: each row must hold relative to its own scale.
    A = np.vstack([base, base, 1e-8 * base[1:], 1e6 * base[1:3]])
    x0 = rng.random(n)
    x = recombination(A, x0)
    assert np.count_nonzero(x) <= 6
    assert _row_rel_err(A, x, x0) <= 1e-9


def test_recombination_support_inside_input_support_and_duplicate_columns():
    rng = np.random.default_rng(3)
    n, m = 400, 6
    A = rng.standard_normal((m, 50))[:, rng.integers(0, 50, n)]  # many identical columns
    A[0] = 1.0
    x0 = rng.random(n) * (rng.random(n) < 0.3)
    x = recombination(A, x0)
    assert np.all((x > 0) <= (x0 > 0))
    assert np.count_nonzero(x) <= m
    assert _row_rel_err(A, x, x0) <= 1e-9


def test_recombination_keeps_vector_when_already_sparse():
    A, x0 = _random_problem(10, 8, seed=4)  # m >= n: full column rank, nothing to remove
    x = recombination(A, x0)
    np.testing.assert_allclose(x, x0, rtol=1e-12)


def test_recombination_points_major_layout_gives_the_same_vector():
    # A Fortran-ordered A is passed to C++ as A^T (points-major) without a copy; the block sums
    # run in the same order, so the result is identical.
    A, x0 = _random_problem(20, 5000, seed=11)
    xc = recombination(A, x0)
    xf = recombination(np.asfortranarray(A), x0)
    np.testing.assert_array_equal(xc, xf)
    assert _row_rel_err(A, xf, x0) <= 1e-9


def test_recombination_on_a_team_gives_the_same_bits_for_any_number_of_threads():
    """The collapse, the pivoted QR's column updates, the null vectors and Find-BFS's
    reflections run on the team in fixed chunks: x is bit-for-bit the 1-thread x (on both
    layouts), and still exact (same image, at most m nonzeros)."""
    rng = np.random.default_rng(8)
    m, n = 160, 30000
    A = rng.standard_normal((m, n))
    A[0] = 1.0
    x0 = rng.random(n)
    x0 /= x0.sum()
    for layout in (np.ascontiguousarray, np.asfortranarray):  # row- / points-major in C++
        Al = layout(A)
        ref = recombination(Al, x0, n_threads=1)
        for k in (2, 3, 4):
            np.testing.assert_array_equal(recombination(Al, x0, n_threads=k), ref)
        assert np.count_nonzero(ref) <= m
        np.testing.assert_allclose(A @ ref, A @ x0, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError):
        recombination(A, x0, n_threads=0)


def test_recombination_returns_in_input_namespace(xp):
    A, x0 = _random_problem(6, 300, seed=5)
    Ax, x0x = xp.asarray(A), xp.asarray(x0)
    x = recombination(Ax, x0x)
    xp.same_place(x, Ax)
    xh = xp.to_numpy(x)
    assert np.count_nonzero(xh) <= 6
    assert _row_rel_err(A, xh, x0) <= 1e-9


@pytest.mark.parametrize(
    "A,x0,match",
    [
        (np.ones((2, 3)), np.array([1.0, -1.0, 0.5]), "x0 must be non-negative"),
        (np.ones((2, 3)), np.array([1.0, np.nan, 0.5]), "x0 has NaN"),
        (np.array([[1.0, np.inf, 1.0]]), np.ones(3), "A has NaN"),
        (np.ones((2, 3)), np.ones(4), "x0 must have shape"),
        (np.ones(3), np.ones(3), "A must be a 2-D array"),
    ],
)
def test_recombination_bad_input_names_the_argument(A, x0, match):
    with pytest.raises(ValueError, match=match):
        recombination(A, x0)


# ---- the simplex QP on the support ----------------------------------------------------------


def _kkt_violation(Kmat, w):
    """Simplex-QP optimality: on supp(w) the gradient 2 K w is constant (= lam), off it >= lam."""
    grad = 2 * Kmat @ w
    lam = float(w @ grad)
    on = w > 0
    return max(np.max(np.abs(grad[on] - lam)), max(0.0, -np.min(grad - lam))) / np.abs(lam)


@pytest.mark.parametrize("seed", range(4))
def test_simplex_weights_satisfy_kkt_and_beat_random_feasible_points(seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((30, 2)) * 2 + 0.5
    Kmat = sc.SteinKernel(sc.IMQ(1.0)).matrix(X, -X)
    w = simplex_weights(Kmat, np.full(30, 1 / 30))
    assert np.all(w >= 0) and np.isclose(w.sum(), 1.0)
    assert _kkt_violation(Kmat, w) < 1e-8
    f = w @ Kmat @ w
    trials = rng.dirichlet(np.full(30, 0.3), size=2000)
    assert f <= np.min(np.einsum("ti,ij,tj->t", trials, Kmat, trials)) + 1e-12


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("p,start", [(40, "uniform"), (200, "uniform"), (120, "sparse"),
                                     (2, "uniform"), (1, "uniform")])
def test_simplex_weights_cpp_loop_equals_the_numpy_reference(seed, p, start):
    # the C++ active set (updated Cholesky) against the NumPy loop it replaces (a fresh
    # factorisation per step): the same optimum, a KKT point, from full and sparse starts
    from stein_coreset.algorithms.weights import simplex_weights_reference
    from stein_coreset.engine.cpu import bridge

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((p, 3)) * 1.5 + 0.7
    Kmat = sc.SteinKernel(sc.IMQ(1.3)).matrix(X, -X)
    w0 = np.full(p, 1.0 / p)
    if start == "sparse":
        w0 = np.zeros(p)
        w0[rng.choice(p, 5, replace=False)] = 0.2
    w_cpp, steps = bridge.simplex_qp(Kmat, w0, 20 * p + 20)
    assert w_cpp is not None and steps >= 0  # well conditioned: no fallback
    w_ref = simplex_weights_reference(Kmat, w0)
    assert np.all(w_cpp >= 0) and np.isclose(w_cpp.sum(), 1.0)
    f_cpp, f_ref = w_cpp @ Kmat @ w_cpp, w_ref @ Kmat @ w_ref
    assert abs(f_cpp - f_ref) <= 1e-10 * abs(f_ref)
    np.testing.assert_allclose(w_cpp, w_ref, atol=1e-8)
    if p > 1:
        assert _kkt_violation(Kmat, w_cpp) < 1e-8


@pytest.mark.parametrize("p", [2, 7, 64, 300])
def test_affine_weights_cpp_cholesky_equals_the_reference(p):
    # Eq. 64 solved by the C++ scaled Cholesky against the NumPy/SciPy reference, and checked
    # against the definition: K w is constant (the multiplier) and 1^T w = 1
    from stein_coreset.algorithms.weights import affine_weights_reference
    from stein_coreset.engine.cpu import bridge

    rng = np.random.default_rng(p)
    X = rng.standard_normal((p, 3)) * 1.5 + 0.7
    Kmat = sc.SteinKernel(sc.IMQ(1.3)).matrix(X, -X)
    w = bridge.affine_weights(Kmat)
    assert w is not None
    np.testing.assert_allclose(w, affine_weights_reference(Kmat), rtol=1e-9, atol=1e-12)
    assert np.isclose(w.sum(), 1.0)
    g = Kmat @ w
    assert np.max(np.abs(g - g.mean())) <= 1e-8 * np.abs(g.mean())
    # a singular matrix (repeated points): C++ declines, the reference's eigh path answers
    Xd = np.vstack([X, X[:2]])
    assert bridge.affine_weights(sc.SteinKernel(sc.IMQ(1.3)).matrix(Xd, -Xd)) is None


def test_simplex_weights_fall_back_to_the_reference_on_a_singular_free_set(monkeypatch):
    # duplicated points make the starting free set singular: the C++ loop declines (-1) and
    # simplex_weights answers with the NumPy reference (eigendecomposition affine steps)
    from stein_coreset.algorithms import weights as wmod
    from stein_coreset.engine.cpu import bridge

    rng = np.random.default_rng(8)
    X = rng.standard_normal((12, 2))
    X = np.vstack([X, X[:4]])
    Kmat = sc.SteinKernel(sc.IMQ(1.0)).matrix(X, -X)
    assert bridge.simplex_qp(Kmat, np.full(16, 1 / 16), 340) == (None, -1)
    called = []
    real = wmod.simplex_weights_reference
    monkeypatch.setattr(wmod, "simplex_weights_reference",
                        lambda *a: called.append(1) or real(*a))
    w = wmod.simplex_weights(Kmat, np.full(16, 1 / 16))
    assert called == [1]
    np.testing.assert_array_equal(w, real(Kmat, np.full(16, 1 / 16)))


def test_simplex_weights_handle_duplicate_points():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((12, 2))
    X = np.vstack([X, X[:4]])  # repeated points: a singular K
    Kmat = sc.SteinKernel(sc.IMQ(1.0)).matrix(X, -X)
    w = simplex_weights(Kmat, np.full(16, 1 / 16))
    assert np.all(np.isfinite(w)) and np.all(w >= 0) and np.isclose(w.sum(), 1.0)
    assert _kkt_violation(Kmat, w) < 1e-7


# ---- Recombination Thinning (Alg. 4) --------------------------------------------------------


def test_recombination_thinning_returns_simplex_coreset_of_at_most_m_points(biased_gaussian, xp):
    X, S = biased_gaussian(n=600, seed=1)
    K = sc.SteinKernel(sc.IMQ(1.5)).bind(xp.asarray(X), xp.asarray(S))
    idx, w = recombination_thinning(K, None, 20, rng=0)
    xp.same_place(w, K.U)
    wh = xp.to_numpy(w)
    assert idx.dtype == np.int64 and np.unique(idx).size == idx.size <= 20
    assert np.all(wh > 0) and np.isclose(wh.sum(), 1.0)
    # The final weights are simplex-optimal on their support.
    Kmat = sc.SteinKernel(sc.IMQ(1.5)).matrix(X[idx], S[idx])
    assert _kkt_violation(Kmat, wh) < 1e-7


def test_recombination_thinning_skips_recombination_only_where_it_removes_nothing(
    biased_gaussian, monkeypatch
):
    """When Resample's support has at most rank + 1 points, RT skips RPCholesky + Recombination
    (O(m^3 log n) at size = n). The skip must be exact: Recombination of such a
    support returns it unchanged, so forcing the full path gives the same coreset."""
    rec = importlib.import_module("stein_coreset.algorithms.recombination")

    X, S = biased_gaussian(n=96, seed=3)
    K = sc.SteinKernel(sc.IMQ(1.5)).bind(X, S)
    fast = recombination_thinning(K, None, 96, rng=5)
    calls = []
    real = rec._recombine

    def forced(*args):
        calls.append(args[1].size)
        return real(*args)

    monkeypatch.setattr(rec, "_recombine", forced)
    assert recombination_thinning(K, None, 96, rng=5)[0].size == fast[0].size
    assert calls == []  # the support (<= 96 points) never reached Recombination
    # force it: the path the skip replaces, on the same support and weights
    counts = np.bincount(rec.resample(np.full(96, 1 / 96), 96, np.random.default_rng(5),
                                      check_input=False), minlength=96)
    supp = np.flatnonzero(counts)
    idx, wr = real(K, supp, counts[supp] / 96.0, 95, np.random.default_rng(6))
    np.testing.assert_array_equal(idx, supp)
    np.testing.assert_allclose(wr, counts[supp] / 96.0, rtol=1e-9)
    # a support larger than rank + 1 still goes through Recombination
    calls.clear()
    recombination_thinning(K, None, 8, rng=5)
    assert calls and calls[0] > 8


def test_recombination_thinning_beats_iid_on_unbiased_input():
    rng = np.random.default_rng(9)
    X = rng.standard_normal((1024, 2))
    K = centred_kernel_matrix(sc.IMQ(1.0), X)
    m = 16
    idx, w = recombination_thinning(K, None, m, rng=1)
    dense = np.zeros(1024)
    dense[idx] = w
    mmd_rt = np.sqrt(max(K.quad(dense), 0.0))
    iid = []
    for s in range(20):
        pick = np.random.default_rng(s).choice(1024, m, replace=False)
        u = np.zeros(1024)
        u[pick] = 1 / m
        iid.append(np.sqrt(K.quad(u)))
    # RT with 16 points should be far better than 16 i.i.d. points (the paper's Fig. 4 regime).
    assert mmd_rt < 0.3 * np.median(iid)


@pytest.mark.parametrize(
    "kwargs,err,match",
    [
        (dict(m=0), ValueError, "m must be between"),
        (dict(m=5, rank=5), ValueError, "rank must be between 0 and m - 1"),
        (dict(m=5, rank=2.0), TypeError, "rank must be an integer"),
        (dict(m=5, w=np.full(50, 0.5)), ValueError, "w must sum to 1"),
        (dict(m=5, w=np.ones(3) / 3), ValueError, r"w must have shape \(50,\)"),
    ],
)
def test_recombination_thinning_bad_input(kwargs, err, match):
    X = np.random.default_rng(0).standard_normal((50, 2))
    K = sc.SteinKernel(sc.IMQ(1.0)).bind(X, -X)
    w = kwargs.pop("w", None)
    with pytest.raises(err, match=match):
        recombination_thinning(K, w, **kwargs)
    with pytest.raises(TypeError, match="K must be a KernelMatrix"):
        recombination_thinning(X, None, 5)
