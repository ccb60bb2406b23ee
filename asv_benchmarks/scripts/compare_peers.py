"""Side-by-side comparisons of stein_coreset with peer packages, one function per comparison.

    python asv_benchmarks/scripts/compare_peers.py --st --kt --skt      (or --all)

Each function prints its numbers and returns them as a dict; ``--json FILE`` saves them all.
Timings are the best of ``--repeat`` runs, taken in one invocation so ratios are comparable.
Add a comparison as a new function plus a flag in ``COMPARISONS``.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from stein_coreset.engine.cpu import bridge


def _best_time(fn, repeat):
    best, out = math.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _jsonable(o):
    """NumPy scalars as numbers; anything else (a kernel in an ``info`` dict) as its repr."""
    try:
        return float(o)
    except (TypeError, ValueError):
        return repr(o)


def biased_chain(n, d, seed):
    """A biased sample for the target N(0, I_d): shifted, over-dispersed Gaussian points."""
    rng = np.random.default_rng(seed)
    X = 0.7 + 1.5 * rng.standard_normal((n, d))
    return X, -X


def compare_st(n=1 << 14, d=4, m=128, seed=0, repeat=7):
    """Stein thinning (Alg. D.1) against the `stein-thinning` package's ``thin``.

    Same points, scores and kernel: the package's defaults (standardize=True,
    preconditioner="id") use the IMQ kernel (1 + ||(x - y) / s||^2)^(-1/2) with s the columns'
    mean absolute deviation, i.e. IMQ(sigma=1, beta=-1/2) with M = diag(s^2) here.
    """
    from stein_thinning.thinning import thin

    import stein_coreset as sc
    from stein_coreset.algorithms import stein_thinning

    X, S = biased_chain(n, d, seed)
    scl = np.mean(np.abs(X - X.mean(axis=0)), axis=0)
    kern = sc.SteinKernel(sc.IMQ(sigma=1.0), M=np.diag(scl**2))

    def ours():
        return stein_thinning(kern.bind(X, S), m)

    t_peer, idx_peer = _best_time(lambda: thin(X, S, m), repeat)
    t_ours, idx_ours = _best_time(ours, repeat)
    t_comp, res = _best_time(
        lambda: sc.compress(X, S, size=m, method="st", kernel=kern, seed=0), repeat
    )
    same = bool(np.array_equal(np.asarray(idx_peer, dtype=np.int64), idx_ours))
    out = {
        "n": n,
        "d": d,
        "m": m,
        "stein_thinning_package_s": t_peer,
        "ours_s": t_ours,
        "ours_compress_s": t_comp,
        "speedup": t_peer / t_ours,
        "speedup_compress": t_peer / t_comp,
        "same_indices": same,
    }
    print(
        f"[st] n={n} d={d} m={m}: stein-thinning {t_peer * 1e3:.1f} ms, ours {t_ours * 1e3:.2f} ms"
        f" (compress {t_comp * 1e3:.2f} ms): {out['speedup']:.1f}x"
        f" ({out['speedup_compress']:.1f}x via compress); same indices: {same}"
    )
    return out


def compare_kt(n=1 << 14, d=2, m=128, seeds=5, repeat=1):
    """Standard (target) kernel thinning, Gaussian kernel sigma^2 = 2d, against goodpoints
    ``kt.thin`` (split and swap kernel both the Gaussian kernel, delta = 1/2) on the same input,
    per seed; MMD to the input's empirical distribution."""
    from goodpoints import kt

    import stein_coreset as sc
    from stein_coreset.kernels import centred_kernel_matrix

    sigma = math.sqrt(2.0 * d)
    t = int(round(math.log2(n / m)))

    def gauss(y, Z):
        return np.exp(-np.sum((y - Z) ** 2, axis=-1) / (2 * sigma**2))

    rows = []
    for seed in range(seeds):
        X = np.random.default_rng(1000 + seed).standard_normal((n, d))
        t_peer, idx_peer = _best_time(
            lambda X=X, seed=seed: kt.thin(X, t, gauss, gauss, delta=0.5, seed=seed), repeat
        )
        t_ours, res = _best_time(
            lambda X=X, seed=seed: sc.compress(
                X, size=m, method="kt", kernel=sc.Gaussian(sigma=sigma), seed=seed
            ),
            repeat,
        )
        Kc = centred_kernel_matrix(sc.Gaussian(sigma=sigma), X)

        def mmd(idx, Kc=Kc):
            w = np.bincount(np.asarray(idx), minlength=n) / len(idx)
            nz = np.flatnonzero(w)
            return math.sqrt(max(float(w[nz] @ bridge.gram(Kc, nz, nz) @ w[nz]), 0.0))

        w_ours = res.dense(n)
        nz = np.flatnonzero(w_ours)
        mmd_ours = math.sqrt(max(float(w_ours[nz] @ bridge.gram(Kc, nz, nz) @ w_ours[nz]), 0.0))
        rows.append((t_peer, t_ours, mmd(idx_peer), mmd_ours))
        print(
            f"[kt] seed {seed}: goodpoints {t_peer:.2f} s MMD {rows[-1][2]:.5f} | "
            f"ours {t_ours:.2f} s MMD {mmd_ours:.5f}"
        )
    r = np.array(rows)
    med = np.median(r, axis=0)
    out = {
        "n": n,
        "d": d,
        "m": m,
        "seeds": seeds,
        "goodpoints_s_median": med[0],
        "ours_s_median": med[1],
        "speedup_median": float(np.median(r[:, 0] / r[:, 1])),
        "goodpoints_mmd_median": med[2],
        "ours_mmd_median": med[3],
        "mmd_no_worse": bool(med[3] <= med[2]),
    }
    print(
        f"[kt] n={n} d={d} m={m}, median of {seeds}: goodpoints {med[0]:.2f} s / MMD "
        f"{med[2]:.5f}; ours {med[1]:.2f} s / MMD {med[3]:.5f}; speedup "
        f"{out['speedup_median']:.1f}x; MMD no worse: {out['mmd_no_worse']}"
    )
    return out


