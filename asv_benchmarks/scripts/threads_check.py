"""Threading check: parallel efficiency, contention and the kernel-column cost.

    python asv_benchmarks/scripts/threads_check.py                 # the full check (a few minutes)
    python asv_benchmarks/scripts/threads_check.py --quick         # smaller n, to see that it runs
    python asv_benchmarks/scripts/threads_check.py --json out.json # also write the figures as JSON
    # the yielding policy:
    STEIN_CORESET_TEAM_WAIT=yield python asv_benchmarks/scripts/threads_check.py

(a) st, skt, kt, lskt, sr at n = 2^15, d = 4: wall time, process CPU time, cpu/wall with the
    default team (the usable cores), and whether n_threads = 1 and 2 select the same points.
(b) st, skt, lskt, sr, sc at n = 2^14, d = 4: wall time alone and with two CPU-bound
    competitor processes (spawned here, each ending itself after a time limit and killed after
    the timing), taken in interleaved pairs; the slowdown ratio of the best times and the median
    of the per-pair ratios (a fair share of a 2-core machine is 2x).
(c) K.column(j) against a one-row Gram block bridge.gram(K, [j]) at n = 65536, d = 4 and 32,
    one thread.
(d) the load average before and after.

The speed-up table over 1, 2, 8, 16 threads (and the team's barrier and wake-up costs:
``--probe-only``) is threads_table.py beside this script.

Inputs are the biased Gaussian chain of compare_peers.py (target N(0, I), sample shifted and
over-dispersed); coreset size 128. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from compare_peers import biased_chain  # the sibling script

from stein_coreset.engine.cpu import bridge


def _timed(fn, repeat):
    """(best wall, cpu of that run, result) over ``repeat`` runs."""
    best = None
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        t1, c1 = time.perf_counter(), time.process_time()
        if best is None or t1 - t0 < best[0]:
            best = (t1 - t0, c1 - c0, out)
    return best


def _compress(X, S, method, size, **kw):
    import stein_coreset as sc

    return sc.compress(X, S, size=size, method=method, seed=0, **kw)


def section_a(n, size, repeat):
    X, S = biased_chain(n, 4, 0)
    rows = []
    for method in ("st", "skt", "kt", "lskt", "sr"):
        _compress(X, S, method, size)  # warm-up (imports, first-use setup)
        wall, cpu, res = _timed(lambda m=method: _compress(X, S, m, size), repeat)
        r1 = _compress(X, S, method, size, n_threads=1)
        r2 = _compress(X, S, method, size, n_threads=2)
        same = bool(
            np.array_equal(np.asarray(r1.indices), np.asarray(r2.indices))
            and np.array_equal(np.asarray(r1.weights), np.asarray(r2.weights))
            and np.array_equal(np.asarray(res.indices), np.asarray(r1.indices))
        )
        rows.append(
            {"method": method, "n": n, "wall_s": wall, "cpu_s": cpu,
             "cpu_per_wall": cpu / wall, "same_selection_1_vs_2": same,
             "n_threads": res.info.get("n_threads")}
        )
        print(f"  {method:6s} wall {wall:8.3f} s  cpu {cpu:8.3f} s  cpu/wall {cpu / wall:5.2f}"
              f"  same selection (1 vs 2 threads): {same}", flush=True)
    return rows


_SPIN = "import time\nt = time.time() + {limit}\nwhile time.time() < t:\n    pass\n"


def _competitors(k, limit):
    return [
        subprocess.Popen([sys.executable, "-c", _SPIN.format(limit=limit)])
        for _ in range(k)
    ]


def _one(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def section_b(n, size, repeat, competitors, limit):
    """Alone and busy timings taken in interleaved pairs (alone, then with fresh competitors),
    so that a change of background load hits both sides of a pair alike; reported: the best of
    each side, their ratio, and the median of the per-pair ratios."""
    X, S = biased_chain(n, 4, 0)
    methods = ("st", "skt", "lskt", "sr", "sc")
    rows = []
    for method in methods:
        fn = lambda m=method: _compress(X, S, m, size)  # noqa: E731
        fn()  # warm-up
        alone, busy, ended = [], [], False
        for _ in range(repeat):
            alone.append(_one(fn))
            procs = _competitors(competitors, limit)
            try:
                time.sleep(0.3)  # let the competitors start
                busy.append(_one(fn))
                ended = ended or not all(p.poll() is None for p in procs)
            finally:
                for p in procs:
                    p.kill()
                for p in procs:
                    p.wait()
        pairs = [b / a for a, b in zip(alone, busy, strict=True)]
        ratio = min(busy) / min(alone)
        rows.append({"method": method, "n": n, "alone_s": min(alone), "busy_s": min(busy),
                     "slowdown": ratio, "pair_slowdowns": pairs,
                     "median_pair_slowdown": float(np.median(pairs)),
                     "competitors": competitors, "loadavg": os.getloadavg()[0]})
        print(f"  {method:6s} alone {min(alone):8.3f} s  with {competitors} competitors"
              f" {min(busy):8.3f} s  slowdown {ratio:5.2f}x  (pairs: "
              f"{', '.join(f'{r:.2f}' for r in pairs)}; median {np.median(pairs):.2f}x;"
              f" load {os.getloadavg()[0]:.2f})", flush=True)
        if ended:
            print("  warning: a competitor ended before the measurement did (raise --limit)")
    return rows


def section_c(n, repeat):
    import stein_coreset as sc

    rows = []
    for d in (4, 32):
        X, S = biased_chain(n, d, 1)
        K = sc.SteinKernel(sc.IMQ(sigma=1.0)).bind(X, S, n_threads=1)
        bridge.handle(K)  # the host copies and the structure-of-arrays layout, built once
        js = [0, n // 3, n // 2, n - 1]
        col = min(_timed(lambda j=j, K=K: K.column(j), max(repeat, 5))[0] for j in js)
        row = min(_timed(lambda j=j, K=K: bridge.gram(K, [j]), max(repeat, 5))[0] for j in js)
        rows.append({"n": n, "d": d, "column_ms": 1e3 * col, "gram_row_ms": 1e3 * row,
                     "ratio": col / row})
        print(f"  d = {d:2d}  column {1e3 * col:8.3f} ms  one-row gram {1e3 * row:8.3f} ms"
              f"  ratio {col / row:5.2f}", flush=True)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small n, one repeat: a smoke run")
    p.add_argument("--json", help="write the figures to this JSON file")
    p.add_argument("--repeat", type=int, default=None, help="runs per timing (best kept)")
    p.add_argument("--competitors", type=int, default=2)
    p.add_argument("--limit", type=float, default=None,
                   help="seconds after which each competitor ends by itself")
    args = p.parse_args(argv)
    q = args.quick
    repeat = args.repeat or (1 if q else 3)
    na, nb, nc = (1 << 12, 1 << 12, 1 << 14) if q else (1 << 15, 1 << 14, 1 << 16)
    limit = args.limit or (120.0 if q else 900.0)

    import stein_coreset as sc
    from stein_coreset._threads import usable_cores

    out = {"quick": q, "usable_cores": usable_cores(), "cpu_count": os.cpu_count(),
           "version": getattr(sc, "__version__", None)}
    out["loadavg_before"] = os.getloadavg()
    out["team_wait"] = os.environ.get("STEIN_CORESET_TEAM_WAIT") or "sleep"
    print(f"load average before: {out['loadavg_before']}; usable cores {out['usable_cores']}; "
          f"team wait policy {out['team_wait']} (STEIN_CORESET_TEAM_WAIT)")
    print(f"(a) n = {na}, d = 4, size 128, default team:")
    out["a"] = section_a(na, 128, repeat)
    print(f"(b) n = {nb}, d = 4, size 128: alone vs {args.competitors} CPU-bound competitors:")
    out["b"] = section_b(nb, 128, repeat, args.competitors, limit)
    print(f"(c) n = {nc}, one thread: K.column(j) vs one-row bridge.gram(K, [j]):")
    out["c"] = section_c(nc, repeat)
    out["loadavg_after"] = os.getloadavg()
    print(f"load average after: {out['loadavg_after']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
