"""The low-rank methods against the quadratic ones, n = 2^16..2^20 (docs/choosing_a_method.md).

    python docs/experiments/lowrank_check.py bw amd 16 18 20 --json lowrank.json

Parts (any subset, in the order given):

- ``bw``: the machine's memory bandwidth, a STREAM-like triad ``a = b + s c`` over 256 MiB
  arrays on every usable core (cache-sized chunks of NumPy ufuncs, one thread per core; 24
  bytes per element as STREAM counts them) and a read-only pass (sum of a float32 array).
- ``amd``: the AMD step (``engine/cpu/src_cpp/amd.cpp``) at n = 2^18, r = 147 (= ceil(n^0.4)):
seconds per
  step, the bytes each step moves (F once in float32, plus the length-n state vectors) and
  their rate as a fraction of the triad and of the read bandwidth.
- ``16``, ``18``, ``20``: n = 2^k, d = 4, the biased chain of
  asv_benchmarks/scripts/compare_peers.py (target N(0, I_4), points 0.7 + 1.5 z). Equal-weight
  methods (skt, lskt) take size sqrt(n), the weighted ones (sr, lsr, sc, lsc) size ceil(n^0.4);
  low-rank ones run with tau = 0.4. Each run is a fresh subprocess: wall and CPU seconds, peak RSS,
  the KSD of the coreset against P (O(m^2) with one Stein kernel per n: IMQ at the input's median
  bandwidth, which compress also uses), and ``res.info``. Seeds 0, 1, 2 at 2^16 for every method; at
  2^18 lskt takes seeds 0-2 and skt seed 0 in full, its seeds 1 and 2 reuse seed 0's Stein Thinning
  (deterministic: it does not depend on the seed) and time only the KT stage; at 2^20 lskt, lsr, lsc
  with seed 0. ``--limit`` seconds per run (default 1200): a run past it is reported as not
  finished.

The load average is recorded before each part; run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

D = 4
EQUAL = ("skt", "lskt")


def biased_chain(n, d, seed):
    """A biased sample for the target N(0, I_d): shifted, over-dispersed Gaussian points."""
    rng = np.random.default_rng(seed)
    X = 0.7 + 1.5 * rng.standard_normal((n, d))
    return X, -X


def _usable_cores() -> int:
    from stein_coreset._threads import effective_n_threads

    return effective_n_threads(None)


def bandwidth(n_bytes: int = 256 << 20, repeat: int = 5) -> dict:
    """Triad and read bandwidth in GB/s (best of ``repeat``), one thread per usable core."""
    from concurrent.futures import ThreadPoolExecutor

    nt = _usable_cores()
    N = n_bytes // 8
    a, b, c = np.zeros(N), np.ones(N), np.full(N, 2.0)
    f32 = np.ones(n_bytes // 4, dtype=np.float32)
    chunk = 1 << 13  # 64 KiB of doubles: the temporary stays in cache

    def triad_part(k):
        lo, hi = k * N // nt, (k + 1) * N // nt
        tmp = np.empty(chunk)
        for i in range(lo, hi, chunk):
            j = min(hi, i + chunk)
            t = tmp[: j - i]
            np.multiply(c[i:j], 3.0, out=t)
            np.add(b[i:j], t, out=a[i:j])

    def read_part(k):
        lo, hi = k * f32.size // nt, (k + 1) * f32.size // nt
        return float(np.add.reduce(f32[lo:hi], dtype=np.float32))

    out = {"threads": nt, "array_mib": n_bytes / 2**20}
    with ThreadPoolExecutor(nt) as pool:
        parts = (("triad", triad_part, 3 * 8 * N), ("read", read_part, 4 * f32.size))
        for name, fn, moved in parts:
            best = math.inf
            for _ in range(repeat):
                t0 = time.perf_counter()
                list(pool.map(fn, range(nt)))
                best = min(best, time.perf_counter() - t0)
            out[f"{name}_gbs"] = moved / best / 1e9
    print(f"[bw] {nt} threads: triad {out['triad_gbs']:.1f} GB/s, read {out['read_gbs']:.1f} GB/s")
    return out


def amd_step(n: int = 1 << 18, r: int = 147, steps: int = 64, bw: dict | None = None) -> dict:
    """Seconds per AMD step at (n, r), and the fraction of the memory bandwidth it reaches."""
    from stein_coreset.engine.cpu import bridge

    rng = np.random.default_rng(0)
    F = (rng.standard_normal((n, r)) / math.sqrt(r)).astype(np.float32)
    res = rng.random(n) + 0.5
    nt = _usable_cores()
    out = {"n": n, "r": r, "threads": nt}
    for label, threads in (("1 thread", 1), (f"{nt} threads", nt)):
        best = math.inf
        for _ in range(3):
            w = np.full(n, 1.0 / n)
            v = w.copy()
            t0 = time.perf_counter()
            bridge.amd_lowrank(F, res, w, v, 0, steps, 1e-3, threads)
            best = min(best, (time.perf_counter() - t0) / steps)
        out[f"step_s_{threads}"] = best
        print(f"[amd] n={n} r={r} {label}: {best * 1e3:.2f} ms per step")
    # per step: F once (4 r bytes a row); pass 1 reads logv, w, v, res; pass 2 reads logv, w
    # and writes logv, v, w (8 bytes each)
    moved = n * (4 * r + 8 * 9)
    out["bytes_per_step"] = moved
    rate = moved / out[f"step_s_{nt}"] / 1e9
    out["gbs"] = rate
    if bw:
        out["fraction_of_triad"] = rate / bw["triad_gbs"]
        out["fraction_of_read"] = rate / bw["read_gbs"]
        print(f"[amd] {moved / 2**20:.0f} MiB per step -> {rate:.1f} GB/s = "
              f"{out['fraction_of_triad']:.0%} of triad, {out['fraction_of_read']:.0%} of read")
    return out


# ---------------------------------------------------------------------------------------------
# One compress run in a fresh process
# ---------------------------------------------------------------------------------------------
def _size(method: str, n: int) -> int:
    return math.isqrt(n) if method in EQUAL else math.ceil(n**0.4 - 1e-9)


def _peak_rss_mib() -> float:
    """This process's resident high-water mark (VmHWM: of its own image since exec; ru_maxrss
    would carry over the parent's, which Linux keeps across fork and exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmHWM in /proc/self/status")


