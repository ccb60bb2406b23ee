"""The low-rank methods' default tau and the AMD stop rule, measured.

    python docs/experiments/lskt_tau.py [--n 15 16] [--seeds 0 1 2] [--pairs skt:lskt sr:lsr sc:lsc]
                             [--taus 0.4 0.5] [--stop-n 12 13] [--json out.json]

Input: the biased chain of ``asv_benchmarks/scripts/compare_peers.py`` (target N(0, I_4), points
0.7 + 1.5 z, scores -x), m = sqrt(n). For each pair full:low-rank, rows: the full method, then
the low-rank one at each tau (wall seconds, res.ksd, and both as ratios to the full method of the
same seed); a summary of the median ratios per (n, method, tau); then lskt with stop="ksd"
against stop="fixed" at the --stop-n sizes (``--stop-n`` with no value skips them).
"""

import argparse
import json
import time

import numpy as np

import stein_coreset as sc


def chain(n, seed, d=4):
    X = 0.7 + 1.5 * np.random.default_rng(1000 + seed).standard_normal((n, d))
    return X, -X


def run(X, S, **kw):
    t = time.perf_counter()
    res = sc.compress(X, S, **kw)
    return time.perf_counter() - t, res.ksd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[15, 16])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--pairs", nargs="+", default=["skt:lskt"])
    ap.add_argument("--taus", type=float, nargs="+", default=[0.5, 0.4])
    ap.add_argument("--stop-n", type=int, nargs="*", default=[12, 13])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = []
    for e in args.n:
        n = 2**e
        m = int(round(np.sqrt(n)))
        for seed in args.seeds:
            X, S = chain(n, seed)
            for pair in args.pairs:
                full, low = pair.split(":")
                t0, k0 = run(X, S, size=m, seed=seed, method=full)
                rows.append({"n": n, "seed": seed, "method": full, "time_s": t0, "ksd": k0})
                print(f"n=2^{e} seed {seed} {full:<14} {t0:8.2f} s  KSD {k0:.5f}", flush=True)
                for tau in args.taus:
                    t, k = run(X, S, size=m, seed=seed, method=low, tau=tau)
                    label = f"{low} tau={tau:g}"
                    rows.append({"n": n, "seed": seed, "method": label, "time_s": t, "ksd": k,
                                 "vs": full, "time_ratio": t / t0, "ksd_ratio": k / k0})
                    print(f"n=2^{e} seed {seed} {label:<14} {t:8.2f} s  KSD {k:.5f}  "
                          f"time {t / t0:.2f}x  KSD {k / k0:.2f}x of {full}", flush=True)
    groups = {}
    for r in rows:
        if "vs" in r:
            groups.setdefault((r["n"], r["method"]), []).append(r)
    for (n, label), rs in sorted(groups.items()):
        tr = float(np.median([r["time_ratio"] for r in rs]))
        kr = float(np.median([r["ksd_ratio"] for r in rs]))
        print(f"summary n=2^{int(np.log2(n))} {label:<14} median time {tr:.2f}x, median KSD "
              f"{kr:.2f}x of {rs[0]['vs']} ({len(rs)} seeds)", flush=True)
    for e in args.stop_n:
        n = 2**e
        m = int(round(np.sqrt(n)))
        for seed in args.seeds:
            X, S = chain(n, seed)
            for stop in ("ksd", "fixed"):
                t, k = run(X, S, size=m, seed=seed, method="lskt", stop=stop)
                rows.append({"n": n, "seed": seed, "method": f"lskt stop={stop}", "time_s": t,
                             "ksd": k})
                print(f"n=2^{e} seed {seed} lskt stop={stop:<6} {t:8.2f} s  KSD {k:.5f}",
                      flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
