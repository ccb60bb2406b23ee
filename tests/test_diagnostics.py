"""Input diagnostics (whether S is a score field of X; Stein's identity on the input and on the
debiased result), the switch that skips them, the n <= d refusal, and the stages a result
reports."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset import datasets, diagnostics
from stein_coreset.diagnostics import check_scores, score_field_test, stein_residuals

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
    assert got["mean_score_sd"] == pytest.approx(np.sqrt(np.mean(sbar**2 / var_s)), rel=1e-12)
    assert got["mean_score_sd_swapped"] == pytest.approx(np.sqrt(np.mean(xbar**2 / var_x)),
                                                         rel=1e-12)
    t = (ds * dx).mean(axis=1)  # per row, the trace's terms
    t_var = w @ (t - w @ t) ** 2
    assert got["stein_trace_se"] == pytest.approx(np.sqrt(t_var / got["n_eff"]), rel=1e-12)
    assert got["n_eff"] == pytest.approx(1.0 / np.sum(w**2), rel=1e-12)


def test_stein_identity_holds_on_exact_draws():
    """E[s] = 0 and E[s (x - mu)^T] = -I under P: the residuals of exact draws."""
    target = datasets.Gaussian(MEAN, COV)
    X = target.sample(20000, 0)
    r = stein_residuals(X, target.score(X))
    assert r["stein_trace"] == pytest.approx(-1.0, abs=0.03)
    assert r["mean_score"] < 0.03
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
    """A reduce node of 32 debiased points (d = 2) once was called 'unrelated rows'; below
    100 distinct rows the nearest-neighbour test does not judge (40 correct rows of a banana
    looked unrelated to it)."""
    X = np.random.default_rng(0).standard_normal((32, 2))
    assert check_scores(X, -X, warn=False)["suspect"] is None
    assert check_scores(X, -X[::-1], warn=False)["suspect"] is None  # too few to judge
    X, S = _banana(40, 1)  # 40 correct rows: nn_rank_z 3.6, nn_sign_z 3.8
    assert check_scores(X, S, warn=False)["suspect"] is None
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


# ---- the score-field test: target-agnostic, no false alarm on curved targets ----------------


def _banana(n, seed, b=0.1, a=10.0):
    """Exact draws of Haario's twisted Gaussian and their scores (a curved target, whose score
    is far from linear: corr(s_j, x_j) is about -0.05)."""
    rng = np.random.default_rng(seed)
    x1 = a * rng.standard_normal(n)
    X = np.column_stack([x1, rng.standard_normal(n) - b * (x1**2 - a**2)])
    u = X[:, 1] + b * (X[:, 0] ** 2 - a**2)
    return X, np.column_stack([-X[:, 0] / a**2 - 2.0 * b * X[:, 0] * u, -u])


def _funnel(n, seed, d=6, sv=3.0):
    """Exact draws of Neal's funnel (v, x_1..x_{d-1}), a hierarchical target, and its scores."""
    rng = np.random.default_rng(seed)
    v = sv * rng.standard_normal(n)
    x = rng.standard_normal((n, d - 1)) * np.exp(0.5 * v)[:, None]
    S = np.column_stack([-v / sv**2 - 0.5 * (d - 1) + 0.5 * np.sum(x**2, 1) * np.exp(-v),
                         -x * np.exp(-v)[:, None]])
    return np.column_stack([v, x]), S


@pytest.mark.parametrize("make", [_banana, _funnel], ids=["banana", "funnel"])
@pytest.mark.parametrize("method", ["st", "skt", "sr"])
def test_exact_draws_of_curved_and_hierarchical_targets_raise_no_warning(make, method):
    """The linear rule called these 'misaligned' in 36 of 36 runs; the better the sample, the
    likelier the alarm."""
    X, S = make(2048, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.DiagnosticWarning)
        res = sc.compress(X, S, 32, method, seed=0)
    assert res.info["diagnostics"]["suspect"] is None
    assert res.info["diagnostics"]["field"]["nn_rank_z"] > 10


