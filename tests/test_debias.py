"""Low-rank Debiasing (Alg. 2): Q rounds of Resample -> Weighted RPCholesky -> AMD."""

import math

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset.algorithms import low_rank_debias


@pytest.fixture(scope="module")
def biased_1024():
    rng = np.random.default_rng(0)
    X = 0.7 + 1.5 * rng.standard_normal((1024, 2))
    sk = sc.SteinKernel()
    Km = sk.bind(X, -X)
    return X, Km, Km.dense()


def test_low_rank_debias_returns_simplex_weights(xp, biased_gaussian):
    X, S = biased_gaussian(n=400, seed=1)
    K = sc.SteinKernel(sc.IMQ(sigma=1.5)).bind(xp.asarray(X), xp.asarray(S))
    w = low_rank_debias(K, 20, rng=0)
    xp.same_place(w, K.U)
    wh = xp.to_numpy(w)
    assert wh.shape == (400,) and np.all(wh >= 0) and math.isclose(wh.sum(), 1.0, rel_tol=1e-12)


def test_low_rank_debias_is_seeded():
    rng = np.random.default_rng(3)
    X = 0.7 + 1.5 * rng.standard_normal((300, 2))
    K = sc.SteinKernel(sc.IMQ(sigma=1.5)).bind(X, -X)
    np.testing.assert_array_equal(low_rank_debias(K, 17, rng=5), low_rank_debias(K, 17, rng=5))


def test_low_rank_debias_reaches_iid_level_precision(biased_1024):
    """Thm. 4: on a biased input the LD weights are as close to P as n i.i.d. draws from P
    (here by a wide margin), and far closer than the input itself."""
    X, Km, K = biased_1024
    w, info = low_rank_debias(Km, 32, rng=0, return_info=True)
    ksd_ld = math.sqrt(w @ K @ w)
    Y = np.random.default_rng(100).standard_normal(X.shape)
    ksd_iid = math.sqrt(sc.SteinKernel(Km.base).bind(Y, -Y).dense().mean())
    ksd_input = math.sqrt(K.mean())
    assert ksd_ld < 0.25 * ksd_iid
    assert ksd_ld < 0.01 * ksd_input
    assert info["rank_used"] == [32, 32, 32] and len(info["objective_end"]) == 3


def test_low_rank_debias_rounds_never_increase_surrogate_objective(biased_1024):
    _, Km, _ = biased_1024
    _, info = low_rank_debias(Km, 32, rng=1, return_info=True)
    for f0, f1 in zip(info["objective_start"], info["objective_end"], strict=True):
        assert f1 <= f0


def test_low_rank_debias_close_to_its_full_rank_version(biased_1024):
    """The rank-sqrt(n) surrogate costs at most a small factor in KSD against the same schedule
    run on the exact matrix (rank = n: Weighted RPCholesky then reproduces K)."""
    _, Km, K = biased_1024
    ratios = []
    for seed in range(2):
        w = low_rank_debias(Km, 32, rng=seed)
        wf = low_rank_debias(Km, 1024, rng=seed)
        ratios.append(math.sqrt((w @ K @ w) / (wf @ K @ wf)))
    assert max(ratios) < 2.5, ratios


def test_low_rank_debias_rejects_bad_input(biased_1024):
    _, Km, _ = biased_1024
    with pytest.raises(ValueError, match="rank"):
        low_rank_debias(Km, 0)
    with pytest.raises(ValueError, match="rounds"):
        low_rank_debias(Km, 4, rounds=0)
    with pytest.raises(ValueError, match="steps"):
        low_rank_debias(Km, 4, steps=-2)
    with pytest.raises(TypeError, match="KernelMatrix"):
        low_rank_debias(np.eye(3), 2)


