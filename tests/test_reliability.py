"""Extreme but valid inputs work or fail clearly; no silent wrong answer."""

import numpy as np
import pytest
from support.signals import interrupt_after

import stein_coreset as sc
from stein_coreset import estimators as est
from stein_coreset.algorithms import stein_thinning
from stein_coreset.engine.cpu import bridge

METHODS = ("standard", "iid", "st", "skt", "kt", "lskt", "compresspp",
           "rt", "ct", "sr", "sc", "lsr", "lsc")


@pytest.fixture
def sample():
    rng = np.random.default_rng(3)
    X = 0.5 + 1.3 * rng.standard_normal((512, 3))
    return X, -X


@pytest.mark.parametrize("method", METHODS)
def test_every_method_selects_the_same_points_after_a_shift_of_1e8(sample, method):
    X, S = sample
    a = sc.compress(X, S, size=16, method=method, seed=1)
    b = sc.compress(X + 1e8, S, size=16, method=method, seed=1)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_allclose(a.weights, b.weights, rtol=1e-6, atol=1e-8)
    assert b.ksd == pytest.approx(a.ksd, rel=1e-6)


def test_bandwidth_and_two_sample_distances_are_shift_invariant(sample):
    X, _ = sample
    Y = np.random.default_rng(4).standard_normal((300, 3))
    assert sc.median_bandwidth(X + 1e8) == pytest.approx(sc.median_bandwidth(X), rel=1e-6)
    assert sc.median_bandwidth(X + 1e10) == pytest.approx(sc.median_bandwidth(X), rel=1e-4)
    assert sc.mmd(X + 1e8, Y + 1e8) == pytest.approx(sc.mmd(X, Y), rel=1e-6)
    assert sc.energy_distance(X + 1e8, Y + 1e8) == pytest.approx(
        sc.energy_distance(X, Y), rel=1e-6
    )
    G = sc.IMQ(sigma=1.0)(X[:50])
    np.testing.assert_allclose(sc.IMQ(sigma=1.0)(X[:50] + 1e8), G, rtol=1e-6)


@pytest.mark.parametrize("sigma", [1e-300, 1e300, 1e-80, 1e80])
@pytest.mark.parametrize("kind", [sc.IMQ, sc.Gaussian, sc.Matern])
def test_bandwidths_whose_fourth_power_is_not_a_normal_float_are_refused(kind, sigma):
    with pytest.raises(ValueError, match="sigma"):
        kind(sigma=sigma)


def test_a_median_bandwidth_out_of_range_says_to_rescale(sample):
    X, S = sample
    with pytest.raises(ValueError, match="sigma.*rescale"):
        sc.compress(X * 1e-100, S * 1e100, size=8, method="st", kernel=sc.SteinKernel(M=None))
    # the default (scale-free) kernel standardises the coordinates: the same selection as X
    res = sc.compress(X * 1e-100, S * 1e100, size=8, method="st")
    np.testing.assert_array_equal(res.indices, sc.compress(X, S, size=8, method="st").indices)


@pytest.mark.parametrize("method", ["st", "skt", "sr"])
def test_scores_that_overflow_the_kernel_give_a_clear_error(sample, method):
    X, S = sample
    with pytest.raises(ValueError, match="overflow"):
        sc.compress(X, S * 1e200, size=8, method=method, seed=0)
    with pytest.raises(ValueError, match="overflow"):
        sc.ksd(X, S * 1e200)


@pytest.mark.parametrize("method", ["lskt", "lsr", "lsc"])
def test_low_rank_methods_work_with_huge_scores(sample, method):
    # the float32 copy of the factor F used to overflow (w had NaN); it is now scaled by 2^-e
    X, S = sample
    res = sc.compress(X, S * 1e40, size=16, method=method, seed=0)
    assert np.isfinite(res.ksd) and np.isfinite(np.asarray(res.weights)).all()


