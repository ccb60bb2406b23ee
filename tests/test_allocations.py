"""Every dense allocation is checked before it is made: the Stein kernel's and a base
kernel's Gram matrices, ``KernelMatrix.dense`` / ``block``, ``Coreset.dense``; and ``mmd`` /
``energy_distance`` refuse more pair evaluations than ``max_pairs`` before they start.

The machine's memory is monkeypatched down (``_validation.physical_memory``) so a refusal is
tested on a small input: if the check is removed the call succeeds on a few kilobytes instead
of filling the machine, and the test fails.
"""

import time

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset import _validation

N = 300  # a 300 x 300 float64 matrix: 720 kB, refused below
MEMORY = 100_000  # bytes the patched machine has
GIB_MSG = r"would need [\d.e+-]+ GiB, more than this machine's [\d.e+-]+ GiB of memory"


@pytest.fixture
def small_machine(monkeypatch):
    monkeypatch.setattr(_validation, "physical_memory", lambda: MEMORY)
    monkeypatch.setattr(_validation, "SMALL_BUFFER", 0)


@pytest.fixture
def sample(xp):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, 2))
    return xp, xp.asarray(X), xp.asarray(-X)


def test_stein_kernel_matrix_is_refused_before_allocation(sample, small_machine):
    xp, X, S = sample
    with pytest.raises(ValueError, match=r"^X: the dense Stein kernel matrix of n = 300 points "
                       r"\(300 x 300 float64\) " + GIB_MSG):
        sc.SteinKernel().matrix(X, S)
    with pytest.raises(ValueError, match=r"^X, Y: the Stein kernel matrix k_p\(X, Y\) \(300 x "
                       r"10 float64, about 8 such arrays while it is formed\) " + GIB_MSG):
        sc.SteinKernel(sc.IMQ(1.0)).matrix(X, S, X[:10, ...], S[:10, ...])


def test_kernel_matrix_dense_and_block_are_refused_before_allocation(sample, small_machine):
    xp, X, S = sample
    K = sc.SteinKernel(sc.IMQ(1.0)).bind(X, S)
    with pytest.raises(ValueError, match=r"^X: the dense kernel matrix of n = 300 points .*"
                       + GIB_MSG):
        K.dense()
    rows = np.arange(N)
    with pytest.raises(ValueError, match=r"^rows: the kernel block K\.block\(rows, cols\) \(300 x "
                       r"300 float64.*" + GIB_MSG):
        K.block(rows)
    with pytest.raises(ValueError, match=r"^rows, cols: the kernel block .*\(300 x 200 float64"):
        K.block(rows, np.arange(200))
    assert K.block(rows[:10], np.arange(10)).shape == (10, 10)  # small blocks still work


@pytest.mark.parametrize("base", [sc.IMQ(1.0), sc.Gaussian(1.0), sc.Matern(1.0, nu=1.5)],
                         ids=lambda b: type(b).__name__)
def test_base_kernel_gram_is_refused_before_allocation(sample, small_machine, base):
    xp, X, _ = sample
    name = type(base).__name__
    with pytest.raises(ValueError, match=rf"^X: the Gram matrix of {name} \(300 x 300 float64, "
                       r"about 6 such arrays while it is formed\) " + GIB_MSG):
        base(X)
    with pytest.raises(ValueError, match=rf"^X, Y: the Gram matrix of {name} \(300 x 100 "):
        base(X, X[:100, ...])
    assert base(X[:5, ...]).shape == (5, 5)


def test_the_refusals_come_at_once_at_a_size_no_machine_holds():
    """n = 3 * 10^6 points: a 72 TB matrix, refused within a second (the check only)."""
    X = np.zeros((3_000_000, 1))
    X[1] = 1.0
    t = time.perf_counter()
    for call in (lambda: sc.IMQ(1.0)(X), lambda: sc.SteinKernel(sc.IMQ(1.0)).matrix(X, -X),
                 lambda: sc.SteinKernel(sc.IMQ(1.0)).bind(X, -X).dense()):
        with pytest.raises(ValueError, match=r"^X: .*would need [\d.]+e\+0[45] GiB"):
            call()
    assert time.perf_counter() - t < 5.0


@pytest.fixture
def coreset():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 2))
    return sc.compress(X, -X, size=5, method="st", seed=0)


@pytest.mark.parametrize("n", [64.9, "64", True, None, np.float64(64.0)])
def test_coreset_dense_refuses_a_non_integer_n(coreset, n):
    with pytest.raises(TypeError, match=r"^n must be an integer"):
        coreset.dense(n)


def test_coreset_dense_refuses_a_vector_larger_than_memory(coreset):
    with pytest.raises(ValueError, match=r"^n: the dense weight vector over n = 10000000000000 "
                       r"points would need 7.45e\+04 GiB"):
        coreset.dense(10**13)
    w = coreset.dense(np.int64(64))  # NumPy integers are integers
    assert w.shape == (64,) and np.isclose(w.sum(), 1.0)


def test_resample_equal_refuses_a_bad_seed_even_when_nothing_is_drawn(coreset):
    assert coreset.kind == "equal"
    with pytest.raises(TypeError, match=r"^seed must be None, a non-negative integer"):
        coreset.resample_equal(seed="x")
    with pytest.raises(TypeError, match=r"^seed must be"):
        coreset.resample_equal(size=3, seed=1.5)
    assert coreset.resample_equal(seed=0) is coreset


@pytest.mark.parametrize("fn", [sc.mmd, sc.energy_distance], ids=["mmd", "energy_distance"])
def test_two_sample_distances_refuse_more_pairs_than_max_pairs(fn):
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((30, 2)), rng.standard_normal((20, 2))
    name = fn.__name__
    with pytest.raises(ValueError, match=rf"^X, Y: {name} of n = 30 and n' = 20 points needs "
                       r"\(n \+ n'\)\^2 = 2.5e\+03 pair evaluations .* max_pairs = 2.4e\+03; "
                       r"subsample X and Y"):
        fn(X, Y, max_pairs=2400)
    assert fn(X, Y, max_pairs=2500) == fn(X, Y, max_pairs=None) >= 0
    with pytest.raises(TypeError, match=r"^max_pairs must be an integer"):
        fn(X, Y, max_pairs=2.5e3)
    with pytest.raises(ValueError, match=r"^max_pairs must be >= 1"):
        fn(X, Y, max_pairs=0)


@pytest.mark.parametrize(("fn", "n", "limit"), [(sc.mmd, 70_000, r"1.72e\+10"),
                                              (sc.energy_distance, 45_000, r"4.29e\+09")],
                         ids=["mmd", "energy_distance"])
def test_two_sample_distances_at_a_size_of_minutes_are_refused_at_once(fn, n, limit,
                                                                      monkeypatch):
    """n = n' at a minutes-long size: refused by the default max_pairs."""
    from stein_coreset import discrepancy

    def started(*a, **k):  # without the check the test fails here, not minutes later
        raise AssertionError("the pair sums started")

    monkeypatch.setattr(discrepancy, "_weighted_pair_sum", started)
    monkeypatch.setattr(discrepancy.KernelMatrix, "quad", started)
    monkeypatch.setattr(discrepancy, "median_bandwidth_of", lambda *a, **k: 1.0)
    X = np.zeros((n, 1))
    X[::2] = 1.0
    t = time.perf_counter()
    with pytest.raises(ValueError, match=f"max_pairs = {limit}"):
        fn(X, X + 0.5)
    assert time.perf_counter() - t < 5.0
