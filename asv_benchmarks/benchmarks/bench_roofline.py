"""Kernel evaluation across dimensions: w^T K w (ksd), Stein thinning, KT-SPLIT and the two-sample
MMD at d in {2, 4, 10, 50, 100}, the entries evaluated per second by the `cpu` backend.

``asv_benchmarks/scripts/roofline.py`` turns the same calls into the table of
docs/performance.md (evaluations per second and the share of the machine's matrix-product rate).
"""

import numpy as np

import stein_coreset as sc
from stein_coreset.algorithms import kt_split, stein_thinning
from stein_coreset.engine.cpu import bridge

DIMS = [2, 4, 10, 50, 100]


def _chain(n, d, seed=0):
    """A biased sample for N(0, I_d) and its scores."""
    X = 0.7 + 1.5 * np.random.default_rng(seed).standard_normal((n, d))
    return X, -X


class KernelProducts:
    """w^T K w (``sc.ksd``: n (n + 1) / 2 Stein-kernel evaluations) and the MMD of the input
    against 1/64 of itself ((n + n/64)^2 / 2 base-kernel evaluations)."""

    params = ([1 << 13], DIMS)
    param_names = ["n", "d"]
    timeout = 300

    def setup(self, n, d):
        self.X, self.S = _chain(n, d)
        self.kern = sc.SteinKernel(sc.IMQ(sigma=float(np.sqrt(2 * d))))
        self.Y = self.X[:: 64]
        self.base = sc.IMQ(sigma=float(np.sqrt(2 * d)))

    def time_ksd(self, n, d):
        sc.ksd(self.X, self.S, kernel=self.kern)

    def time_mmd(self, n, d):
        sc.mmd(self.X, self.Y, kernel=self.base)


class GreedyLoops:
    """Stein thinning for n steps (a column per distinct pick) and KT-SPLIT in 4 rounds."""

    params = ([1 << 13], DIMS)
    param_names = ["n", "d"]
    timeout = 300

    def setup(self, n, d):
        X, S = _chain(n, d)
        self.K = sc.SteinKernel(sc.IMQ(sigma=float(np.sqrt(2 * d)))).bind(X, S)
        bridge.handle(self.K)
        self.idx = np.arange(n)

    def time_stein_thinning(self, n, d):
        stein_thinning(self.K, n)

    def time_kt_split(self, n, d):
        kt_split(self.K, self.idx, 4, 0.5, rng=1)
