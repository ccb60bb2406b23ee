"""Equal-weighted compression: Stein thinning (Alg. D.1), KT-SPLIT / KT-Swap (Alg. D.2-D.3),
SKT (Alg. 1), the "kt" baseline and resampling (Alg. E.3)."""

import numpy as np

import stein_coreset as sc
from stein_coreset.algorithms import kt_split, kt_swap, resample, stein_thinning
from stein_coreset.engine.cpu import bridge
from stein_coreset.kernels import centred_kernel_matrix


def _chain(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = 0.7 + 1.5 * rng.standard_normal((n, d))
    return X, -X


class SteinThinning:
    params = ([1 << 12, 1 << 14], [4], [128])
    param_names = ["n", "d", "m"]
    timeout = 300

    def setup(self, n, d, m):
        X, S = _chain(n, d)
        self.K = sc.SteinKernel(sc.IMQ(sigma=1.0)).bind(X, S)
        bridge.handle(self.K)

    def time_stein_thinning(self, n, d, m):
        stein_thinning(self.K, m)

    def peakmem_stein_thinning(self, n, d, m):
        stein_thinning(self.K, m)


class KernelThinningParts:
    params = ([1 << 12, 1 << 14], [128])
    param_names = ["n", "m"]
    timeout = 300

    def setup(self, n, m):
        X, S = _chain(n, 4)
        self.K = sc.SteinKernel(sc.IMQ(sigma=1.0)).bind(X, S)
        bridge.handle(self.K)
        self.t = int(np.log2(n // m))
        self.cands = kt_split(self.K, np.arange(n), self.t, rng=0)

    def time_kt_split(self, n, m):
        kt_split(self.K, np.arange(n), self.t, rng=0)

    def time_kt_swap(self, n, m):
        kt_swap(self.K, self.cands)


class CentredKernel:
    """The "kt" baseline's k_P: a Gaussian kernel centred at the input (O(n^2))."""

    params = [[1 << 12, 1 << 14]]
    param_names = ["n"]
    timeout = 300

    def setup(self, n):
        self.X = np.random.default_rng(0).standard_normal((n, 2))

    def time_centred_kernel_matrix(self, n):
        centred_kernel_matrix(sc.Gaussian(sigma=2.0), self.X)


class CompressEqual:
    params = ([1 << 12], ["st", "skt", "kt"])
    param_names = ["n", "method"]
    timeout = 600

    def setup(self, n, method):
        self.X, self.S = _chain(n, 4)
        self.kernel = sc.SteinKernel(sc.IMQ(sigma=1.0)) if method != "kt" else sc.IMQ(1.0)

    def time_compress(self, n, method):
        sc.compress(self.X, self.S, size=64, method=method, kernel=self.kernel, seed=0)

    def peakmem_compress(self, n, method):
        sc.compress(self.X, self.S, size=64, method=method, kernel=self.kernel, seed=0)


class Resample:
    params = ([1 << 16, 1 << 20], ["stratified_residual", "residual", "iid"])
    param_names = ["n", "method"]

    def setup(self, n, method):
        w = np.random.default_rng(0).random(n) ** 4
        self.w = w / w.sum()

    def time_resample(self, n, method):
        resample(self.w, 1024, rng=0, method=method)