def compare_skt(n=1 << 14, d=4, m=128, seed=0, repeat=1):
    """Stein kernel thinning wall time, next to Stein thinning and standard thinning
    (KSD to the target N(0, I_d) of each coreset)."""
    import stein_coreset as sc

    X, S = biased_chain(n, d, seed)
    kern = sc.SteinKernel()
    out = {"n": n, "d": d, "m": m}
    for method in ("skt", "st", "standard"):
        t_m, res = _best_time(
            lambda method=method: sc.compress(X, S, size=m, method=method, kernel=kern, seed=seed),
            repeat,
        )
        out[f"{method}_s"] = t_m
        out[f"{method}_ksd"] = res.ksd
        extra = f" info {res.info}" if method == "skt" else ""
        print(f"[skt] {method}: {t_m:.3f} s, KSD {res.ksd:.5f}{extra}")
    return out


def _peak_rss_mib():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def compare_compresspp(n=1 << 16, d=2, seed=0, repeat=1, g=4):
    """KT-Compress++ (unbiased baseline, Gaussian kernel sigma^2 = 2d, g = 4, delta = 1/2)
    against goodpoints ``compress.compresspp_kt`` on the same input: time and MMD to the input's
    empirical distribution (exact, O(n^2) C++ centring done once for the scoring)."""
    from goodpoints import compress as gp_compress

    import stein_coreset as sc
    from stein_coreset.kernels import centred_kernel_matrix

    sigma = math.sqrt(2.0 * d)
    X = np.random.default_rng(2000 + seed).standard_normal((n, d))
    m = int(math.isqrt(n))
    t_peer, idx_peer = _best_time(
        lambda: gp_compress.compresspp_kt(
            X, b"gaussian", k_params=np.array([2.0 * sigma**2]), g=g, delta=0.5, seed=seed
        ),
        repeat,
    )
    t_ours, res = _best_time(
        lambda: sc.compress(
            X, size=m, method="compresspp", kernel=sc.Gaussian(sigma=sigma), seed=seed, g=g
        ),
        repeat,
    )
    Kc = centred_kernel_matrix(sc.Gaussian(sigma=sigma), X)

    def mmd_of(w):
        nz = np.flatnonzero(w)
        return math.sqrt(max(float(w[nz] @ bridge.gram(Kc, nz, nz) @ w[nz]), 0.0))

    mmd_peer = mmd_of(np.bincount(np.asarray(idx_peer, dtype=np.int64), minlength=n) / m)
    mmd_ours = mmd_of(res.dense(n))
    iid = np.random.default_rng(seed).choice(n, m, replace=False)
    mmd_iid = mmd_of(np.bincount(iid, minlength=n) / m)
    out = {
        "n": n,
        "d": d,
        "m": m,
        "g": g,
        "goodpoints_s": t_peer,
        "ours_s": t_ours,
        "speedup": t_peer / t_ours,
        "goodpoints_mmd": mmd_peer,
        "ours_mmd": mmd_ours,
        "iid_mmd": mmd_iid,
        "ours_info": {k: v for k, v in res.info.items() if not isinstance(v, float)},
    }
    print(
        f"[compresspp] n={n} d={d} m={m} g={g}: goodpoints {t_peer:.2f} s MMD {mmd_peer:.5f} | "
        f"ours {t_ours:.2f} s MMD {mmd_ours:.5f} | iid MMD {mmd_iid:.5f}; "
        f"speedup {out['speedup']:.2f}x"
    )
    return out


