"""Data in other units: every fit of 10^k X, k = -3 ... 6, against the fit of X (issue 55).

A fit of data in other units should be the same fit rescaled: for the Gaussian model theta =
(loc, scale) both carry the data's units, so theta_hat(10^k X) / 10^k = theta_hat(X). For each
discrepancy (SM; KSD with the median-heuristic IMQ, which follows the data; DKSD with
m_theta(x) = 1 + ((x - loc) / scale)^2; DSM with m(x) = 1 / (1 + (x / sd(X))^2); NNSM on
positive data) and each optimiser, the script fits X = N(0.5, 2^2) (n = 500, seed 7; NNSM:
N(5, 1)) in ten units and prints how many fits converged and the largest
|theta_hat(10^k X) / 10^k - theta_hat(X)| over k, in standard errors of the fit of X. Before
the verification, L-BFGS stopped on absolute tolerances: one iteration on data in units of 1000.

    python docs/experiments/estimators/scale_equivariance.py [--quick] [--before DIR]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

KS = tuple(range(-3, 7))
OPTIMIZERS = ("lbfgs", "nelder_mead", "riemannian_sgd", "sgd")
DISCREPANCIES = ("sm", "ksd", "dksd", "dsm", "nnsm")


def _kwargs(discrepancy, Y):
    if discrepancy == "dksd":
        return {"diffusion": lambda x, t: 1.0 + ((x[:, 0] - t[0]) / t[1]) ** 2}
    if discrepancy == "dsm":
        s0 = float(Y.std())
        return {"diffusion": lambda x, t: 1.0 / (1.0 + (x[:, 0] / s0) ** 2)}
    return {}


def run(est, ks=KS, optimizers=OPTIMIZERS, discrepancies=DISCREPANCIES, n=500):
    """{(discrepancy, optimizer): dict(converged=int, worst=float (se), reference=theta)};
    the reference is the installed library's fit of X (its standard errors too)."""
    cur = common.estimators(None)
    rng = np.random.default_rng(7)
    base = {"nnsm": 5.0 + rng.standard_normal((n, 1))}
    base.update(dict.fromkeys(("sm", "ksd", "dksd", "dsm"),
                              cur.Gaussian(d=1).sample(n, [0.5, 2.0], np.random.default_rng(7))))
    out = {}
    for disc in discrepancies:
        X = base[disc]
        ref = cur.fit(cur.Gaussian(d=1), X, discrepancy=disc, optimizer="lbfgs",
                      **_kwargs(disc, X))
        for opt in optimizers:
            conv, worst, worst_all = 0, 0.0, 0.0
            for k in ks:
                Y = X * 10.0**k
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    try:
                        f = est.fit(est.Gaussian(d=1), Y, discrepancy=disc, optimizer=opt,
                                    **_kwargs(disc, Y))
                    except ValueError as e:  # the older code raised for some units
                        print(f"  {disc}/{opt} k={k}: ValueError {str(e)[:80]}")
                        worst = np.inf
                        continue
                dist = float(np.max(np.abs(f.theta / 10.0**k - ref.theta) / ref.stderr))
                conv += bool(f.converged)
                worst_all = max(worst_all, dist)
                if f.converged:
                    worst = max(worst, dist)
            out[disc, opt] = dict(converged=conv, worst=worst, worst_all=worst_all,
                                  reference=ref.theta)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="k in {-3, 6}, L-BFGS, SM and KSD")
    p.add_argument("--before", default=None, help="an older estimators package directory")
    args = p.parse_args(argv)
    est = common.estimators(args.before)
    if args.quick:
        res = run(est, ks=(-3, 0, 6), optimizers=("lbfgs",), discrepancies=("sm", "ksd"), n=200)
    else:
        res = run(est)
    ks = (-3, 0, 6) if args.quick else KS
    print(f"data x 10^k, k = {ks[0]} ... {ks[-1]}: converged fits, and the largest "
          "|theta(10^k X) / 10^k - theta(X)| in standard errors over those (over all fits in "
          "brackets where some did not converge)"
          + (f"; estimators from {args.before}" if args.before else ""))
    opts = sorted({o for _, o in res}, key=lambda o: OPTIMIZERS.index(o))
    print(f"{'':6s}" + "".join(f"{o:>28s}" for o in opts))
    for disc in dict.fromkeys(d for d, _ in res):
        cells = []
        for o in opts:
            r = res[disc, o]
            extra = "" if r["converged"] == len(ks) else f" [{r['worst_all']:.2g}]"
            cells.append(f"{r['converged']:>2d}/{len(ks)} {r['worst']:8.2g} se{extra}")
        print(f"{disc:6s}" + "".join(f"{c:>28s}" for c in cells))
    return res


if __name__ == "__main__":
    main()
