"""compress(method="lskt" | "compresspp"): Low-rank SKT (Alg. 3) and the KT-Compress++ baseline."""

import math

import numpy as np
import pytest

import stein_coreset as sc


@pytest.fixture(scope="module")
def biased_4d():
    rng = np.random.default_rng(0)
    X = 0.7 + 1.5 * rng.standard_normal((2**14, 4))
    return X, -X


@pytest.mark.parametrize("method", ["lskt", "compresspp"])
def test_lowrank_methods_return_equal_weights(method, biased_gaussian):
    X, S = biased_gaussian(n=1024, seed=1)
    res = sc.compress(X, S, size=32, method=method, seed=0)
    assert res.kind == "equal" and res.method == method
    assert len(res) <= 32 and np.unique(res.indices).size == len(res)
    counts = res.weights * 32
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)
    assert math.isclose(res.weights.sum(), 1.0)
    assert res.info["size_used"] == 32 and res.info["n_prime"] == 1024
    assert res.ksd is not None and res.ksd > 0


@pytest.mark.parametrize("method", ["lskt", "compresspp"])
def test_lowrank_methods_are_seeded(method, biased_gaussian):
    X, S = biased_gaussian(n=1024, seed=2)
    a = sc.compress(X, S, size=32, method=method, seed=7)
    b = sc.compress(X, S, size=32, method=method, seed=7)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.weights, b.weights)


@pytest.mark.slow
def test_lskt_close_to_skt_on_a_biased_chain(biased_4d):
    """n = 2^14, d = 4, m = 128: KSD(LSKT) within 1.5x of KSD(SKT)."""
    X, S = biased_4d
    lskt = sc.compress(X, S, size=128, method="lskt", seed=0)
    skt = sc.compress(X, S, size=128, method="skt", seed=0)
    st = sc.compress(X[::128], S[::128], size=128, method="standard")
    assert lskt.ksd < 1.5 * skt.ksd, (lskt.ksd, skt.ksd)
    assert lskt.ksd < 0.1 * st.ksd
    # default rank ceil(n^0.4) = 49 (LD_DEFAULT_TAU); rank= or tau=0.5 restores 128
    assert lskt.info["rank"] == 49 and lskt.info["rounds"] == 3 and lskt.info["steps"] == 896


def test_lskt_keeps_any_size_and_standard_thins(biased_gaussian):
    """size = 40 = 5 * 8 is kept: 40^2 < n, so Rem. 2 thins to 1600 first, and KT-Compress++
    runs on n' = 5 * 4^5 >= 1600 resampled points with leaves of 5 * 4^3 (oversampling
    2^3 sqrt(5) >= 2^4)."""
    X, S = biased_gaussian(n=3000, seed=3)
    res = sc.compress(X, S, size=40, method="lskt", seed=0)
    assert res.draws.shape[0] == 40 and len(res) <= 40
    assert res.info["size_used"] == 40 and res.info["standard_thin"]
    assert res.info["n_thinned"] == 1600 and res.info["n_prime"] == 5 * 4**5
    assert res.info["g"] == 3
    off = sc.compress(X, S, size=40, method="lskt", seed=0, standard_thin=False)
    assert not off.info["standard_thin"] and off.info["n_prime"] == 5 * 4**5


@pytest.mark.parametrize("n", [100, 1000, 3000, 4096, 70000])
@pytest.mark.parametrize("size", [1, 2, 3, 7, 12, 40, 64, 100, 181, 256])
@pytest.mark.parametrize("g", [0, 2, 4])
def test_compresspp_plan_fits_any_size(n, size, g):
    """The plan's sizes satisfy what KT-Compress++ needs: n' = c 4^J covers the (thinned)
    input, the COMPRESS output c 2^(g'+J) (or n' without levels) is m times a power of two,
    and the oversampling 2^g' sqrt(c) is at least the requested 2^g."""
    from stein_coreset.algorithms.compresspp import _layout, _log2_ratio, compresspp_plan

    if size > n:
        return
    m, sub, n_prime, g_used, info = compresspp_plan(n, size, g=g)
    assert m == size == info["size_used"]
    n_used = n if sub is None else sub.size
    assert n_prime >= n_used and n_prime < 4 * max(n_used, m)
    c, J = _layout(n_prime, m)
    assert c % 2 == 1 and m % c == 0
    assert c * 4**g_used >= 4**g
    out = c * 2 ** (g_used + J) if J > g_used else n_prime
    assert _log2_ratio(out, m) is not None


def test_lskt_at_an_odd_size_is_as_good_as_skt(biased_gaussian):
    """At a size that is not a power of two, LSKT keeps it (it used to round 45 down to 32,
    a KSD about 45/32 times SKT's); its KSD stays within 1.3x of SKT's at the same size."""
    ratios = []
    for seed in range(3):
        X, S = biased_gaussian(n=4096, d=2, seed=seed)
        skt = sc.compress(X, S, size=45, method="skt", seed=seed)
        lskt = sc.compress(X, S, size=45, method="lskt", seed=seed)
        assert lskt.draws.shape[0] == 45
        ratios.append(lskt.ksd / skt.ksd)
    assert float(np.median(ratios)) <= 1.3, ratios


