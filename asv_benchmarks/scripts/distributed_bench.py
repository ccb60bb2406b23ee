"""Debiased compression on Dask against what one process can do.

    python asv_benchmarks/scripts/distributed_bench.py --json dist.json  # full run, 15-25 min
    python asv_benchmarks/scripts/distributed_bench.py --quick           # n = 2^16 / 2^15, 1 min

Input: the biased chain of tests/test_distributed.py -- target P = N(0, I_4), scores -x in
closed form; the blocks b with b % 8 in {0, 3} are burn-in (1.5 x + 6, far from P), the others
are drawn from P. Each block is generated on the worker that compresses it (from
``default_rng([seed, b])``), so the driver never holds the input.

(1) n = 2^20, d = 4, 16 blocks of 2^16, coreset size m = sqrt(n) = 1024, block coresets of
    ``--block-factor`` x m rows (default 2, as the tests), fan-in 8, on a fresh
    ``LocalCluster(n_workers=2, threads_per_worker=1, processes=True)`` (loopback) per run:
    wall time and KSD of distributed skt and lskt, against
    (a) standard thinning to 2^16 rows (every 16th), then single-process skt (what a user does
        today), and
    (b) single-process lskt with tau = 0.4 on all n rows, in a subprocess killed after
        ``--limit`` seconds (default 600): "did not finish" if so.
    Every KSD is ``sc.ksd`` of the m-point result against P with one fixed Stein kernel
    (IMQ, the bandwidth the distributed run fixed), O(m^2); (a) and (b) use that kernel too.
(2) Speed-up from 1 to 2 workers of distributed skt at n = 2^18 (16 blocks, m = 2^9), each on a
    fresh cluster.
(3) Peak memory: VmHWM of each worker (read with ``client.run`` after the run; workers
    are fresh for each measurement), of the driver (this process), and of the (a)/(b)
    subprocesses (VmHWM, polled).
(4) Load average before and after, the driver's CPU and wall time.

``--quick``: (1) at n = 2^16 (8 blocks of 2^13, m = 256; (a) thins to 2^12) and (2) at
n = 2^15 (8 blocks, m = 181: the same rule m = floor(sqrt(n))). Markdown tables go to stdout;
``--json PATH`` writes every figure. Run the full one on an otherwise idle machine: it uses both
cores for minutes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

D = 4
BURN = (0, 3)  # b % 8 in BURN: a burn-in block, as in tests/test_distributed.py
THIN = 16  # baseline (a) keeps every 16th row: 2^20 -> 2^16 (--quick: 2^16 -> 2^12)


# ---------------------------------------------------------------------------------------------
# The input: generated per block, on the worker
# ---------------------------------------------------------------------------------------------
def make_block(b: int, rows: int, seed: int) -> np.ndarray:
    """Rows of block b: N(0, I) (target P), or burn-in 1.5 z + 6 when b % 8 is in BURN."""
    X = np.random.default_rng([seed, b]).standard_normal((rows, D))
    if b % 8 in BURN:
        X = 1.5 * X + 6.0
    return X


def make_input(n: int, n_blocks: int, seed: int) -> np.ndarray:
    """The whole input in one process (the single-process baselines only)."""
    rows = n // n_blocks
    return np.concatenate([make_block(b, rows, seed) for b in range(n_blocks)])


def lazy_input(n: int, n_blocks: int, seed: int):
    """(X, S) as dask arrays, one chunk per block, S = grad log p(X) = -X."""
    import dask
    import dask.array as da

    rows = n // n_blocks
    gen = dask.delayed(make_block, pure=True)
    X = da.concatenate([da.from_delayed(gen(b, rows, seed), (rows, D), dtype=np.float64)
                        for b in range(n_blocks)])
    return X, -X


# ---------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------
def _maxrss_mib() -> float:
    """This process's resident high-water mark since its exec (VmHWM; ``ru_maxrss`` would
    include the parent's, which Linux carries over fork and exec)."""
    peak = vm_hwm_mib(os.getpid())
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def ksd_of(points, weights, sigma: float) -> float:
    """KSD of the weighted points against P = N(0, I) (scores -x), fixed IMQ Stein kernel."""
    import stein_coreset as sc

    P = np.asarray(points, dtype=np.float64)
    k = sc.SteinKernel(sc.IMQ(sigma=sigma))
    return float(sc.ksd(P, -P, weights=np.asarray(weights, dtype=np.float64), kernel=k))


def run_distributed(method: str, n: int, n_blocks: int, size: int, workers: int, seed: int,
                    block_size: int):
    """One distributed run on a fresh loopback LocalCluster; wall/cpu of the call, worker RSS."""
    import distributed

    from stein_coreset import distributed as scd

    t0 = time.perf_counter()
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster, \
            distributed.Client(cluster) as client:
        t_start = time.perf_counter() - t0
        X, S = lazy_input(n, n_blocks, seed)
        w0, c0 = time.perf_counter(), time.process_time()
        res = scd.compress(X, S, size=size, method=method, seed=seed, block_size=block_size)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        rss = client.run(_maxrss_mib)
    return {
        "run": f"distributed {method}",
        "method": method,
        "n": n,
        "n_blocks": n_blocks,
        "workers": workers,
        "size": int(len(res.indices)),
        "requested_size": size,
        "block_size": block_size,
        "wall_s": wall,
        "driver_cpu_s": cpu,
        "cluster_start_s": t_start,
        "worker_peak_rss_mib": sorted(float(v) for v in rss.values()),
        "sigma": float(res.info["sigma"]),
        "points": np.asarray(res.points),
        "weights": np.asarray(res.weights),
        "ksd_reported": res.ksd,
    }


