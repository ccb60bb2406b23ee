"""compress_mcmc: a NumPyro MCMC (samples, model, warm-up when collected) in, the result
compress_trace gives out; float64 scores of a model sampled in float32 with integer indexing."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
numpyro = pytest.importorskip("numpyro")
import jax.numpy as jnp  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
from numpyro.infer import MCMC, NUTS  # noqa: E402
from numpyro.infer.util import potential_energy, unconstrain_fn  # noqa: E402

from stein_coreset.integrations.arviz import get_group, summary  # noqa: E402
from stein_coreset.integrations.numpyro import compress_mcmc, mcmc_scores  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

J, N = 6, 90
RNG = np.random.default_rng(0)
COUNTY = RNG.integers(0, J, N)  # NumPy int64 indices
FLOOR = RNG.integers(0, 2, N).astype(float)
LOG_RADON = 1.0 + 0.4 * COUNTY / J - 0.6 * FLOOR + RNG.normal(0.0, 0.7, N)


def radon(county, floor, log_radon=None):
    """Varying intercepts by county, one slope: the radon model's shape (a[county])."""
    mu_a = numpyro.sample("mu_a", dist.Normal(0.0, 5.0))
    sigma_a = numpyro.sample("sigma_a", dist.HalfNormal(2.0))
    with numpyro.plate("county", J):
        a = numpyro.sample("a", dist.Normal(mu_a, sigma_a))
    b = numpyro.sample("b", dist.Normal(0.0, 2.0))
    sigma = numpyro.sample("sigma", dist.Exponential(1.0))
    numpyro.deterministic("a_mean", a.mean())
    with numpyro.plate("obs", county.shape[0]):
        numpyro.sample("y", dist.Normal(a[county] + b * floor, sigma), obs=log_radon)


def radon_closed_over_numpy(log_radon=None):
    """The same, closing over the NumPy index array instead of taking it as an argument."""
    radon(COUNTY, FLOOR, log_radon)


def float32():
    """JAX's default 32-bit mode, even where another test's library (goodpoints.jax) turned
    jax_enable_x64 on for the whole process."""
    return jax.enable_x64(False)


@pytest.fixture(scope="module")
def run():
    """Sampled in float32 (JAX's default), warm-up collected first."""
    mcmc = MCMC(NUTS(radon), num_warmup=40, num_samples=120, num_chains=2,
                chain_method="sequential", progress_bar=False)
    with float32():
        mcmc.warmup(jax.random.PRNGKey(0), COUNTY, FLOOR, LOG_RADON, collect_warmup=True)
        warmup = mcmc.get_samples(group_by_chain=True)
        mcmc.run(jax.random.PRNGKey(1), COUNTY, FLOOR, LOG_RADON)
    return mcmc, warmup


def test_float32_samples_with_integer_indexing_give_float64_scores(run):
    mcmc, warmup = run
    assert np.asarray(mcmc.get_samples()["a"]).dtype == np.float32
    sd = mcmc_scores(mcmc, warmup=warmup)
    assert sd.X.dtype == np.float64 and sd.scores_dtype == "float64" and not sd.note
    assert sd.X.shape == (2 * (40 + 120), 1 + 1 + J + 1 + 1)
    assert sd.source_group.tolist()[:41] == ["warmup_posterior"] * 40 + ["posterior"]
    # the gradient of minus NumPyro's potential energy, by central differences in float64
    with jax.enable_x64(True):
        names = ["a", "b", "mu_a", "sigma", "sigma_a"]  # ravel_pytree's (sorted) order
        sizes = [J, 1, 1, 1, 1]

        def logp(x):
            parts, start = {}, 0
            for name, k in zip(names, sizes, strict=True):
                parts[name] = x[start] if k == 1 and name != "a" else x[start:start + k]
                start += k
            args = (np.array(COUNTY), np.array(FLOOR), np.array(LOG_RADON))
            return -float(potential_energy(radon, args, {}, parts))

        h = 1e-6
        for i in (3, 200):
            x = sd.X[i]
            fd = [(logp(x + h * e) - logp(x - h * e)) / (2 * h) for e in np.eye(x.size)]
            np.testing.assert_allclose(sd.S[i], fd, rtol=1e-5, atol=1e-5)


