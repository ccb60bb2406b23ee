"""Eight schools (non-centred) end to end: PyMC trace with its warm-up -> debiased coresets.

Run:  python docs/integrations/eight_schools.py [--size 40] [--tune 500] [--draws 500]
Needs: pip install ".[pymc]" from the source tree (PyMC 5 + ArviZ 0.x, or on Python >= 3.12
PyMC 6 + ArviZ >= 1.1; matplotlib optional, for the figure)

Prints the time to sample, the time to score and compress, the KSD of each coreset and the error
of its (weighted) posterior mean of (mu, tau, theta) against a long reference run, for the
debiased methods and standard thinning of the same draws and the same size. Then checks that
``az.summary`` reports the coreset's own means: for skt (equal weights, draws with repeats) and
for sr with ``resample_equal=True`` its means equal the weighted means to 1e-12; for sr's
weighted support they do not, which is why the weights live in the ``coreset`` group.
"""

import argparse
import time
import warnings

import arviz as az
import numpy as np
import pymc as pm

from stein_coreset.integrations.arviz import get_group, weighted_mean
from stein_coreset.integrations.pymc import compress_trace

warnings.filterwarnings("ignore")

Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def eight_schools():
    with pm.Model(coords={"school": np.arange(8)}) as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        theta_tilde = pm.Normal("theta_tilde", 0.0, 1.0, dims="school")
        theta = pm.Deterministic("theta", mu + tau * theta_tilde, dims="school")
        pm.Normal("y", theta, SIGMA, observed=Y, dims="school")
    return model


def sample(model, draws, tune, seed, chains=2):
    with model:
        return pm.sample(
            draws,
            tune=tune,
            chains=chains,
            cores=1,
            random_seed=seed,
            discard_tuned_samples=False,
            progressbar=False,
            compute_convergence_checks=False,
        )


VARS = ["mu", "tau", "theta"]


def means(post, weights=None):
    """Posterior means of (mu, tau, theta[8]) as one vector, weighted by the coreset."""
    vals = np.concatenate(
        [
            post[v].values.reshape(post.sizes["chain"] * post.sizes["draw"], -1)
            for v in VARS
        ],
        axis=1,
    )
    w = np.full(vals.shape[0], 1 / vals.shape[0]) if weights is None else weights.ravel()
    return w @ vals


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=40)
    ap.add_argument("--tune", type=int, default=500)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--ref-draws", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--figure", default=None, help="write the coreset-over-trace figure here")
    args = ap.parse_args()

    model = eight_schools()
    t = time.perf_counter()
    idata = sample(model, args.draws, args.tune, args.seed)
    t_sample = time.perf_counter() - t
    t = time.perf_counter()
    ref = get_group(sample(model, args.ref_draws, 1000, 12345, chains=4), "posterior")
    t_ref = time.perf_counter() - t
    ref_mean = means(ref)
    n = 2 * (args.tune + args.draws)
    print(
        f"sample: {t_sample:.1f} s for 2 chains x ({args.tune} warm-up + {args.draws}) draws; "
        f"reference: {t_ref:.1f} s for 4 x {args.ref_draws}"
    )
    print(f"n = {n} draws (warm-up included), size = {args.size}")
    head = ("method", "KSD", "mean err", "compile s", "scores ms", "compress s")
    print("{:<24}{:>8}{:>10}{:>10}{:>10}{:>11}".format(*head))

    results = {}
    full = means(get_group(idata, "posterior"))
    print(f"{'all post-warmup draws':<24}{'':>8}{np.linalg.norm(full - ref_mean):>10.3f}")
    for label, method, warm in [
        ("standard", "standard", True),
        ("standard (post-warmup)", "standard", False),
        ("st", "st", True),
        ("skt", "skt", True),
        ("sr", "sr", True),
        ("sc", "sc", True),
        ("lskt", "lskt", True),
    ]:
        t = time.perf_counter()
        out = compress_trace(
            idata, model, size=args.size, method=method, random_seed=args.seed,
            include_warmup=warm,
        )
        wall = time.perf_counter() - t
        post = get_group(out, "posterior")
        err = np.linalg.norm(means(post, get_group(out, "coreset")["weight"].values) - ref_mean)
        a = post.attrs
        results[label] = out
        print(
            f"{label:<24}{a['ksd']:>8.4f}{err:>10.3f}{a['time_compile_s']:>10.2f}"
            f"{1e3 * a['time_scores_s']:>10.1f}{a['time_compress_s']:>11.3f}   (call {wall:.2f} s)"
        )

    print(f"\npymc {pm.__version__}, arviz {az.__version__}: az.summary mean vs weighted mean")
    sr_eq = compress_trace(
        idata, model, size=args.size, method="sr", random_seed=args.seed, resample_equal=True
    )
    for label, out in (("skt", results["skt"]), ("sr resample_equal", sr_eq),
                       ("sr (weighted support)", results["sr"])):
        summ = az.summary(out, var_names=VARS, kind="stats", round_to="none")
        wm = weighted_mean(out, VARS)
        want = np.concatenate([np.atleast_1d(wm[v].values) for v in VARS])
        diff = np.max(np.abs(summ["mean"].to_numpy() - want))
        ndraw = get_group(out, "posterior").sizes["draw"]
        print(f"{label:<24} draws {ndraw:>3}  max |summary mean - weighted mean| = {diff:.2e}")
    sr_w = weighted_mean(results["sr"], VARS)
    sr_eq_m = weighted_mean(sr_eq, VARS)
    gap = max(float(np.max(np.abs(sr_w[v] - sr_eq_m[v]))) for v in VARS)
    print(f"sr weighted mean vs its resample_equal mean: max gap {gap:.3f}")

    if args.figure:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4.5))
        for g, c in (("warmup_posterior", "0.8"), ("posterior", "0.5")):
            ds = get_group(idata, g)
            ax.scatter(
                ds["mu"].values.ravel(),
                np.log(ds["tau"].values.ravel()),
                s=3,
                c=c,
                label="warm-up" if g == "warmup_posterior" else "draws",
            )
        p = get_group(results["standard"], "posterior")
        ax.scatter(
            p["mu"].values.ravel(),
            np.log(p["tau"].values.ravel()),
            marker="x",
            s=30,
            c="C3",
            label="standard thinning",
        )
        for label, mk, col in (("skt", "o", "C0"), ("sr", "s", "C2")):
            p = get_group(results[label], "posterior")
            w = get_group(results[label], "coreset")["weight"].values.ravel()
            ax.scatter(
                p["mu"].values.ravel(),
                np.log(p["tau"].values.ravel()),
                marker=mk,
                s=20 + 800 * w,
                facecolors="none",
                edgecolors=col,
                label=f"{label} (area ~ weight)",
            )
        ax.set_xlabel("mu")
        ax.set_ylabel("log tau")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.figure, dpi=90)


if __name__ == "__main__":
    main()
