"""compress(..., method="st" | "skt" | "kt" | "standard" | "iid"): equal-weighted results."""

import numpy as np
import pytest

import stein_coreset as sc

EQUAL = ["st", "skt", "kt", "standard", "iid"]


@pytest.fixture(scope="module")
def chain():
    rng = np.random.default_rng(0)
    X = 0.7 + 1.5 * rng.standard_normal((1000, 2))  # n not a multiple of m
    return X, -X


@pytest.mark.parametrize("method", EQUAL)
def test_equal_weights_are_multiples_of_one_over_m(method, chain):
    X, S = chain
    m = 24
    res = sc.compress(X, S, size=m, method=method, seed=0)
    w = np.asarray(res.weights)
    assert res.kind == "equal" and res.method == method
    assert abs(w.sum() - 1) < 1e-12
    np.testing.assert_allclose(w * m, np.round(w * m), atol=1e-9)
    assert np.unique(np.asarray(res.indices)).size == len(res) <= m
    assert res.ksd is not None and res.ksd >= 0
    np.testing.assert_array_equal(res.points, X[np.asarray(res.indices)])


@pytest.mark.parametrize("method", ["st", "skt", "kt"])
def test_same_seed_same_result(method, chain):
    X, S = chain
    a = sc.compress(X, S, size=16, method=method, seed=3)
    b = sc.compress(X, S, size=16, method=method, seed=3)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.weights, b.weights)


def test_skt_reports_standard_thinning(chain):
    X, S = chain
    res = sc.compress(X, S, size=8, method="skt", seed=0)  # 8^2 < 1000: Rem. 2 applies
    assert res.info["standard_thin"] is True and res.info["n_thinned"] == 64
    off = sc.compress(X, S, size=8, method="skt", seed=0, standard_thin=False)
    assert off.info["standard_thin"] is False and off.info["n_prime"] == 8 * 128
    big = sc.compress(X, S, size=40, method="skt", seed=0)  # 40^2 >= 1000
    assert big.info["standard_thin"] is False and big.info["n_prime"] == 40 * 32


def test_kt_without_scores_and_its_options(chain):
    X, _ = chain
    res = sc.compress(X, size=16, method="kt", seed=1, delta=0.25, swap_passes=2)
    assert res.ksd is None and abs(float(np.sum(res.weights)) - 1) < 1e-12
    with pytest.raises(TypeError, match="unknown option"):
        sc.compress(X, size=16, method="kt", seed=1, standard_thin=True)


@pytest.mark.parametrize("method", ["st", "skt", "kt"])
def test_results_come_back_in_the_callers_namespace(method, xp, chain):
    X, S = chain
    Xa, Sa = xp.asarray(X[:300]), xp.asarray(S[:300])
    res = sc.compress(Xa, Sa, size=10, method=method, seed=0)
    xp.same_place(res.indices, Xa)
    xp.same_place(res.weights, Xa)
    ref = sc.compress(X[:300], S[:300], size=10, method=method, seed=0)
    np.testing.assert_array_equal(xp.to_numpy(res.indices), ref.indices)


def test_skt_beats_st_beats_standard_on_a_biased_chain(biased_gaussian):
    """Median over 5 seeds, n = 4096, m = 64 (a statistical check)."""
    ksd = {k: [] for k in ("skt", "st", "standard")}
    for seed in range(5):
        X, S = biased_gaussian(n=4096, d=2, seed=seed)
        kern = sc.SteinKernel()  # IMQ, median bandwidth of this chain
        for method in ksd:
            ksd[method].append(
                sc.compress(X, S, size=64, method=method, kernel=kern, seed=seed).ksd
            )
    med = {k: np.median(v) for k, v in ksd.items()}
    assert med["skt"] < med["st"] < med["standard"]