def test_unconstrained_draws_map_back_to_the_samples(run):
    mcmc, warmup = run
    sd = mcmc_scores(mcmc, warmup=warmup)
    back = sd.to_constrained(sd.X[[0, 45]])
    np.testing.assert_allclose(back["sigma_a"][0], warmup["sigma_a"][0, 0], rtol=1e-5)
    np.testing.assert_allclose(back["a"][1], mcmc.get_samples(True)["a"][0, 5], rtol=1e-5)
    with jax.enable_x64(True):
        u = unconstrain_fn(radon, (COUNTY, FLOOR, LOG_RADON), {},
                           {k: np.asarray(v[0, 5], np.float64)
                            for k, v in mcmc.get_samples(True).items() if k != "a_mean"})
    np.testing.assert_allclose(sd.X[45, J + 2], float(u["sigma"]), rtol=1e-6)  # a, b, mu_a, sigma


def test_compress_mcmc_returns_what_compress_trace_returns(run):
    mcmc, warmup = run
    res = compress_mcmc(mcmc, size=24, method="skt", seed=0, warmup=warmup)
    post, cs = get_group(res, "posterior"), get_group(res, "coreset")
    assert dict(post.sizes) == {"chain": 24, "draw": 1, "a_dim_0": J}
    assert cs.attrs["n_input"] == 320 and cs.attrs["n_warmup_input"] == 80
    assert "note_warmup" not in cs.attrs
    # the deterministic site comes from the source draws
    np.testing.assert_allclose(cs["a_mean"].values, cs["a"].values.mean(axis=1), rtol=1e-5)
    table = summary(res, var_names=["mu_a", "b"])
    np.testing.assert_allclose(table.loc["b", "mean"], float(post["b"].mean()), rtol=1e-12)
    # NumPyro's extra fields are the sampler statistics of post-warm-up draws (the warm-up's
    # are not kept with its samples): without warm-up input every kept draw has them
    res = compress_mcmc(mcmc, size=24, method="skt", seed=0)
    assert get_group(res, "sample_stats")["diverging"].shape == (24, 1)


def test_without_warmup_the_note_says_how_to_collect_it(run):
    mcmc, _ = run
    cs = get_group(compress_mcmc(mcmc, size=8, method="st", seed=0), "coreset")
    assert cs.attrs["n_warmup_input"] == 0 and "collect_warmup=True" in cs.attrs["note_warmup"]


def test_jax_int32_arguments_and_a_closed_over_jax_array_work_in_float64():
    mcmc = MCMC(NUTS(radon), num_warmup=30, num_samples=40, progress_bar=False)
    with float32():
        mcmc.run(jax.random.PRNGKey(2), jnp.asarray(COUNTY), jnp.asarray(FLOOR),
                 jnp.asarray(LOG_RADON))
    cs = get_group(compress_mcmc(mcmc, size=8, method="skt", seed=0), "coreset")
    assert cs.attrs["scores_dtype"] == "float64" and "note_scores" not in cs.attrs


def test_a_model_closing_over_a_seen_numpy_array_falls_back_to_its_own_precision_and_says_so():
    """JAX keeps the int32 device copy of a NumPy array it saw in float32 mode; a model that
    closes over one cannot be traced in float64 afterwards. The scores then come in the
    sampler's precision, and the result says so."""
    mcmc = MCMC(NUTS(radon_closed_over_numpy), num_warmup=30, num_samples=40,
                progress_bar=False)
    with float32():
        mcmc.run(jax.random.PRNGKey(3), LOG_RADON)
    cs = get_group(compress_mcmc(mcmc, size=8, method="skt", seed=0), "coreset")
    assert cs.attrs["scores_dtype"] == "float32"
    assert "could not be evaluated in float64" in cs.attrs["note_scores"]


def test_a_kernel_without_a_model_and_a_wrong_warmup_are_errors(run):
    mcmc, _ = run
    pot = MCMC(NUTS(potential_fn=lambda x: 0.5 * jnp.sum(x**2)), num_warmup=5, num_samples=5,
               progress_bar=False)
    with float32():
        pot.run(jax.random.PRNGKey(0), init_params=jnp.zeros(2))
    with pytest.raises(TypeError, match="potential_fn, not a model"):
        compress_mcmc(pot, size=2, method="st")
    with pytest.raises(TypeError, match="warmup: expected the dict"):
        compress_mcmc(mcmc, size=2, method="st", warmup=[1, 2])
    with pytest.raises(TypeError, match="mcmc: expected a numpyro.infer.MCMC"):
        compress_mcmc(object(), size=2, method="st")
