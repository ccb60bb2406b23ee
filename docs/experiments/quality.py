"""Quality benchmark: KSD vs output size m for the equal-weighted and weighted methods, on a
biased and an unbiased input, with the fitted log-log slope, and the authors' goodpoints.jax
SKT / LSKT side by side when it is importable.

    python docs/experiments/quality.py              # the table (d = 2, n = 2^8 .. 2^14)
    python docs/experiments/quality.py --d 4 --nmax 12 --seeds 3
    # paired log-ratios ours / goodpoints; a method option (a JSON value); one timed run each
    # at n = 2^16:
    python docs/experiments/quality.py --methods skt,lskt --peer --pair
    python docs/experiments/quality.py --methods skt --opt swap_passes=2
    python docs/experiments/quality.py --time 16 --methods skt,lskt

Inputs (seed s, n points in d dimensions, target P = N(0, I), scores S = -X):
``biased``: X = 0.7 + 1.5 z, z ~ N(0, I); ``iid``: X = z. One fixed Stein IMQ kernel,
sigma^2 = 2 d, for every n (no median heuristic, so KSDs at different n are comparable); every
KSD, including goodpoints', is evaluated with this library's kernel. Output size m =
floor(sqrt(n)) (LSKT rounds it down to a power of two). The slope is the least-squares slope
of log KSD against log m over the n given (mean KSD over seeds); i.i.d. draws from P give
-1/2, the paper's SKT / LSKT guarantees ~ -1 up to logs.

goodpoints.jax runs (``--peer``) are slow on a CPU; they are cached in ``--cache`` (JSON,
keyed by method, input, d, n, seed) so that only our side is recomputed between runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

os.environ.setdefault("TQDM_DISABLE", "1")  # goodpoints' AMD progress bars

OURS = ("standard", "st", "skt", "lskt", "sr", "sc")
PEER = ("skt", "lskt")


def make_input(kind: str, n: int, d: int, seed: int):
    """The benchmark input: (X, S) with S = -X the N(0, I) scores."""
    z = np.random.default_rng(seed).standard_normal((n, d))
    X = 0.7 + 1.5 * z if kind == "biased" else z
    return X, -X


def stein_kernel(d: int):
    import stein_coreset as sc

    return sc.SteinKernel(sc.IMQ(sigma=math.sqrt(2.0 * d)))


def output_size(n: int) -> int:
    return math.isqrt(n)


def ours(method: str, X, S, m: int, seed: int, options: dict):
    """(KSD, seconds, size used) of ``compress(method)`` with the fixed kernel."""
    import stein_coreset as sc
    from stein_coreset.compress import METHODS

    own = METHODS[method].options
    kw = {k: v for k, v in options.items() if k in own}
    t0 = time.perf_counter()
    res = sc.compress(X, S, size=m, method=method, kernel=stein_kernel(X.shape[1]), seed=seed,
                      **kw)
    return float(res.ksd), time.perf_counter() - t0, int(res.info.get("size_used", m))


def _peer_kernel(d: int):
    from goodpoints.jax.kernel.precond_stein import PrecondSteinKernel
    from goodpoints.jax.kernel.scalar import imq

    return PrecondSteinKernel(imq, np.eye(d), 2.0 * d)


def peer_indices(method: str, X, S, m: int, seed: int):
    """goodpoints.jax's SKT (st_thin then kt, Stein-thinning baseline) or LSKT (lr_debias then
    kt_compresspp) with its default parameters: the (m,) output indices with repeats."""
    import warnings

    import jax

    jax.config.update("jax_enable_x64", True)
    warnings.filterwarnings("ignore", message="no QP solver")
    from goodpoints.jax.compress import kt_compresspp
    from goodpoints.jax.kt import kt
    from goodpoints.jax.lr_debias import lr_debias
    from goodpoints.jax.st import st_thin

    n, d = X.shape
    kernel = _peer_kernel(d)
    points = kernel.prepare_input(X, S)
    rng = np.random.default_rng(seed)
    w0 = np.full(n, 1.0 / n)
    if method == "skt":
        n_prime = m * 2 ** max(0, math.ceil(math.log2(n / m) - 1e-12))
        w, _ = st_thin(kernel, points, w0, rng, inflate_size=n, out_size=n_prime)
        return np.asarray(kt(kernel, points, w, rng, inflate_size=n_prime, out_size=m, delta=0.5))
    n_prime = 4 ** math.ceil(math.log(n, 4) - 1e-12)
    if m * m != n_prime:
        raise ValueError(f"goodpoints' LSKT outputs sqrt(4^ceil(log4 n)) points; n = {n}, m = {m}")
    rank = math.ceil(math.sqrt(n))
    w, _, _ = lr_debias(kernel, points, rng, rank=rank, num_iter=math.ceil(7 * math.sqrt(n)))
    return np.asarray(kt_compresspp(kernel, points, w, rng, inflate_size=n_prime, g=4,
                                    delta=0.5))


def peer(method, kind, X, S, m, seed, cache, cached_only=False):
    key = f"{method}/{kind}/d{X.shape[1]}/n{X.shape[0]}/s{seed}"
    if key not in cache:
        if cached_only:
            return None
        import stein_coreset as sc

        t0 = time.perf_counter()
        idx = peer_indices(method, X, S, m, seed)
        sec = time.perf_counter() - t0
        w = np.bincount(idx, minlength=X.shape[0]) / idx.size
        cache[key] = {"ksd": float(sc.ksd(X, S, weights=w, kernel=stein_kernel(X.shape[1]))),
                      "seconds": sec}
    return cache[key]["ksd"]


def slope(ms, ksds) -> float:
    return float(np.polyfit(np.log(ms), np.log(ksds), 1)[0])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--d", type=int, default=2)
    p.add_argument("--inputs", default="biased,iid")
    p.add_argument("--nmin", type=int, default=8, help="smallest log2 n")
    p.add_argument("--nmax", type=int, default=14, help="largest log2 n")
    p.add_argument("--even", action="store_true", help="only n = 4^j (goodpoints' LSKT sizes)")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--methods", default=",".join(OURS))
    p.add_argument("--peer", action="store_true", help="also goodpoints.jax's skt / lskt")
    p.add_argument("--pair", action="store_true",
                   help="print paired mean log(ours / goodpoints) +- s.e. instead of the table")
    p.add_argument("--time", type=int, metavar="LOG2N",
                   help="one run of each method on the biased input of 2^LOG2N points (seed 0): "
                        "wall and CPU seconds (all threads) and the load average")
    p.add_argument("--cached", action="store_true",
                   help="use only goodpoints results already in --cache (skip the others)")
    p.add_argument("--opt", action="append", default=[], help="method option name=JSON value")
    p.add_argument("--cache", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "_cache", "quality_peer.json"))
    args = p.parse_args(argv)
    options = {}
    for kv in args.opt:
        k, v = kv.split("=", 1)
        options[k] = json.loads(v)
    methods = args.methods.split(",")
    if args.time:
        n = 2**args.time
        X, S = make_input("biased", n, args.d, 0)
        for mt in methods:
            load = os.getloadavg()[0]
            c0 = time.process_time()
            v, t, mu = ours(mt, X, S, output_size(n), 0, options)
            print(f"{mt}: n = 2^{args.time}, m = {mu}: wall {t:.2f} s, cpu "
                  f"{time.process_time() - c0:.2f} s, load {load:.1f}, KSD {v:.5f}")
        return 0
    logn = [k for k in range(args.nmin, args.nmax + 1) if not args.even or k % 2 == 0]
    use_peer = args.peer or args.pair
    if use_peer:
        try:
            import goodpoints.jax  # noqa: F401
        except ImportError:
            print("goodpoints.jax is not importable: peer columns left out", file=sys.stderr)
            use_peer = False
    cache = {}
    if use_peer and os.path.exists(args.cache):
        with open(args.cache) as f:
            cache = json.load(f)

    for kind in args.inputs.split(","):
        print(f"\n## {kind} input, d = {args.d}, {args.seeds} seeds, options {options or '{}'}")
        cols = [(mt, "ours") for mt in methods]
        if use_peer:
            cols += [(mt, "gp") for mt in methods if mt in PEER]
        table = {c: [] for c in cols}
        used = {c: [] for c in cols}  # output size each method used (LSKT: a power of two)
        secs = {c: [] for c in cols}
        pairs = {mt: [] for mt in methods if mt in PEER}
        ms = []
        for k in logn:
            n = 2**k
            m = output_size(n)
            ms.append(m)
            vals = {c: [] for c in cols}
            for s in range(args.seeds):
                X, S = make_input(kind, n, args.d, s)
                for mt in methods:
                    v, t, mu = ours(mt, X, S, m, s, options)
                    vals[(mt, "ours")].append(v)
                    secs[(mt, "ours")].append(t)
                    if use_peer and mt in PEER and (mt != "lskt" or k % 2 == 0):
                        g = peer(mt, kind, X, S, m, s, cache, args.cached)
                        if g is not None:
                            vals[(mt, "gp")].append(g)
                            pairs[mt].append((n, math.log(v / g)))
                    if s == 0:
                        for c in cols:
                            if c[0] == mt:
                                used[c].append(mu)
                if use_peer and not args.cached:
                    os.makedirs(os.path.dirname(os.path.abspath(args.cache)), exist_ok=True)
                    with open(args.cache, "w") as f:
                        json.dump(cache, f, indent=0, sort_keys=True)
            for c in cols:
                table[c].append(float(np.mean(vals[c])) if vals[c] else float("nan"))
        if args.pair:
            print("method  n      mean log(ours/gp)  s.e.   (per seed)")
            for mt, rows in pairs.items():
                for n in sorted({r[0] for r in rows}):
                    r = np.array([v for nn, v in rows if nn == n])
                    se = r.std(ddof=1) / math.sqrt(r.size) if r.size > 1 else float("nan")
                    print(f"{mt:6s}  2^{int(math.log2(n)):<3d}  {r.mean():+.3f}  {se:.3f}   "
                          + " ".join(f"{x:+.3f}" for x in r))
            continue
        head = "n       m   " + " ".join(f"{mt + ('' if w == 'ours' else '[gp]'):>10s}"
                                       for mt, w in cols)
        print(head)
        for i, k in enumerate(logn):
            print(f"2^{k:<4d} {ms[i]:4d}  " + " ".join(f"{table[c][i]:10.5f}" for c in cols))
        sl = []
        for c in cols:
            ok = [i for i in range(len(ms)) if np.isfinite(table[c][i])]
            sl.append(slope([used[c][i] for i in ok], [table[c][i] for i in ok]) if len(ok) > 1
                      else float("nan"))
        print("slope       " + " ".join(f"{v:10.2f}" for v in sl))
        odd = [i for i, k in enumerate(logn) if k % 2]
        if odd and "lskt" in methods:
            sizes = ", ".join(str(used[("lskt", "ours")][i]) for i in odd)
            print(f"(lskt at odd log2 n outputs {sizes} points, a power of two; its slope is "
                  "fitted against the sizes used)")
        print("sec (all)   " + " ".join(f"{sum(secs[c]):10.1f}" for c in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
