"""Kernel evaluation against the machine's limit: the table of docs/performance.md.

    python asv_benchmarks/scripts/roofline.py                       # this build
    python asv_benchmarks/scripts/roofline.py --compare OTHER_PYTHON # and another build beside it

For each d: ``sc.ksd`` on n points (n (n + 1) / 2 Stein-kernel evaluations, median of --repeat
runs), its evaluations per second, and the rate of its d-dependent part (q, <t_i, t_j> and
<u_i - u_j, t_i - t_j>), counted as the four matrix products a BLAS formulation needs (8 d flops
per entry) over the time above the d = 1 run, as a share of the matrix-product rate NumPy reaches
here (a 4096 x 4096 float64 product). Then ``sc.mmd`` of n points against 256 of them (and at
2^16, this build only), skt at d = 100 and KT-SPLIT (t = 4) at d = 4 and 50. With --compare,
every measurement alternates between the two interpreters (this script run under each), and
the ratios are printed: old time / new time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def _median(f, repeat):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2]


def measure(what: str, n: int, d: int, repeat: int) -> float:
    """Seconds of one measurement in this process."""
    import numpy as np

    import stein_coreset as sc

    rng = np.random.default_rng(0)
    if what == "matmul":
        A = rng.standard_normal((4096, 4096))
        A @ A
        return _median(lambda: A @ A, repeat)
    X = 0.7 + 1.5 * rng.standard_normal((n, d))
    if what == "ksd":
        kern = sc.SteinKernel(sc.IMQ(sigma=float(np.sqrt(2 * d))))
        return _median(lambda: sc.ksd(X, -X, kernel=kern), repeat)
    if what == "mmd":
        Y = X[rng.choice(n, 256, replace=False)]
        base = sc.IMQ(sigma=float(np.sqrt(2 * d)))
        return _median(lambda: sc.mmd(X, Y, kernel=base, max_pairs=None), repeat)
    if what == "skt":
        return _median(lambda: sc.compress(X, -X, 128, method="skt", seed=1), repeat)
    if what == "kt_split":
        from stein_coreset.algorithms import kt_split

        K = sc.SteinKernel(sc.IMQ(sigma=float(np.sqrt(2 * d)))).bind(X, -X)
        return _median(lambda: kt_split(K, np.arange(n), 4, 0.5, rng=1), repeat)
    raise ValueError(what)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 14)
    ap.add_argument("--dims", default="1,2,4,10,50,100")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--compare", help="another Python whose stein_coreset to time beside this one")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # what,n,d,repeat: one measurement, as JSON
    args = ap.parse_args()
    if args.one:
        what, n, d, repeat = args.one.split(",")
        print(json.dumps(measure(what, int(n), int(d), int(repeat))))
        return
    pythons = [sys.executable] + ([args.compare] if args.compare else [])

    def timed(what, n, d, repeat=args.repeat):
        out = []
        for py in pythons:  # alternate: the same load for both
            r = subprocess.run([py, os.path.abspath(__file__), "--one",
                                f"{what},{n},{d},{repeat}"],
                               capture_output=True, text=True, check=True, cwd="/")
            out.append(json.loads(r.stdout.strip().splitlines()[-1]))
        return out

    print(f"load average at start: {os.getloadavg()[0]:.2f}; cpus: {os.cpu_count()}")
    t_mm = timed("matmul", 0, 0)[0]
    peak = 2 * 4096**3 / t_mm / 1e9
    print(f"matrix product (NumPy, 4096^2 float64): {peak:.1f} GFLOP/s")
    n = args.n
    pairs = n * (n + 1) / 2
    dims = [int(x) for x in args.dims.split(",")]
    base = None
    head = "| d | ksd (s) | evaluations/s | d-part GFLOP/s | share of matmul |"
    if args.compare:
        head += " previous (s) | speed-up |"
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for d in dims:
        t = timed("ksd", n, d)
        if d == 1:
            base = t[0]
        cells = [f"{d}", f"{t[0]:.3f}", f"{pairs / t[0] / 1e6:.0f} M"]
        if base is not None and d > 1 and t[0] > base:
            rate = 8 * d * pairs / (t[0] - base) / 1e9
            cells += [f"{rate:.1f}", f"{rate / peak:.0%}"]
        else:
            cells += ["", ""]
        if args.compare:
            cells += [f"{t[1]:.3f}", f"{t[1] / t[0]:.2f}x"]
        print("| " + " | ".join(cells) + " |")
    for what, nn, d in (("mmd", 1 << 14, 4), ("skt", 1 << 14, 100), ("kt_split", 1 << 14, 4),
                        ("kt_split", 1 << 14, 50)):
        t = timed(what, nn, d, 1)  # one run each: the previous main's mmd was plain NumPy
        line = f"{what} n = {nn}, d = {d}: {t[0]:.3f} s"
        if args.compare:
            line += f" (previous {t[1]:.3f} s, {t[1] / t[0]:.2f}x)"
        print(line)
    t = measure("mmd", 1 << 16, 4, args.repeat)  # this build only (NumPy took minutes)
    print(f"mmd n = {1 << 16} against 256 of its points, d = 4: {t:.3f} s")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