def child(method: str, n: int, seed: int, sigma: float, reuse_st: str | None) -> dict:
    import stein_coreset as sc

    X, S = biased_chain(n, D, 12345)
    kernel = sc.SteinKernel(sc.IMQ(sigma=sigma))
    m = _size(method, n)
    opts = {"tau": 0.4} if method.startswith("l") else {}
    c0, t0 = time.process_time(), time.perf_counter()
    if reuse_st:  # skt with a saved Stein Thinning run: the KT stage only (see the docstring)
        from stein_coreset.algorithms.kernel_thinning import kernel_thinning
        from stein_coreset.algorithms.weights import equal_weights

        st = np.load(reuse_st)
        K = kernel.bind(X, S)
        idx = kernel_thinning(K, m, indices=np.sort(st), rng=np.random.default_rng(seed),
                              baseline=st[:m])
        idx, w = equal_weights(idx, m)
        info = {}
    else:
        res = sc.compress(X, S, size=m, method=method, kernel=kernel, seed=seed, **opts)
        idx, w, info = np.asarray(res.indices), np.asarray(res.weights), res.info
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    ksd = sc.ksd(X[idx], S[idx], weights=w, kernel=kernel)
    keep = ("rank", "rank_from_tau", "ld_steps_run", "time_rpcholesky_s", "time_amd_s",
            "time_ld_s", "time_compresspp_s")
    return {
        "method": method, "n": n, "seed": seed, "size": m, "wall_s": wall, "cpu_s": cpu,
        "cpu_over_wall": cpu / wall, "ksd": ksd, "coreset": int(len(idx)),
        "peak_rss_mib": _peak_rss_mib(),
        "st_only_kt": bool(reuse_st),
        "info": {k: info[k] for k in keep if k in info},
    }


