"""Weighted RPCholesky (Alg. F.1): a low-rank factor F with K ~ F F^T, O(n r) kernel columns."""

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset.algorithms import weighted_rpcholesky


def _stein_matrix(xp, n=120, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = 0.7 + 1.5 * rng.standard_normal((n, d))
    return sc.SteinKernel(sc.IMQ(sigma=1.5)).bind(xp.asarray(X), xp.asarray(-X))


def _weighted_trace_error(K, F, w):
    """tr(D (K - F F^T) D) with D = diag(sqrt w): the nuclear norm of the PSD residual."""
    R = K - F @ F.T
    return float(np.sum(w * np.diag(R)))


def test_weighted_rpcholesky_trace_error_decreases_with_rank(xp):
    Kmat = _stein_matrix(xp)
    K = xp.to_numpy(Kmat.dense())
    n = K.shape[0]
    w = np.full(n, 1.0 / n)
    errs = []
    for r in (2, 5, 10, 20, 40):
        # the same seed replays the same draws: a rank-r2 run extends the rank-r1 run,
        # so the residual (a Schur complement) can only shrink
        piv, F = weighted_rpcholesky(Kmat, rank=r, rng=np.random.default_rng(3))
        errs.append(_weighted_trace_error(K, xp.to_numpy(F), w))
        assert errs[-1] >= -1e-9 * np.trace(K) / n
    assert all(b < a for a, b in zip(errs[:-1], errs[1:], strict=True)), errs
    assert errs[-1] < 0.05 * errs[0]


def test_weighted_rpcholesky_with_weights_reproduces_matrix_on_support():
    Kmat = _stein_matrix(np, n=60)
    K = Kmat.dense()
    rng = np.random.default_rng(1)
    w = rng.random(60)
    w[::4] = 0.0
    w /= w.sum()
    piv, F = weighted_rpcholesky(Kmat, w, rank=60, rng=rng)
    s = w > 0
    assert np.all(s[piv]), "a zero-weight point was chosen as a pivot"
    np.testing.assert_allclose((F @ F.T)[np.ix_(s, s)], K[np.ix_(s, s)], atol=1e-8 * K.max())
    assert np.all(F[~s] == 0.0)


def test_weighted_rpcholesky_full_rank_reproduces_matrix(xp):
    Kmat = _stein_matrix(xp, n=50)
    K = xp.to_numpy(Kmat.dense())
    piv, F = weighted_rpcholesky(Kmat, rank=50, rng=np.random.default_rng(0))
    np.testing.assert_allclose(xp.to_numpy(F) @ xp.to_numpy(F).T, K, atol=1e-8 * np.abs(K).max())


def test_weighted_rpcholesky_pivots_are_distinct_host_int64(xp):
    Kmat = _stein_matrix(xp, n=200)
    piv, F = weighted_rpcholesky(Kmat, rank=80, rng=np.random.default_rng(5))
    assert isinstance(piv, np.ndarray) and piv.dtype == np.int64
    assert piv.shape == (80,) and np.unique(piv).size == 80
    assert F.shape == (200, 80)
    xp.same_place(F, Kmat.U)


def test_weighted_rpcholesky_pivot_columns_are_exact(xp):
    """F F^T interpolates K on the pivot columns (the Nystrom property)."""
    Kmat = _stein_matrix(xp, n=100)
    K = xp.to_numpy(Kmat.dense())
    piv, F = weighted_rpcholesky(Kmat, rank=15, rng=np.random.default_rng(2))
    F = xp.to_numpy(F)
    np.testing.assert_allclose((F @ F.T)[:, piv], K[:, piv], atol=1e-9 * np.abs(K).max())


def test_weighted_rpcholesky_centred_base_kernel_rank_one_matrix_stops_early():
    """A centred kernel of two distinct points has rank 1: the run stops after one pivot."""
    X = np.array([[0.0, 0.0], [1.0, 1.0]] * 5)
    Kmat = sc.kernels.centred_kernel_matrix(sc.Gaussian(1.0), X)
    piv, F = weighted_rpcholesky(Kmat, rank=6, rng=np.random.default_rng(0))
    assert piv.size == 1
    np.testing.assert_allclose(F @ F.T, Kmat.dense(), atol=1e-12)


def test_weighted_rpcholesky_rejects_bad_rank():
    Kmat = _stein_matrix(np, n=10)
    with pytest.raises(ValueError, match="rank"):
        weighted_rpcholesky(Kmat, rank=0)


@pytest.mark.parametrize("n", [300, 2500])
def test_weighted_rpcholesky_cpp_loop_matches_array_api_loop(n):
    """The C++ loop (NumPy inputs) and the namespace-generic loop draw the same pivots from the
    same generator and give the same factor up to rounding, and leave the generator alike
    (n = 2500: the C++ finds a pivot through its chunks' sums of d, three chunks)."""
    Kmat = _stein_matrix(np, n=n, d=3, seed=4)
    rng = np.random.default_rng(9)
    w = rng.random(n)
    w[::5] = 0.0
    w /= w.sum()
    assert Kmat.backend.name == "cpu"
    for rank in (1, 7, 40):
        g1, g2 = np.random.default_rng(rank), np.random.default_rng(rank)
        p1, F1 = weighted_rpcholesky(Kmat, w, rank, g1)
        p2, F2 = weighted_rpcholesky(Kmat.with_backend("xp"), w, rank, g2)
        np.testing.assert_array_equal(p1, p2)
        np.testing.assert_allclose(F1, F2, rtol=1e-12, atol=1e-14 * np.abs(F2).max())
        assert g1.random() == g2.random()
    p3, F3 = weighted_rpcholesky(Kmat, w, 40, np.random.default_rng(40), progress=True)
    p4, _ = weighted_rpcholesky(Kmat, w, 40, np.random.default_rng(40))
    np.testing.assert_array_equal(p3, p4)


def test_weighted_rpcholesky_cpp_loop_stops_when_the_residual_vanishes():
    """Ten distinct points repeated: the reweighted matrix has rank 10, so at most 10 pivots are
    taken and F F^T reproduces K; both loops agree."""
    rng = np.random.default_rng(0)
    X = np.repeat(rng.standard_normal((10, 2)), 6, axis=0)
    Km = sc.SteinKernel(sc.IMQ(sigma=1.0)).bind(X, -X)
    K = Km.dense()
    p1, F1 = weighted_rpcholesky(Km, rank=30, rng=np.random.default_rng(1))
    p2, _ = weighted_rpcholesky(Km.with_backend("xp"), rank=30,
                                rng=np.random.default_rng(1))
    assert p1.size <= 10 and F1.shape == (60, p1.size)
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_allclose(F1 @ F1.T, K, atol=1e-7 * np.abs(K).max())


def test_weighted_rpcholesky_on_the_support_equals_the_full_factor():
    """RT and CT factor K restricted to the support of w: the pivot draws and the factor's rows
    there are the same as over all n points (zero-weight rows are zero)."""
    Kmat = _stein_matrix(np, n=200, seed=3)
    rng = np.random.default_rng(5)
    w = rng.random(200) * (rng.random(200) < 0.3)
    w /= w.sum()
    supp = np.flatnonzero(w > 0)
    p_all, F_all = weighted_rpcholesky(Kmat, w, 25, np.random.default_rng(7))
    p_s, F_s = weighted_rpcholesky(Kmat.take(supp), w[supp], 25, np.random.default_rng(7))
    np.testing.assert_array_equal(supp[p_s], p_all)
    np.testing.assert_allclose(F_s, F_all[supp], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("backend", ["cpu", "xp", "strict"])
def test_weighted_rpcholesky_pivot_entries_follow_the_cpp_order_of_operations(backend):
    """Step i of Alg. F.1 as engine/cpu/src_cpp/rpcholesky.cpp computes it, on every backend: the
    pivot
    residual g = K'_ss - sum_{k<i} F'_sk^2 summed in sequence, and F'_si = g * (1 / sqrt(g)),
    bit for bit (K' = diag(sw) K diag(sw); n = 1024 with uniform weights makes sw = 2^-5, so
    F = F' / sw is exact). The array-API loop once took g from the matrix product and divided
    by sqrt(g)."""
    if backend == "strict":
        strict = pytest.importorskip("array_api_strict")
        from stein_coreset._array_api import to_host

        rng = np.random.default_rng(0)
        X = 0.7 + 1.5 * rng.standard_normal((1024, 2))
        dev = strict.Device("device1")
        Kmat = sc.SteinKernel(sc.IMQ(sigma=1.5)).bind(strict.asarray(X, device=dev),
                                                     strict.asarray(-X, device=dev))
        host = to_host
    else:
        Kmat = _stein_matrix(np, n=1024).with_backend(backend)
        host = np.asarray
    piv, F = weighted_rpcholesky(Kmat, rank=30, rng=np.random.default_rng(1))
    Fw = host(F) * 2.0**-5
    for i, s in enumerate(piv):
        kss = host(Kmat.column(int(s)))[s] * 2.0**-5 * 2.0**-5
        g = kss
        for k in range(i):
            g = g - Fw[s, k] * Fw[s, k]
        assert Fw[s, i] == g * (1.0 / np.sqrt(g)), (i, Fw[s, i], g * (1.0 / np.sqrt(g)))


@pytest.mark.parametrize("rank", [7, 60])  # 60: the residual vanishes first (n = 40, r' < r)
def test_factor_rows_with_spare_rows_are_the_factor_and_zeros(xp, rank):
    """weighted_rpcholesky_rows hands Recombination F^T with room for its constant: the same
    pivots and factor (bit for bit) as weighted_rpcholesky, then zero rows, C-ordered, in K's
    namespace and place."""
    from stein_coreset.algorithms.rpcholesky import weighted_rpcholesky_rows

    Kmat = _stein_matrix(xp, n=40)
    w = xp.asarray(np.random.default_rng(1).dirichlet(np.ones(40)))
    piv, F = weighted_rpcholesky(Kmat, w, rank, np.random.default_rng(5))
    for spare in (0, 1, 3):
        piv2, G = weighted_rpcholesky_rows(Kmat, w, rank, np.random.default_rng(5),
                                           spare_rows=spare)
        xp.same_place(G, Kmat.U)
        Gh, r = xp.to_numpy(G), piv.size
        np.testing.assert_array_equal(piv2, piv)
        assert Gh.shape == (r + spare, 40) and Gh.flags.c_contiguous
        np.testing.assert_array_equal(Gh[:r], xp.to_numpy(F).T)
        assert not np.any(Gh[r:])
    assert (piv.size < rank) == (rank == 60)
