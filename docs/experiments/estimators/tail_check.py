"""Choosing the tail check of the standard errors: which values, which threshold (issue 55).

The sandwich needs the per-point contributions c_i to the loss's gradient to have a finite
variance. We estimate the generalised Pareto shape xi of their tail (xi < 1/2 iff the variance
is finite; stein_coreset.estimators.tails) on R samples (seeds 5000 + r, apart from the
coverage runs' 1000 + r) of each model, for the contributions c (per parameter) and for the
influence values H^-1 c, and prints the median of the largest xi-hat over parameters and how
often it exceeds 1/2 and 0.7. Models and fits as in coverage.py: Gaussian (0.5, 2), Gamma (6, 2)
(variance finite, fourth moment not, under SM), the 2-d correlated Gaussian (1, 2, 0.6); Gamma
(3, 1) and Cauchy data, where SM's contributions have an infinite variance.

    python docs/experiments/estimators/tail_check.py [--reps 40] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

import stein_coreset as sc  # noqa: E402
from stein_coreset import estimators as est  # noqa: E402
from stein_coreset.estimators import inference  # noqa: E402
from stein_coreset.estimators.diffusion import as_diffusion  # noqa: E402
from stein_coreset.estimators.tails import tail_shapes  # noqa: E402

CASES = {"Gaussian (0.5, 2)": (est.Gaussian(), [0.5, 2.0], "gaussian"),
         "Gamma (6, 2)": (est.Gamma(), [6.0, 2.0], "gamma"),
         "2-d correlated": (common.CorrelatedGaussian(), [1.0, 2.0, 0.6], "correlated"),
         "Gamma (3, 1)": (est.Gamma(), [3.0, 1.0], "gamma"),
         "Cauchy data": (est.Gaussian(), None, "cauchy")}


def run(reps, cases=tuple(CASES), discrepancies=("sm", "ksd", "dksd"), n=500):
    """{(case, discrepancy): (xi-hat of c, xi-hat of H^-1 c), each (reps,) of the max over
    parameters}."""
    out = {}
    for name in cases:
        model, truth, kind = CASES[name]
        for disc in discrepancies:
            kw = common.fit_kwargs(disc, kind)
            xc, xp = [], []
            for r in range(reps):
                rng = np.random.default_rng(5000 + r)
                X = rng.standard_cauchy((n, 1)) if truth is None else model.sample(n, truth,
                                                                                    rng)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    f = est.fit(model, X, optimizer="lbfgs", **kw)
                kern = None if disc == "sm" else sc.IMQ(sc.median_bandwidth(X))
                diff = as_diffusion(kw.get("diffusion"))
                sw = inference.sandwich(model, X, f.theta, disc, kern, diff)
                if sw.cov is None:
                    continue
                C = sw.contributions
                xc.append(np.nanmax(tail_shapes(C)))
                xp.append(np.nanmax(tail_shapes((C - C.mean(0)) @ np.linalg.inv(sw.hessian))))
            out[name, disc] = (np.array(xc), np.array(xp))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=40)
    p.add_argument("--quick", action="store_true", help="3 samples, SM, two models")
    args = p.parse_args(argv)
    if args.quick:
        res = run(3, ("Gaussian (0.5, 2)", "Cauchy data"), ("sm",), n=300)
    else:
        res = run(args.reps)
    print("| model | discrepancy | c: median xi-hat | c: > 1/2 | c: > 0.7 | H^-1 c: median | "
          "H^-1 c: > 1/2 | H^-1 c: > 0.7 |")
    print("|---|---|---|---|---|---|---|---|")
    for (name, disc), (xc, xp) in res.items():
        print(f"| {name} | {disc.upper()} | {np.median(xc):.2f} | {np.mean(xc > 0.5):.0%} | "
              f"{np.mean(xc > 0.7):.0%} | {np.median(xp):.2f} | {np.mean(xp > 0.5):.0%} | "
              f"{np.mean(xp > 0.7):.0%} |")
    return res


if __name__ == "__main__":
    main()
