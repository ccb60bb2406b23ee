#!/usr/bin/env python
"""How close Low-rank Debiasing (Alg. 2) comes to the exact simplex-reweighting optimum (Eq. 1).

On the biased-Gaussian case (n = 1024, d = 2, default Stein kernel) this prints the KSD of LD's
weights divided by the KSD of the optimal simplex weights (SLSQP on the exact n x n matrix,
warm-started by long AMD), for several ranks and AMD step counts:

    python tools/ld_vs_optimum.py

At rank sqrt(n) more AMD steps move LD towards the optimum of its surrogate
K' = F F^T + diag(K - F F^T), not of K, so the ratio is set by the rank.
"""

import math

import array_api_compat.numpy as xp_np
import numpy as np
import scipy.optimize

import stein_coreset as sc
from stein_coreset.algorithms import amd, low_rank_debias


class _Dense:
    """The exact kernel matrix as an AMD operator."""

    xp, device = xp_np, "cpu"

    def __init__(self, K):
        self.K, self.n = K, K.shape[0]

    def matvec(self, w):
        return self.K @ w

    def diag(self):
        return np.diag(self.K).copy()


def main():
    rng = np.random.default_rng(0)
    X = 0.7 + 1.5 * rng.standard_normal((1024, 2))
    Km = sc.SteinKernel().bind(X, -X)
    K = Km.dense()
    w0 = amd(_Dense(K), 20000, agg=True)
    n = K.shape[0]
    res = scipy.optimize.minimize(
        lambda w: w @ K @ w,
        w0,
        jac=lambda w: 2 * K @ w,
        bounds=[(0, None)] * n,
        constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1, "jac": lambda w: np.ones(n)}],
        method="SLSQP",
        options={"maxiter": 500, "ftol": 1e-16},
    )
    w = np.clip(res.x, 0, None)
    opt = math.sqrt((w / w.sum()) @ K @ (w / w.sum()))
    print(f"exact optimum KSD {opt:.4g} (input: {math.sqrt(K.mean()):.4g})")
    print(f"{'rank':>6}{'AMD steps':>11}{'KSD / optimum':>15}")
    for rank in (32, 128, 512):
        for steps in (None, 2240, 22400):
            wl = low_rank_debias(Km, rank, rng=0, steps=steps)
            label = "default" if steps is None else str(steps)
            print(f"{rank:>6}{label:>11}{math.sqrt(wl @ K @ wl) / opt:>15.2f}")


if __name__ == "__main__":
    main()
