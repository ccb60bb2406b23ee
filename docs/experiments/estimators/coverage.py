"""Coverage of the asymptotic intervals, and how often the tail check warns (issue 55).

For each model and discrepancy, R samples of n = 500 from the model at a known theta*, an
L-BFGS fit of each (SM; KSD with the median-heuristic IMQ; DKSD with that kernel and a
diffusion: m(x) = 1 / (1 + x^2) for the Gaussian, m(x) = x for the Gammas, a full constant
m = [[1, .5], [.5, 1]] for the 2-d model), and the fraction of 95% intervals
``fit.conf_int()`` that contain theta*. Models: Gaussian(d=1) at (0.5, 2); Gamma at (6, 2),
where SM's per-point contributions have a finite variance (they grow like x^-2, finite for
shape > 4) but no finite fourth moment; the centred bivariate Gaussian with correlation at
(s1, s2, rho) = (1, 2, 0.6), a user model with rho in (-1, 1); and, where the variance is
infinite, Gamma at (3, 1) and Cauchy data under the Gaussian model (no theta*: only the
warnings). The script prints per cell the fits that converged, the coverage per parameter,
the mean standard error against the standard deviation of the estimates, and the share of
fits that warned (StandardErrorWarning: the generalised Pareto shape of a parameter's
per-point contributions above 1/2); ``--json`` writes every number.

    python docs/experiments/estimators/coverage.py [--reps 200] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

from stein_coreset import estimators as est  # noqa: E402

CASES = {
    "gaussian": (lambda: est.Gaussian(d=1), [0.5, 2.0]),
    "gamma": (lambda: est.Gamma(), [6.0, 2.0]),
    "correlated": (lambda: common.CorrelatedGaussian(), [1.0, 2.0, 0.6]),
    "gamma31": (lambda: est.Gamma(), [3.0, 1.0]),
    "cauchy": (lambda: est.Gaussian(d=1), None),
}
LABELS = {"gaussian": "Gaussian (0.5, 2)", "gamma": "Gamma (6, 2)",
          "correlated": "2-d correlated (1, 2, 0.6)", "gamma31": "Gamma (3, 1)",
          "cauchy": "Cauchy data, Gaussian model"}
DISCREPANCIES = ("sm", "ksd", "dksd")


def _sample(case, model, truth, n, rng):
    if case == "cauchy":
        return rng.standard_cauchy((n, 1))
    return model.sample(n, truth, rng)


def run(cases, reps, n=500, seed0=1000):
    """{(case, discrepancy): dict of per-repetition arrays: theta, stderr, converged, xi,
    warned, covered}."""
    out = {}
    for case in cases:
        make, truth = CASES[case]
        model = make()
        mkind = "gamma" if case.startswith("gamma") else case
        for disc in DISCREPANCIES:
            kw = common.fit_kwargs(disc, mkind)
            rec = {k: [] for k in ("theta", "stderr", "converged", "xi", "warned")}
            for r in range(reps):
                X = _sample(case, model, truth, n, np.random.default_rng(seed0 + r))
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    f = est.fit(model, X, optimizer="lbfgs", **kw)
                p = f.theta.size
                rec["theta"].append(f.theta)
                rec["stderr"].append(f.stderr if f.stderr is not None else np.full(p, np.nan))
                rec["converged"].append(f.converged)
                rec["xi"].append(f.tail_shape if f.tail_shape is not None
                                 else np.full(p, np.nan))
                rec["warned"].append(any(issubclass(x.category, est.StandardErrorWarning)
                                         for x in w))
            rec = {k: np.asarray(v) for k, v in rec.items()}
            if truth is not None:
                rec["covered"] = np.abs(rec["theta"] - np.asarray(truth)) <= \
                    1.959963984540054 * rec["stderr"]
            out[case, disc] = rec
    return out


def table(res, reps):
    lines = ["| model | discrepancy | converged | coverage of 95% intervals | mean stderr | "
             "sd of estimates | warned |", "|---|---|---|---|---|---|---|"]
    for (case, disc), rec in res.items():
        conv = int(rec["converged"].sum())
        warned = float(rec["warned"].mean())
        if "covered" in rec:
            ok = rec["converged"]
            cov = ", ".join(f"{v:.3f}" for v in rec["covered"][ok].mean(axis=0))
            se = ", ".join(f"{v:.3g}" for v in np.nanmean(rec["stderr"][ok], axis=0))
            sd = ", ".join(f"{v:.3g}" for v in np.std(rec["theta"][ok], axis=0))
        else:
            cov = se = sd = "-"
        lines.append(f"| {LABELS[case]} | {disc.upper()} | {conv}/{reps} | {cov} | {se} | "
                     f"{sd} | {warned:.1%} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--quick", action="store_true", help="3 repetitions, n = 200")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".png"))
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    reps, n = (3, 200) if args.quick else (args.reps, 500)
    cases = args.cases.split(",")
    t0 = time.perf_counter()
    res = run(cases, reps, n)
    print(f"n = {n}, {reps} repetitions, L-BFGS, {time.perf_counter() - t0:.0f} s")
    print(table(res, reps))
    if args.json is not None:
        args.json.write_text(json.dumps({f"{c}/{d}": {k: v.tolist() for k, v in r.items()}
                                         for (c, d), r in res.items()}))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6))
    xs, labels = [], []
    for (case, disc), rec in res.items():
        labels.append(f"{case}\n{disc}")
        xs.append(len(xs))
        if "covered" in rec:
            cov = rec["covered"][rec["converged"]].mean(axis=0)
            a1.plot([xs[-1]] * cov.size, cov, "o", color="C0")
        a2.bar(xs[-1], rec["warned"].mean(), color="C3")
    a1.axhline(0.95, color="k", lw=0.8, ls="--")
    a1.set_ylabel("coverage (each parameter)")
    a2.set_ylabel("share of fits warned")
    for ax in (a1, a2):
        ax.set_xticks(xs, labels, fontsize=6, rotation=90)
    fig.suptitle(f"95% intervals, n = {n}, {reps} repetitions", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    plt.close(fig)
    print(f"wrote {args.out}")
    return res


if __name__ == "__main__":
    main()
