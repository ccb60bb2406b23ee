"""KT-Compress++ against the authors' ``goodpoints.compress.compresspp_kt``: MMD to the input and
time, on identical inputs, stage by stage.

    python docs/experiments/compresspp_gap.py --n 12 14 16 18 --seeds 5 --json gap.json
    python docs/experiments/compresspp_gap.py --n 12 14 --seeds 5 --variants   # the diagnosis

Input: a 4-d ULA chain for P = N(0, I) with its burn-in kept (x_0 = 4 (1, 1, 1, 1), step 0.3,
so biased both by the start and by the discretisation), seed s. Both sides use the Gaussian
kernel exp(-|x - y|^2 / (2 sigma^2)) with sigma^2 = 2 d (goodpoints' ``k_params = 2 sigma^2``),
g = 4, delta = 1/2, m = sqrt(n). The MMD of each output to the input's empirical distribution is
exact (the kernel centred at all n points, O(n^2) C++). The two methods run alternately in one
process, so the time ratio is of one run.

``--variants`` adds goodpoints with ``skip_swap=True`` (KT-SPLIT halvings without their
refinement) and ours with each change that could explain a gap, one at a time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import numpy as np


def ula_chain(n: int, d: int = 4, seed: int = 0, step: float = 0.3, start: float = 4.0):
    """n steps of the unadjusted Langevin algorithm for N(0, I_d) from start * 1, kept whole."""
    rng = np.random.default_rng(seed)
    X = np.empty((n, d))
    x = np.full(d, start)
    noise = rng.standard_normal((n, d)) * math.sqrt(2 * step)
    for t in range(n):
        x = x - step * x + noise[t]
        X[t] = x
    return X


def mmd_to_input(Kc, idx, n):
    """MMD of the equal-weight multiset ``idx`` to the input, from the centred kernel matrix."""
    from stein_coreset.engine.cpu import bridge

    w = np.bincount(np.asarray(idx, dtype=np.int64), minlength=n) / len(idx)
    nz = np.flatnonzero(w)
    return math.sqrt(max(float(w[nz] @ bridge.gram(Kc, nz, nz) @ w[nz]), 0.0))


def ours(X, m, sigma, seed, **options):
    import stein_coreset as sc

    options.setdefault("g", 4)
    res = sc.compress(X, size=m, method="compresspp", kernel=sc.Gaussian(sigma=sigma),
                      seed=seed, **options)
    return np.repeat(np.asarray(res.indices), np.rint(np.asarray(res.weights) * m).astype(int))


def goodpoints(X, m, sigma, seed, g=4, skip_swap=False):
    from goodpoints import compress as gp

    return gp.compresspp_kt(X, b"gaussian", k_params=np.array([2.0 * sigma**2]), g=g,
                            delta=0.5, seed=seed, skip_swap=skip_swap)


def run(ns, seeds, variants=(), d=4, first_seed=0):
    import stein_coreset as sc
    from stein_coreset.kernels import centred_kernel_matrix

    sigma = math.sqrt(2.0 * d)
    rows = []
    for logn in ns:
        n = 1 << logn
        m = math.isqrt(n)
        for s in range(first_seed, first_seed + seeds):
            X = ula_chain(n, d, seed=s)
            Kc = centred_kernel_matrix(sc.Gaussian(sigma=sigma), X)
            runs = {"goodpoints": lambda X=X, s=s, m=m: goodpoints(X, m, sigma, s),
                    "ours": lambda X=X, s=s, m=m: ours(X, m, sigma, s)}
            if "skip_swap" in variants:
                runs["goodpoints_skip_swap"] = lambda X=X, s=s, m=m: goodpoints(X, m, sigma, s,
                                                                           skip_swap=True)
            for name, opts in VARIANTS.items():
                if name in variants:
                    runs[f"ours_{name}"] = lambda X=X, s=s, m=m, o=opts: ours(X, m, sigma, s, **o)
            row = {"n": n, "seed": s, "m": m}
            for name, fn in runs.items():
                t0 = time.perf_counter()
                idx = fn()
                row[f"{name}_s"] = time.perf_counter() - t0
                row[f"{name}_mmd"] = mmd_to_input(Kc, idx, n)
            rows.append(row)
            print(json.dumps({k: (round(v, 5) if isinstance(v, float) else v)
                              for k, v in row.items()}), flush=True)
    return rows


#: The options of ours tried one at a time by --variants (each a suspected cause of a gap).
VARIANTS = {
    "passes1": {"swap_passes": 1},  # the default before (one KT-Swap sweep)
    "target_compress": {"swap_target": "compress"},  # goodpoints' final target
    "g5": {"g": 5},  # a COMPRESS output twice as large, as goodpoints' 4 bins give
}


def summarize(rows, names=("ours",)):
    out = []
    for n in sorted({r["n"] for r in rows}):
        rs = [r for r in rows if r["n"] == n]
        for name in names:
            ratio = [r[f"{name}_mmd"] / r["goodpoints_mmd"] for r in rs]
            time_ratio = [r[f"{name}_s"] / r["goodpoints_s"] for r in rs]
            out.append({"n": n, "method": name, "seeds": len(rs),
                        "mmd_ratio_mean": float(np.mean(ratio)),
                        "mmd_ratio_max": float(np.max(ratio)),
                        "worse_in": int(sum(x > 1 for x in ratio)),
                        "time_ratio": float(np.median(time_ratio))})
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, nargs="+", default=[12, 14, 16])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--first-seed", type=int, default=0,
                   help="seeds first-seed .. first-seed + seeds - 1 (to add seeds to a run)")
    p.add_argument("--variants", nargs="*", default=None,
                   help="also run these variants (skip_swap and the VARIANTS names; no names: all)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    print(f"load average {os.getloadavg()}")
    variants = () if args.variants is None else (args.variants or ["skip_swap", *VARIANTS])
    rows = run(args.n, args.seeds, variants, first_seed=args.first_seed)
    names = [k[:-4] for k in rows[0] if k.endswith("_mmd") and k != "goodpoints_mmd"]
    table = summarize(rows, names)
    for t in table:
        print(f"n = {t['n']:>7} {t['method']:<28} MMD / goodpoints: mean {t['mmd_ratio_mean']:.3f} "
              f"max {t['mmd_ratio_max']:.3f}, worse in {t['worse_in']}/{t['seeds']} seeds; "
              f"time / goodpoints {t['time_ratio']:.3f}")
    print(f"load average {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "summary": table}, f, indent=1)


if __name__ == "__main__":
    main()
