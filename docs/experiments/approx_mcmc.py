"""Correcting for approximate MCMC (the shape of the paper's Fig. 2, top): SGLD on a Bayesian
logistic regression.

The data set is generated (N = 2000 points, 4 features and an intercept, d = 5). A
stochastic-gradient Langevin chain (minibatches of 32, no Metropolis correction, preconditioned
by the inverse Hessian at the mode) is biased; it is standard-thinned to n0 points, the
full-data scores are computed on those points only, and each method compresses them. Metrics:
the KSD to P (Stein kernel with M = the inverse Hessian at the mode, IMQ base, median
M-bandwidth) and the energy distance to a long full-gradient MALA reference chain; median over
5 seeds.

    python docs/experiments/approx_mcmc.py        # writes approx_mcmc.png, approx_mcmc.json
    python docs/experiments/approx_mcmc.py --quick
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from _common import (
    HERE,
    cached,
    constant_configs,
    equal_configs,
    plot,
    save_json,
    sc,
    simplex_configs,
    standard_thin,
    sweep,
)

from stein_coreset import datasets as ds


def simulate(n: int, step: float, n_reference: int, seed: int = 0):
    lr = ds.LogisticRegression(n_data=2000, p=4, seed=seed)
    mode, H = lr.mode()
    M = np.linalg.inv(H)
    rng = np.random.default_rng(seed)
    X = ds.sgld(lr, mode, n, step, batch_size=32, precond=M, rng=rng)
    refs = []
    for _ in range(4):
        ch = ds.mala(
            lr.log_density_and_score, mode, n_reference // 4 + 200, 1.0, precond=M, rng=rng
        )
        refs.append(ch.X[200:])
    print(f"  SGLD chain: {n} states; reference MALA acceptance {ch.acceptance_rate:.2f}")
    return {"X": X, "reference": np.concatenate(refs), "M": M}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="n = 2^12, n0 up to 1024, 3 seeds")
    ap.add_argument("--n", type=int, default=None, help="chain length (default 2^14)")
    ap.add_argument("--step", type=float, default=0.5, help="SGLD step in the M metric (0.5)")
    ap.add_argument("--n0", type=int, nargs="+", default=None)
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--refresh", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "approx_mcmc"))
    a = ap.parse_args(argv)
    n = a.n or (2**12 if a.quick else 2**14)
    n0s = a.n0 or ([64, 256, 1024] if a.quick else [256, 1024, 4096])
    seeds = list(range(a.seeds or (3 if a.quick else 5)))
    print(f"simulating an SGLD chain of {n} states on a logistic regression posterior (cached)")
    data = cached(f"sgld_logreg_n{n}_h{a.step:g}", lambda: simulate(n, a.step, 8000), a.refresh)
    X, ref, M = data["X"], data["reference"], data["M"]
    lr = ds.LogisticRegression(n_data=2000, p=4, seed=0)
    # full-data scores at the standard-thinned points only (the paper's protocol); the sweep
    # reads S only there, the other rows stay NaN
    S = np.full_like(X, np.nan)
    need = np.unique(np.concatenate([standard_thin(n, n0) for n0 in n0s]))
    S[need] = lr.score(X[need])
    kernel = sc.SteinKernel(sc.IMQ(sigma=sc.median_bandwidth(X, M=M)), M=M)
    configs = equal_configs(False) + simplex_configs(False) + constant_configs(False)
    results = sweep(configs, X, S, n0s, seeds, kernel, ref)
    meta = {
        "experiment": "approximate MCMC (SGLD, logistic regression d=5)",
        "n": n,
        "n0": n0s,
        "seeds": len(seeds),
        "step": a.step,
        "bandwidth": kernel.base.sigma,
        "full_score_evaluations": int(need.size),
        "command": "python docs/experiments/approx_mcmc.py" + (" --quick" if a.quick else ""),
    }
    save_json(results, a.out + ".json", meta)
    plot(
        results,
        a.out + ".png",
        f"Correcting for approximate MCMC: SGLD (batch 32) on a logistic regression, d = 5, "
        f"n = {n} (median of {len(seeds)} runs)",
    )
    print(f"wrote {a.out}.png, {a.out}.json")


if __name__ == "__main__":
    main()
