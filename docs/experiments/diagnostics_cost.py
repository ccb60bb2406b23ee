"""What the input diagnostics cost next to the cheapest method (docs/diagnostics.md, "Cost").

For n = 2^15 points of a correlated Gaussian and d in {2, 10, 50}: the median time of
``compress(X, S, m, "st", diagnostics=False)`` and of the checks alone
(``check_scores(X, S, w, idx)`` on its result: what ``diagnostics=True`` adds), measured
alternately, in one process, with NumPy's default BLAS threads (reported, through threadpoolctl
when it is installed).

    python docs/experiments/diagnostics_cost.py [--repeats 31] [--sizes 64 181]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from _common import sc

from stein_coreset.diagnostics import check_scores


def blas_threads() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed (NumPy's default)"
    return ", ".join(f"{i['internal_api']} {i['num_threads']}" for i in threadpool_info())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=31)
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 181])
    ap.add_argument("--log2n", type=int, default=15)
    args = ap.parse_args(argv)
    n = 2**args.log2n
    print(f"n = 2^{args.log2n}, {os.cpu_count()} cores, thread pools: {blas_threads()}; median "
          f"of {args.repeats} runs, alternating")
    print("| d | size | st, diagnostics=False (ms) | the checks (ms) | checks / st |")
    print("|---|---|---|---|---|")
    for d in (2, 10, 50):
        rng = np.random.default_rng(d)
        C = 0.5 * np.eye(d) + 0.5
        X = rng.standard_normal((n, d)) @ np.linalg.cholesky(C).T
        S = -np.linalg.solve(C, X.T).T
        for m in args.sizes:
            res = sc.compress(X, S, m, "st", seed=0, diagnostics=False)  # warm-up
            check_scores(X, S, res.weights, res.indices, warn=False)
            t_st, t_ck = [], []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                res = sc.compress(X, S, m, "st", seed=0, diagnostics=False)
                t_st.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                check_scores(X, S, res.weights, res.indices, warn=False)
                t_ck.append(time.perf_counter() - t0)
            a, b = np.median(t_st), np.median(t_ck)
            print(f"| {d} | {m} | {1e3 * a:.1f} | {1e3 * b:.2f} | {b / a:.1%} |", flush=True)


if __name__ == "__main__":
    main()