def test_scalar_and_diagonal_preconditioners_equal_the_full_matrix(sample):
    X, S = sample
    full = sc.SteinKernel(sc.IMQ(1.0), M=np.diag([2.0, 2.0, 2.0])).matrix(X[:40], S[:40])
    np.testing.assert_allclose(sc.SteinKernel(sc.IMQ(1.0), M=2.0).matrix(X[:40], S[:40]), full)
    diag = np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(
        sc.SteinKernel(sc.IMQ(1.0), M=diag).matrix(X[:40], S[:40]),
        sc.SteinKernel(sc.IMQ(1.0), M=np.diag(diag)).matrix(X[:40], S[:40]),
    )
    with pytest.raises(ValueError, match="M"):
        sc.SteinKernel(sc.IMQ(1.0), M=-1.0).matrix(X, S)
    with pytest.raises(TypeError, match="M"):
        sc.SteinKernel(sc.IMQ(1.0), M="I").matrix(X, S)


@pytest.mark.parametrize("method", ["kt", "rt", "ct", "compresspp"])
def test_baselines_use_the_preconditioner(sample, method):
    # before, a SteinKernel's M was silently dropped by the unbiased baselines
    X, S = sample
    M = np.diag([1e4, 1.0, 1.0])
    with_m = sc.compress(X, S, size=8, method=method, seed=0,
                         kernel=sc.SteinKernel(sc.IMQ(1.0), M=M))
    plain = sc.compress(X, S, size=8, method=method, seed=0, kernel=sc.SteinKernel(sc.IMQ(1.0)))
    whitened = sc.compress(X / np.sqrt(np.diag(M)), S, size=8, method=method, seed=0,
                           kernel=sc.IMQ(1.0))
    assert not np.array_equal(with_m.indices, plain.indices)
    np.testing.assert_array_equal(with_m.indices, whitened.indices)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"wx": np.full(64, 2 / 64)}, "wx must sum to 1"),
        ({"wy": np.full(64, 0.5 / 64)}, "wy must sum to 1"),
        ({"wy": np.ones(10)}, r"wy must have shape"),
    ],
)
def test_two_sample_weights_must_sum_to_one(kw, match):
    # total masses of 2 and 1 made energy_distance negative, silently clamped to 0.0
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((64, 2)), rng.standard_normal((64, 2))
    for f in (sc.mmd, sc.energy_distance):
        with pytest.raises(ValueError, match=match):
            f(X, Y, **kw)


def test_signed_weights_of_unit_mass_give_nonnegative_distances():
    # constant-preserving coresets carry signed weights; MMD and energy distance stay >= 0
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((64, 2)), rng.standard_normal((64, 2))
    wx = np.full(64, 1 / 64)
    wx[:8] -= 0.05
    wx[8:16] += 0.05
    assert sc.mmd(X, Y, wx=wx) > 0
    assert sc.energy_distance(X, Y, wx=wx) > 0


def test_ksd_weights_may_be_signed_but_must_sum_to_one(sample):
    X, S = sample
    w = np.full(512, 1 / 512)
    w[0], w[1] = w[0] + 0.5, w[1] - 0.5
    assert np.isfinite(sc.ksd(X, S, weights=w))
    with pytest.raises(ValueError, match="weights must sum to 1"):
        sc.ksd(X, S, weights=2 * w)


def test_all_equal_points_give_a_valid_coreset_for_every_baseline():
    X = np.ones((64, 3))
    for method in ("standard", "iid", "kt", "compresspp", "rt", "ct"):
        res = sc.compress(X, -X, size=8, method=method, seed=0, kernel=sc.IMQ(1.0))
        assert np.isclose(np.sum(res.weights), 1.0) and len(res) <= 8


def test_stein_thinning_refuses_more_steps_than_memory_holds(sample):
    X, S = sample
    K = sc.SteinKernel(sc.IMQ(1.0)).bind(X, S)
    with pytest.raises(ValueError, match=r"m: .*GiB"):
        stein_thinning(K, 10**13)