def compare_lskt(n=1 << 14, d=4, seed=0, repeat=1):
    """LSKT (Alg. 3) against SKT (Alg. 1) on a biased chain, m = sqrt(n): wall times (with the
    LD / KT-Compress++ split) and KSD to the target N(0, I_d)."""
    import stein_coreset as sc

    X, S = biased_chain(n, d, seed)
    m = int(math.isqrt(n))
    out = {"n": n, "d": d, "m": m}
    for method in ("lskt", "skt"):
        t_m, res = _best_time(
            lambda method=method: sc.compress(X, S, size=m, method=method, seed=seed), repeat
        )
        out[f"{method}_s"] = t_m
        out[f"{method}_ksd"] = res.ksd
        if method == "lskt":
            out["lskt_ld_s"] = res.info["time_ld_s"]
            out["lskt_compresspp_s"] = res.info["time_compresspp_s"]
        print(f"[lskt] {method}: {t_m:.2f} s, KSD {res.ksd:.5f}")
    out["skt_over_lskt_time"] = out["skt_s"] / out["lskt_s"]
    out["lskt_over_skt_ksd"] = out["lskt_ksd"] / out["skt_ksd"]
    print(
        f"[lskt] n={n} d={d} m={m}: SKT/LSKT time {out['skt_over_lskt_time']:.2f}, "
        f"KSD(LSKT)/KSD(SKT) {out['lskt_over_skt_ksd']:.3f} (LD {out['lskt_ld_s']:.2f} s, "
        f"KT-Compress++ {out['lskt_compresspp_s']:.2f} s)"
    )
    return out


def compare_lskt_scaling(ns=(1 << 12, 1 << 13, 1 << 14, 1 << 15, 1 << 16), d=4, seed=0,
                         repeat=1):
    """LSKT wall time from n = 2^12 to 2^16 (rank = ceil(sqrt(n)), T = 7 sqrt(n), m = the largest
    power of two <= sqrt(n), no standard thinning) and the fitted exponent of time ~ n^a; each n
    also reports peak memory (tracemalloc: NumPy and Python allocations; max RSS so far)."""
    import tracemalloc

    import stein_coreset as sc

    Xw, Sw = biased_chain(1024, d, seed)
    sc.compress(Xw, Sw, size=32, method="lskt", seed=seed)  # warm-up: thread pools, caches
    rows = []
    for n in ns:
        X, S = biased_chain(n, d, seed)
        m = 1 << (int(math.isqrt(n)).bit_length() - 1)
        tracemalloc.start()
        t_m, res = _best_time(
            lambda X=X, S=S, m=m: sc.compress(
                X, S, size=m, method="lskt", seed=seed, standard_thin=False
            ),
            repeat,
        )
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        rows.append((n, t_m, res.info["time_ld_s"], res.info["time_compresspp_s"], peak, res.ksd))
        print(
            f"[lskt-scaling] n={n} m={len(res)}: {t_m:.2f} s (LD {rows[-1][2]:.2f} s, "
            f"KT-Compress++ {rows[-1][3]:.2f} s), traced peak {peak:.0f} MiB, "
            f"max RSS {_peak_rss_mib():.0f} MiB, KSD {res.ksd:.5f}"
        )
    r = np.array(rows)
    slope = float(np.polyfit(np.log(r[:, 0]), np.log(r[:, 1]), 1)[0])
    slope_ld = float(np.polyfit(np.log(r[:, 0]), np.log(r[:, 2]), 1)[0])
    slope_cpp = float(np.polyfit(np.log(r[:, 0]), np.log(r[:, 3]), 1)[0])
    out = {
        "rows": [dict(zip(("n", "s", "ld_s", "compresspp_s", "traced_peak_mib", "ksd"), x,
                          strict=True)) for x in rows],
        "exponent": slope,
        "exponent_ld": slope_ld,
        "exponent_compresspp": slope_cpp,
        "max_rss_mib": _peak_rss_mib(),
    }
    print(
        f"[lskt-scaling] time ~ n^{slope:.2f} (LD n^{slope_ld:.2f}, "
        f"KT-Compress++ n^{slope_cpp:.2f})"
    )
    return out