@pytest.mark.parametrize("make", [_banana, _funnel], ids=["banana", "funnel"])
def test_shuffled_and_sign_flipped_scores_of_curved_targets_are_named(make):
    X, S = make(2048, 1)
    perm = np.random.default_rng(2).permutation(len(S))
    assert check_scores(X, S[perm], warn=False)["suspect"] == "misaligned"
    assert check_scores(X, -S, warn=False)["suspect"] == "sign-flipped"


def test_score_field_figures_are_one_half_for_unrelated_rows_and_near_one_for_a_field():
    X, S = _banana(4096, 3)
    r = score_field_test(X, S)
    assert r["nn_rank"] > 0.85 and r["nn_sign"] > 0.85 and r["nn_queries"] == 128
    z = [score_field_test(X, S[np.random.default_rng(k).permutation(4096)]) for k in range(8)]
    assert all(abs(f["nn_rank_z"]) < 4 and abs(f["nn_sign_z"]) < 4 for f in z)
    assert abs(np.mean([f["nn_rank"] for f in z]) - 0.5) < 0.02


def test_score_field_test_is_invariant_to_units_and_deterministic():
    X, S = _funnel(1500, 4)
    D = np.array([1e-3, 1.0, 50.0, 2.0, 1e4, 0.5])
    assert score_field_test(X * D, S / D) == pytest.approx(score_field_test(X, S))
    assert score_field_test(X, S) == score_field_test(X, S)


def test_a_repeated_state_with_another_score_is_misaligned():
    """A chain repeats its state after a rejection; rows of S shifted by one give the repeat
    the score of the state before, which no function does."""
    target = datasets.Gaussian(MEAN, COV)
    ch = datasets.mala(target.log_density_and_score, MEAN, 1500, 1.5, rng=0)
    assert 0.2 < ch.acceptance_rate < 0.8
    assert check_scores(ch.X, ch.S, warn=False)["field"]["repeat_conflicts"] == 0
    out = check_scores(ch.X, np.roll(ch.S, 1, axis=0), warn=False)
    assert out["field"]["repeat_conflicts"] >= 0.1 * out["field"]["repeats"] > 0
    assert out["suspect"] == "misaligned"


def test_a_stuck_chain_is_not_judged_by_the_neighbour_test():
    X = np.repeat(np.array([[0.5, 1.0], [0.7, 1.1]]), 50, axis=0)
    out = check_scores(X, -X, warn=False)
    assert out["field"]["nn_queries"] == 0 and out["suspect"] is None


def test_diagnostics_false_skips_the_checks_and_says_so(mala_chain):
    X, S, _ = mala_chain
    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.DiagnosticWarning)
        res = sc.compress(X, -S, 16, "st", seed=0, diagnostics=False)  # sign-flipped: silent
    assert res.info["diagnostics"] == {"checked": False, "input": None, "field": None,
                                       "coreset": None, "suspect": None}
    assert "WARNING" not in res.summary()
    assert sc.compress(X, S, 16, "st", seed=0).info["diagnostics"]["checked"] is True
    with pytest.raises(TypeError, match="diagnostics"):
        sc.compress(X, S, 16, "st", diagnostics="no")


def test_warnings_point_to_what_the_checks_cannot_see(mala_chain):
    X, S, _ = mala_chain
    _, flagged, _ = _suspect(X, -S)
    assert "What cannot be detected" in str(flagged[0].message)


def test_the_checks_form_no_d_by_d_matrix(monkeypatch):
    """Issue 56: two pinv/eigh of the d x d covariance took 55 s at d = 2000 and could not be
    interrupted; the checks are now O(n d) and one compiled neighbour search on at most 512
    rows."""
    def refuse(*a, **k):
        raise AssertionError("a d x d factorisation")

    for name in ("pinv", "eigh", "inv", "solve", "lstsq", "svd"):
        monkeypatch.setattr(np.linalg, name, refuse)
    X = np.random.default_rng(0).standard_normal((300, 120))
    out = check_scores(X, -X, np.full(10, 0.1), np.arange(10), warn=False)
    assert out["suspect"] is None and out["coreset"] is not None