def test_fit_rejects_unknown_gradient_and_nan_reg():
    X = np.random.default_rng(0).standard_normal((100, 1))
    with pytest.raises(ValueError, match="gradient must be one of"):
        est.fit(est.Gaussian(), X, discrepancy="ksd", steps=3, gradient="magic")
    with pytest.raises(ValueError, match="reg"):
        est.fit(est.Gaussian(), X, discrepancy="ksd", steps=3, reg=float("nan"))


@pytest.mark.parametrize("optimizer", ["sgd", "riemannian_sgd"])
def test_fit_with_a_huge_step_does_not_claim_convergence(optimizer):
    X = 1.0 + 2.0 * np.random.default_rng(0).standard_normal((200, 1))
    bad = est.fit(est.Gaussian(), X, discrepancy="ksd", steps=60, lr=1e6, seed=0,
                  optimizer=optimizer)
    assert not bad.converged and "lr" in bad.message
    good = est.fit(est.Gaussian(), X, discrepancy="ksd", steps=150, seed=0, optimizer=optimizer)
    assert good.converged and np.allclose(good.theta, [1.0, 2.0], atol=0.4)


@pytest.mark.parametrize("base", [sc.IMQ(1e-75), sc.IMQ(4e-67), sc.IMQ(1e-75, beta=-0.3),
                                  sc.Gaussian(1e-75), sc.Matern(1e-75, nu=1.5),
                                  sc.Matern(4e-67, nu=2.5), sc.IMQ(1e75), sc.Matern(1e75)])
@pytest.mark.parametrize("scale", [0, 50, 100, 150])
def test_stein_gram_is_finite_when_distance_over_sigma_squared_overflows(base, scale):
    # q / sigma^2 up to 1e450: the radial terms take their limit 0, never inf * 0 = NaN (before:
    # NaN in every off-diagonal entry of the C++ Gram from scale 50 on); C++ and array API agree
    xs = pytest.importorskip("array_api_strict")
    X = 10.0**scale * np.random.default_rng(0).standard_normal((20, 3))
    G = sc.SteinKernel(base).matrix(X, -X)
    assert np.all(np.isfinite(G))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        H = np.asarray(sc.SteinKernel(base).matrix(xs.asarray(X), xs.asarray(-X)))
    assert np.all(np.isfinite(H))
    np.testing.assert_allclose(H, G, rtol=1e-12, atol=1e-12 * np.max(np.abs(G)))


@pytest.mark.parametrize("method", ["lskt", "lsr", "lsc"])
def test_low_rank_methods_work_at_spread_1e150_with_the_smallest_bandwidth(method):
    # the fuzz suite's counterexample (before: "w has NaN or inf entries" from Low-rank
    # Debiasing, the NaN columns of the Stein kernel reaching AMD)
    X = np.array([8.54665848e148, -3.82524589e149, 8.29987223e149, 6.38472169e149,
                  -9.90247964e149, 1.03294293e149, -1.64519751e150, -3.40530562e150,
                  -1.76204168e149, -1.10222564e149, -1.45174784e150] * 2)[:, None]
    res = sc.compress(X, -X, size=7, method=method, seed=0, kernel=sc.IMQ(1e-75))
    assert len(res) <= 7 and len(np.unique(res.indices)) == len(res)
    assert np.all(np.isfinite(res.weights)) and res.weights.sum() == pytest.approx(1.0)
    assert np.isfinite(res.ksd) and res.ksd >= 0


@pytest.mark.parametrize("discrepancy", ["sm", "dsm"])
def test_fit_at_scale_1e149_raises_no_overflow_error(discrepancy):
    # before: OverflowError from the Gaussian model's s**3 on a Python float (s ~ 1e149)
    X = 1e149 * np.random.default_rng(0).standard_normal((30, 1))
    with np.errstate(all="ignore"):
        fit = est.fit(est.Gaussian(), X, discrepancy=discrepancy, optimizer="sgd", steps=5,
                      seed=0)
    assert np.all(np.isfinite(fit.theta)) and isinstance(fit.message, str)


