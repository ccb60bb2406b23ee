"""Correcting for burn-in (the shape of the paper's Fig. 1 / Figs. I.1-I.3) on the Goodwin ODE.

One P-MALA chain on the Goodwin oscillator posterior (d = 4), started far from the posterior
mass, is standard-thinned to n0 points and compressed by each method; the "burn-in oracle"
baselines instead use 6 independent chains (from 6 starts) to find the burn-in with a
Gelman-Rubin diagnostic (R-hat < 1.1 on states [b, 2b)), discard it, and compress the remainder
with an unbiased method (KT, Compress++, RT, CT). Metrics: KSD (the MMD to P of the Stein
kernel with M = I, IMQ base, median bandwidth) and energy distance to a long reference sample;
median over 5 seeds.

    python docs/experiments/burn_in.py            # writes burn_in.png, burn_in_trajectory.png,
                                                  # burn_in.json (about 10 minutes on 2 cores)
    python docs/experiments/burn_in.py --quick    # smaller n and n0, 3 seeds (a few minutes)
"""

from __future__ import annotations

import argparse
import os
import time

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

#: The 6 starts (theta = a1, a2, k, alpha); the first chain is the one that is compressed.
STARTS = [
    (5.0, 0.5, 5.0, 0.2),
    (10.0, 10.0, 0.3, 0.3),
    (3.0, 1.0, 1.0, 1.0),
    (6.0, 2.0, 0.4, 0.8),
    (0.4, 0.4, 4.0, 0.6),
    (2.0, 8.0, 1.0, 1.0),
]


def simulate(n: int, n_reference: int, seed: int = 0):
    g = ds.Goodwin()
    M = g.laplace_covariance()
    rng = np.random.default_rng(seed)
    chains = []
    for i, start in enumerate(STARTS):
        t0 = time.perf_counter()
        ch = ds.mala(g.log_density_and_score, np.log(start), n, 0.05, precond=M, rng=rng)
        print(
            f"  chain {i + 1}/6: acceptance {ch.acceptance_rate:.2f} "
            f"({time.perf_counter() - t0:.0f} s)"
        )
        chains.append(ch)
    ref = ds.goodwin_chain(
        10, seed=seed + 1, n_reference=n_reference, reference_chains=8, target=g
    ).reference
    out = {"reference": ref}
    for i, ch in enumerate(chains):
        out[f"X{i}"], out[f"S{i}"] = ch.X, ch.S
    return out


def trajectory_figure(X, burn_in, coreset, label, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.2, 3.6))
    ax.plot(X[:, 0], X[:, 1], color="0.75", lw=0.3, label="P-MALA chain")
    ax.plot(
        X[:burn_in, 0],
        X[:burn_in, 1],
        color="tab:red",
        lw=0.6,
        label=f"burn-in (6-chain oracle: {burn_in} states)",
    )
    ax.scatter(
        coreset[:, 0],
        coreset[:, 1],
        s=14,
        color="tab:blue",
        edgecolor="k",
        lw=0.3,
        zorder=3,
        label=f"{label} coreset (1 chain)",
    )
    ax.set_xlabel("log a1")
    ax.set_ylabel("log a2")
    ax.set_title("Goodwin oscillator: burn-in correction", fontsize=9)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="n = 2^12, n0 up to 1024, 3 seeds")
    p.add_argument("--n", type=int, default=None, help="chain length (default 2^14)")
    p.add_argument("--n0", type=int, nargs="+", default=None, help="input sizes after thinning")
    p.add_argument("--seeds", type=int, default=None, help="runs per point (median; default 5)")
    p.add_argument("--refresh", action="store_true", help="re-simulate the cached chains")
    p.add_argument("--rhat", type=float, default=1.1, help="oracle R-hat threshold (1.1)")
    p.add_argument("--out", default=os.path.join(HERE, "burn_in"), help="output path stem")
    a = p.parse_args(argv)
    n = a.n or (2**12 if a.quick else 2**14)
    n0s = a.n0 or ([64, 256, 1024] if a.quick else [256, 1024, 4096])
    seeds = list(range(a.seeds or (3 if a.quick else 5)))

    print(f"simulating 6 P-MALA chains of {n} states on the Goodwin posterior (cached)")
    data = cached(f"goodwin_6chains_n{n}", lambda: simulate(n, 4000), a.refresh)
    X, S, ref = data["X0"], data["S0"], data["reference"]
    b = ds.burn_in_oracle([data[f"X{i}"] for i in range(6)], threshold=a.rhat)
    print(f"burn-in oracle (6 chains, R-hat < {a.rhat} on [b, 2b)): {b} of {n} states")
    kernel = sc.SteinKernel(sc.IMQ(sigma=sc.median_bandwidth(X)))

    configs = equal_configs() + simplex_configs() + constant_configs()
    results = sweep(configs, X, S, n0s, seeds, kernel, ref, burn_in=b)
    meta = {
        "experiment": "burn-in (Goodwin, P-MALA)",
        "n": n,
        "n0": n0s,
        "seeds": len(seeds),
        "burn_in_oracle": b,
        "rhat_threshold": a.rhat,
        "bandwidth": kernel.base.sigma,
        "command": "python docs/experiments/burn_in.py" + (" --quick" if a.quick else ""),
    }
    save_json(results, a.out + ".json", meta)
    plot(
        results,
        a.out + ".png",
        f"Correcting for burn-in: Goodwin oscillator, one P-MALA chain of n = {n} "
        f"(median of {len(seeds)} runs; dashed: 6-chain burn-in oracle)",
    )
    # trajectory with the best available single-chain equal-weighted coreset
    for method in ("lskt", "skt", "st"):
        if method in sc.available_methods():
            n0 = n0s[-1]
            idx = standard_thin(n, n0)
            res = sc.compress(
                X[idx], S[idx], size=int(round(np.sqrt(n0))), method=method, kernel=kernel, seed=0
            )
            trajectory_figure(
                X, b, np.asarray(res.points), method.upper(), a.out + "_trajectory.png"
            )
            break
    print(f"wrote {a.out}.png, {a.out}_trajectory.png, {a.out}.json")


if __name__ == "__main__":
    main()
