"""DKSD loss and theta-gradient (Barp et al., 2019, Eq. 7) at n = 2000, d = 5.

One O(n^2 d) pass (scalar / diagonal diffusion) or O(n^2 d^2) (full diffusion) gives the U-statistic
and its gradient: in C++ (engine/cpu/src_cpp/dksd.hpp, the NumPy default, "cpu"), blocked through
the array API ("xp"), or on a CUDA device ("cuda": CuPy input, the pass of
stein_coreset/engine/cuda/src_cuda/dksd.cu; skipped where CuPy has no device). The KSD value alone
goes through engine.KernelMatrix.
"""

import array_api_compat
import numpy as np

import stein_coreset as sc
from stein_coreset import estimators as est


def _diag(x, t):
    return 1.0 / (1.0 + x * x)


def _full(x, t):
    xp = array_api_compat.array_namespace(x)
    d = x.shape[1]
    eye = xp.eye(d, dtype=x.dtype, device=array_api_compat.device(x))
    return eye[None, :, :] + 0.1 * xp.tanh(x)[:, :, None]


def _on_device(X):
    """X as a CuPy array, or NotImplementedError (asv: skip) where CuPy has no device."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
    except Exception as e:
        raise NotImplementedError(f"CuPy with a device is not usable here: {e}") from None
    return cupy.asarray(X)


DIFFUSIONS = {"identity": None, "diag": _diag, "full": _full}


class DKSDLossGrad:
    params = (["identity", "diag", "full"], ["cpu", "xp", "cuda"], [2000])
    param_names = ["diffusion", "backend", "n"]
    timeout = 300

    def setup(self, diffusion, backend, n):
        d = 5
        rng = np.random.default_rng(0)
        self.model = est.StudentT(nu=5.0, d=d)
        self.theta = np.r_[np.zeros(d), 1.0]
        self.X = self.model.sample(n, self.theta, rng)
        if backend == "cuda":
            self.X = _on_device(self.X)
        self.kw = dict(discrepancy="dksd", kernel=sc.IMQ(sigma=1.0),
                       diffusion=DIFFUSIONS[diffusion], backend=backend)

    def time_loss(self, diffusion, backend, n):
        est.loss(self.model, self.theta, self.X, **self.kw)

    def time_loss_and_grad(self, diffusion, backend, n):
        est.loss_and_grad(self.model, self.theta, self.X, **self.kw)

    def peakmem_loss_and_grad(self, diffusion, backend, n):
        est.loss_and_grad(self.model, self.theta, self.X, **self.kw)


class KSDLoss:
    """KSD U-statistic through KernelMatrix vs the gradient-capable DKSD pass (m = I)."""

    params = ([2000],)
    param_names = ["n"]

    def setup(self, n):
        d = 5
        self.model = est.StudentT(nu=5.0, d=d)
        self.theta = np.r_[np.zeros(d), 1.0]
        self.X = self.model.sample(n, self.theta, np.random.default_rng(0))

    def time_ksd_kernel_matrix(self, n):
        est.loss(self.model, self.theta, self.X, discrepancy="ksd", kernel=sc.IMQ(sigma=1.0))

    def time_ksd_loss_and_grad(self, n):
        est.loss_and_grad(self.model, self.theta, self.X, discrepancy="ksd",
                          kernel=sc.IMQ(sigma=1.0))
