"""The result every integration returns (results.compress_scored), through compress_trace on a
PyMC model with every kind of transform: equal-weight posterior draws only, the weighted
support in the coreset group, sample stats carried over, what ArviZ reads of it."""

import numpy as np
import pytest

pm = pytest.importorskip("pymc")
az = pytest.importorskip("arviz")

from support.pymc_traces import constrained_model, from_dict, random_trace  # noqa: E402

from stein_coreset.integrations.arviz import (  # noqa: E402
    get_group,
    has_group,
    to_idata,
    weighted_mean,
)
from stein_coreset.integrations.pymc import compress_trace, trace_scores  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")


@pytest.fixture(scope="module")
def model():
    return constrained_model()


@pytest.fixture(scope="module")
def trace():
    return random_trace(np.random.default_rng(0))


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
