"""Input diagnostics (Stein's identity on the input and on the debiased result), the n <= d
refusal, and the stages a result reports."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset import datasets
from stein_coreset.diagnostics import check_scores, stein_residuals

MEAN = np.array([1.0, -2.0, 0.5])
COV = np.array([[1.0, 0.3, 0.0], [0.3, 2.0, 0.4], [0.0, 0.4, 0.5]])


@pytest.fixture(scope="module")
def mala_chain():
    """A biased MALA chain with its burn-in (started 8 sds away) on a 3-d Gaussian."""
    target = datasets.Gaussian(MEAN, COV)
    rng = np.random.default_rng(0)
    ch = datasets.mala(target.log_density_and_score, MEAN + 8.0 * rng.standard_normal(3), 4096,
                       0.05, rng=rng)
    return ch.X, ch.S, target


def _suspect(X, S, method="st", size=64):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = sc.compress(X, S, size, method, seed=0)
    flagged = [w for w in caught if issubclass(w.category, sc.DiagnosticWarning)]
    suspect = res.info["diagnostics"]["suspect"]
    assert bool(flagged) == (suspect is not None)
    return suspect, flagged, res


def test_diagnostic_warning_is_an_exported_user_warning():
    assert issubclass(sc.DiagnosticWarning, UserWarning)
    assert "DiagnosticWarning" in sc.__all__


@pytest.mark.parametrize("method", ["st", "skt", "sr", "sc", "lskt"])
def test_correct_scores_of_a_biased_chain_raise_no_warning(mala_chain, method):
    X, S, _ = mala_chain
    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.DiagnosticWarning)
        res = sc.compress(X, S, 64, method, seed=0)
    diag = res.info["diagnostics"]
    assert diag["suspect"] is None
    # the burn-in breaks the identity on the input; the debiased result repairs it
    assert diag["coreset"]["mean_score"] < 0.2 * diag["input"]["mean_score"]


def test_swapped_points_and_scores_are_named(mala_chain):
    X, S, _ = mala_chain
    suspect, flagged, _ = _suspect(S, X)
    assert suspect == "swapped"
    assert "swapped" in str(flagged[0].message)


def test_sign_flipped_scores_are_named(mala_chain):
    X, S, _ = mala_chain
    suspect, flagged, _ = _suspect(X, -S)
    assert suspect == "sign-flipped"
    assert "-grad log p" in str(flagged[0].message)


def test_shuffled_rows_are_named(mala_chain):
    X, S, _ = mala_chain
    perm = np.random.default_rng(1).permutation(len(S))
    suspect, flagged, _ = _suspect(X, S[perm])
    assert suspect == "misaligned"
    assert "rows of S" in str(flagged[0].message)


def test_scores_of_another_target_are_named():
    target = datasets.Gaussian.correlated(d=4, rho=0.8)
    X = target.sample(4096, 0)
    suspect, flagged, _ = _suspect(X, target.score(X - 2.0 * X.std(axis=0)))
    assert suspect in ("wrong target", "swapped")
    assert "another density" in str(flagged[0].message)
    suspect, _, _ = _suspect(X, target.score(X - [8.0, -8.0, 8.0, -8.0]))
    assert suspect == "wrong target"


def test_unbiased_baselines_do_not_judge_their_undebiased_result(biased_gaussian):
    """A biased input's own thinning keeps the bias: no alarm from the result's residuals."""
    X, S = biased_gaussian(n=2048, d=2, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.DiagnosticWarning)
        res = sc.compress(X, S, 32, "standard")
    assert res.info["diagnostics"]["coreset"] is None


def test_stein_residuals_match_their_definitions():
    rng = np.random.default_rng(3)
    X, S = rng.standard_normal((50, 3)), rng.standard_normal((50, 3))
    w = rng.random(50)
    w /= w.sum()
    got = stein_residuals(X, S, w)
    xbar, sbar = w @ X, w @ S
    dx, ds = X - xbar, S - sbar
    var_x, var_s = w @ dx**2, w @ ds**2
    cov = w @ (ds * dx)
    assert got["stein_trace"] == pytest.approx(cov.mean(), rel=1e-12)
    assert got["stein_corr"] == pytest.approx(np.mean(cov / np.sqrt(var_x * var_s)), rel=1e-12)
    assert got["mean_score"] == pytest.approx(np.sqrt(np.mean((sbar**2) * var_x)), rel=1e-12)
    # linear_r2: the weighted least-squares fit of each s_j on (1, x)
    r2 = []
    A = np.column_stack([np.ones(50), X]) * np.sqrt(w)[:, None]
    for j in range(3):
        b = S[:, j] * np.sqrt(w)
        coef = np.linalg.lstsq(A, b, rcond=None)[0]
        resid = b - A @ coef
        r2.append(1.0 - resid @ resid / var_s[j])
    assert got["linear_r2"] == pytest.approx(np.mean(r2), rel=1e-9)
    assert got["n_eff"] == pytest.approx(1.0 / np.sum(w**2), rel=1e-12)


def test_stein_identity_holds_on_exact_draws():
    """E[s] = 0 and E[s (x - mu)^T] = -I under P: the residuals of exact draws."""
    target = datasets.Gaussian(MEAN, COV)
    X = target.sample(20000, 0)
    r = stein_residuals(X, target.score(X))
    assert r["stein_trace"] == pytest.approx(-1.0, abs=0.03)
    assert r["mean_score"] < 0.03
    assert r["linear_r2"] == pytest.approx(1.0, abs=1e-9)
    assert check_scores(X, target.score(X), warn=False)["suspect"] is None


@pytest.mark.parametrize("shape", [(3, 500), (4, 4)])
def test_n_at_most_d_is_refused_with_a_transpose_hint(shape):
    X = np.random.default_rng(0).standard_normal(shape)
    with pytest.raises(ValueError, match=r"transpose \(X\.T"):
        sc.compress(X, -X, size=2, method="skt")


def test_size_and_method_may_be_positional():
    X = np.random.default_rng(0).standard_normal((256, 2))
    a = sc.compress(X, -X, 16, "skt", seed=0)
    b = sc.compress(X, -X, size=16, method="skt", seed=0)
    np.testing.assert_array_equal(a.indices, b.indices)
    with pytest.raises(TypeError, match="'size'"):
        sc.compress(X, -X, method="skt")
    with pytest.raises(TypeError, match="'method'"):
        sc.compress(X, -X, 16)


# ---- stages ------------------------------------------------------------------------------


def _ksd(X, S, idx, w, res):
    return sc.ksd(X[idx], S[idx], w, kernel=res.info["stein_kernel"])


def test_skt_stages_are_the_ksds_of_their_coresets(mala_chain):
    X, S, _ = mala_chain
    X, S = X[:1024], S[:1024]
    m = 32
    res = sc.compress(X, S, m, "skt", seed=0)
    st = res.info["stages"]
    assert set(st) == {"stein_thinning", "kt_split", "baseline", "kt_swap", "winner"}
    assert st["winner"] in ("kt_split", "baseline")
    # the result is the swapped winner, and its KSD is the one reported
    assert st["kt_swap"]["ksd"] == pytest.approx(res.ksd, rel=1e-8)
    assert st["kt_swap"]["ksd"] == pytest.approx(
        st["kt_swap"]["ksd_" + st["winner"]], rel=1e-12)
    # Stein thinning's stages, recomputed from their definitions (n' = 1024 greedy steps;
    # the baseline is its first m picks)
    kern = res.info["stein_kernel"]
    full = sc.compress(X, S, st["stein_thinning"]["picks"], "st", kernel=kern)
    assert st["stein_thinning"]["ksd"] == pytest.approx(full.ksd, rel=1e-8)
    first = sc.compress(X, S, m, "st", kernel=kern)
    assert st["baseline"]["ksd"] == pytest.approx(first.ksd, rel=1e-8)
    assert st["kt_swap"]["ksd_baseline"] <= st["baseline"]["ksd"] * (1 + 1e-12)


@pytest.mark.parametrize("method, first, last", [
    ("sr", "stein_thinning", "recombination"), ("sc", "stein_thinning", "cholesky"),
    ("lsr", "low_rank_debias", "recombination"), ("lsc", "low_rank_debias", "cholesky"),
])
def test_weighted_stages_report_the_debiasing_and_the_result(mala_chain, method, first, last):
    X, S, _ = mala_chain
    X, S = X[:1024], S[:1024]
    res = sc.compress(X, S, 32, method, seed=0)
    st = res.info["stages"]
    assert "winner" not in st  # nothing competed: the thinned result is returned
    assert st[last]["ksd"] == pytest.approx(res.ksd, rel=1e-8)
    assert st[last]["size"] == len(res)
    assert st[first]["ksd"] > 0 and st[first]["size"] >= len(res)


def test_lskt_stages_name_the_compress_candidate(mala_chain):
    X, S, _ = mala_chain
    res = sc.compress(X[:1024], S[:1024], 32, "lskt", seed=0)
    st = res.info["stages"]
    assert st["winner"] in ("kt_compress", "baseline")
    assert st["kt_swap"]["ksd"] == pytest.approx(res.ksd, rel=1e-8)


def test_sign_flip_is_caught_by_the_trace_where_coordinates_correlate_weakly():
    """A strongly correlated target: corr(s_j, x_j) is small (-0.14) but Stein's trace is -1,
    so the flipped scores' trace (+1) names them (the Goodwin posterior is such a case)."""
    target = datasets.Gaussian.correlated(d=4, rho=0.99)
    X = target.sample(4096, 0)
    r = stein_residuals(X, -target.score(X))
    assert r["stein_corr"] < 0.2 < r["stein_trace"]
    assert check_scores(X, -target.score(X), warn=False)["suspect"] == "sign-flipped"
    assert check_scores(X, target.score(X), warn=False)["suspect"] is None


