"""compress_trace: a PyMC trace in, a debiased InferenceData out that ArviZ cannot misread.

Runs on PyMC 5 + ArviZ 0.x (InferenceData) and on PyMC 6 + ArviZ >= 1.1 (DataTree): the tests
read groups through ``stein_coreset.integrations.arviz.get_group`` only."""

import warnings

import numpy as np
import pytest

pm = pytest.importorskip("pymc")
az = pytest.importorskip("arviz")
pt = pytest.importorskip("pytensor.tensor")

from stein_coreset.integrations.arviz import (  # noqa: E402
    arviz_major,
    get_group,
    has_group,
    to_idata,
    weighted_mean,
)
from stein_coreset.integrations.pymc import compress_trace, trace_scores  # noqa: E402

ARVIZ_1 = arviz_major() >= 1


def from_dict(**groups):
    """az.from_dict for ArviZ 0.x (groups as keywords) and 1.x (one dict)."""
    if ARVIZ_1:
        return az.from_dict(groups, save_warmup=True)
    return az.from_dict(**groups, save_warmup=True)


def map_groups(idata, f):
    names = [g for g in ("posterior", "warmup_posterior") if has_group(idata, g)]
    return to_idata({g: f(get_group(idata, g)) for g in names}, like=idata)

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")


def constrained_model():
    """A positive (HalfNormal), two bounded (Beta, Uniform with a random bound), a simplex
    (Dirichlet) and a matrix-valued free variable, plus a deterministic."""
    with pm.Model() as model:
        s = pm.HalfNormal("s", 1.0)
        b = pm.Beta("b", 2.0, 3.0)
        u = pm.Uniform("u", -1.0, s + 1.0)  # a transform whose bounds depend on another RV
        p = pm.Dirichlet("p", np.ones(3))
        W = pm.Normal("W", 0.0, s, shape=(2, 3))
        pm.Deterministic("t", W.sum() * p[0])
        pm.Normal("y", W.sum() * p[0] + b + u, 1.0, observed=np.array([0.3, 0.5]))
    return model


def random_trace(rng, chains=2, draws=6, warmup=4):
    def group(nd):
        p = rng.dirichlet(np.ones(3), size=(chains, nd))
        W = rng.normal(size=(chains, nd, 2, 3))
        return {
            "s": rng.gamma(2.0, 0.5, size=(chains, nd)),
            "b": rng.uniform(0.05, 0.95, size=(chains, nd)),
            "u": rng.uniform(-0.9, 0.95, size=(chains, nd)),  # below s + 1 > 1
            "p": p,
            "W": W,
            "t": W.sum(axis=(2, 3)) * p[..., 0],
        }

    return from_dict(posterior=group(draws), warmup_posterior=group(warmup))


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


def hand_coreset(trace, model, size, method, seed):
    """The same compression done by hand: trace_scores, then sc.compress with the same seed
    stream, the support mapped back through the model's backward transform."""
    import stein_coreset as sc

    ts = trace_scores(trace, model)
    res = sc.compress(ts.X, ts.S, size=size, method=method, seed=np.random.default_rng(seed))
    pts = dict(zip(ts.functions.names,
                   ts.functions.to_constrained(ts.X[np.asarray(res.indices)]), strict=True))
    return res, np.asarray(res.weights), pts


def test_weighted_support_keeps_its_weights_and_sources_in_the_coreset_group(model, trace):
    out = compress_trace(trace, model, size=5, method="sr", random_seed=1)
    post, cs = get_group(out, "posterior"), get_group(out, "coreset")
    assert "coreset_weight" not in post.data_vars and "weight" not in post.data_vars
    assert cs["weight"].dims == ("point",) and cs.sizes["point"] <= 5
    assert cs["W"].shape[1:] == (2, 3) and post["p"].shape[2:] == (3,)
    np.testing.assert_allclose(cs["weight"].values.sum(), 1.0)
    np.testing.assert_allclose(post["p"].values.sum(axis=-1), 1.0)
    a = post.attrs
    assert a["stein_coreset_method"] == "sr" and a["ksd"] > 0 and a["n_input"] == 20
    assert a["coreset_kind"] == "simplex" and a["coreset_size"] == cs.sizes["point"]
    assert a["time_scores_s"] >= 0 and a["time_compress_s"] >= 0
    # every point is a source draw: free variables (backward transform) and the deterministic
    src = zip(cs["source_chain"].values, cs["source_draw"].values, cs["source_warmup"].values,
              strict=True)
    for j, (c, d, w) in enumerate(src):
        g = get_group(trace, "warmup_posterior" if w else "posterior")
        np.testing.assert_allclose(cs["W"].values[j], g["W"].values[c, d], rtol=1e-10)
        np.testing.assert_allclose(cs["t"].values[j], g["t"].values[c, d], rtol=1e-12)
    # the weighted mean is what the weights of the method say
    res, w, pts = hand_coreset(trace, model, 5, "sr", 1)
    np.testing.assert_allclose(cs["weight"].values, w, rtol=1e-12)
    assert float(weighted_mean(out, "s")["s"]) == pytest.approx(float(w @ pts["s"]), rel=1e-12)


