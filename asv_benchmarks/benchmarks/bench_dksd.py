"""The DKSD pair pass (Barp et al., 2019, Eq. 7) across d: the loss and its adjoints.

The engine's operation itself (``estimators.dksd.pair_pass`` on canonical arrays U, V, F) on the C++
pass ("cpu": engine/cpu/src_cpp/dksd.hpp, blocked and vectorised, one thread) and the array-API
reference ("xp", NumPy arrays), and the loss + theta-gradient a user calls
(``estimators.loss_and_grad``, a Gaussian model, IMQ kernel, identity diffusion). O(n^2 d) work for
a diagonal F, O(n^2 d^2) for a full one; n is set per d so one run stays well under a second at d =
100.
"""

import numpy as np

import stein_coreset as sc
from stein_coreset import estimators as est
from stein_coreset.estimators import dksd as D

DIMS = [2, 4, 10, 50, 100]


def _n(kind, d):
    """Points: 1000 for a diagonal F, fewer for a full one (constant n^2 d^2 past d = 10)."""
    return 1000 if kind == "diag" else int(1000 * min(1.0, 10.0 / d))


class DKSDPass:
    params = (DIMS, ["diag", "full"], ["cpu", "xp"])
    param_names = ["d", "kind", "backend"]
    timeout = 300

    def setup(self, d, kind, backend):
        n = _n(kind, d)
        rng = np.random.default_rng(0)
        self.U, self.V = rng.standard_normal((n, d)), rng.standard_normal((n, d))
        self.F = (rng.random((n, d)) + 0.5 if kind == "diag"
                  else np.eye(d)[None] + 0.1 * rng.standard_normal((n, d, d)))
        self.comps = [(sc.IMQ(1.0), 1.0)] * d

    def time_loss(self, d, kind, backend):
        D.pair_pass(self.U, self.V, kind, self.F, self.comps, False, backend=backend)

    def time_loss_and_adjoints(self, d, kind, backend):
        D.pair_pass(self.U, self.V, kind, self.F, self.comps, True, backend=backend)


class DKSDLossGradByDim:
    """``loss_and_grad(discrepancy="dksd")`` on a Gaussian model at n = 1000 (all threads)."""

    params = (DIMS, ["cpu", "xp"])
    param_names = ["d", "backend"]
    timeout = 300

    def setup(self, d, backend):
        self.model = est.Gaussian(d=d)
        self.theta = np.r_[np.zeros(d), 1.0]
        self.X = self.model.sample(1000, self.theta, np.random.default_rng(0))

    def time_loss_and_grad(self, d, backend):
        est.loss_and_grad(self.model, self.theta, self.X, discrepancy="dksd",
                          kernel=sc.IMQ(sigma=1.0), backend=backend)
