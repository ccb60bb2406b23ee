"""Peak memory of every ``compress`` method against the estimate of docs/guarantees.md.

    python asv_benchmarks/scripts/peak_memory.py      # n = 4096 and 16384, d = 4: a table
    python asv_benchmarks/scripts/peak_memory.py --n 65536 --methods lskt sr

Each (method, n) runs in a fresh Python process: X ~ N(0, I_d), S = -X, size = rank = ceil(sqrt n)
(the defaults of App. I.2), seed 0, after a warm-up call at n = 256 (imports, lazy set-up). Two
measurements of the one call:

- ``tracemalloc``: the peak of the Python-heap and NumPy allocations (NumPy reports its buffers to
  tracemalloc) above what was allocated before the call;
- resident-set delta: the process's resident high-water mark (VmHWM, reset to the current RSS
  through /proc/self/clear_refs just before the call; ``ru_maxrss`` where that is not
  available) minus the RSS at the start of the call. It also sees the C++ buffers
  (std::vector, OpenMP stacks) that tracemalloc does not, and memory NumPy's allocator keeps.

The estimate is the docs' table with its constants written out, in bytes: the whitened copies of
X and S and their structure-of-arrays copies (4 n d doubles), plus per method

    standard, iid                  8 n
    st                             8 (n + m)
    skt, compresspp                8 * 4 n           (sums and index buffers of KT-SPLIT / swap)
    kt                             8 * 4 n + 8 s n   (and the centring product's s accumulators of
                                   n doubles, stein_coreset.engine.cpu._core.matvec_slots(n): 32 up
                                   to n = 2^17, else 0; rt and ct free them before their factor,
                                   which dominates)
    lskt                           12 n r + 8 * 4 n  (the float64 factor, its float32 copy)
    sr, rt                         16 n r + 8 (m + 1)^2  (the factor and Recombination's [F, 1])
    sc, ct                         8 n r + 8 (m + 1)^2
    lsr, lsc                       20 n r + 8 (m + 1)^2

plus, with the default kernel (``kernel=None``: IMQ at the median bandwidth), the median heuristic
over p = min(n, 1000) points (engine/cpu/src_cpp/pairwise.cpp, NumPy input): a coordinate-major copy
(p d doubles), 16384 sampled pair distances and the pairs inside the sample's bracket, at most p (p
- 1) / 60 doubles (~3% of the pairs measured; 0.3 MiB at p = 1000). Mode "fixed" passes
``kernel=IMQ(median_bandwidth(X))``, the bandwidth computed in the parent process, so only the
method's own buffers are measured.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile

METHODS = ("standard", "iid", "st", "skt", "kt", "lskt", "compresspp",
           "rt", "ct", "sr", "sc", "lsr", "lsc")
MEDIAN_POINTS = 1000  # median_bandwidth(max_points=1000)

CHILD = r"""
import json, resource, sys, time, tracemalloc
import numpy as np
import stein_coreset as sc

method, n, d, sigma = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
m = int(np.ceil(np.sqrt(n)))
rng = np.random.default_rng(0)
X = rng.standard_normal((n, d))
S = -X
kernel = sc.IMQ(sigma) if sigma > 0 else None
sc.compress(X[:256], S[:256], size=16, method=method, seed=0, kernel=kernel)
def status(key):
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith(key + ":"))
try:  # Linux >= 4.0: reset the resident high-water mark (VmHWM) to the current RSS
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    rss0, hwm = status("VmRSS"), True
except OSError:  # elsewhere: the process's ru_maxrss so far
    rss0, hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, False
tracemalloc.start()
t0 = time.perf_counter()
res = sc.compress(X, S, size=m, method=method, seed=0, kernel=kernel)
wall = time.perf_counter() - t0
cur, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
rss1 = status("VmHWM") if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"method": method, "n": n, "d": d, "m": m, "k": len(res),
                  "traced_peak": peak, "rss_delta": rss1 - rss0, "rss_peak": rss1,
                  "wall_s": wall}))
"""


def estimate(method: str, n: int, d: int, mode: str = "default") -> int:
    """Bytes the docs' table predicts for one call (see the module docstring)."""
    from stein_coreset.engine.cpu._core import matvec_slots

    m = r = math.ceil(math.sqrt(n))
    base = 8 * 4 * n * d
    dominant = {
        "standard": 8 * n, "iid": 8 * n,
        "st": 8 * (n + m),
        "skt": 32 * n, "kt": 32 * n + 8 * matvec_slots(n) * n, "compresspp": 32 * n,
        "lskt": 12 * n * r + 32 * n,
        "sr": 16 * n * r + 8 * (m + 1) ** 2, "rt": 16 * n * r + 8 * (m + 1) ** 2,
        "sc": 8 * n * r + 8 * (m + 1) ** 2, "ct": 8 * n * r + 8 * (m + 1) ** 2,
        "lsr": 20 * n * r + 8 * (m + 1) ** 2, "lsc": 20 * n * r + 8 * (m + 1) ** 2,
    }[method]
    p = min(n, MEDIAN_POINTS)
    median = 8 * (p * d + 16384 + p * (p - 1) // 60) if mode == "default" else 0
    return base + dominant + median


def measure(method: str, n: int, d: int, mode: str, timeout: float) -> dict:
    sigma = 0.0
    if mode == "fixed":  # computed here, so the child's high-water mark never holds the median's
        import numpy as np

        import stein_coreset as sc

        sigma = sc.median_bandwidth(np.random.default_rng(0).standard_normal((n, d)))
    with tempfile.TemporaryDirectory() as tmp:  # never import the package from the checkout
        out = subprocess.run([sys.executable, "-c", CHILD, method, str(n), str(d), repr(sigma)],
                             cwd=tmp,
                             capture_output=True, text=True, timeout=timeout,
                             env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if out.returncode:
        raise RuntimeError(f"{method} n={n}: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, nargs="+", default=[4096, 16384])
    p.add_argument("--d", type=int, default=4)
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--modes", nargs="+", default=["default", "fixed"],
                   choices=["default", "fixed"])
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    p.add_argument("--json", help="also write the raw rows here")
    args = p.parse_args(argv)
    mib = 2.0**20
    rows = []
    print(f"<!-- python asv_benchmarks/scripts/peak_memory.py --n {' '.join(map(str, args.n))} "
          f"--d {args.d}; "
          f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()} -->")
    print("| method | n | m = r | kernel | estimate (MiB) | tracemalloc peak (MiB) | "
          "RSS delta (MiB) | max / estimate | time (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in args.n:
        for method in args.methods:
            for mode in args.modes:
                row = measure(method, n, args.d, mode, args.timeout)
                row["mode"] = mode
                row["estimate"] = estimate(method, n, args.d, mode)
                rows.append(row)
                worst = max(row["traced_peak"], row["rss_delta"])
                print(f"| `{method}` | {n} | {row['m']} | {mode} | {row['estimate'] / mib:.1f} | "
                      f"{row['traced_peak'] / mib:.1f} | {row['rss_delta'] / mib:.1f} | "
                      f"{worst / row['estimate']:.2f} | {row['wall_s']:.1f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