def test_the_rules_table_quotes_the_constants_in_force(monkeypatch):
    assert "`nn_rank_z` < 4 " in diagnostics.thresholds()
    monkeypatch.setattr(diagnostics, "MISALIGNED_Z", 5.5)
    assert "`nn_rank_z` < 5.5 " in diagnostics.thresholds()


@pytest.mark.slow
def test_ctrl_c_reaches_the_checks_within_a_second_at_d_2000(tmp_path):
    """SIGINT one second into check_scores at d = 2000 raises KeyboardInterrupt within 1 s."""
    import signal
    import subprocess
    import sys
    import time

    # Python's own SIGINT handler, as in a terminal: a test run started in the background
    # (`cmd &` without job control) hands its children SIGINT ignored, and the loop never ended;
    # the loop is bounded (60 s) so that a lost signal fails the test instead of hanging it
    code = (
        "import signal, time, numpy as np\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from stein_coreset.diagnostics import check_scores\n"
        "X = np.random.default_rng(0).standard_normal((4000, 2000))\n"
        "print('go', flush=True)\n"
        "t_end = time.monotonic() + 60.0\n"
        "try:\n"
        "    while time.monotonic() < t_end:\n"
        "        check_scores(X, -X, warn=False)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         cwd=tmp_path)
    try:
        assert p.stdout.readline().strip() == "go"
        time.sleep(1.0)
        t0 = time.perf_counter()
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=90)
        latency = time.perf_counter() - t0
    finally:
        p.kill()
        p.wait()
    assert "interrupted" in out
    assert latency < 1.0


@pytest.mark.slow
@pytest.mark.parametrize("make", [_banana, _funnel], ids=["banana", "funnel"])
def test_no_false_alarm_and_every_shuffle_caught_over_seeds(make):
    for seed in range(10):
        X, S = make(1024, 100 + seed)
        assert check_scores(X, S, warn=False)["suspect"] is None
        perm = np.random.default_rng(seed).permutation(len(S))
        assert check_scores(X, S[perm], warn=False)["suspect"] == "misaligned"


def test_a_noisy_trace_from_few_draws_of_a_curved_target_is_no_sign_flip():
    """64 exact draws of a banana: Stein's trace (-1 under P) comes out at +0.77 with correct
    scores, s_1 x_1 being heavy-tailed; the rule asks for 3 standard errors."""
    X, S = _banana(64, 3)
    out = check_scores(X, S, warn=False)
    assert out["input"]["stein_trace"] > 0.5 and out["input"]["stein_corr"] > 0
    assert out["input"]["stein_trace"] < 3.0 * out["input"]["stein_trace_se"]
    assert out["suspect"] is None


def test_a_short_chain_near_zero_is_not_called_swapped(monkeypatch):
    """A chain that covers a corner of a centred target has its mean score far from 0 and
    its mean point near 0 -- the swap's signature -- but a Stein trace near 0, not -1."""
    target = datasets.Gaussian.correlated(d=10, rho=0.9)
    rng = np.random.default_rng(5)
    ch = datasets.mala(target.log_density_and_score, target.sample(1, rng)[0], 200, 0.01,
                       precond=target.cov, rng=rng)
    out = check_scores(ch.X, ch.S, warn=False)
    assert out["suspect"] is None and out["input"]["stein_trace"] > diagnostics.SWAP_TRACE
    monkeypatch.setattr(diagnostics, "SWAP_TRACE", 10.0)
    assert check_scores(ch.X, ch.S, warn=False)["suspect"] == "swapped"


def test_the_checks_read_a_column_major_input_as_they_read_a_row_major_one():
    # a column-major S (a DataFrame's values, a solve's transpose) is gathered column by
    # column: the figures must not depend on the layout
    rng = np.random.default_rng(3)
    X = rng.standard_normal((5000, 7))
    S = np.asfortranarray(-X)
    idx = np.arange(0, 5000, 97)
    w = np.full(idx.size, 1.0 / idx.size)
    a = check_scores(X, S, w, idx, warn=False)
    b = check_scores(np.ascontiguousarray(X), np.ascontiguousarray(S), w, idx, warn=False)
    assert a == b