def test_simplex_posterior_is_an_equal_weight_resample_of_the_weighted_support(model, trace):
    out = compress_trace(trace, model, size=5, method="sr", random_seed=1, draws=200)
    post, cs = get_group(out, "posterior"), get_group(out, "coreset")
    assert post.sizes["chain"] * post.sizes["draw"] == 200
    assert post.attrs["resampled_equal"] == 1 and post.attrs["posterior_draws"] == 200
    assert "resample" in post.attrs["posterior_is"]
    dp = cs["draw_point"].values.ravel()
    for name in ("s", "W", "t"):  # each draw is one of the support points
        np.testing.assert_array_equal(
            post[name].values.reshape((200,) + cs[name].shape[1:]), cs[name].values[dp]
        )
    share = np.bincount(dp, minlength=cs.sizes["point"]) / 200
    assert np.max(np.abs(share - cs["weight"].values)) <= 2 / 200 + 1e-12
    # so plain az.summary of the posterior follows the weighted mean to resampling error
    summ = az.summary(out, var_names=["s"], kind="stats", round_to="none")
    want = float(weighted_mean(out, "s")["s"])
    spread = float(np.ptp(cs["s"].values))
    assert abs(float(summ["mean"].iloc[0]) - want) <= 2 * cs.sizes["point"] / 200 * spread
    # the default: 1000 draws (pm.sample's default), or size if larger
    default = compress_trace(trace, model, size=5, method="sr", random_seed=1)
    assert get_group(default, "posterior").attrs["posterior_draws"] == 1000


def test_signed_weights_give_no_posterior_draws_but_their_weighted_support(model, trace):
    from stein_coreset.integrations.arviz import summary

    out = compress_trace(trace, model, size=6, method="sc", random_seed=3)
    assert not has_group(out, "posterior") and not has_group(out, "sample_stats")
    cs = get_group(out, "coreset")
    assert cs.attrs["coreset_kind"] == "constant" and cs.attrs["posterior_draws"] == 0
    assert "signed" in cs.attrs["posterior_is"] and "summary" in cs.attrs["posterior_is"]
    res, w, pts = hand_coreset(trace, model, 6, "sc", 3)
    np.testing.assert_allclose(cs["weight"].values, w, rtol=1e-12)
    got = summary(out, var_names=["s", "b"])
    np.testing.assert_allclose(got["mean"].to_numpy(), [w @ pts["s"], w @ pts["b"]], rtol=1e-12)
    # ArviZ refuses it rather than reading signed weights as draws
    with pytest.raises((ValueError, KeyError, AttributeError, TypeError)):
        az.summary(out)


def test_documented_summary_is_the_weighted_truth_with_no_mcmc_diagnostics(model, trace):
    from stein_coreset.integrations.arviz import summary

    out = compress_trace(trace, model, size=5, method="sr", random_seed=1)
    got = summary(out, var_names=["s", "u"])
    assert list(got.columns) == ["mean", "sd", "eti_3%", "eti_97%"]
    res, w, pts = hand_coreset(trace, model, 5, "sr", 1)
    for name in ("s", "u"):
        x, row = pts[name], got.loc[name]
        mean = w @ x
        assert row["mean"] == pytest.approx(mean, rel=1e-12)
        assert row["sd"] == pytest.approx(np.sqrt(w @ (x - mean) ** 2), rel=1e-12)
        assert x.min() <= row["eti_3%"] <= mean <= row["eti_97%"] <= x.max()


def test_arviz_prints_no_ess_mcse_or_rhat_for_a_coreset(model, trace):
    from stein_coreset.integrations.arviz import summary

    out = compress_trace(trace, model, size=8, method="skt", random_seed=0)
    full = az.summary(out, var_names=["s", "b"], round_to="none")
    diag = [c for c in full.columns if c.startswith(("ess", "mcse", "r_hat"))]
    assert len(diag) >= 3 and full[diag].isna().all().all(), full
    # its means are the coreset's (equal weights, repeats kept) and the documented call agrees
    ours = summary(out, var_names=["s", "b"])
    np.testing.assert_allclose(full["mean"].to_numpy(), ours["mean"].to_numpy(), rtol=1e-12)
    assert list(full.index) == list(ours.index)


