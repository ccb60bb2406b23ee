"""lskt's default tau and the AMD stop rule, measured (issue 26).

    python tools/lskt_tau.py [--n 15 16] [--seeds 0 1 2] [--stop-n 12 13] [--json out.json]

Input: the biased chain of ``tools/compare_peers.py`` (target N(0, I_4), points
0.7 + 1.5 z, scores -x), m = sqrt(n). Rows: skt, lskt at tau = 0.5 and 0.4 (wall seconds and
res.ksd), then lskt with stop="ksd" against stop="fixed" at small n.
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
    ap.add_argument("--stop-n", type=int, nargs="+", default=[12, 13])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = []
    for e in args.n:
        n = 2**e
        m = int(round(np.sqrt(n)))
        for seed in args.seeds:
            X, S = chain(n, seed)
            for label, kw in (("skt", {"method": "skt"}),
                              ("lskt tau=0.5", {"method": "lskt", "tau": 0.5}),
                              ("lskt tau=0.4", {"method": "lskt", "tau": 0.4})):
                t, k = run(X, S, size=m, seed=seed, **kw)
                rows.append({"n": n, "seed": seed, "method": label, "time_s": t, "ksd": k})
                print(f"n=2^{e} seed {seed} {label:<14} {t:8.2f} s  KSD {k:.5f}", flush=True)
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
