"""compress_trace: reading a PyMC trace (the model's compiled maps, the draws in the unconstrained
space, their scores, what is checked, the feedback); the result it builds is
tests/test_integrations_results.py's.

Runs on PyMC 5 + ArviZ 0.x (InferenceData) and on PyMC 6 + ArviZ >= 1.1 (DataTree): the tests
read groups through ``stein_coreset.integrations.arviz.get_group`` only."""

import warnings

import numpy as np
import pytest

pm = pytest.importorskip("pymc")
az = pytest.importorskip("arviz")
pt = pytest.importorskip("pytensor.tensor")

from support.pymc_traces import (  # noqa: E402
    constrained_model,
    from_dict,
    map_groups,
    random_trace,
)

from stein_coreset.integrations.arviz import get_group, to_idata, weighted_mean  # noqa: E402
from stein_coreset.integrations.pymc import compress_trace, trace_scores  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")


@pytest.fixture(scope="module")
def model():
    return constrained_model()


@pytest.fixture(scope="module")
def trace():
    return random_trace(np.random.default_rng(0))


@pytest.mark.slow  # PyTensor compiles two models' graphs: ~5 s warm, ~15 s on a cold cache
def test_scores_equal_central_differences_of_the_models_unconstrained_log_density(model, trace):
    ts = trace_scores(trace, model)
    assert ts.X.shape == (2 * (6 + 4), 1 + 1 + 1 + 2 + 6)  # simplex of 3 -> 2 coordinates
    logp = model.compile_logp(jacobian=True)  # PyMC's own, not our compiled graph
    fns = ts.functions

    def f(x):
        parts = fns.split(x[None])
        return float(logp({n: v[0] for n, v in zip(fns.value_names, parts, strict=True)}))

    h = 1e-5
    for i in [0, 3, 11, 19]:
        x = ts.X[i]
        fd = np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])
        np.testing.assert_allclose(ts.S[i], fd, rtol=1e-5, atol=1e-6)


def test_scores_are_vectorised_and_warmup_rows_come_first_in_each_chain(model, trace):
    ts = trace_scores(trace, model, batch_size=3)
    assert ts.functions.vectorized["dlogp"]
    assert ts.source_group.tolist()[:5] == ["warmup_posterior"] * 4 + ["posterior"]
    assert ts.source_chain.tolist() == [0] * 10 + [1] * 10
    # the per-draw compiled gradient agrees with the batched one
    single = ts.functions.single("dlogp")
    parts = ts.functions.split(ts.X[7:8])
    want = ts.functions.join([np.asarray(g)[None] for g in single(*[p[0] for p in parts])])
    np.testing.assert_allclose(ts.S[7:8], want, rtol=1e-12)
    assert trace_scores(trace, model, include_warmup=False).X.shape[0] == 12


def test_the_per_draw_loop_fallback_gives_the_vectorised_scores(model, trace, monkeypatch):
    from stein_coreset.integrations.pymc import ModelFunctions

    want = trace_scores(trace, model).S
    monkeypatch.setattr(ModelFunctions, "_batched_fn", lambda self, key: None)
    fns = ModelFunctions(model)  # a fresh object: nothing cached
    ts = trace_scores(trace, model)
    np.testing.assert_allclose(fns.scores(ts.X), want, rtol=1e-12)
    assert fns.vectorized["dlogp"] is False


def test_unconstrained_draws_map_back_to_the_trace(model, trace):
    ts = trace_scores(trace, model)
    back = dict(zip(ts.functions.names, ts.functions.to_constrained(ts.X), strict=True))
    post, warm = get_group(trace, "posterior"), get_group(trace, "warmup_posterior")
    np.testing.assert_allclose(back["p"][:4], warm["p"].values[0], rtol=1e-10)
    np.testing.assert_allclose(back["s"][4:10], post["s"].values[0], rtol=1e-10)
    np.testing.assert_allclose(back["u"][14:], post["u"].values[1], rtol=1e-10)


def test_a_model_variable_missing_from_the_trace_is_an_error(model, trace):
    with pytest.raises(ValueError, match=r"\['b'\].*missing"):
        compress_trace(map_groups(trace, lambda ds: ds.drop_vars("b")), model, size=3, method="st")