def test_few_rows_are_not_called_misaligned():
    """Below 20 d rows the linear fit's R^2 is not judged (a reduce node of 32 debiased
    points, d = 2, explains 100% of S and was called 'unrelated rows')."""
    X = np.random.default_rng(0).standard_normal((32, 2))
    assert check_scores(X, -X, warn=False)["suspect"] is None
    perm = np.random.default_rng(1).permutation(2000)
    X = np.random.default_rng(2).standard_normal((2000, 2))
    assert check_scores(X, -X[perm], warn=False)["suspect"] == "misaligned"


def test_distributed_tasks_raise_no_diagnostic_warning_for_a_burn_in_block():
    dask = pytest.importorskip("dask")
    from stein_coreset import distributed

    target = datasets.Gaussian(MEAN, COV)
    rng = np.random.default_rng(0)
    ch = datasets.mala(target.log_density_and_score, MEAN + 30.0, 1024, 0.05, rng=rng)
    with dask.config.set(scheduler="synchronous"), warnings.catch_warnings():
        warnings.simplefilter("error", sc.DiagnosticWarning)
        distributed.compress([ch.X[:128], ch.X[128:]], [ch.S[:128], ch.S[128:]], size=16,
                             method="st", seed=0)


def test_an_intermediate_stage_above_the_support_cap_reports_no_ksd(mala_chain, monkeypatch):
    from stein_coreset.algorithms import weights

    X, S, _ = mala_chain
    monkeypatch.setattr(weights, "STAGE_KSD_MAX_SUPPORT", 10)
    res = sc.compress(X[:1024], S[:1024], 32, "skt", seed=0)
    st = res.info["stages"]
    assert st["stein_thinning"]["ksd"] is None and st["stein_thinning"]["size"] > 10
    assert st["kt_swap"]["ksd"] == pytest.approx(res.ksd, rel=1e-8)
    assert "stein_thinning n/a" in res.summary()