def test_gaussian_model_derivatives_are_exact_where_representable():
    # 2 delta / s^3 at delta ~ s ~ 1e149 is ~1e-298: formed as ((delta / s) / s) / s
    m = est.Gaussian()
    x = np.array([[3e149]])
    J = np.asarray(m.score_dtheta(x, np.array([1e149, 1e149])))  # theta = (mu, sigma)
    assert np.all(np.isfinite(J))
    assert J[0, 0, -1] == pytest.approx(4e-298, rel=1e-12)


def test_a_flat_loss_is_not_reported_as_converged():
    # IMQ(1) against X ~ 1e149: every kernel term is 0, theta never moves; before: converged=True
    X = 1e149 * np.random.default_rng(0).standard_normal((30, 1))
    with np.errstate(all="ignore"):
        fit = est.fit(est.Gaussian(), X, discrepancy="dksd", optimizer="sgd", steps=20,
                      seed=0, kernel=sc.IMQ(1.0))
    assert not fit.converged and "flat" in fit.message


@pytest.mark.parametrize("method", ["sr", "lskt", "ct"])
def test_a_factor_larger_than_memory_is_refused_before_allocation(sample, method, monkeypatch):
    # the (n, r) factor of weighted RPCholesky is estimated before it is allocated (the bytes
    # of every O(n r) buffer); here the machine is said to hold 256 KiB
    from stein_coreset import _validation

    X, S = sample
    # sr: RT factors on the support of the Stein thinning weights (here 232 points) and only
    # when that support exceeds rank + 1, so a smaller rank and memory make it allocate
    memory, rank = (2**14, 40) if method == "sr" else (2**18, 300)
    monkeypatch.setattr(_validation, "physical_memory", lambda: memory)
    size = 16 if method == "lskt" else 400  # sr / ct: rank < size
    with pytest.raises(ValueError, match=r"rank: .*factor.*GiB"):
        sc.compress(X, S, size=size, method=method, seed=0, rank=rank)


# ---- Ctrl-C within a second -------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGINT") or
                    __import__("sys").platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("method, n, size", [
    ("skt", 2**16, 2**14), ("sr", 2**16, 2**14), ("sc", 2**16, 2**14), ("lskt", 2**16, 2**14),
    # the unbiased baselines' centring product K 1 (n (n + 1) / 2 evaluations in 32 slots on
    # the default team): Ctrl-C was seen once per slot, 2.5-28 s after the signal at 2^17
    ("kt", 2**17, 256), ("rt", 2**17, 256), ("ct", 2**17, 256),
])
def test_compress_raises_keyboard_interrupt_within_a_second_of_sigint(method, n, size):
    # before: Ctrl-C waited for the C++ loop to end (5-14 s at n = 2^15 .. 2^16)
    import signal
    import time

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT does not have Python's default handler here")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 4)) + 0.3  # the call lasts until the signal: n is free
    t0 = time.perf_counter()
    sent, timer = interrupt_after(0.5)
    finished = []
    try:
        with pytest.raises(KeyboardInterrupt):
            sc.compress(X, -X, size=size, method=method, seed=0)
            finished.append(True)
            time.sleep(5)  # the signal lands here
    finally:
        timer.cancel()
    t1 = time.perf_counter()
    if finished:
        pytest.skip("the compression finished before the signal")
    assert "t" in sent and sent["t"] - t0 < 5
    assert t1 - sent["t"] < 1.0