def test_a_trace_variable_missing_from_the_model_is_an_error(model, trace):
    other = map_groups(trace, lambda ds: ds.assign(zeta=ds["s"] * 2))
    with pytest.raises(ValueError, match="zeta.*not in the model"):
        compress_trace(other, model, size=3, method="st")


def test_a_trace_variable_of_another_shape_is_named_before_pytensor_sees_it(model, trace):
    # before: PyTensor's "Bad input argument to pytensor function ... at index 0"
    other = map_groups(trace, lambda ds: ds.drop_vars("W").assign(
        W=(("chain", "draw", "W_row", "W_col"), ds["W"].values[..., :2])))
    with pytest.raises(ValueError, match=r"'W' has shape \(2, 2\) per draw, but the model's 'W' "
                                         r"has shape \(2, 3\)"):
        compress_trace(other, model, size=3, method="st")


def test_a_trace_without_posterior_is_an_error(model):
    idata = to_idata({"observed_data": get_group(
        from_dict(posterior={"y": np.array([[0.3, 0.5]])}), "posterior")})
    with pytest.raises(ValueError, match="no 'posterior' group"):
        compress_trace(idata, model, size=3, method="st")


def test_a_discrete_free_variable_is_an_error():
    with pm.Model() as disc:
        pm.Poisson("k", 3.0)
    idata = from_dict(posterior={"k": np.array([[1, 2, 3]])})
    with pytest.raises(ValueError, match="discrete"):
        compress_trace(idata, disc, size=2, method="st")


def test_nan_gradients_raise_or_are_dropped_and_counted():
    with pm.Model() as bad:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("edge", pt.sqrt(1.5 - x))  # NaN log density and gradient for x > 1.5
    xs = np.array([[0.1, -0.5, 2.0, 0.7, 1.9, -1.0, 0.3, 0.0]])
    idata = from_dict(posterior={"x": xs})
    with pytest.raises(ValueError, match="NaN or inf at 2 of 8 draws.*nan_policy='omit'"):
        compress_trace(idata, bad, size=3, method="st")
    out = compress_trace(idata, bad, size=3, method="st", nan_policy="omit")
    assert get_group(out, "posterior").attrs["n_dropped"] == 2
    assert (get_group(out, "posterior")["x"].values < 1.5).all()


# ---- what happened: the warm-up, the compile, feedback -----------------------------------------


def test_a_trace_without_warmup_gets_a_note_naming_discard_tuned_samples(model, trace):
    post = get_group(trace, "posterior").assign_attrs(tuning_steps=500)
    no_warm = to_idata({"posterior": post}, like=trace)
    a = get_group(compress_trace(no_warm, model, size=4, method="skt", random_seed=0),
                  "posterior").attrs
    assert a["n_warmup_input"] == 0
    assert "500 tuning steps" in a["note_warmup"]
    assert "discard_tuned_samples=False" in a["note_warmup"]
    left_out = compress_trace(trace, model, size=4, method="skt", random_seed=0,
                              include_warmup=False)
    assert "include_warmup=False" in get_group(left_out, "posterior").attrs["note_warmup"]
    kept = compress_trace(trace, model, size=4, method="skt", random_seed=0)
    assert "note_warmup" not in get_group(kept, "posterior").attrs


def test_the_warmup_note_is_said_with_the_progress_feedback(model, trace, capfd):
    no_warm = to_idata({"posterior": get_group(trace, "posterior")}, like=trace)
    compress_trace(no_warm, model, size=4, method="skt", random_seed=0, progress=True)
    assert "no warm-up draws" in capfd.readouterr().err
    compress_trace(no_warm, model, size=4, method="skt", random_seed=0)  # not a terminal
    assert "warm-up" not in capfd.readouterr().err


def tiny_model():
    with pm.Model() as m:
        pm.Normal("x", 0.0, 1.0)
        pm.HalfNormal("h", 1.0)
    rng = np.random.default_rng(0)
    return m, from_dict(posterior={"x": rng.normal(size=(1, 12)),
                                   "h": rng.gamma(2.0, size=(1, 12))})


