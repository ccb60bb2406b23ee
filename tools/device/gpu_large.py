#!/usr/bin/env python
"""Large-n runs on one GPU: lskt's time, peak device memory and KSD at n = 2^20 and beyond,
and ``stein_coreset.distributed.compress`` with CuPy blocks on a Dask LocalCluster.

    python tools/device/gpu_large.py --n 1048576 16777216 --json large.json
    python tools/device/gpu_large.py --dask --n 65536
    python tools/device/gpu_large.py --amd --n 16384 65536 1048576
    python tools/device/gpu_large.py --dksd --n 4096 16384

Input: d = 4, X = 0.7 + 1.5 z (drawn on the device), S = -X, Stein IMQ sigma^2 = 2d, size
ceil(sqrt(n)), tau = 0.4. Peak device memory is the CuPy pool's high-water mark (the pool keeps
what it allocated until freed explicitly).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time


class Rows(list):
    """The rows of a run, the JSON file rewritten (atomically) after each one, so a run killed
    at its time limit leaves every row it finished and the one it was running
    (``{"running": ...}``)."""

    def __init__(self, path: str | None):
        super().__init__()
        self.path = path

    def running(self, **what) -> None:
        self._write(list(self) + [{"running": what, "since": time.strftime("%H:%M:%S")}])

    def append(self, row) -> None:
        super().append(row)
        self._write(list(self))

    def _write(self, rows) -> None:
        if self.path:
            tmp = f"{self.path}.tmp"
            with open(tmp, "w") as f:
                json.dump(rows, f, indent=1)
            os.replace(tmp, self.path)


def _input(cp, n, d, seed=0):
    rs = cp.random.RandomState(seed)
    X = 0.7 + 1.5 * rs.standard_normal((n, d), dtype=cp.float64)
    return X, -X


class _StrictStandIn:
    """What large() needs of CuPy, on array_api_strict (the device script's CPU dry run)."""

    def __init__(self):
        import types

        import array_api_strict as xps
        import numpy as np

        def state(seed):
            rs = np.random.RandomState(seed)
            return types.SimpleNamespace(standard_normal=lambda shape, dtype=None: xps.asarray(
                rs.standard_normal(shape)))

        self.random = types.SimpleNamespace(RandomState=state)
        self.float64 = xps.float64
        pool = types.SimpleNamespace(free_all_blocks=lambda: None, total_bytes=lambda: 0)
        self.get_default_memory_pool = lambda: pool
        dev = types.SimpleNamespace(synchronize=lambda: None)
        self.cuda = types.SimpleNamespace(Device=lambda: dev)


def large(args) -> list[dict]:
    if args.xp == "strict":
        cp = _StrictStandIn()
    else:
        import cupy as cp

    import stein_coreset as sc

    rows = args.rows
    kern = sc.SteinKernel(sc.IMQ(sigma=math.sqrt(2 * args.d)))
    pool = cp.get_default_memory_pool()
    Xw, Sw = _input(cp, min(4096, min(args.n)), args.d)
    sc.compress(Xw, Sw, size=64, method=args.method, kernel=kern, seed=0, tau=args.tau)  # compile
    for n in args.n:
        rows.running(method=args.method, n=n, tau=args.tau)
        pool.free_all_blocks()
        X, S = _input(cp, n, args.d)
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        try:
            res = sc.compress(X, S, size=math.ceil(math.sqrt(n)), method=args.method,
                              kernel=kern, seed=0, tau=args.tau)
            cp.cuda.Device().synchronize()
            secs = time.perf_counter() - t0
            row = {"method": args.method, "n": n, "d": args.d, "tau": args.tau, "seconds": secs,
                   "peak_device_gib": pool.total_bytes() / 2**30, "ksd": res.ksd,
                   "size": len(res)}
        except Exception as e:  # report (out of memory, refusal) and go on
            row = {"method": args.method, "n": n, "error": f"{type(e).__name__}: {e}"[:500]}
        print(json.dumps(row), flush=True)
        rows.append(row)
        del X, S
    return rows


def dask_gpu(args) -> list[dict]:
    import cupy as cp
    import dask.array as da
    import numpy as np
    from distributed import Client, LocalCluster

    import stein_coreset as sc
    from stein_coreset import distributed as scd

    n = args.n[0]
    kern = sc.SteinKernel(sc.IMQ(sigma=math.sqrt(2 * args.d)))
    X, S = _input(cp, n, args.d)
    Xh, Sh = cp.asnumpy(X), cp.asnumpy(S)
    rows = args.rows
    # one worker in this process (in-process transport): it shares this process's GPU
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster):
        for method in ("st", "skt"):
            out = {}
            for name, A, B in (("cupy", X, S), ("numpy", Xh, Sh)):
                dX = da.from_array(A, chunks=(n // 4, args.d), asarray=False)
                dS = da.from_array(B, chunks=(n // 4, args.d), asarray=False)
                t0 = time.perf_counter()
                res = scd.compress(dX, dS, size=math.ceil(math.sqrt(n)), method=method, seed=3,
                                   kernel=kern)
                out[name] = (res, time.perf_counter() - t0)
            g, c = out["cupy"][0], out["numpy"][0]
            same = bool(np.array_equal(sc._array_api.to_host(g.indices, np.int64),
                                       sc._array_api.to_host(c.indices, np.int64)))
            row = {"method": method, "n": n, "blocks": 4, "cupy_s": out["cupy"][1],
                   "numpy_s": out["numpy"][1], "ksd_cupy": g.ksd, "ksd_numpy": c.ksd,
                   "same_indices": same,
                   "rel_ksd": abs(g.ksd - c.ksd) / max(abs(c.ksd), 1e-300),
                   "indices_on_device": isinstance(g.indices, cp.ndarray)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def diagnose_lskt(args) -> list[dict]:
    """Where a CuPy lskt departs from the NumPy one: Low-rank Debiasing's weights (same seed),
    then KT-Compress++ on one common resampled sequence."""
    import cupy as cp
    import numpy as np

    import stein_coreset as sc
    from stein_coreset.algorithms.compresspp import compresspp_plan, run_kt_compresspp
    from stein_coreset.algorithms.debias import low_rank_debias
    from stein_coreset.algorithms.resample import resample

    n = args.n[0]
    X, S = _input(cp, n, args.d)
    Xh, Sh = cp.asnumpy(X), cp.asnumpy(S)
    kern = sc.SteinKernel(sc.IMQ(sigma=math.sqrt(2 * args.d)))
    Kc, Kg = kern.bind(Xh, Sh), kern.bind(X, S)
    size = math.ceil(math.sqrt(n))
    m, sub, n_prime, g, _ = compresspp_plan(n, size, g=4, standard_thin=True)
    rank = math.ceil(n ** args.tau)
    out = {}
    for name, K in (("cpu", Kc), ("cuda", Kg)):
        w, info = low_rank_debias(K, rank, rng=np.random.default_rng(5), return_info=True)
        out[name] = (sc._array_api.to_host(w), info["steps_run"])
    wc, wg = out["cpu"][0], out["cuda"][0]
    seq = resample(wc, n_prime, np.random.default_rng(6), check_input=False)
    idx = {}
    for name, K in (("cpu", Kc), ("cuda", Kg)):
        idx[name] = run_kt_compresspp(K, seq, g, 0.5, np.random.default_rng(7), None, m)[0]
    C = np.stack([idx["cpu"], idx["cuda"]])
    sums = {name: K.coreset_sums(C).tolist() for name, K in (("cpu", Kc), ("cuda", Kg))}
    uni = Kc.kt_split(seq[:4096], 4, 0.5, 11)
    ung = Kg.kt_split(seq[:4096], 4, 0.5, 11)
    row = {"n": n, "ld_max_abs_w_diff": float(np.max(np.abs(wc - wg))),
           "ld_max_w": float(wc.max()), "ld_steps_cpu": out["cpu"][1],
           "ld_steps_cuda": out["cuda"][1],
           "ktcpp_same": bool(np.array_equal(idx["cpu"], idx["cuda"])),
           "ktcpp_frac_same_positions": float(np.mean(idx["cpu"] == idx["cuda"])),
           "coreset_sums_by_cpu": sums["cpu"], "coreset_sums_by_cuda": sums["cuda"],
           "kt_split_rows_same": float(np.mean(np.all(uni == ung, axis=1)))}
    print(json.dumps(row), flush=True)
    return [row]


def loops(args) -> list[dict]:
    """Stein thinning run for n steps (the first stage of SKT, SR and SC) in both device loop
    modes (STEIN_CORESET_CUDA_LOOP), and persistent on 1/2, 1/4, 1/8 and 1/16 of the
    multiprocessors (STEIN_CORESET_CUDA_LOOP_BLOCKS: fewer blocks at the grid barrier, more
    points each; a GPU step is latency-bound, and beating 16 host cores by 5x at 2^16 needs
    2-3 us a step: 1 thread of this library takes ~11.5 s for the 2^16 steps on a 2-core
    EPYC): seconds, microseconds per step, same picks."""
    import os

    import cupy as cp
    import numpy as np

    import stein_coreset as sc
    from stein_coreset.engine.cuda import launch as cuda_launch

    rows = args.rows
    kern = sc.SteinKernel(sc.IMQ(sigma=math.sqrt(2 * args.d)))
    sms = cuda_launch.multiprocessors(cp.cuda.Device().id)
    for n in args.n:
        X, S = _input(cp, n, args.d)
        K = kern.bind(X, S)
        picks = None
        fewer = dict.fromkeys(max(1, sms // k) for k in (2, 4, 8, 16))
        for mode, blocks in [("graph", ""), ("persistent", "")] + [
                ("persistent", str(b)) for b in fewer if b < sms]:
            os.environ["STEIN_CORESET_CUDA_LOOP"] = mode
            os.environ["STEIN_CORESET_CUDA_LOOP_BLOCKS"] = blocks
            K.stein_thinning(64)  # compile
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            got = K.stein_thinning(n)
            secs = time.perf_counter() - t0
            row = {"n": n, "mode": mode, "max_blocks": int(blocks or sms), "steps": n,
                   "seconds": secs, "us_per_step": secs / n * 1e6}
            if picks is None:
                picks = got
            else:
                row["same_picks_as_graph"] = bool(np.array_equal(picks, got))
            print(json.dumps(row), flush=True)
            rows.append(row)
    os.environ.pop("STEIN_CORESET_CUDA_LOOP", None)
    os.environ.pop("STEIN_CORESET_CUDA_LOOP_BLOCKS", None)
    return rows


def amd_modes(args) -> list[dict]:
    """AMD (Alg. F.2) on a rank ceil(n^tau) K' = F F^T + diag(res) for 7 sqrt(n) steps (App.
    I.2's cap, no monitor): the device's array-API loop, the fused kernel
    (STEIN_CORESET_CUDA_AMD) with its blocks of ``cuda_amd.amd_grid`` ("fused") and with blocks of
    BLOCK threads ("fused_block256", the grid before blocks grew), and up to n = 2^16 the C++
    loop on the host's cores; seconds, the fused kernel's threads per block and F's float32
    bytes read per second, and the largest relative difference of the weights to the C++ ones
    (above 2^16: to the array-API loop's)."""
    import os

    import cupy as cp
    import numpy as np

    from stein_coreset.algorithms.amd import LowRankPlusDiagonal, amd
    from stein_coreset.engine.cuda import amd as cuda_amd
    from stein_coreset.engine.cuda import config as cuda_config

    rows = args.rows
    for n in args.n:
        r = min(1024, math.ceil(n ** args.tau))
        steps = math.ceil(7 * math.sqrt(n))
        rs = cp.random.RandomState(n)
        F = 0.3 * rs.standard_normal((n, r), dtype=cp.float64)
        dg = cp.sum(F * F, axis=1) + rs.random_sample(n)
        op = LowRankPlusDiagonal(F, dg)
        row = {"n": n, "r": r, "steps": steps}
        ref = None
        if n <= 1 << 16:
            t0 = time.perf_counter()
            ref = amd(LowRankPlusDiagonal(cp.asnumpy(F), cp.asnumpy(dg)), steps)
            row["cpu_seconds"] = time.perf_counter() - t0
        most = cuda_config.AMD_MAX_BLOCK
        for mode in ("xp", "fused", "fused_block256"):
            os.environ["STEIN_CORESET_CUDA_AMD"] = mode[:5]
            cuda_config.AMD_MAX_BLOCK = cuda_config.BLOCK if mode == "fused_block256" else most
            amd(op, 4)  # compile
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            wg = cp.asnumpy(amd(op, steps))
            row[f"{mode}_seconds"] = time.perf_counter() - t0
            if mode != "xp":
                if isinstance(F, cp.ndarray):  # not on the tests' NumPy stand-in
                    row[f"{mode}_threads"] = cuda_amd.amd_launch(n, r, cp.cuda.Device().id)[2]
                row[f"{mode}_GBps"] = 4.0 * n * r * steps / row[f"{mode}_seconds"] / 1e9
            if ref is None:
                ref = wg
            row[f"{mode}_max_rel_diff"] = float(np.max(np.abs(wg - ref) / np.maximum(ref, 1e-300)))
        cuda_config.AMD_MAX_BLOCK = most
        print(json.dumps(row), flush=True)
        rows.append(row)
        del op, F, dg
    os.environ.pop("STEIN_CORESET_CUDA_AMD", None)
    return rows


def dksd_pass(args) -> list[dict]:
    """The estimators' DKSD pair pass (Barp et al., Eq. 7, value and adjoints) at d = --d
    with a diagonal diffusion and a shared IMQ: on the device the pass the engine picks
    ("auto": the CUDA rows) and the blocked array-API pass ("xp"), on the host the C++ on every
    usable core ("cpu"); seconds (best of 3, warm) and the relative difference of the value
    to the C++'s."""
    import cupy as cp
    import numpy as np

    import stein_coreset as sc
    from stein_coreset import _array_api as aa
    from stein_coreset._threads import effective_n_threads
    from stein_coreset.engine import get_backend
    from stein_coreset.estimators import dksd as D

    d = args.d
    comps = [(sc.IMQ(sigma=math.sqrt(2 * d)), 1.0)] * d
    threads = effective_n_threads(None)

    def best_of_3(*a, **kw):  # the pass on these arguments, warm
        out = D.pair_pass(*a, **kw)  # compile, caches
        secs = []
        for _ in range(3):
            t0 = time.perf_counter()
            out = D.pair_pass(*a, **kw)
            cp.cuda.Device().synchronize()
            secs.append(time.perf_counter() - t0)
        return out, min(secs)

    rows = args.rows
    for n in args.n:
        rng = np.random.default_rng(n)
        U, V = rng.standard_normal((n, d)), rng.standard_normal((n, d))
        F = rng.random((n, d)) + 0.5
        ref, secs = best_of_3(U, V, "diag", F, comps, True, backend="cpu", n_threads=threads)
        row = {"n": n, "d": d, "cpu_threads": threads, "cpu_seconds": secs}
        dev = [cp.asarray(a) for a in (U, V, F)]
        xp, _ = aa.namespace(U=dev[0])
        for backend in ("auto", "xp"):
            out, secs = best_of_3(dev[0], dev[1], "diag", dev[2], comps, True, backend=backend)
            row[f"{backend}_backend"] = get_backend(backend, xp, comps[0][0]).name
            row[f"{backend}_seconds"] = secs
            row[f"{backend}_rel_diff"] = abs(out[0] - ref[0]) / abs(ref[0])
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def profile(args) -> list[dict]:
    """cProfile of one warm run of each method of ``--method`` (comma-separated) at n (the 30
    costliest functions by cumulative time): where a method's device time goes, host syncs
    and Python included."""
    import cProfile
    import io
    import pstats

    import cupy as cp

    import stein_coreset as sc
    from stein_coreset.methods import METHODS

    n = args.n[0]
    X, S = _input(cp, n, args.d)
    rows = args.rows
    for method in args.method.split(","):
        stein = METHODS[method].debiased
        base = sc.IMQ(sigma=math.sqrt(2 * args.d))
        kw = dict(size=math.ceil(math.sqrt(n)), method=method, seed=0,
                  kernel=sc.SteinKernel(base) if stein else base)
        if method.startswith("l"):  # the low-rank methods at --tau, as gpu_check runs them
            kw["tau"] = args.tau
        Sm = S if stein else None
        sc.compress(X, Sm, **kw)  # warm
        cp.cuda.Device().synchronize()
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        res = sc.compress(X, Sm, **kw)
        cp.cuda.Device().synchronize()
        prof.disable()
        secs = time.perf_counter() - t0
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(30)
        print(f"{method} n={n}: {secs:.3f} s, info: "
              f"{ {k: v for k, v in res.info.items() if 'time' in k} }")
        print(buf.getvalue(), flush=True)
        rows.append({"method": method, "n": n, "seconds": secs})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, nargs="+", default=[1 << 20])
    p.add_argument("--d", type=int, default=4)
    p.add_argument("--method", default="lskt")
    p.add_argument("--tau", type=float, default=0.4)
    p.add_argument("--dask", action="store_true")
    p.add_argument("--diagnose-lskt", action="store_true")
    p.add_argument("--loops", action="store_true")
    p.add_argument("--amd", action="store_true", help="AMD: array-API loop vs fused kernel")
    p.add_argument("--profile", action="store_true", help="cProfile one run of --method")
    p.add_argument("--dksd", action="store_true", help="DKSD pair pass: CUDA vs array API vs C++")
    p.add_argument("--xp", choices=["cupy", "strict"], default="cupy",
                   help="strict: array_api_strict in place of CuPy (the CPU dry run; lskt only)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    args.rows = Rows(args.json)
    if args.diagnose_lskt:
        rows = diagnose_lskt(args)
    elif args.loops:
        rows = loops(args)
    elif args.amd:
        rows = amd_modes(args)
    elif args.profile:
        rows = profile(args)
    elif args.dksd:
        rows = dksd_pass(args)
    else:
        rows = dask_gpu(args) if args.dask else large(args)
    if rows is not args.rows:  # a mode that built a list of its own
        for row in rows:
            args.rows.append(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