def test_every_cpp_loop_stops_when_the_cancel_flag_is_set_and_recovers_after():
    # a call whose flag is set (a SIGINT, or distributed.compress's Ctrl-C for its tasks on
    # Dask's threads) unwinds with KeyboardInterrupt; the next call computes exactly what an
    # uninterrupted call does
    import signal

    from stein_coreset.engine.cpu import _core

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT does not have Python's default handler here")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 2))
    K = sc.SteinKernel(sc.IMQ(1.0)).bind(X, -X)
    h = bridge.handle(K)
    idx = np.arange(512, dtype=np.int64)
    A = rng.standard_normal((5, 600))
    G = X[:50] @ X[:50].T + np.eye(50)
    calls = {
        "gram": lambda: _core.gram(h, idx[:4]),
        "stein_thinning": lambda: _core.stein_thinning(h, 20),
        "kt_split": lambda: _core.kt_split(h, idx, 2, 0.5, 1),
        "coreset_sums": lambda: _core.coreset_sums(h, idx.reshape(4, 128).copy()),
        "kt_swap_refine": lambda: _core.kt_swap_refine(h, idx[:16].copy()),
        "kt_swap_ls": lambda: _core.kt_swap_ls(h, np.full(600, 1 / 600), idx[:10], 0),
        "matvec_soa": lambda: _core.matvec_soa(h, np.ones(600)),
        "quad_soa": lambda: _core.quad_soa(h, np.ones(600)),
        "kernel_row_means": lambda: _core.kernel_row_means(h, idx[:4]),
        "recombination": lambda: _core.recombination(A, np.full(600, 1 / 600)),
        "simplex_qp": lambda: _core.simplex_qp(G, np.full(50, 1 / 50), 100),
        "affine_weights": lambda: _core.affine_weights(G),
        "median_pairwise_distance": lambda: _core.median_pairwise_distance(X),
        "pairwise_sq_distances": lambda: _core.pairwise_sq_distances(X),
    }
    from concurrent.futures import ThreadPoolExecutor

    def cancelled(call):
        _core._cancel_next_call_for_tests()  # its flag set from the start, as by a signal
        return call()

    for name, call in calls.items():
        before = call()
        with ThreadPoolExecutor(1) as pool, pytest.raises(KeyboardInterrupt):
            pool.submit(cancelled, call).result()
        assert not _core._cancel_requested()  # the flag went with its call
        after = call()
        if isinstance(before, tuple):
            before, after = before[0], after[0]
        np.testing.assert_array_equal(np.asarray(after), np.asarray(before), err_msg=name)


def test_a_program_with_its_own_sigint_handler_keeps_it():
    # the hook is only put in front of Python's default handler: a custom handler's program
    # is not cancelled behind its back
    import signal

    from stein_coreset.engine.cpu import _core

    seen = []
    old = signal.signal(signal.SIGINT, lambda *a: seen.append(a[0]))
    try:
        rng = np.random.default_rng(0)
        X = rng.standard_normal((2**12, 2))
        sent, timer = interrupt_after(0.05)
        res = sc.compress(X, -X, size=2**11, method="st", seed=0)
        timer.join()
        assert len(res) > 0 and not _core._cancel_requested()
    finally:
        signal.signal(signal.SIGINT, old)
    assert seen == [signal.SIGINT]


# ---- refusals before the work -----------------------------------------------------------------