@pytest.fixture
def slow_compile(monkeypatch):
    """Every PyTensor compile of a compress_trace call takes 0.2 s more."""
    import time

    from stein_coreset.integrations.pymc import ModelFunctions

    real = ModelFunctions._compile
    calls = []

    def slow(inputs, outputs):
        calls.append(1)
        time.sleep(0.2)
        return real(inputs, outputs)

    monkeypatch.setattr(ModelFunctions, "_compile", staticmethod(slow))
    return calls


def test_every_compile_counts_as_compile_time_and_none_as_scoring_time(slow_compile):
    m, idata = tiny_model()  # a new model: nothing compiled yet
    a = get_group(compress_trace(idata, m, size=4, method="st", random_seed=0), "posterior").attrs
    n = len(slow_compile)
    assert n >= 5  # forward, gradient and backward maps, per draw and batched
    assert a["time_compile_s"] >= 0.2 * n
    assert a["time_scores_s"] < 0.2 and a["time_transform_s"] < 0.2
    # a second call on the same model compiles nothing
    b = get_group(compress_trace(idata, m, size=4, method="st", random_seed=0), "posterior").attrs
    assert len(slow_compile) == n and b["time_compile_s"] < 0.2


def test_progress_says_when_the_model_compiles_and_is_silent_when_not_a_terminal(
    slow_compile, capfd
):
    m, idata = tiny_model()
    compress_trace(idata, m, size=4, method="st", random_seed=0)  # stderr is not a TTY here
    assert "compiling" not in capfd.readouterr().err
    m, idata = tiny_model()
    compress_trace(idata, m, size=4, method="st", random_seed=0, progress=True)
    err = capfd.readouterr().err
    assert "compiling the model's gradient (PyTensor)" in err and "done in" in err


# ---- the statistical check on a real, short PyMC run --------------------------------------------


def shifted_model():
    rng = np.random.default_rng(42)
    y = rng.normal(1.0, 2.0, size=30)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        sigma = pm.HalfNormal("sigma", 5.0)
        pm.Normal("y", mu, sigma, observed=y)
    return model


def sample(model, draws, tune, seed):
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pm.sample(
            draws,
            tune=tune,
            chains=2,
            cores=1,
            random_seed=seed,
            progressbar=False,
            discard_tuned_samples=False,
            compute_convergence_checks=False,
            initvals={"mu": 25.0, "sigma": 20.0},  # far away: a visible burn-in
        )


def coreset_mean(out, name):
    return float(weighted_mean(out, name)[name])


@pytest.mark.slow
def test_skt_beats_standard_thinning_in_ksd_and_posterior_mean_error():
    model = shifted_model()
    ref = get_group(sample(model, 2000, 500, seed=100), "posterior")
    ref_mean = np.array([float(ref["mu"].mean()), float(ref["sigma"].mean())])
    err = {"skt": [], "standard": []}
    for seed in (1, 2, 3):
        idata = sample(model, 100, 100, seed=seed)  # 400 draws, half of them warm-up
        outs = {m: compress_trace(idata, model, size=20, method=m, random_seed=seed) for m in err}
        ksd = {m: get_group(o, "posterior").attrs["ksd"] for m, o in outs.items()}
        assert ksd["skt"] < ksd["standard"]
        for m, out in outs.items():
            got = np.array([coreset_mean(out, "mu"), coreset_mean(out, "sigma")])
            err[m].append(np.linalg.norm(got - ref_mean))
    assert np.median(err["skt"]) < np.median(err["standard"]), err


def test_compress_trace_from_eight_threads_on_one_model_gives_the_serial_results(model):
    """The per-model compiled PyTensor functions are shared by every call on the model: from
    8 threads at once, each on its own trace, every result must be the serial one (they once
    raised AttributeError / ValueError / PermissionError or returned another coreset: a
    PyTensor function's input and output storage is per function, not per call). Repeated."""
    import concurrent.futures

    traces = [random_trace(np.random.default_rng(100 + i), chains=2, draws=40, warmup=20)
              for i in range(8)]

    def run(tr):
        res = compress_trace(tr, model, size=6, method="st", random_seed=0)
        post = get_group(res, "posterior")
        return np.concatenate([np.asarray(post[v]).ravel() for v in ("s", "b", "u", "W")])

    serial = [run(tr) for tr in traces]
    for _ in range(4):
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            got = list(pool.map(run, traces))
        for g, s in zip(got, serial, strict=True):
            np.testing.assert_array_equal(g, s)
