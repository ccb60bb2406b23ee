"""The kernel matrix's products on the cpu backend (engine/cpu/src_cpp/soa_kernel*): a column, K w
and w^T K w from the upper triangle, rows evaluated together or alone and every tile give the
same entries bit for bit, for any team size."""

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset.engine.cpu import bridge


def _chain(n, d, seed):
    rng = np.random.default_rng(seed)
    X = 0.7 + 1.5 * rng.standard_normal((n, d))
    return X, -X


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