def run_one(method, n, seed, sigma, limit, reuse_st=None) -> dict:
    cmd = [sys.executable, __file__, "--child", method, str(n), str(seed), repr(sigma)]
    if reuse_st:
        cmd += ["--reuse-st", reuse_st]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit,
                           cwd=os.path.dirname(os.path.abspath(__file__)))
    except subprocess.TimeoutExpired:
        print(f"  {method} n={n} seed={seed}: did not finish in {limit:.0f} s", flush=True)
        return {"method": method, "n": n, "seed": seed, "finished": False, "limit_s": limit}
    if p.returncode != 0:
        raise RuntimeError(f"{method} n={n} seed={seed} failed:\n{p.stderr[-3000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["finished"], out["process_s"] = True, time.perf_counter() - t0
    print(f"  {method:5s} n=2^{int(math.log2(n))} seed={seed} m={out['size']}: "
          f"{out['wall_s']:8.2f} s (cpu/wall {out['cpu_over_wall']:.2f}), KSD {out['ksd']:.5f}, "
          f"peak {out['peak_rss_mib']:.0f} MiB {out['info']}", flush=True)
    return out


def save_st(n: int, sigma: float, path: str) -> float:
    """Stein Thinning for n steps (skt's first stage at size sqrt(n)), saved; its seconds."""
    import stein_coreset as sc

    X, S = biased_chain(n, D, 12345)
    K = sc.SteinKernel(sc.IMQ(sigma=sigma)).bind(X, S)
    t0 = time.perf_counter()
    np.save(path, K.stein_thinning(n))
    return time.perf_counter() - t0


def size_part(k: int, limit: float, tmp: str) -> dict:
    import stein_coreset as sc

    n = 1 << k
    X, _ = biased_chain(n, D, 12345)
    sigma = float(sc.median_bandwidth(X))
    del X
    runs = []
    print(f"[n=2^{k}] sigma = {sigma:.4f}, load {os.getloadavg()}", flush=True)
    if k <= 16:
        plan = [(m, s) for m in ("skt", "lskt", "sr", "lsr", "sc", "lsc") for s in (0, 1, 2)]
        runs = [run_one(m, n, s, sigma, limit) for m, s in plan]
    elif k <= 18:
        runs = [run_one("lskt", n, s, sigma, limit) for s in (0, 1, 2)]
        runs.append(run_one("skt", n, 0, sigma, limit))
        st_path = os.path.join(tmp, f"st_{k}.npy")
        save_st(n, sigma, st_path)
        runs += [run_one("skt", n, s, sigma, limit, reuse_st=st_path) for s in (1, 2)]
    else:
        runs = [run_one(m, n, 0, sigma, limit) for m in ("lskt", "lsr", "lsc")]
    summary = {}
    for m in sorted({r["method"] for r in runs}):
        rs = [r for r in runs if r["method"] == m and r["finished"]]
        full = [r for r in rs if not r.get("st_only_kt")]
        if rs:
            summary[m] = {"median_ksd": float(np.median([r["ksd"] for r in rs])),
                          "median_wall_s": float(np.median([r["wall_s"] for r in full]))}
    for lo, hi in (("lskt", "skt"), ("lsr", "sr"), ("lsc", "sc")):
        if lo in summary and hi in summary:
            summary[f"{lo}/{hi}"] = {
                "time": summary[lo]["median_wall_s"] / summary[hi]["median_wall_s"],
                "ksd": summary[lo]["median_ksd"] / summary[hi]["median_ksd"],
            }
            print(f"[n=2^{k}] {lo}/{hi}: time {summary[f'{lo}/{hi}']['time']:.3f}, "
                  f"median KSD {summary[f'{lo}/{hi}']['ksd']:.3f}", flush=True)
    return {"n": n, "sigma": sigma, "runs": runs, "summary": summary,
            "load_after": os.getloadavg()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("parts", nargs="*", default=["bw", "amd", "16"])
    p.add_argument("--json", default=None)
    p.add_argument("--limit", type=float, default=1200.0)
    p.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    p.add_argument("--reuse-st", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        m, n, seed, sigma = args.child
        print(json.dumps(child(m, int(n), int(seed), float(sigma), args.reuse_st)))
        return
    import tempfile

    out = {"load_before": os.getloadavg(), "cpu_count": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        for part in args.parts:
            out.setdefault("load_at", {})[part] = os.getloadavg()
            if part == "bw":
                out["bw"] = bandwidth()
            elif part == "amd":
                out["amd"] = amd_step(bw=out.get("bw"))
            else:
                out[f"n{part}"] = size_part(int(part), args.limit, tmp)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(out, f, indent=1, default=float)
    out["load_after"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=float)


if __name__ == "__main__":
    main()
