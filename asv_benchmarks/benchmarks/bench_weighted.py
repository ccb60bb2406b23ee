"""Weighted compression: Recombination alone (Alg. G.1), and RT / CT (Alg. 4 / 6) on the
burn-in-like setting of the paper's Table I.1 (d = 4, m = rank = n^tau).

``python asv_benchmarks/benchmarks/bench_weighted.py`` runs every case once and prints the
times with their ratio to the paper's GPU times (Table I.1, RTX 6000, JAX);
``... bench_weighted.py --size-at-input-size`` prints the times at size up to the input
size (n = 2048).
On a busy machine NumPy's OpenBLAS threads (the simplex QP's and the affine solves' LAPACK
calls) spin against the other work: ``OPENBLAS_NUM_THREADS=1`` keeps them from stalling
(docs/guarantees.md, "Time at sizes close to n").
"""

import time

import numpy as np

import stein_coreset as sc
from stein_coreset.algorithms import (
    cholesky_thinning,
    kt_swap_ls,
    recombination,
    recombination_thinning,
)
from stein_coreset.engine.cpu import bridge

#: Table I.1 of the paper (seconds; median of 3 runs on one NVIDIA RTX 6000 GPU).
PAPER_TABLE_I1 = {
    ("rt", 0.5, 1 << 14): 0.79,
    ("rt", 0.4, 1 << 14): 0.60,
    ("ct", 0.5, 1 << 14): 2.06,
    ("ct", 0.4, 1 << 14): 1.96,
    ("rt", 0.5, 1 << 16): 2.59,
    ("rt", 0.4, 1 << 16): 1.68,
    ("ct", 0.5, 1 << 16): 3.66,
    ("ct", 0.4, 1 << 16): 3.04,
}


def _stein_problem(n, d=4, seed=0):
    """Biased input (shifted, over-dispersed Gaussian) for the target N(0, I_d)."""
    rng = np.random.default_rng(seed)
    X = 0.7 + 1.5 * rng.standard_normal((n, d))
    K = sc.SteinKernel(sc.IMQ(sigma=sc.median_bandwidth(X))).bind(X, -X)
    bridge.handle(K)
    K.diag()
    return K, np.full(n, 1.0 / n)


def _thin(K, w, method, tau, seed=0):
    m = round(K.n**tau)
    thin = recombination_thinning if method == "rt" else cholesky_thinning
    return thin(K, w, m, rng=seed)


class Recombination:
    """Recombination alone on a dense random A with a constant row (target: < 2 s), on 1 and 2
    threads (its QR, null vectors, Find-BFS reflections and collapse run on the team)."""

    params = ([64, 256], [1 << 16, 10**6], [1, 2])
    param_names = ["m", "n", "n_threads"]
    timeout = 300

    def setup(self, m, n, n_threads):
        rng = np.random.default_rng(0)
        self.A = rng.standard_normal((m, n))
        self.A[0] = 1.0
        self.x0 = rng.random(n)

    def time_recombination(self, m, n, n_threads):
        recombination(self.A, self.x0, n_threads=n_threads)

    def peakmem_recombination(self, m, n, n_threads):
        recombination(self.A, self.x0, n_threads=n_threads)


class KTSwapLS:
    """KT-Swap-LS (Alg. G.2) visiting s = 256 support points over n = 2^16 candidates."""

    params = ([1 << 16], [256], [1, 2])
    param_names = ["n", "s", "n_threads"]
    timeout = 300

    def setup(self, n, s, n_threads):
        K, _ = _stein_problem(n)
        self.K = K.with_threads(n_threads)
        rng = np.random.default_rng(1)
        self.idx = rng.choice(n, s, replace=False)
        self.w = rng.dirichlet(np.ones(s))

    def time_kt_swap_ls(self, n, s, n_threads):
        kt_swap_ls(self.K, self.idx, self.w, "splx")


class WeightedThinning:
    """RT and CT with m = rank = n^tau from uniform input weights (Table I.1's RT / CT columns)."""

    params = ([1 << 14, 1 << 16], [0.4, 0.5], ["rt", "ct"])
    param_names = ["n", "tau", "method"]
    timeout = 600

    def setup(self, n, tau, method):
        self.K, self.w = _stein_problem(n)

    def time_thinning(self, n, tau, method):
        _thin(self.K, self.w, method, tau)

    def peakmem_thinning(self, n, tau, method):
        _thin(self.K, self.w, method, tau)


class SizeAtInputSize:
    """Size up to n: sr / rt / ct / lsr through ``compress`` at n = 2048 with size up to n
    (Recombination with up to n - 1 test vectors and the simplex QP on up to n points)."""

    params = ([256, 1024, 2048], ["sr", "rt", "ct", "lsr"])
    param_names = ["size", "method"]
    timeout = 600

    def setup(self, size, method):
        rng = np.random.default_rng(0)
        self.X = 0.7 + 1.5 * rng.standard_normal((2048, 4))

    def time_compress(self, size, method):
        sc.compress(self.X, -self.X, size=size, method=method, seed=0)


def size_at_input_size():
    """Print wall, cpu/wall, coreset size and KSD of :class:`SizeAtInputSize`'s cases."""
    import os

    print(f"load average {os.getloadavg()}")
    case = SizeAtInputSize()
    for method in SizeAtInputSize.params[1]:
        for size in SizeAtInputSize.params[0]:
            case.setup(size, method)
            c0, t0 = time.process_time(), time.perf_counter()
            res = sc.compress(case.X, -case.X, size=size, method=method, seed=0)
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            print(f"{method:4s} n=2048 size={size:5d}: {dt:6.2f} s (cpu/wall {dc / dt:.2f}), "
                  f"{len(res)} points, KSD {res.ksd:.4g}", flush=True)


def main():
    import sys

    if sys.argv[1:] == ["--size-at-input-size"]:
        size_at_input_size()
        return
    for m, n in [(64, 10**6), (256, 1 << 16)]:
        case = Recombination()
        case.setup(m, n, 1)
        for k in (1, 2):
            t = time.perf_counter()
            case.time_recombination(m, n, k)
            print(f"recombination m={m} n={n} n_threads={k}: {time.perf_counter() - t:.3f} s")
    for n in (1 << 14, 1 << 16):
        K, w = _stein_problem(n)
        for method in ("rt", "ct"):
            for tau in (0.4, 0.5):
                t = time.perf_counter()
                idx, wts = _thin(K, w, method, tau)
                dt = time.perf_counter() - t
                paper = PAPER_TABLE_I1[(method, tau, n)]
                ksd = np.sqrt(max(K.take(idx).quad(np.asarray(wts)), 0.0))
                print(
                    f"{method.upper()}({tau}) n=2^{n.bit_length() - 1} m={round(n**tau)}: "
                    f"{dt:.2f} s, {idx.size} points, KSD {ksd:.4g}; "
                    f"paper (GPU) {paper:.2f} s, ratio ours/paper {dt / paper:.2f}"
                )


if __name__ == "__main__":
    main()
