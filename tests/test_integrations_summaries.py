"""summary, weighted_mean, coreset_support (summaries.py, re-exported by
stein_coreset.integrations.arviz): the weighted figures of a result's coreset group."""

import numpy as np
import pytest

az = pytest.importorskip("arviz")
xr = pytest.importorskip("xarray")

from stein_coreset.integrations.arviz import arviz_major, get_group  # noqa: E402


@pytest.fixture(scope="module")
def idata():
    rng = np.random.default_rng(0)
    post = {
        "a": rng.normal(size=(3, 7)),
        "v": rng.normal(size=(3, 7, 4)),
        "M": rng.normal(size=(3, 7, 2, 5)),
    }
    kw = dict(dims={"v": ["school"], "M": ["row", "col"]},
              coords={"school": list("ABCD"), "row": [10, 20]})
    if arviz_major() >= 1:  # ArviZ 1.x: one dict of groups, a DataTree out
        return az.from_dict({"posterior": post}, **kw)
    return az.from_dict(posterior=post, **kw)


def coreset_tree(weights, **variables):
    """A compress_trace-shaped result holding only its weighted support."""
    ds = xr.Dataset(
        {"weight": ("point", np.asarray(weights, float)), **variables},
        coords={"school": list("ABC")},
        attrs={"stein_coreset_method": "sr", "coreset_kind": "simplex"},
    )
    return xr.DataTree.from_dict({"coreset": ds})


def test_summary_is_the_weighted_mean_sd_and_interval_with_no_mcmc_diagnostics():
    from stein_coreset.integrations.arviz import summary

    rng = np.random.default_rng(1)
    w = rng.dirichlet(np.ones(30))
    mu, th = rng.normal(size=30), rng.normal(size=(30, 3))
    got = summary(coreset_tree(w, mu=("point", mu), th=(("point", "school"), th)))
    assert list(got.columns) == ["mean", "sd", "eti_3%", "eti_97%"]
    assert list(got.index) == ["mu", "th[A]", "th[B]", "th[C]"]
    for label, x in [("mu", mu), ("th[B]", th[:, 1])]:
        m = w @ x
        assert got.loc[label, "mean"] == pytest.approx(m, rel=1e-12)
        assert got.loc[label, "sd"] == pytest.approx(np.sqrt(w @ (x - m) ** 2), rel=1e-12)
        order = np.argsort(x)
        cw = np.cumsum(w[order])
        assert got.loc[label, "eti_3%"] == x[order][np.argmax(cw >= 0.03)]
        assert got.loc[label, "eti_97%"] == x[order][np.argmax(cw >= 0.97)]
    assert got.attrs["coreset_kind"] == "simplex"
    assert list(summary(coreset_tree(w, mu=("point", mu)), prob=0.5).columns)[2:] == [
        "eti_25%", "eti_75%"
    ]


def test_summary_of_signed_weights_has_no_quantiles_and_no_sd_where_variance_is_negative():
    from stein_coreset.integrations.arviz import summary

    got = summary(coreset_tree([1.5, -0.5], mu=("point", [0.0, 10.0])))
    assert list(got.columns) == ["mean", "sd"]
    assert got.loc["mu", "mean"] == pytest.approx(-5.0)
    assert np.isnan(got.loc["mu", "sd"])  # 1.5 * 25 - 0.5 * 225 < 0


def test_summary_labels_entries_as_az_summary_does(idata):
    from stein_coreset.integrations.arviz import summary

    post = get_group(idata, "posterior")
    flat = post.stack(point=("chain", "draw")).drop_vars(["point", "chain", "draw"])
    flat = flat.assign(weight=("point", np.full(flat.sizes["point"], 1 / flat.sizes["point"])))
    ours = summary(xr.DataTree.from_dict({"coreset": flat}))
    theirs = az.summary(idata, kind="stats", round_to="none")
    assert list(ours.index) == list(theirs.index)
    np.testing.assert_allclose(ours["mean"], theirs["mean"], rtol=1e-12)


def test_weighted_mean_reads_the_layout_with_weights_aligned_to_the_draws():
    # results written before the support had its own dimension
    from stein_coreset.integrations.arviz import weighted_mean

    post = xr.Dataset({"mu": (("chain", "draw"), [[1.0, 2.0, 4.0]])})
    cs = xr.Dataset({"weight": (("chain", "draw"), [[0.5, 0.25, 0.25]])})
    tree = xr.DataTree.from_dict({"posterior": post, "coreset": cs})
    assert float(weighted_mean(tree)["mu"]) == pytest.approx(2.0)
