"""Eight schools (non-centred) end to end: PyMC trace with its warm-up -> debiased coresets.

Run:  python docs/integrations/eight_schools.py [--size 40] [--tune 500] [--draws 500]
Needs: pip install ".[pymc]" from the source tree (PyMC 5 + ArviZ 0.x, or on Python >= 3.12
PyMC 6 + ArviZ >= 1.1; matplotlib optional, for the figure)

Prints the time to sample, the time to compile, score and compress, the KSD of each coreset and
the error of its weighted posterior mean of (mu, tau, theta) against a long reference run, for
the debiased methods and standard thinning of the same draws and the same size. Then sets what
ArviZ reports next to the weighted truth, computed by hand from ``res.weights`` of the same
compression (``trace_scores`` + ``stein_coreset.compress`` with the same seed): the documented
``stein_coreset.integrations.arviz.summary`` equals it for every kind of weights; plain
``az.summary`` equals it for skt (equal weights, draws with repeats) and follows it to
resampling error for sr (its posterior is an equal-weight resample), with NaN ESS/MCSE/R-hat.
"""

import argparse
import time
import warnings

import arviz as az
import numpy as np
import pymc as pm

import stein_coreset as sc
from stein_coreset.integrations.arviz import get_group, summary, weighted_mean
from stein_coreset.integrations.pymc import compress_trace, trace_scores

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


def means(post):
    """Posterior means of (mu, tau, theta[8]) of a trace as one vector."""
    vals = np.concatenate(
        [
            post[v].values.reshape(post.sizes["chain"] * post.sizes["draw"], -1)
            for v in VARS
        ],
        axis=1,
    )
    return vals.mean(axis=0)


def coreset_means(out):
    """The coreset's weighted means of (mu, tau, theta[8]) as one vector (every kind)."""
    wm = weighted_mean(out, VARS)
    return np.concatenate([np.atleast_1d(wm[v].values) for v in VARS])


def weighted_truth(idata, model, size, method, seed):
    """(mean, sd) of (mu, tau, theta[8]) by hand from res.weights of the same compression."""
    ts = trace_scores(idata, model, progress=False)
    res = sc.compress(ts.X, ts.S, size=size, method=method, seed=np.random.default_rng(seed))
    pts = dict(zip(ts.functions.names,
                   ts.functions.to_constrained(ts.X[np.asarray(res.indices)]), strict=True))
    w = np.asarray(res.weights)
    theta = pts["mu"][:, None] + pts["tau"][:, None] * pts["theta_tilde"]
    x = np.column_stack([pts["mu"], pts["tau"], theta])
    mean = w @ x
    return mean, np.sqrt(w @ (x - mean) ** 2)


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
        a = get_group(out, "coreset").attrs
        err = np.linalg.norm(coreset_means(out) - ref_mean)
        results[label] = out
        print(
            f"{label:<24}{a['ksd']:>8.4f}{err:>10.3f}{a['time_compile_s']:>10.2f}"
            f"{1e3 * a['time_scores_s']:>10.1f}{a['time_compress_s']:>11.3f}   (call {wall:.2f} s)"
        )

    print(f"\npymc {pm.__version__}, arviz {az.__version__}: what ArviZ reports vs the "
          "weighted truth (by hand from res.weights)")
    rows = ["mu", "tau"] + [f"theta[{i}]" for i in range(8)]
    for label, method, draws in (("skt", "skt", None), ("sr", "sr", None),
                                 (f"sr, draws={args.size}", "sr", args.size)):
        out = compress_trace(idata, model, size=args.size, method=method,
                             random_seed=args.seed, draws=draws)
        t_mean, t_sd = weighted_truth(idata, model, args.size, method, args.seed)
        ours = summary(out, var_names=VARS)
        theirs = az.summary(out, var_names=VARS, round_to="none")
        post = get_group(out, "posterior")
        print(f"\n{label}: {post.attrs['coreset_size']} points, posterior "
              f"{post.sizes['chain']} chains x {post.sizes['draw']} draw: "
              f"{post.attrs['posterior_is'][:60]}...")
        print(f"{'':<10}{'truth mean':>11}{'truth sd':>10}{'summary':>10}{'sd':>8}"
              f"{'az mean':>10}{'az sd':>8}{'ess_bulk':>9}{'mcse':>7}{'r_hat':>7}")
        for i, r in enumerate(rows):
            print(f"{r:<10}{t_mean[i]:>11.4f}{t_sd[i]:>10.4f}{ours['mean'].iloc[i]:>10.4f}"
                  f"{ours['sd'].iloc[i]:>8.4f}{theirs['mean'].iloc[i]:>10.4f}"
                  f"{theirs['sd'].iloc[i]:>8.4f}{theirs['ess_bulk'].iloc[i]:>9.1f}"
                  f"{theirs['mcse_mean'].iloc[i]:>7.3f}{theirs['r_hat'].iloc[i]:>7.2f}")
        print(f"max |summary - truth|: mean {np.max(np.abs(ours['mean'] - t_mean)):.1e}, sd "
              f"{np.max(np.abs(ours['sd'] - t_sd)):.1e};  max |az.summary - truth|: mean "
              f"{np.max(np.abs(theirs['mean'] - t_mean)):.3f}, sd "
              f"{np.max(np.abs(theirs['sd'] - t_sd)):.3f} (az.summary's sd is ddof=1)")
    sc_out = results["sc"]
    t_mean, _ = weighted_truth(idata, model, args.size, "sc", args.seed)
    print(f"\nsc: groups {sorted(g for g in ('posterior', 'coreset') if g in groups(sc_out))}; "
          f"max |summary mean - truth| = "
          f"{np.max(np.abs(summary(sc_out, var_names=VARS)['mean'] - t_mean)):.1e}")

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
            p = get_group(results[label], "coreset")  # the weighted support
            w = p["weight"].values.ravel()
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


def groups(out):
    """The group names of an InferenceData (ArviZ 0.x) or a DataTree (ArviZ 1.x)."""
    return out.groups() if callable(getattr(out, "groups", None)) else list(out.children)


if __name__ == "__main__":
    main()
