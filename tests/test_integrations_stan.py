"""compress_fit: a Stan fit (PyStan 3, CmdStan CSV, ArviZ) and its model (PyStan or anything with
BridgeStan's method names) in, the result compress_trace gives out. Real PyStan-built programs:
the first run on a machine compiles two (~30-50 s each; httpstan caches them afterwards)."""

import asyncio
import math
import os

import numpy as np
import pytest

stan = pytest.importorskip("stan")
az = pytest.importorskip("arviz")

from stein_coreset.integrations.arviz import get_group, has_group, summary  # noqa: E402
from stein_coreset.integrations.stan import (  # noqa: E402
    PyStanModel,
    StanVariables,
    compress_fit,
    fit_groups,
    fit_scores,
    stan_functions,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

#: posteriordb's eight_schools_noncentered program, as it is there: the same text compiles once
#: for these tests, the docs' example and the posteriordb harness
EIGHT_SCHOOLS = """data {
  int<lower=0> J; // number of schools
  array[J] real y; // estimated treatment
  array[J] real<lower=0> sigma; // std of estimated effect
}
parameters {
  vector[J] theta_trans; // transformation of theta
  real mu; // hyper-parameter of mean
  real<lower=0> tau; // hyper-parameter of sd
}
transformed parameters {
  vector[J] theta;
  // original theta
  theta = theta_trans * tau + mu;
}
model {
  theta_trans ~ normal(0, 1);
  y ~ normal(theta, sigma);
  mu ~ normal(0, 5); // a non-informative prior
  tau ~ cauchy(0, 5);
}


"""
DATA = {"J": 8, "y": [28, 8, -3, 7, -1, 1, 18, 12], "sigma": [15, 10, 16, 11, 9, 11, 10, 18]}

#: every kind of constraint a transform maps: positive, bounds that depend on a parameter, a
#: simplex (K - 1 coordinates), a Cholesky factor of a correlation matrix and a matrix (both
#: column-major in Stan's flat order), with a transformed parameter and a generated quantity
CONSTRAINED = """
parameters {
  real<lower=0> s;
  real<lower=-1, upper=s + 1> u;
  simplex[3] p;
  cholesky_factor_corr[3] L;
  matrix[2, 3] W;
}
transformed parameters {
  real t = sum(W) * p[1];
}
model {
  s ~ gamma(2, 2);
  p ~ dirichlet([2, 3, 4]');
  L ~ lkj_corr_cholesky(2);
  to_vector(W) ~ normal(0, s);
  u ~ normal(0.5, 1);
}
generated quantities {
  real g = t + u;
}
"""


def build(code, data=None, seed=1):
    return stan.build(code, data=data or {}, random_seed=seed)


@pytest.fixture(scope="module")
def schools():
    return build(EIGHT_SCHOOLS, DATA)


@pytest.fixture(scope="module")
def schools_fit(schools):
    # a short warm-up, kept: 2 chains x (60 warm-up + 150) draws
    return schools.sample(num_chains=2, num_warmup=60, num_samples=150, save_warmup=True)


@pytest.fixture(scope="module")
def constrained():
    return build(CONSTRAINED)


@pytest.fixture(scope="module")
def constrained_fit(constrained):
    return constrained.sample(num_chains=2, num_warmup=40, num_samples=30, save_warmup=True)


def test_pystan_draws_are_read_as_arviz_reads_them_and_the_warmup_as_stan_wrote_it(
        constrained, constrained_fit):
    ours = fit_groups(constrained_fit)
    theirs = az.from_pystan(posterior=constrained_fit, posterior_model=constrained,
                            save_warmup=True)
    mine, ref = ours["posterior"], get_group(theirs, "posterior")
    assert dict(mine.sizes)["chain"] == 2 and dict(mine.sizes)["draw"] == 30
    for name in ("s", "u", "p", "L", "W", "t", "g"):
        np.testing.assert_array_equal(mine[name].values, ref[name].values, err_msg=name)
    lp = get_group(theirs, "sample_stats")["lp"].values
    np.testing.assert_array_equal(ours["sample_stats"]["lp"].values, lp)
    # the warm-up: the first 40 saved draws of each chain (PyStan interleaves the chains)
    raw = np.asarray(constrained_fit["s"]).reshape(70, 2).T
    np.testing.assert_array_equal(ours["warmup_posterior"]["s"].values, raw[:, :40])
    np.testing.assert_array_equal(mine["s"].values, raw[:, 40:])


def test_arvizs_warmup_that_repeats_the_posterior_is_left_out_with_a_note(constrained,
                                                                        constrained_fit):
    """ArviZ 0.x's from_pystan fills warmup_posterior with the post-warm-up draws again."""
    idata = az.from_pystan(posterior=constrained_fit, posterior_model=constrained,
                           save_warmup=True)
    warm = get_group(idata, "warmup_posterior")["s"].values
    if not np.array_equal(warm, get_group(idata, "posterior")["s"].values):
        pytest.skip("this ArviZ reads the PyStan 3 warm-up correctly")
    sd = fit_scores(idata, constrained)
    assert sd.n_warmup == 0 and sd.n == 60 and "repeats the posterior" in sd.note


def test_unconstrained_draws_are_stans_and_map_back_through_constrain(constrained,
                                                                     constrained_fit):
    sd = fit_scores(constrained_fit, constrained)
    assert sd.X.shape == (2 * 70, 1 + 1 + 2 + 3 + 6)  # s, u, simplex 3 -> 2, corr 3 -> 3, W
    assert sd.source_group.tolist()[:41] == ["warmup_posterior"] * 40 + ["posterior"]
    # PyStan's own (public, HTTP) unconstrain_pars on one draw
    post = fit_groups(constrained_fit)["posterior"]
    draw = {n: post[n].values[1, 4] for n in ("s", "u", "p", "L", "W")}
    want = constrained.unconstrain_pars({k: v.tolist() for k, v in draw.items()})
    np.testing.assert_allclose(sd.X[70 + 40 + 4], want, rtol=1e-10)
    back = sd.to_constrained(sd.X[[70 + 40 + 4]])
    for name, value in draw.items():
        np.testing.assert_allclose(back[name][0], value, rtol=1e-8, atol=1e-12, err_msg=name)


def test_scores_are_the_gradient_of_the_log_density_with_the_jacobian(constrained,
                                                                     constrained_fit):
    sd = fit_scores(constrained_fit, constrained)

    def logp(x):  # PyStan's public log_prob, Jacobian adjustment on
        return constrained.log_prob(list(x), adjust_transform=True)

    h = 1e-5
    for i in (0, 75):
        x = sd.X[i]
        fd = [(logp(x + h * e) - logp(x - h * e)) / (2 * h) for e in np.eye(x.size)]
        np.testing.assert_allclose(sd.S[i], fd, rtol=1e-5, atol=1e-5)
    # PyStan's own grad_log_prob (its default: the Jacobian on) agrees; without it, not
    np.testing.assert_allclose(sd.S[0], constrained.grad_log_prob(list(sd.X[0])), rtol=1e-12)
    _, no_jac = PyStanModel(constrained).log_density_gradient(sd.X[0], jacobian=False)
    assert not np.allclose(sd.S[0], no_jac, rtol=1e-3)


def test_compress_fit_returns_what_compress_trace_returns(schools, schools_fit):
    res = compress_fit(schools_fit, schools, size=20, method="skt", seed=0)
    post, cs = get_group(res, "posterior"), get_group(res, "coreset")
    assert dict(post.sizes) == {"chain": 20, "draw": 1, "theta_trans_dim_0": 8, "theta_dim_0": 8}
    assert cs.attrs["n_input"] == 2 * 210 and cs.attrs["n_warmup_input"] == 2 * 60
    assert "note_warmup" not in cs.attrs and cs.attrs["scores_dtype"] == "float64"
    np.testing.assert_allclose(float(cs["weight"].sum()), 1.0)
    # each point is its source draw, free and transformed parameters alike
    src = fit_groups(schools_fit)
    for j in range(cs.sizes["point"]):
        group = "warmup_posterior" if cs["source_warmup"].values[j] else "posterior"
        c, d = int(cs["source_chain"][j]), int(cs["source_draw"][j])
        for name in ("mu", "tau", "theta"):
            np.testing.assert_allclose(cs[name].values[j], src[group][name].values[c, d],
                                       rtol=1e-8)
    assert has_group(res, "sample_stats")
    table = summary(res, var_names=["mu", "tau"])
    np.testing.assert_allclose(table.loc["mu", "mean"], float(post["mu"].mean()), rtol=1e-12)


def test_cmdstan_csv_and_arviz_inputs_give_the_same_coreset(schools, schools_fit, tmp_path):
    paths = write_cmdstan_csv(schools_fit, tmp_path)
    direct = get_group(compress_fit(schools_fit, schools, size=12, method="sr", seed=3),
                       "coreset")
    cs = get_group(compress_fit(paths, schools, size=12, method="sr", seed=3), "coreset")
    np.testing.assert_allclose(cs["weight"].values, direct["weight"].values, rtol=1e-6)
    np.testing.assert_array_equal(cs["source_draw"].values, direct["source_draw"].values)
    # ArviZ's object of the post-warm-up draws (its PyStan 3 warm-up is not usable, above)
    post_only = get_group(compress_fit(schools_fit, schools, size=12, method="sr", seed=3,
                                       include_warmup=False), "coreset")
    cs = get_group(compress_fit(az.from_pystan(posterior=schools_fit, posterior_model=schools),
                                schools, size=12, method="sr", seed=3), "coreset")
    np.testing.assert_allclose(cs["weight"].values, post_only["weight"].values, rtol=1e-6)
    np.testing.assert_array_equal(cs["source_draw"].values, post_only["source_draw"].values)


def test_any_object_with_bridgestans_method_names_goes_through_the_same_code(schools,
                                                                           schools_fit):
    ours = EightSchoolsByHand()
    assert stan_functions(ours) is ours
    a = fit_scores(schools_fit, ours)
    b = fit_scores(schools_fit, schools)
    np.testing.assert_allclose(a.X, b.X, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a.S, b.S, rtol=1e-8, atol=1e-10)
    ra = get_group(compress_fit(schools_fit, ours, size=10, method="skt", seed=0), "coreset")
    rb = get_group(compress_fit(schools_fit, schools, size=10, method="skt", seed=0), "coreset")
    np.testing.assert_array_equal(ra["source_draw"].values, rb["source_draw"].values)


def test_a_fit_without_saved_warmup_gets_a_note_naming_save_warmup(schools):
    fit = schools.sample(num_chains=1, num_warmup=100, num_samples=60)
    cs = get_group(compress_fit(fit, schools, size=8, method="st", seed=0), "coreset")
    assert cs.attrs["n_warmup_input"] == 0 and "save_warmup=True" in cs.attrs["note_warmup"]


def test_wrong_models_and_fits_are_named(schools, schools_fit, constrained):
    with pytest.raises(TypeError, match="lacks param_unconstrain"):
        compress_fit(schools_fit, object(), size=5, method="st")
    with pytest.raises(ValueError, match=r"parameters \['s', 'u', 'p', 'L', 'W'\] are missing"):
        compress_fit(schools_fit, constrained, size=5, method="st")
    with pytest.raises(TypeError, match="fit: expected a PyStan 3 fit"):
        compress_fit(42, schools, size=5, method="st")
    with pytest.raises(ValueError, match="propto"):
        PyStanModel(schools).log_density(np.zeros(10), propto=False)


def test_compress_fit_works_inside_a_running_event_loop(schools, schools_fit):
    """Jupyter runs an event loop, in which PyStan's own calls (asyncio.run) refuse to run;
    compress_fit calls the compiled model directly and works there."""

    async def main():
        return compress_fit(schools_fit, schools, size=8, method="st", seed=0)

    res = asyncio.run(main())
    assert get_group(res, "coreset").attrs["coreset_kind"] == "equal"


def test_stan_variables_reject_complex_and_tuple_entries():
    with pytest.raises(ValueError, match="complex and tuple"):
        StanVariables(["z.real", "z.imag"])


@pytest.mark.slow
def test_skt_on_a_short_warmup_beats_standard_thinning_against_a_long_run(schools):
    ref = fit_groups(build(EIGHT_SCHOOLS, DATA, seed=99).sample(
        num_chains=4, num_warmup=1000, num_samples=2500))["posterior"]
    ref_mean = np.array([float(ref["mu"].mean()), float(np.log(ref["tau"]).mean())])
    err = {"skt": [], "standard": []}
    for seed in (1, 2, 3):
        fit = build(EIGHT_SCHOOLS, DATA, seed=seed).sample(
            num_chains=2, num_warmup=15, num_samples=200, save_warmup=True,
            init=[{"mu": 25.0, "tau": 40.0, "theta_trans": [3.0] * 8}] * 2)
        for method in err:
            cs = get_group(compress_fit(fit, schools, size=20, method=method, seed=seed),
                           "coreset")
            w = cs["weight"].values
            got = np.array([w @ cs["mu"].values, w @ np.log(cs["tau"].values)])
            err[method].append(np.linalg.norm(got - ref_mean))
    assert np.median(err["skt"]) < np.median(err["standard"]), err


# ---- helpers ----------------------------------------------------------------------------------


def write_cmdstan_csv(fit, folder):
    """The fit in CmdStan's output format (comment header, CSV columns, the warm-up rows before
    '# Adaptation terminated'), one file per chain."""
    groups = fit_groups(fit)
    stats = ["lp__", "accept_stat__", "stepsize__", "treedepth__", "n_leapfrog__",
             "divergent__", "energy__"]
    names = ["lp", "acceptance_rate", "step_size", "tree_depth", "n_steps", "diverging",
             "energy"]
    paths = []
    for c in range(fit.num_chains):
        cols, rows_w, rows_p = [], [], []
        for g, rows in (("warmup", rows_w), ("", rows_p)):
            post = groups[f"{g}_posterior" if g else "posterior"]
            st = groups[f"{g}_sample_stats" if g else "sample_stats"]
            blocks = [st[n].values[c].astype(float)[:, None] for n in names]
            cols = list(stats)
            for name in fit.param_names:
                v = post[name].values[c]
                v = v.reshape(v.shape[0], -1, order="F") if v.ndim > 1 else v[:, None]
                blocks.append(v)
                dims = fit.dims[fit.param_names.index(name)]
                cols += [name] if not dims else [
                    name + "." + ".".join(str(i + 1) for i in idx)
                    for idx in zip(*np.unravel_index(np.arange(math.prod(dims)), dims,
                                                     order="F"), strict=True)]
            rows.extend(np.hstack(blocks).tolist())
        path = os.path.join(folder, f"schools_{c + 1}.csv")
        with open(path, "w") as fh:
            fh.write("# method = sample (Default)\n#   sample\n#     save_warmup = true\n")
            fh.write(",".join(cols) + "\n")
            fh.writelines(",".join(repr(x) for x in r) + "\n" for r in rows_w)
            fh.write("# Adaptation terminated\n# Step size = 0.5\n")
            fh.writelines(",".join(repr(x) for x in r) + "\n" for r in rows_p)
        paths.append(path)
    return paths


class EightSchoolsByHand:
    """Eight schools, non-centred, written out in NumPy under BridgeStan's method names: the
    log density on (theta_trans, mu, log tau) with the Jacobian log tau."""

    y = np.array(DATA["y"], float)
    sigma = np.array(DATA["sigma"], float)

    def param_names(self, *, include_tp=False, include_gq=False):
        names = [f"theta_trans.{i}" for i in range(1, 9)] + ["mu", "tau"]
        return names + ([f"theta.{i}" for i in range(1, 9)] if include_tp else [])

    def param_unc_num(self):
        return 10

    def param_unconstrain(self, theta):
        return np.r_[theta[:9], np.log(theta[9])]

    def param_constrain(self, x, *, include_tp=False, include_gq=False, rng=None):
        tau = math.exp(x[9])
        out = np.r_[x[:9], tau]
        return np.r_[out, x[:8] * tau + x[8]] if include_tp else out

    def log_density_gradient(self, x, *, propto=True, jacobian=True):
        tt, mu, lt = x[:8], x[8], x[9]
        tau = math.exp(lt)
        theta = tt * tau + mu
        r = (self.y - theta) / self.sigma**2
        lp = (-0.5 * tt @ tt - 0.5 * np.sum((self.y - theta) ** 2 / self.sigma**2)
              - mu**2 / 50 - math.log1p(tau**2 / 25) + (lt if jacobian else 0.0))
        g = np.empty(10)
        g[:8] = -tt + r * tau
        g[8] = r.sum() - mu / 25
        g[9] = (r @ tt) * tau - 2 * tau**2 / 25 / (1 + tau**2 / 25) + (1.0 if jacobian else 0)
        return lp, g
