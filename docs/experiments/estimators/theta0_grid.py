"""Poor starts: a 7 x 5 grid of theta0 for SM, KSD and DKSD on one Gaussian sample (issue 55).

The sample of the issue's reproducer (n = 500 from N(0.5, 2^2), seed 7), the model
Gaussian(d=1), theta = (loc, scale), L-BFGS from each theta0 in loc {-3, -2, -1, 0, 1, 2, 3} x
scale {0.25, 0.5, 1, 2, 4}; KSD and DKSD with IMQ(2) (DKSD with m(x) = 1 / (1 + x^2)). The
reference is each discrepancy's fit from the default start, checked against Nelder-Mead; it
and its standard errors always come from the installed, verified fit, also when ``--before``
loads older estimators for the grid. A fit is *wrong* when it is more than 0.01 standard errors
(the tolerance that ``converged`` promises) from the reference in any parameter. The script
counts converged-and-right, converged-and-wrong (must be 0), not converged, and the reasons
given, and draws the grid.

    python docs/experiments/estimators/theta0_grid.py [--quick] [--out FILE] [--before DIR]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

LOCS = (-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0)
SCALES = (0.25, 0.5, 1.0, 2.0, 4.0)
WRONG = 0.01  # standard errors: the tolerance of converged (verify.NEWTON_TOLERANCE)


def settings():
    return {"SM": {"discrepancy": "sm"},
            "KSD": {"discrepancy": "ksd", "kernel": common.IMQ2},
            "DKSD": {"discrepancy": "dksd", "kernel": common.IMQ2,
                     "diffusion": common.robust_m}}


def _reason(msg):
    """A short label for a not-converged message."""
    for key, label in (("Newton", "Newton check failed"), ("runs away", "runaway"),
                       ("approaches its bound", "unbounded towards a bound"),
                       ("not positive definite", "Hessian not PD"),
                       ("no positive curvature", "Hessian not PD"),
                       ("NaN or inf", "numerical excursion"), ("overflow", "numerical excursion"),
                       ("derivatives", "kink check")):
        if key in msg:
            return label
    return msg[:60]


def run(est, locs=LOCS, scales=SCALES):
    """{discrepancy: dict(grid=(len(locs), len(scales)) codes, counts, reasons, ref)}; codes:
    1 converged and right, 2 converged and wrong, 0 not converged and right, -1 neither."""
    cur = common.estimators(None)
    X = cur.Gaussian(d=1).sample(500, [0.5, 2.0], np.random.default_rng(7))
    model = est.Gaussian(d=1)
    out = {}
    for name, kw in settings().items():
        ref = cur.fit(cur.Gaussian(d=1), X, optimizer="lbfgs", **kw)
        nm = cur.fit(cur.Gaussian(d=1), X, optimizer="nelder_mead", steps=2000, **kw)
        se = ref.stderr
        grid = np.zeros((len(locs), len(scales)), dtype=int)
        worst = 0.0  # the largest distance of a converged fit, in standard errors
        reasons = Counter()
        for i, loc in enumerate(locs):
            for j, s in enumerate(scales):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    f = est.fit(model, X, optimizer="lbfgs", theta0=[loc, s], **kw)
                dist = float(np.max(np.abs(f.theta - ref.theta) / se))
                right = dist <= WRONG
                if f.converged:
                    worst = max(worst, dist)
                    grid[i, j] = 1 if right else 2
                else:
                    grid[i, j] = 0 if right else -1
                    reasons[_reason(f.message)] += 1
        out[name] = dict(grid=grid, ref=ref.theta, se=se, nm=nm.theta, worst=worst,
                         counts={"converged, right": int(np.sum(grid == 1)),
                                 "converged, WRONG": int(np.sum(grid == 2)),
                                 "not converged, right": int(np.sum(grid == 0)),
                                 "not converged, wrong": int(np.sum(grid == -1))},
                         reasons=dict(reasons))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a 2 x 2 corner of the grid")
    p.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".png"))
    p.add_argument("--before", default=None, help="an older estimators package directory")
    args = p.parse_args(argv)
    est = common.estimators(args.before)
    locs, scales = ((-3.0, 0.0), (1.0, 4.0)) if args.quick else (LOCS, SCALES)
    res = run(est, locs, scales)
    print(f"theta0 grid {len(locs)} x {len(scales)} (loc x scale), Gaussian n = 500, L-BFGS; "
          f"wrong = more than {WRONG} standard errors from the reference"
          + (f"; estimators from {args.before}" if args.before else ""))
    for name, r in res.items():
        dev = np.max(np.abs(r["nm"] - r["ref"]) / r["se"])
        print(f"{name}: reference {np.round(r['ref'], 4).tolist()} (Nelder-Mead within "
              f"{dev:.1g} se); " + ", ".join(f"{k} {v}" for k, v in r["counts"].items())
              + f"; farthest converged fit {r['worst']:.2g} se")
        if r["reasons"]:
            print("    not converged: " + ", ".join(f"{k} {v}" for k, v in
                                                    sorted(r["reasons"].items())))
    total = sum(r["counts"]["converged, WRONG"] for r in res.values())
    print(f"wrong and converged: {total}/{len(res) * len(locs) * len(scales)}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    cmap = ListedColormap(["#bbbbbb", "#f2c14e", "#4c9f70", "#d1495b"])
    fig, axes = plt.subplots(1, len(res), figsize=(3.2 * len(res), 3.2))
    for ax, (name, r) in zip(np.atleast_1d(axes), res.items(), strict=True):
        ax.imshow(r["grid"].T + 1, cmap=cmap, vmin=0, vmax=3, origin="lower")
        ax.set_xticks(range(len(locs)), [f"{v:g}" for v in locs])
        ax.set_yticks(range(len(scales)), [f"{v:g}" for v in scales])
        ax.set_xlabel("loc of theta0")
        ax.set_title(f"{name}: {r['counts']['converged, WRONG']} wrong+converged", fontsize=9)
    np.atleast_1d(axes)[0].set_ylabel("scale of theta0")
    fig.suptitle("green: converged, right; red: converged, WRONG; yellow: not converged "
                 "(right); grey: not converged (wrong)", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    plt.close(fig)
    print(f"wrote {args.out}")
    return res


if __name__ == "__main__":
    main()