def test_lskt_n_not_a_power_of_four_resamples_up(biased_gaussian):
    X, S = biased_gaussian(n=700, seed=4)
    res = sc.compress(X, S, size=32, method="lskt", seed=0, rounds=2, steps=50)
    assert res.info["n_prime"] == 1024 and res.info["rounds"] == 2 and res.info["steps"] == 50
    assert len(res) <= 32 and res.indices.max() < 700


def test_lskt_large_size_raises_oversampling(biased_gaussian):
    """size 256 from n' = 1024 with g = 1: COMPRESS would give 2^1 sqrt(n') = 64 < 256 points,
    so the oversampling is raised to g = 3 (2^3 * 32 = 256)."""
    X, S = biased_gaussian(n=1024, seed=5)
    res = sc.compress(X, S, size=256, method="lskt", seed=0, g=1)
    assert res.info["size_used"] == 256 and res.info["g"] == 3
    assert len(res) <= 256


def test_compresspp_beats_iid_on_unbiased_input():
    rng = np.random.default_rng(6)
    X = rng.standard_normal((4096, 2))
    base = sc.Gaussian(1.0)
    res = sc.compress(X, size=64, method="compresspp", kernel=base, seed=0)
    assert res.info["swap_target"] == "input" and res.info["compress_size"] == 1024
    iid = sc.compress(X, size=64, method="iid", seed=0)
    m_cpp = sc.mmd(X, res.points, wy=res.weights, kernel=base)
    m_iid = sc.mmd(X, iid.points, wy=iid.weights, kernel=base)
    assert m_cpp < 0.4 * m_iid
    for target in ("compress", "input_all"):
        r = sc.compress(X[:1024], size=32, method="compresspp", kernel=base, seed=0,
                        swap_target=target)
        assert r.info["swap_target"] == target and len(r) <= 32


def test_lowrank_methods_progress_bars(biased_gaussian, capsys, monkeypatch):
    from stein_coreset import _progress

    monkeypatch.setattr(_progress, "DELAY_S", 0.0)  # these stages are short; draw them anyway
    X, S = biased_gaussian(n=256, seed=7)
    sc.compress(X, S, size=16, method="lskt", seed=0, progress=True)
    err = capsys.readouterr().err
    assert "low-rank debiasing" in err and "AMD" in err and "RPCholesky" in err


@pytest.mark.parametrize("method", ["lskt", "compresspp"])
def test_lowrank_methods_in_callers_namespace(method, xp, biased_gaussian):
    X, S = biased_gaussian(n=256, seed=8)
    res = sc.compress(xp.asarray(X), xp.asarray(S), size=16, method=method, seed=0)
    xp.same_place(res.points, xp.asarray(X))
    xp.same_place(res.weights, xp.asarray(X))
    ref = sc.compress(X, S, size=16, method=method, seed=0)
    if method == "compresspp":  # the same decisions in every namespace
        np.testing.assert_array_equal(xp.to_numpy(res.indices), ref.indices)
    else:  # NumPy runs AMD in C++ on a float32 factor: the same up to near-ties
        assert abs(res.ksd - ref.ksd) <= 0.2 * ref.ksd


def test_lowrank_methods_reject_bad_options(biased_gaussian):
    X, S = biased_gaussian(n=256, seed=9)
    with pytest.raises(ValueError, match="weights"):
        sc.compress(X, S, size=16, method="lskt", weights=np.full(256, 1 / 256))
    with pytest.raises(ValueError, match="swap_target"):
        sc.compress(X, size=16, method="compresspp", swap_target="P")
    with pytest.raises(ValueError, match="g must"):
        sc.compress(X, S, size=16, method="lskt", g=-2)
    with pytest.raises(TypeError, match="unknown option"):
        sc.compress(X, S, size=16, method="lskt", bogus=1)
    with pytest.raises(ValueError, match="debiased"):
        sc.compress(X, size=16, method="lskt")


@pytest.mark.parametrize("method", ["lskt", "lsr", "lsc"])
def test_low_rank_methods_report_stages_and_take_a_stop_rule(method):
    rng = np.random.default_rng(0)
    X = 0.5 + rng.standard_normal((600, 2))
    res = sc.compress(X, -X, size=32, method=method, tau=0.4, seed=1)
    steps = res.info["ld_steps_run"]
    assert len(steps) == 3 and all(0 < t <= math.ceil(7 * math.sqrt(600)) for t in steps)
    assert res.info["time_rpcholesky_s"] >= 0 and res.info["time_amd_s"] > 0
    fixed = sc.compress(X, -X, size=32, method=method, tau=0.4, seed=1, stop="fixed")
    assert fixed.info["ld_steps_run"] == [math.ceil(7 * math.sqrt(600))] * 3
    with pytest.raises(ValueError, match="stop"):
        sc.compress(X, -X, size=16, method=method, stop="sometimes")
