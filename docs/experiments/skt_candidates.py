"""Does SKT's KT-SPLIT work pay? How often Stein thinning's baseline wins KT-Swap's final pick,
by how much, and whether swapping more of KT-SPLIT's candidates changes that.

    python docs/experiments/skt_candidates.py --json skt_candidates.json
    python docs/experiments/skt_candidates.py --pdb /work/pdb_chains   # + the posteriordb chains

SKT (Alg. 1) runs Stein thinning to n' points, KT-SPLIT into 2^t candidate coresets, then
KT-Swap on the best candidate (by MMD to P) and on the baseline (Stein thinning's first m picks),
and keeps the better after swapping. For each input this records the KSD of every stage, the
winner, and what swapping the k best candidates (k = 1, 2, 4) would have given, with the time
of each part (ST, KT-SPLIT, one KT-Swap refinement). Inputs: the usual biased chains (a shifted,
over-dispersed Gaussian sample for N(0, I_d), d = 2 ... 100; the Gaussian-mixture MALA chain;
the Goodwin P-MALA chain; a ULA chain with its burn-in) at n = 2^12 ... 2^16, and, with
``--pdb DIR``, saved posteriordb chains (``NAME_{nuts,tempered}.npz`` holding X and S, as the
posteriordb experiment samples them: 25 warm-up draws kept, or tempered at T = 2).
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import time

import numpy as np


def usual_inputs(quick: bool = False):
    """(name, X, S) of the usual chains."""
    from stein_coreset.datasets import gmm_chain, goodwin_chain

    out = []
    for logn, d in ([(12, 2), (14, 4)] if quick else
                    [(12, 2), (12, 10), (14, 2), (14, 4), (14, 10), (14, 50), (14, 100),
                     (16, 4)]):
        n = 1 << logn
        X = 0.7 + 1.5 * np.random.default_rng(logn + d).standard_normal((n, d))
        out.append((f"gauss_n2^{logn}_d{d}", X, -X))
    if not quick:
        for logn in (12, 14):
            c = gmm_chain(1 << logn, seed=0)
            out.append((f"gmm_n2^{logn}", np.asarray(c.X), np.asarray(c.S)))
        c = goodwin_chain(1 << 12, seed=0)
        out.append(("goodwin_n2^12", np.asarray(c.X), np.asarray(c.S)))
        rng = np.random.default_rng(3)
        n, d, h = 1 << 14, 4, 0.3
        X = np.empty((n, d))
        x = np.full(d, 4.0)
        for t in range(n):
            x = x - h * x + math.sqrt(2 * h) * rng.standard_normal(d)
            X[t] = x
        out.append(("ula_n2^14_d4", X, -X))
    return out


def pdb_inputs(folder: str):
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "*.npz"))):
        with np.load(path) as z:
            X, S = z["X"], z["S"]
        if np.all(np.isfinite(X)) and np.all(np.isfinite(S)) and X.shape[0] > X.shape[1]:
            out.append((os.path.basename(path)[:-4], X, S))
    return out


def one(X, S, m=None, seed=0, ks=(1, 2, 4, 8), passes=4):
    """SKT's stages on (X, S), with the k best candidates swapped for each k in ks."""
    import stein_coreset as sc
    from stein_coreset.algorithms import kt_split, stein_thinning
    from stein_coreset.algorithms.resample import standard_thinning

    n = X.shape[0]
    m = m or int(math.isqrt(n))
    stein = sc.SteinKernel().resolve(X)
    K = stein.bind(X, S)
    if m * m < n:  # Rem. 2, as skt does
        K = K.take(standard_thinning(n, m * m))
    t = max(0, math.ceil(math.log2(K.n / m) - 1e-12))
    t0 = time.perf_counter()
    st = stein_thinning(K, m << t, check_input=False)
    t_st = time.perf_counter() - t0
    t0 = time.perf_counter()
    cands = kt_split(K, np.sort(st), t, 0.5, np.random.default_rng(seed), check_input=False)
    t_split = time.perf_counter() - t0
    C = np.stack(cands)
    mmd2 = K.coreset_sums(C) / m**2
    order = np.argsort(mmd2)
    base = np.array(st[:m], dtype=np.int64)

    def swapped(I):
        I = np.array(I, dtype=np.int64)
        K.kt_swap_refine(I, passes, True)
        return math.sqrt(max(float(K.coreset_sums(I[None, :])[0]) / m**2, 0.0)), I

    t0 = time.perf_counter()
    ksd_base, _ = swapped(base)
    t_swap = time.perf_counter() - t0
    cand_swapped = [swapped(C[j])[0] for j in order[: max(ks)]]
    row = {"n": n, "d": X.shape[1], "m": m, "t": t, "candidates": len(cands),
           "ksd_st_m": math.sqrt(max(float(K.coreset_sums(base[None, :])[0]) / m**2, 0)),
           "ksd_best_candidate": math.sqrt(max(float(mmd2[order[0]]), 0)),
           "ksd_baseline_swapped": ksd_base,
           "ksd_candidates_swapped": cand_swapped,
           "time_st": t_st, "time_split": t_split, "time_one_swap": t_swap}
    for k in ks:
        best_c = min(cand_swapped[:k])
        row[f"winner_k{k}"] = "candidate" if best_c < ksd_base else "baseline"
        row[f"ksd_k{k}"] = min(best_c, ksd_base)
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pdb", default=None, help="a folder of saved posteriordb chains")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--pdb-only", action="store_true", help="only the posteriordb chains")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    print(f"load average {os.getloadavg()}")
    inputs = ([] if args.pdb_only else usual_inputs(args.quick)) + (
        pdb_inputs(args.pdb) if args.pdb else [])
    rows = []
    for name, X, S in inputs:
        row = {"input": name, **one(X, S)}
        rows.append(row)
        print(f"{name:<48} n={row['n']:>6} d={row['d']:>3}  KT best {row['ksd_best_candidate']:.4g}"
              f"  baseline swapped {row['ksd_baseline_swapped']:.4g}  candidates swapped "
              f"{', '.join(f'{v:.4g}' for v in row['ksd_candidates_swapped'])}  winner(k=1) "
              f"{row['winner_k1']}, (k=4) {row['winner_k4']};  ST {row['time_st']:.2f}s  split "
              f"{row['time_split']:.2f}s  swap {row['time_one_swap']:.2f}s", flush=True)
    for k in (1, 2, 4, 8):
        wins = sum(r[f"winner_k{k}"] == "baseline" for r in rows)
        print(f"k = {k}: the baseline wins {wins} of {len(rows)}")
    for k in (2, 4, 8):
        gain = [r["ksd_k1"] / r[f"ksd_k{k}"] for r in rows]
        print(f"KSD(k=1) / KSD(k={k}): median {np.median(gain):.4f}, max {np.max(gain):.4f}")
    print(f"load average {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
