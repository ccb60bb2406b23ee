"""flatten / unflatten: the (n, d) view of an ArviZ posterior and back; the groups of either
ArviZ container (containers.py). The weighted figures: tests/test_integrations_summaries.py."""

import numpy as np
import pytest

az = pytest.importorskip("arviz")
xr = pytest.importorskip("xarray")

from stein_coreset.integrations.arviz import (  # noqa: E402
    arviz_major,
    flatten,
    get_group,
    unflatten,  # noqa: E402
)


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


def test_flatten_is_chain_major_with_one_column_per_entry(idata):
    X, layout = flatten(idata)
    assert X.shape == (21, 1 + 4 + 10)
    assert layout.names == ("a", "v", "M")
    post = get_group(idata, 'posterior')
    np.testing.assert_array_equal(X[7 * 2 + 3, 0], post["a"].values[2, 3])
    np.testing.assert_array_equal(X[8, 1:5], post["v"].values[1, 1])
    np.testing.assert_array_equal(X[0, 5:], post["M"].values[0, 0].ravel())
    chain, draw = layout.source([0, 8, 20])
    assert chain.tolist() == [0, 1, 2] and draw.tolist() == [0, 1, 6]


def test_unflatten_flatten_round_trips_scalar_vector_and_matrix_variables(idata):
    X, layout = flatten(idata)
    back = unflatten(X, layout)
    xr.testing.assert_identical(
        back[["a", "v", "M"]], get_group(idata, 'posterior')[["a", "v", "M"]].drop_attrs()
    )


def test_unflatten_of_coreset_rows_is_one_chain_with_the_variables_shapes(idata):
    X, layout = flatten(idata, var_names=["M", "a"])
    ds = unflatten(X[[1, 5, 9]], layout)
    assert ds["M"].dims == ("chain", "draw", "row", "col")
    assert ds["M"].shape == (1, 3, 2, 5) and ds["a"].shape == (1, 3)
    assert ds["row"].values.tolist() == [10, 20]
    d = unflatten(X[:2], layout, as_dataset=False)
    np.testing.assert_array_equal(d["M"][1], get_group(idata, 'posterior')["M"].values[0, 1])


def test_flatten_rejects_absent_group_and_variables(idata):
    with pytest.raises(ValueError, match="warmup_posterior"):
        flatten(idata, group="warmup_posterior")
    with pytest.raises(ValueError, match="var_names"):
        flatten(idata, var_names=["nope"])
    with pytest.raises(ValueError, match="shape"):
        unflatten(np.zeros((2, 3)), flatten(idata)[1])


def test_flatten_takes_a_bare_dataset_as_the_posterior(idata):
    X1, _ = flatten(idata)
    X2, _ = flatten(get_group(idata, 'posterior'))
    np.testing.assert_array_equal(X1, X2)


def test_flatten_takes_an_xarray_datatree(idata):
    tree = xr.DataTree.from_dict({"posterior": get_group(idata, 'posterior')})
    X1, _ = flatten(idata)
    X2, layout = flatten(tree)
    np.testing.assert_array_equal(X1, X2)
    with pytest.raises(ValueError, match="no 'warmup_posterior' group"):
        flatten(tree, group="warmup_posterior")


def test_importing_the_integrations_imports_no_sampler(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys, stein_coreset, stein_coreset.integrations;"
        "import stein_coreset.integrations.stan, stein_coreset.integrations.numpyro;"
        "import stein_coreset.integrations.pymc, stein_coreset.datasets.posteriordb;"
        "print([m for m in ('pymc', 'arviz', 'jax', 'pytensor', 'stan', 'httpstan', 'numpyro',"
        " 'xarray') if m in sys.modules])"
    )
    # run outside the checkout: its source tree (without the built _core) would shadow the
    # installed package
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "[]"


def test_groups_are_read_from_either_container_a_dataset_or_a_dict(idata):
    from stein_coreset.integrations.arviz import has_group, to_idata

    post = get_group(idata, "posterior")
    for container in (idata, post, {"posterior": post}, to_idata({"posterior": post})):
        assert has_group(container, "posterior") and not has_group(container, "coreset")
        assert get_group(container, "posterior").equals(post)
    with pytest.raises(ValueError, match="no 'coreset' group"):
        get_group({"posterior": post}, "coreset")


# ---- what ArviZ reads of a coreset's layout --------------------------------------------------


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("layout", [(40, 1), (1, 40)])
def test_one_draw_per_chain_is_what_makes_arviz_diagnostics_nan(layout):
    # the layout compress_trace gives its posterior: ESS, MCSE and R-hat NaN, not numbers;
    # a single chain of 40 draws would print ESS and MCSE as if it were a Markov chain
    x = np.random.default_rng(0).normal(size=40).reshape(layout)
    post = {"mu": x}
    data = az.from_dict({"posterior": post}) if arviz_major() >= 1 else az.from_dict(
        posterior=post
    )
    s = az.summary(data, round_to="none")
    diag = [c for c in s.columns if c.startswith(("ess", "mcse"))]
    assert len(diag) == 4
    assert s[diag].isna().all().all() == (layout == (40, 1))
    assert s["r_hat"].isna().all()