def test_equal_result_is_size_draws_with_repeats_and_summary_means_are_weighted_means(
    model, trace
):
    out = compress_trace(trace, model, size=8, method="skt", random_seed=0)
    post, cs = get_group(out, "posterior"), get_group(out, "coreset")
    assert post.sizes["chain"] * post.sizes["draw"] == 8 and "weight" not in post.data_vars
    counts = np.bincount(cs["draw_point"].values.ravel(), minlength=cs.sizes["point"])
    np.testing.assert_allclose(cs["weight"].values, counts / 8, rtol=1e-12)
    summ = az.summary(out, var_names=["s", "b"], kind="stats", round_to="none")
    wm = weighted_mean(out, ["s", "b"])
    np.testing.assert_allclose(summ["mean"].to_numpy(), [float(wm["s"]), float(wm["b"])],
                               rtol=1e-12)


def test_random_seed_and_var_names_as_pymc_names_them(model, trace):
    a = compress_trace(trace, model, size=6, method="sr", random_seed=0, resample_equal=True,
                       var_names=["W", "t"])
    b = compress_trace(trace, model, size=6, method="sr", seed=0, resample_equal=True)
    assert set(get_group(a, "posterior").data_vars) == {"W", "t"}
    np.testing.assert_array_equal(get_group(a, "posterior")["W"], get_group(b, "posterior")["W"])
    with pytest.raises(ValueError, match="var_names"):
        compress_trace(trace, model, size=3, method="st", var_names=["nope"])
    with pytest.raises(TypeError, match="random_seed"):
        compress_trace(trace, model, size=3, method="st", random_seed=1, seed=1)


def test_sample_stats_of_the_kept_draws_are_carried_over(model, trace):
    rng = np.random.default_rng(5)
    stats = {"energy": rng.normal(size=(2, 6)), "diverging": rng.uniform(size=(2, 6)) < 0.2}
    wstats = {"energy": rng.normal(size=(2, 4)), "diverging": np.zeros((2, 4), bool)}
    groups = {g: get_group(trace, g) for g in ("posterior", "warmup_posterior")}
    groups["sample_stats"] = from_dict(posterior=stats)
    groups["sample_stats"] = get_group(groups["sample_stats"], "posterior")
    groups["warmup_sample_stats"] = get_group(from_dict(posterior=wstats), "posterior")
    idata = to_idata(groups, like=trace)
    out = compress_trace(idata, model, size=6, method="skt", random_seed=0)
    ss, cs = get_group(out, "sample_stats"), get_group(out, "coreset")
    for j, p in enumerate(cs["draw_point"].values.ravel()):
        c, d = int(cs["source_chain"][p]), int(cs["source_draw"][p])
        src = wstats if cs["source_warmup"][p] else stats
        assert ss["energy"].values.ravel()[j] == src["energy"][c, d]


def test_the_result_round_trips_through_netcdf(model, trace, tmp_path):
    out = compress_trace(trace, model, size=4, method="skt", random_seed=0)
    out.to_netcdf(tmp_path / "coreset.nc")
    back = az.from_netcdf(tmp_path / "coreset.nc")
    np.testing.assert_array_equal(
        get_group(back, "coreset")["source_draw"], get_group(out, "coreset")["source_draw"]
    )
    np.testing.assert_array_equal(
        get_group(back, "posterior")["p"].values, get_group(out, "posterior")["p"].values
    )


def test_a_datatree_trace_gives_a_datatree_coreset(model, trace):
    xr = pytest.importorskip("xarray")
    tree = xr.DataTree.from_dict(
        {g: get_group(trace, g) for g in ("posterior", "warmup_posterior")}
    )
    out = compress_trace(tree, model, size=4, method="skt", random_seed=0)
    ref = compress_trace(trace, model, size=4, method="skt", random_seed=0)
    assert isinstance(out, xr.DataTree)
    np.testing.assert_array_equal(
        out["posterior"]["W"].values, get_group(ref, "posterior")["W"].values
    )
    assert out["posterior"].attrs["n_input"] == 20


def test_the_resample_is_deterministic_for_a_seed_and_resample_equal_refuses_signed(
    model, trace
):
    a = compress_trace(trace, model, size=6, method="sr", random_seed=3, draws=6)
    b = compress_trace(trace, model, size=6, method="sr", random_seed=3, draws=6,
                       resample_equal=True)
    assert get_group(a, "posterior").attrs["posterior_draws"] == 6
    np.testing.assert_array_equal(
        get_group(a, "posterior")["W"].values, get_group(b, "posterior")["W"].values
    )
    assert get_group(a, "posterior").attrs["coreset_kind"] == "simplex"
    with pytest.raises(ValueError, match="signed"):
        compress_trace(trace, model, size=6, method="sc", random_seed=3, resample_equal=True)


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