def test_resampled_ksd2_is_exact_on_small_support_and_a_v_statistic_otherwise(biased_1024):
    from stein_coreset.algorithms.debias import resampled_ksd2

    _, Km, K = biased_1024
    rng = np.random.default_rng(3)
    w = rng.random(1024) ** 4
    w /= w.sum()
    assert math.isclose(resampled_ksd2(Km, 1024)(w), float(w @ K @ w), rel_tol=1e-10)
    # s = 100 < nnz: the systematic resample at offset u, by brute force
    u, s = 0.3, 100
    cum = np.cumsum(w)
    idx = np.minimum(np.searchsorted(cum, (u + np.arange(s)) / s * cum[-1], side="right"), 1023)
    c = np.bincount(idx, minlength=1024) / s
    assert math.isclose(resampled_ksd2(Km, s, u)(w), float(c @ K @ c), rel_tol=1e-10)

    # with the low-rank surrogate K' as control variate: w^T K' w + c^T (K - K')_off c, where
    # F comes as rpcholesky gives it (the transpose of a C-ordered array)
    from stein_coreset.algorithms.amd import LowRankPlusDiagonal

    F = np.ascontiguousarray(rng.standard_normal((1024, 8)).T / 40).T
    Kp = LowRankPlusDiagonal(F, np.diag(K).copy())
    E = K - Kp.dense()
    np.fill_diagonal(E, 0.0)
    expected = float(w @ Kp.dense() @ w + c @ E @ c)
    got = resampled_ksd2(Km, s, u, surrogate=Kp)(w)
    assert math.isclose(got, expected, rel_tol=1e-9)


def test_low_rank_debias_stop_rules(biased_1024):
    """stop="fixed" runs the paper's T steps every round; stop="ksd" runs at most T, reports
    what it ran, and its weights are no worse in the true KSD than the fixed rule's (the
    monitor is exact at n = 1024), on each of 3 seeds, up to 5%."""
    _, Km, K = biased_1024
    for seed in range(3):
        wf, fi = low_rank_debias(Km, 32, rng=seed, stop="fixed", return_info=True)
        wk, ki = low_rank_debias(Km, 32, rng=seed, stop="ksd", return_info=True)
        assert fi["steps_run"] == [math.ceil(7 * math.sqrt(1024))] * 3
        assert all(0 < t <= 224 for t in ki["steps_run"]) and len(ki["time_amd_s"]) == 3
        assert float(wk @ K @ wk) <= 1.05 * float(wf @ K @ wf), seed
    with pytest.raises(ValueError, match="stop"):
        low_rank_debias(Km, 4, stop="never")


def test_low_rank_debias_backends_agree_to_rounding():
    """n = 2048, seed 19: the C++ backend ("cpu"), the array-API reference forced on NumPy
    ("xp") and array_api_strict on another device give the same LD weights, the same supports
    and the same AMD steps per round (the monitor's resample of 256 points keeps the test
    fast). AMD on each backend steps on F rounded to float32; before, the array-API loop read
    F in float64 and its weights differed from the C++ ones by ~2e-8 relative. What is left
    is the rounding of the kernel columns (the C++ and array-API formulas sum in different
    orders), 2.5e-15 here; long AMD runs amplify it (1.2e-11 with stop="fixed")."""
    strict = pytest.importorskip("array_api_strict")
    from stein_coreset._array_api import to_host

    rng = np.random.default_rng(19)
    X = 0.7 + 1.5 * rng.standard_normal((2048, 2))
    kern = sc.SteinKernel(sc.IMQ(sigma=1.5))
    K = kern.bind(X, -X)
    dev = strict.Device("device1")
    Ks = kern.bind(strict.asarray(X, device=dev), strict.asarray(-X, device=dev))
    names = (K.backend.name, K.with_backend("xp").backend.name, Ks.backend.name)
    assert names == ("cpu", "xp", "xp")
    w_cpu, info = low_rank_debias(K, 45, rng=19, monitor_points=256, return_info=True)
    for Kb in (K.with_backend("xp"), Ks):
        w, info_b = low_rank_debias(Kb, 45, rng=19, monitor_points=256, return_info=True)
        w = to_host(w)
        assert info_b["steps_run"] == info["steps_run"]
        np.testing.assert_array_equal(w > 0, w_cpu > 0)
        np.testing.assert_allclose(w, w_cpu, rtol=1e-12, atol=0.0)
