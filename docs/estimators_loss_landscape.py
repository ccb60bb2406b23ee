"""Loss landscapes of minimum Stein discrepancy estimators (Barp et al., 2019, Figs. 2-3).

Left: Student-t (nu = 5, n = 300) location theta_1: SM, KSD and DKSD with
m_theta(x) = 1 + (x - theta_1)^2 / theta_2^2. Right: Gaussian location model with 80 of 300
points moved to x = 8: SM, DSM and DKSD with m(x) = 1 / (1 + x^2).

Needs the optional ``plot`` extra (matplotlib). Run from the repository root:

    python docs/estimators_loss_landscape.py  # writes docs/estimators_loss_landscape.png
"""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import stein_coreset as sc  # noqa: E402
from stein_coreset import estimators as est  # noqa: E402


def _scaled(v):
    v = np.asarray(v)
    return (v - v.min()) / (v.max() - v.min())


OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "estimators_loss_landscape.png")


def main(out=OUT):
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    grid = np.linspace(-1.5, 1.5, 121)

    # Sec. 4.2: heavy tails
    model = est.StudentT(nu=5.0, scale=1.0)
    X = model.sample(300, [0.0], np.random.default_rng(0))
    k = sc.IMQ(sigma=1.0)

    def m_t(x, t):
        return 1.0 + (x[:, 0] - t[0]) ** 2

    curves = {
        "SM": [est.loss(model, [t], X, discrepancy="sm") for t in grid],
        "KSD": [est.loss(model, [t], X, discrepancy="ksd", kernel=k) for t in grid],
        "DKSD, $m_\\theta=1+(x-\\theta_1)^2$": [
            est.loss(model, [t], X, discrepancy="dksd", kernel=k, diffusion=m_t) for t in grid],
    }
    ax = axes[0]
    for name, v in curves.items():
        ax.plot(grid, _scaled(v), label=name)
    ax.axvline(0.0, color="k", lw=0.8, ls=":")
    ax.set(title="Student-t ($\\nu=5$), $n=300$", xlabel="$\\theta_1$",
           ylabel="loss (rescaled to [0, 1])")
    ax.legend(fontsize=8)

    # Sec. 4.3: robustness
    model = est.GeneralizedGamma(power=2.0)
    X = np.concatenate([model.sample(220, [0.0], np.random.default_rng(0)),
                        np.full((80, 1), 8.0)])

    def m_r(x, t):
        return 1.0 / (1.0 + x[:, 0] ** 2)

    grid2 = np.linspace(-1.0, 3.0, 121)
    curves = {
        "SM": [est.loss(model, [t], X, discrepancy="sm") for t in grid2],
        "DSM, $m=1/(1+x^2)$": [est.loss(model, [t], X, discrepancy="dsm", diffusion=m_r)
                               for t in grid2],
        "DKSD, $m=1/(1+x^2)$": [est.loss(model, [t], X, discrepancy="dksd", kernel=k,
                                         diffusion=m_r) for t in grid2],
    }
    ax = axes[1]
    for name, v in curves.items():
        ax.plot(grid2, _scaled(v), label=name)
    ax.axvline(0.0, color="k", lw=0.8, ls=":")
    ax.set(title="Gaussian location, 80/300 points at $x=8$", xlabel="$\\theta_1$")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    return out


if __name__ == "__main__":
    print(main())