@pytest.mark.parametrize("method, kw", [("ct", {"rank": 2**16 - 1}), ("sc", {"rank": 2**16})])
def test_rank_near_n_is_refused_within_a_second_with_the_memory_estimate(method, kw,
                                                                         monkeypatch):
    # before: ct refused after 17 s of O(n^2) centring, sc reached an unchecked 9.9 GiB
    # (m, m) allocation after 42 s; the machine is said to hold 16 GiB
    import time

    from stein_coreset import _validation

    monkeypatch.setattr(_validation, "physical_memory", lambda: 16 * 2**30)
    X = np.random.default_rng(0).standard_normal((2**16, 2))
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"rank: .*\(65536, 6553[56]\).* GiB, more than"):
        sc.compress(X, -X, size=2**16, method=method, seed=0, **kw)
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize("method", ["lskt", "lsr", "lsc"])
def test_rounds_beyond_what_low_rank_debiasing_can_use_are_refused_at_once(method):
    # before: rounds=10**6 on n = 64 ran for ~15 minutes
    import time

    X = np.random.default_rng(0).standard_normal((64, 2))
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"rounds = 1000000 .* ceil\(n / rank\)\) = \d+ for n"):
        sc.compress(X, -X, size=8, method=method, seed=0, rounds=10**6)
    with pytest.raises(ValueError, match=r"steps = .* 2\^26"):
        sc.compress(X, -X, size=8, method=method, seed=0, steps=2**27)
    assert time.perf_counter() - t0 < 1.0
    res = sc.compress(X, -X, size=8, method=method, seed=0, rounds=8)  # the cap itself runs
    assert len(res) <= 8


# ---- no silent answer -------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["st", "skt", "sr", "kt"])
def test_a_masked_array_is_refused_or_its_masked_rows_dropped_under_omit(sample, method):
    # before: the mask was ignored by every method (same indices as the unmasked array)
    X, S = sample
    mask = np.zeros_like(X, dtype=bool)
    mask[5:40, 1] = True
    Xm = np.ma.masked_array(X, mask)
    with pytest.raises(ValueError, match="X is a masked array with 35 masked rows"):
        sc.compress(Xm, S, size=8, method=method, seed=0)
    res = sc.compress(Xm, S, size=8, method=method, seed=0, nan_policy="omit")
    keep = np.r_[0:5, 40:512]
    ref = sc.compress(X[keep], S[keep], size=8, method=method, seed=0)
    np.testing.assert_array_equal(res.indices, keep[ref.indices])
    assert res.info["n_dropped"] == 35
    for f in (sc.ksd, sc.median_bandwidth):
        with pytest.raises(ValueError, match="X is a masked array"):
            f(Xm, S) if f is sc.ksd else f(Xm)
    wm = np.ma.masked_array(np.full(512, 1 / 512), mask=np.arange(512) == 0)
    with pytest.raises(ValueError, match="weights is a masked array with 1 masked entries"):
        sc.compress(X, S, size=8, method="rt", weights=wm)


def test_a_thread_count_beyond_what_the_machine_can_run_names_n_threads(sample):
    # before: a raw OverflowError from _core.median_pairwise_distance
    X, S = sample
    for n_threads in (2**40, 2**31):
        with pytest.raises(ValueError, match="n_threads = .* per CPU"):
            sc.compress(X, S, size=8, method="st", n_threads=n_threads)


@pytest.mark.parametrize("method", ["lsr", "lsc", "st", "skt"])
def test_one_row_at_1e308_is_refused_naming_x(sample, method):
    # before (lsr, lsc): "w has NaN or inf entries" from inside Low-rank Debiasing
    X, S = sample
    Y = X.copy()
    Y[0] = 1e308
    with pytest.raises(ValueError, match=r"X: the points span 1e\+308.*rescale X"):
        sc.compress(Y, S, size=8, method=method, seed=0)


@pytest.mark.parametrize("method", ["rt", "ct"])
def test_input_weights_are_renormalised_over_the_rows_kept_under_omit(sample, method):
    # before: "weights must sum to 1, got 0.5" for weights that did sum to 1
    X, S = sample
    Y = X.copy()
    Y[:256] = np.nan
    w = np.full(512, 1 / 512)
    res = sc.compress(Y, S, size=8, method=method, seed=0, weights=w, nan_policy="omit")
    ref = sc.compress(X[256:], S[256:], size=8, method=method, seed=0, weights=w[256:] * 2)
    np.testing.assert_array_equal(res.indices, ref.indices + 256)
    assert res.info["weight_dropped"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="weights must sum to 1"):
        sc.compress(Y, S, size=8, method=method, weights=w / 2, nan_policy="omit")