def vm_hwm_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def run_baseline(which: str, n: int, n_blocks: int, size: int, sigma: float, seed: int,
                 limit: float, mem_gib: float):
    """(a) or (b) in a subprocess (this script, ``--baseline``), killed after ``limit`` s."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "res.npz")
        cmd = [sys.executable, os.path.abspath(__file__), "--baseline", which, "--n", str(n),
               "--blocks", str(n_blocks), "--size", str(size), "--sigma", repr(sigma),
               "--seed", str(seed), "--mem-limit-gib", str(mem_gib), "--out", out]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=tmp)
        hwm, status = 0.0, "ok"
        while proc.poll() is None:
            hwm = max(hwm, vm_hwm_mib(proc.pid) or 0.0)
            if time.perf_counter() - t0 > limit:
                proc.kill()  # this child only, by its pid
                status = f"did not finish in {limit:g} s"
                break
            time.sleep(0.25)
        stdout, stderr = proc.communicate()
        row = {"run": which, "n": n, "workers": 1, "requested_size": size,
               "proc_peak_rss_mib": hwm or None, "status": status}
        if status == "ok" and proc.returncode != 0:
            row["status"] = "failed: " + (stderr.strip().splitlines() or ["?"])[-1][:200]
        if row["status"] == "ok":
            meta = json.loads(stdout.strip().splitlines()[-1])
            with np.load(out) as z:
                row.update(points=z["points"], weights=z["weights"])
            row.update(meta)
        else:
            row["wall_s"] = time.perf_counter() - t0
    return row


def baseline_child(args) -> None:
    """The subprocess of :func:`run_baseline`: build the input, compress it, save the result."""
    import stein_coreset as sc

    if args.mem_limit_gib > 0:  # fail with MemoryError rather than take the machine's memory
        lim = int(args.mem_limit_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    X = make_input(args.n, args.blocks, args.seed)
    k = sc.SteinKernel(sc.IMQ(sigma=args.sigma))
    w0, c0 = time.perf_counter(), time.process_time()
    if args.baseline.startswith("(a)"):
        Xt = X[::THIN]  # standard thinning: every THIN-th row

        res = sc.compress(Xt, -Xt, size=args.size, method="skt", kernel=k, seed=args.seed)
        n_in = Xt.shape[0]
    else:
        res = sc.compress(X, -X, size=args.size, method="lskt", tau=0.4, kernel=k,
                          seed=args.seed)
        n_in = X.shape[0]
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    np.savez(args.out, points=np.asarray(res.points), weights=np.asarray(res.weights))
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "size": int(len(res.indices)),
                      "n_compressed": int(n_in)}))


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------
def _fmt(v, spec=".3g"):
    return "-" if v is None else format(v, spec)


def markdown(rep) -> str:
    cfg = rep["config"]
    out = [
        f"n = 2^{int(math.log2(cfg['n']))}, d = {D}, {cfg['n_blocks']} blocks of "
        f"{cfg['n'] // cfg['n_blocks']}, coreset size m = {cfg['size']}, block coresets "
        f"{cfg['block_factor']} m, seed {cfg['seed']}, "
        f"{os.cpu_count()} cores; load average before {rep['loadavg_before']}, after "
        f"{rep['loadavg_after']}",
        "",
        "| run | workers | wall s | KSD | KSD / (a) | driver cpu s | peak RSS MiB |",
        "|---|---|---|---|---|---|---|",
    ]
    ref = next((r.get("ksd") for r in rep["main"] if r["run"].startswith("(a)")), None)
    for r in rep["main"]:
        ksd = r.get("ksd")
        ratio = None if ksd is None or not ref else ksd / ref
        if "worker_peak_rss_mib" in r:
            rss = "workers " + ", ".join(f"{v:.0f}" for v in r["worker_peak_rss_mib"])
        else:
            rss = "process " + _fmt(r.get("proc_peak_rss_mib"), ".0f")
        wall = _fmt(r.get("wall_s"), ".1f")
        if r.get("status", "ok") != "ok":
            wall = f"{r['status']}"
        out.append(f"| {r['run']} | {r['workers']} | {wall} | {_fmt(ksd, '.4g')} | "
                   f"{_fmt(ratio, '.3f')} | {_fmt(r.get('driver_cpu_s'), '.1f')} | {rss} |")
    sp = rep["speedup"]
    out += [
        "",
        f"Speed-up of distributed skt at n = 2^{int(math.log2(sp['n']))} ({sp['n_blocks']} "
        f"blocks, m = {sp['size']}): 1 worker {sp['wall_s'][0]:.1f} s, 2 workers "
        f"{sp['wall_s'][1]:.1f} s, speed-up {sp['speedup']:.2f}x",
        f"Driver: peak RSS {rep['driver_peak_rss_mib']:.0f} MiB, cpu {rep['driver_cpu_s']:.1f} s, "
        f"wall {rep['driver_wall_s']:.1f} s",
    ]
    aim = rep.get("aim")
    if aim is not None:
        out.append(f"Aim (distributed KSD below (a), wall < 300 s): {aim}")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="n = 2^16 and 2^15 (about a minute)")
    p.add_argument("--json", default=None, metavar="PATH", help="write every figure as JSON")
    p.add_argument("--limit", type=float, default=600.0,
                   help="seconds before the single-process baselines are killed (default 600)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--block-factor", type=int, default=2,
                   help="block coreset size = this x m (default 2, as tests/test_distributed.py)")
    p.add_argument("--mem-limit-gib", type=float, default=12.0,
                   help="address-space limit of the baseline subprocesses (0: none)")
    # the baseline subprocess (internal)
    p.add_argument("--baseline", default=None, help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, help=argparse.SUPPRESS)
    p.add_argument("--blocks", type=int, help=argparse.SUPPRESS)
    p.add_argument("--size", type=int, help=argparse.SUPPRESS)
    p.add_argument("--sigma", type=float, help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.baseline is not None:
        baseline_child(args)
        return 0

    import dask
    import distributed

    import stein_coreset

    w_start, c_start = time.perf_counter(), time.process_time()
    load_before = [round(x, 2) for x in os.getloadavg()]
    n, n_blocks, n_sp = (2**16, 8, 2**15) if args.quick else (2**20, 16, 2**18)
    size, size_sp = int(math.isqrt(n)), int(math.isqrt(n_sp))
    seed = args.seed

    main_rows = []
    for method in ("skt", "lskt"):
        print(f"# distributed {method}, n = {n}, 2 workers ...", file=sys.stderr, flush=True)
        main_rows.append(run_distributed(method, n, n_blocks, size, 2, seed,
                                         args.block_factor * size))
    sigma = main_rows[0]["sigma"]
    thin = f"(a) standard thinning to 2^{int(math.log2(n // THIN))}, then skt"
    for which in (thin, "(b) single-process lskt, tau = 0.4"):
        print(f"# {which} ...", file=sys.stderr, flush=True)
        main_rows.append(run_baseline(which, n, n_blocks, size, sigma, seed, args.limit,
                                      args.mem_limit_gib))
    for r in main_rows:
        r["ksd"] = ksd_of(r["points"], r["weights"], sigma) if "points" in r else None

    sp_runs = []
    for workers in (1, 2):
        print(f"# speed-up: distributed skt, n = {n_sp}, {workers} worker(s) ...",
              file=sys.stderr, flush=True)
        r = run_distributed("skt", n_sp, n_blocks, size_sp, workers, seed,
                            args.block_factor * size_sp)
        r["ksd"] = ksd_of(r.pop("points"), r.pop("weights"), r["sigma"])
        sp_runs.append(r)
    walls = [r["wall_s"] for r in sp_runs]
    speedup = {"n": n_sp, "n_blocks": n_blocks, "size": size_sp, "wall_s": walls,
               "speedup": walls[0] / walls[1], "runs": sp_runs}

    ref = next(r["ksd"] for r in main_rows if r["run"].startswith("(a)"))
    dist = [r for r in main_rows if r["run"].startswith("distributed")]
    aim = None
    if ref is not None:
        aim = ", ".join(
            f"{r['method']}: {'yes' if r['ksd'] < ref and r['wall_s'] < 300 else 'no'}"
            for r in dist
        )
    rep = {
        "issue": 13,
        "quick": args.quick,
        "config": {"n": n, "d": D, "n_blocks": n_blocks, "size": size, "seed": seed,
                   "block_factor": args.block_factor,
                   "burn_in_blocks": "b % 8 in (0, 3)", "limit_s": args.limit,
                   "cluster": "LocalCluster(n_workers=2, threads_per_worker=1, processes=True)"},
        "versions": {"stein_coreset": getattr(stein_coreset, "__version__", None),
                     "dask": dask.__version__, "distributed": distributed.__version__,
                     "numpy": np.__version__, "python": platform.python_version()},
        "cpu_count": os.cpu_count(),
        "main": [{k: v for k, v in r.items() if k not in ("points", "weights")}
                 for r in main_rows],
        "speedup": speedup,
        "aim": aim,
        "loadavg_before": load_before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "driver_peak_rss_mib": _maxrss_mib(),
        "driver_cpu_s": time.process_time() - c_start,
        "driver_wall_s": time.perf_counter() - w_start,
    }
    print(markdown(rep))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rep, f, indent=1, default=lambda o: o.item() if hasattr(o, "item")
                      else repr(o))
    return 0


if __name__ == "__main__":
    sys.exit(main())