def compare_lskt_stretch(n=1 << 20, d=4, tau=0.4, seed=0, repeat=1):
    """Stretch: LSKT at n = 2^20, d = 4, rank = n^tau (paper Table I.1: LD(0.4) 131 s +
    KT-Compress++ 36 s on an RTX 6000 GPU)."""
    import stein_coreset as sc

    X, S = biased_chain(n, d, seed)
    m = int(math.isqrt(n))
    rank = int(round(n**tau))
    t_m, res = _best_time(
        lambda: sc.compress(X, S, size=m, method="lskt", rank=rank, seed=seed), repeat
    )
    out = {"n": n, "d": d, "tau": tau, "rank": rank, "s": t_m, "ksd": res.ksd,
           "ld_s": res.info["time_ld_s"], "compresspp_s": res.info["time_compresspp_s"]}
    print(f"[lskt-stretch] n={n} rank={rank}: {t_m:.1f} s (LD {out['ld_s']:.1f} s, "
          f"KT-Compress++ {out['compresspp_s']:.1f} s), KSD {res.ksd:.5f}")
    return out


def compare_scaling(ns=(1 << 12, 1 << 13, 1 << 14, 1 << 15), d=4, seed=0, repeat=1):
    """Time against n for the debiased methods and their low-rank versions (tau = 0.4), and the
    fitted exponent a of time ~ n^a (the last two sizes), with cpu/wall and the load average.

    Sizes as in lowrank_check.py: sqrt(n) for skt/lskt, ceil(n^0.4) for sr/lsr/sc/lsc."""
    import os

    import stein_coreset as sc

    methods = ("skt", "lskt", "sr", "lsr", "sc", "lsc")
    Xw, Sw = biased_chain(1024, d, seed)
    for m in methods:  # warm-up: thread teams, caches
        sc.compress(Xw, Sw, size=8, method=m, seed=seed)
    rows = {m: [] for m in methods}
    for n in ns:
        X, S = biased_chain(n, d, seed)
        kernel = sc.SteinKernel(sc.IMQ(sigma=float(sc.median_bandwidth(X))))
        for m in methods:
            size = math.isqrt(n) if m.endswith("kt") else math.ceil(n**0.4 - 1e-9)
            opts = {"tau": 0.4} if m.startswith("l") else {}
            c0 = time.process_time()
            t, res = _best_time(
                lambda X=X, S=S, size=size, m=m, kernel=kernel, opts=opts: sc.compress(
                    X, S, size=size, method=m, kernel=kernel, seed=seed, **opts
                ),
                repeat,
            )
            cpu = (time.process_time() - c0) / repeat
            rows[m].append({"n": n, "s": t, "cpu_over_wall": cpu / t, "ksd": res.ksd,
                            "load": os.getloadavg()[0]})
            print(f"[scaling] n=2^{int(math.log2(n))} {m:5s} m={size}: {t:7.2f} s "
                  f"(cpu/wall {cpu / t:.2f}, load {os.getloadavg()[0]:.2f}), KSD {res.ksd:.5f}",
                  flush=True)
    out = {"rows": rows, "exponents": {}}
    for m in methods:
        r = rows[m]
        a = math.log(r[-1]["s"] / r[-2]["s"]) / math.log(r[-1]["n"] / r[-2]["n"])
        out["exponents"][m] = a
    print("[scaling] time ~ n^a over the last doubling: " + ", ".join(
        f"{m} {a:.2f}" for m, a in out["exponents"].items()))
    return out


COMPARISONS = {
    "st": compare_st,
    "kt": compare_kt,
    "skt": compare_skt,
    "compresspp": compare_compresspp,
    "lskt": compare_lskt,
    "lskt_scaling": compare_lskt_scaling,
    "lskt_stretch": compare_lskt_stretch,
    "scaling": compare_scaling,
}

#: Comparisons too long for ``--all`` on a small machine (run them by their own flag).
NOT_IN_ALL = {"lskt_stretch", "scaling"}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for name, fn in COMPARISONS.items():
        p.add_argument(f"--{name}", action="store_true", help=(fn.__doc__ or "").split("\n")[0])
    p.add_argument("--all", action="store_true", help="run every comparison")
    p.add_argument("--repeat", type=int, default=None, help="timing repeats (best of)")
    p.add_argument("--json", default=None, help="write the results to this JSON file")
    args = p.parse_args(argv)
    chosen = [k for k in COMPARISONS if (args.all and k not in NOT_IN_ALL) or getattr(args, k)]
    if not chosen:
        p.error("choose at least one comparison (or --all)")
    results = {}
    for name in chosen:
        kw = {} if args.repeat is None else {"repeat": args.repeat}
        results[name] = COMPARISONS[name](**kw)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2, default=_jsonable)
    return results


if __name__ == "__main__":
    main()
