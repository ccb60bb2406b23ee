"""Stein-kernel Gram matrix: the C++ evaluator, the array-API path, and plain NumPy broadcasting."""

import numpy as np

import stein_coreset as sc
from stein_coreset.engine.cpu import bridge


def numpy_broadcast_stein_gram(X, S, sigma):
    """Reference: IMQ(beta=-1/2) Stein kernel (M = I) by direct (n, n, d) broadcasting."""
    diff = X[:, None, :] - X[None, :, :]
    q = np.einsum("ijk,ijk->ij", diff, diff)
    b = 1.0 + q / sigma**2
    k0 = b**-0.5
    k1 = -0.5 / sigma**2 * b**-1.5
    k2 = 0.75 / sigma**4 * b**-2.5
    d = X.shape[1]
    ut = np.einsum("ijk,ijk->ij", diff, S[:, None, :] - S[None, :, :])
    return k0 * (S @ S.T) - 2 * k1 * ut - 4 * q * k2 - 2 * d * k1


class SteinGram:
    params = ([4096], [4, 32], ["cpu", "xp", "numpy_broadcast"])
    param_names = ["n", "d", "backend"]
    timeout = 300

    def setup(self, n, d, backend):
        rng = np.random.default_rng(0)
        self.X = rng.standard_normal((n, d))
        self.S = -self.X
        self.K = sc.SteinKernel(sc.IMQ(sigma=1.0)).bind(self.X, self.S)
        self.rows = np.arange(n)
        bridge.handle(self.K)

    def _run(self, n, d, backend):
        if backend == "cpu":
            return bridge.gram(self.K, self.rows)
        if backend == "xp":
            return self.K.with_backend("xp").dense()
        return numpy_broadcast_stein_gram(self.X, self.S, 1.0)

    def time_gram(self, n, d, backend):
        self._run(n, d, backend)

    def peakmem_gram(self, n, d, backend):
        self._run(n, d, backend)


class SteinMatvec:
    """Blocked K w, which never holds more than a (block x n) slab."""

    params = ([1 << 14], [4], ["cpu", "xp"])
    param_names = ["n", "d", "backend"]
    timeout = 300

    def setup(self, n, d, backend):
        rng = np.random.default_rng(0)
        X = rng.standard_normal((n, d))
        self.K = sc.SteinKernel(sc.IMQ(sigma=1.0)).bind(X, -X)
        self.w = np.full(n, 1.0 / n)
        bridge.handle(self.K)

    def time_matvec(self, n, d, backend):
        if backend == "cpu":
            bridge.matvec(self.K, self.w)
        else:
            self.K.with_backend("xp").matvec(self.w)

    def peakmem_matvec(self, n, d, backend):
        self.time_matvec(n, d, backend)
