"""The median bandwidth on the engine (engine/cpu/src_cpp/pairwise.hpp): the C++ evaluation is
the NumPy definition bit for bit, for any team and namespace."""

import numpy as np
import pytest

import stein_coreset as sc


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


@pytest.mark.parametrize("c", [1e160, 1e300, 1e-300, 2.0**-1070 * 2**40])
def test_median_bandwidth_scales_with_the_points_at_any_scale(c):
    # before: inf at 1e160 (the squared distances overflowed), and "the points are (nearly)
    # all equal" at 1e-300 (they underflowed to 0)
    X = np.random.default_rng(0).standard_normal((500, 2))
    assert sc.median_bandwidth(c * X) == pytest.approx(c * sc.median_bandwidth(X), rel=1e-12)


def test_median_bandwidth_is_unchanged_bit_for_bit_at_ordinary_scales():
    X = np.random.default_rng(1).standard_normal((300, 3))
    for c in (1.0, 2.0**100, 2.0**-100, 1e50):
        m = sc.median_bandwidth(c * X)
        # the value the median of the pairwise distances gives directly
        d = np.sqrt(((c * X[:, None, :] - c * X[None, :, :]) ** 2).sum(-1))
        assert m == np.median(d[np.triu_indices(300, 1)])


@pytest.mark.parametrize("c, needle", [
    (1e160, r"X: the median pairwise distance of the points is 1\.6\de\+160, outside"),
    (1e-300, r"X: the median pairwise distance of the points is 1\.6\de-300, outside"),
])
def test_a_kernel_at_a_median_bandwidth_out_of_range_names_X(c, needle):
    X = np.random.default_rng(0).standard_normal((500, 2))
    with pytest.raises(ValueError, match=needle):
        sc.ksd(c * X, -X / c, kernel=sc.SteinKernel(M=None))


def test_a_variance_that_underflows_is_not_taken_for_a_constant_coordinate():
    # before: M = 'scale' kept scale 1 for it, and the median bandwidth then said "the points
    # are (nearly) all equal"
    X = np.random.default_rng(0).standard_normal((500, 2))
    with pytest.raises(ValueError, match=r"X: the variance of its coordinate 0 underflows"):
        sc.compress(1e-300 * X, -X / 1e-300, size=8, method="st", seed=0)
    Y = X.copy()
    Y[:, 1] = 3.0  # a constant coordinate still keeps scale 1
    assert len(sc.compress(Y, -Y, size=8, method="st", seed=0)) == 8