# ---- Dask input validated like in-process input -----------------------------------------------

@pytest.fixture
def dask_input():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 2))
    return da, X, -X


@pytest.mark.parametrize("kw, err, match", [
    ({"block_size": 2.5}, TypeError, "block_size must be an integer"),
    ({"block_size": True}, TypeError, "block_size must be an integer"),
    ({"block_size": 0}, ValueError, "block_size must be >= 1"),
    ({"seed": -1}, ValueError, "seed must be >= 0"),
    ({"seed": 1.5}, TypeError, "seed must be an integer"),
    ({"size": 8.0}, TypeError, "size must be an integer"),
    ({"n_threads": 0}, ValueError, "n_threads"),
])
def test_distributed_arguments_are_validated_like_compress(dask_input, kw, err, match):
    # before: block_size 2.5 -> 2, True -> 1; seed=-1 -> "expected non-negative integer"
    from stein_coreset import distributed as scd

    da, X, S = dask_input
    args = {"size": 8, "method": "skt", "seed": 0, **kw}
    with pytest.raises(err, match=match):
        scd.compress(da.from_array(X, chunks=(100, 2)), da.from_array(S, chunks=(100, 2)),
                     **args)


def test_distributed_complex_input_is_refused_not_truncated(dask_input, tmp_path):
    # before: the imaginary part was dropped on the workers (the warning only in a worker log)
    from stein_coreset import distributed as scd

    da, X, S = dask_input
    Xc = da.from_array(X.astype(complex), chunks=(100, 2))
    with pytest.raises(TypeError, match="X must hold real numbers, got dtype complex128"):
        scd.compress(Xc, da.from_array(S, chunks=(100, 2)), size=8, method="skt", seed=0)
    np.save(tmp_path / "c.npy", X.astype(complex))
    np.save(tmp_path / "s.npy", S)
    with pytest.raises(TypeError, match=r"c\.npy must hold real numbers"):
        scd.compress([str(tmp_path / "c.npy")], [str(tmp_path / "s.npy")], size=8,
                     method="skt", seed=0)


@pytest.mark.parametrize("method", ["skt", "sr"])
def test_a_dask_block_smaller_than_size_after_omit_is_merged(dask_input, method):
    # before: an error the single-process path does not give
    from stein_coreset import distributed as scd

    da, X, S = dask_input
    Y = X.copy()
    Y[5:97] = np.nan  # block 0 keeps 8 rows < size 16
    res = scd.compress(da.from_array(Y, chunks=(100, 2)), da.from_array(S, chunks=(100, 2)),
                       size=16, method=method, seed=0, nan_policy="omit")
    assert 1 <= len(res) <= 16 and res.info["n_dropped"] == 92
    assert np.all(np.isfinite(Y[np.asarray(res.indices)]))
    assert res.info["blocks"][0].get("passed_through") is True


@pytest.mark.parametrize("handler", ["python", "own", "ignored"])
def test_a_stale_cancel_request_does_not_cancel_the_next_main_thread_call(sample, handler):
    # whatever SIGINT's handler: before, a program started with SIGINT ignored (a background
    # job) or with its own handler kept the request, and its next call raised KeyboardInterrupt
    import signal

    from stein_coreset.engine.cpu import _core

    X, S = sample
    ref = sc.compress(X, S, size=8, method="skt", seed=0)
    old = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, {"python": signal.default_int_handler, "own": lambda *a: None,
                                  "ignored": signal.SIG_IGN}[handler])
    try:
        _core.cancel_all()  # as after a Ctrl-C of distributed.compress on Dask's threads
        res = sc.compress(X, S, size=8, method="skt", seed=0)
        cleared = not _core._cancel_requested()
    finally:
        signal.signal(signal.SIGINT, old)
    np.testing.assert_array_equal(res.indices, ref.indices)
    assert cleared
