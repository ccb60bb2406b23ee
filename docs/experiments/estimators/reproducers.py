"""The reproducers of issue 55, run against the installed estimators (or, with --before DIR,
an older copy): what ``fit`` says and returns for each.

    python docs/experiments/estimators/reproducers.py [--before DIR]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def _show(label, call):
    with warnings.catch_warnings(record=True) as w, np.errstate(all="ignore"):
        warnings.simplefilter("always")
        try:
            f = call()
        except Exception as e:  # noqa: BLE001 - the outcome is what we print
            print(f"{label}:\n    raises {type(e).__name__}: {e}")
            return None
    se = "None" if f.stderr is None else np.array2string(f.stderr, precision=4)
    print(f"{label}:\n    theta {np.array2string(f.theta, precision=4)}, stderr {se}, "
          f"converged={f.converged}\n    message: {f.message}")
    for x in w:
        if "estimators" in type(x.message).__module__ or "Warning" in x.category.__name__:
            print(f"    {x.category.__name__}: {str(x.message)[:160]}...")
    return f


def run(est):
    G = est.Gaussian(d=1)
    X = G.sample(500, [0.5, 2.0], np.random.default_rng(7))
    _show("1. poor start, KSD IMQ(2), L-BFGS from theta0 = [-3, 1] (minimiser (0.241, 1.874))",
          lambda: est.fit(G, X, discrepancy="ksd", kernel=common.IMQ2, optimizer="lbfgs",
                          theta0=[-3, 1]))
    Y = 1000 * np.random.default_rng(0).normal(size=(200, 1))
    for disc in ("ksd", "dksd", "sm", "dsm"):
        _show(f"2. data in units of 1000, {disc}, L-BFGS",
              lambda disc=disc: est.fit(G, Y, discrepancy=disc, optimizer="lbfgs"))
    _show("   the same, KSD by Nelder-Mead",
          lambda: est.fit(G, Y, discrepancy="ksd", optimizer="nelder_mead"))
    Z = 5.0 + np.random.default_rng(0).normal(size=(200, 1))
    _show("   NNSM on N(5, 1) in units of 1e6, L-BFGS (units of 1: theta ~ [5, 1])",
          lambda: est.fit(G, 1e6 * Z, discrepancy="nnsm", optimizer="lbfgs"))
    _show("3. NNSM on constant data np.full((100, 1), 3.)",
          lambda: est.fit(G, np.full((100, 1), 3.0), discrepancy="nnsm", optimizer="lbfgs"))
    big = G.sample(300, [0.5, 2.0], np.random.default_rng(0)) * 1e200
    _show("4. data at 1e200, the default fit", lambda: est.fit(G, big))
    _show("   data at 1e200, SM", lambda: est.fit(G, big, discrepancy="sm", optimizer="lbfgs"))
    fam = est.ExponentialFamily(
        grad_T=lambda x: np.stack([np.ones_like(x), 2 * np.ones_like(x)], axis=1),
        grad_b=lambda x: -x, n_params=2)
    W = np.random.default_rng(0).normal(0.5, 1.0, (200, 1))
    _show("5. collinear statistics T = (x, 2x), SM, L-BFGS",
          lambda: est.fit(fam, W, discrepancy="sm", optimizer="lbfgs", theta0=[0.0, 0.0]))
    _show("6. a user model whose score_dtheta is half the truth in the scale, KSD",
          lambda: est.fit(common.halved_scale_derivative(est), X, discrepancy="ksd",
                          optimizer="lbfgs"))
    Q = np.abs(np.random.default_rng(1).gamma(3.0, 1.0, (200, 1)))
    Q[17] = -0.3
    _show("7. a negative point in a Gamma sample (a user model declaring support (0, inf))",
          lambda: est.fit(common.UserGamma(), Q, discrepancy="ksd", optimizer="lbfgs"))
    C = np.random.default_rng(0).standard_cauchy((500, 1))
    _show("8. Cauchy data, Gaussian model, SM", lambda: est.fit(G, C, discrepancy="sm",
                                                               optimizer="lbfgs"))
    V = G.sample(300, [0.5, 2.0], np.random.default_rng(0))
    a, b = est.fit(G, V), est.fit(G, V)
    print(f"9. the default fit (DKSD, Riemannian SGD, seed=None) twice: "
          f"{np.array2string(a.theta, precision=10)} and "
          f"{np.array2string(b.theta, precision=10)}: identical = "
          f"{bool(np.array_equal(a.theta, b.theta))}")
    print(f"10. len(repr(fit)) = {len(repr(a))}")
    return a, b


def summary_table(est):
    """print(fit.summary()) for the 3-parameter correlated Gaussian, KSD."""
    model = common.CorrelatedGaussian()
    X = model.sample(500, [1.0, 2.0, 0.6], np.random.default_rng(0))
    f = est.fit(model, X, discrepancy="ksd", optimizer="lbfgs")
    print(f.summary())
    return f


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", default=None, help="an older estimators package directory")
    args = p.parse_args(argv)
    est = common.estimators(args.before)
    out = run(est)
    if hasattr(est.FitResult, "summary"):
        print("11. print(fit.summary()), the correlated Gaussian (s1, s2, rho), n = 500, KSD:")
        summary_table(est)
    return out


if __name__ == "__main__":
    main()
