"""Detection and false-alarm rates of compress's input diagnostics (docs/diagnostics.md).

Correct inputs: biased chains of the library's test beds (burn-in, tempering, stochastic
gradients) and exact draws. Misuses of each: X and S swapped, S sign-flipped, the rows of S
shuffled or shifted by one, and the scores of another target. For every (case, seed) the
chosen method runs through ``stein_coreset.compress`` and the table counts the runs whose
``res.info["diagnostics"]["suspect"]`` is set.

    python docs/experiments/diagnostics.py [--seeds 5] [--method skt] [--size 64] [--n 4096]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import stein_coreset as sc
from stein_coreset import datasets


def _gaussian_chain(n, seed, start_sd=8.0, mean=(1.0, -2.0, 0.5)):
    target = datasets.Gaussian(np.array(mean),
                               np.array([[1.0, 0.3, 0.0], [0.3, 2.0, 0.4], [0.0, 0.4, 0.5]]))
    rng = np.random.default_rng(seed)
    x0 = target.mean + start_sd * rng.standard_normal(3)
    ch = datasets.mala(target.log_density_and_score, x0, n, 0.05, rng=rng)
    return ch.X, ch.S, target


def _gaussian_iid(n, seed):
    target = datasets.Gaussian.correlated(d=4, rho=0.8)
    X = target.sample(n, seed)
    return X, target.score(X), target


def _gaussian_tempered(n, seed):
    target = datasets.Gaussian.correlated(d=4, rho=0.8)
    X = target.temper(4.0).sample(n, seed)
    return X, target.score(X), target


def _gmm(n, seed):
    ch = datasets.gmm_chain(n, seed=seed)
    return ch.X, ch.S, datasets.GaussianMixture()


def _logistic_sgld(n, seed):
    target = datasets.LogisticRegression(seed=seed)
    mode, _ = target.mode()
    X = datasets.sgld(target, mode + 0.5, n, 2e-3, rng=seed)
    return X, target.score(X), target


def _goodwin(n, seed):
    ch = datasets.goodwin_chain(n, seed=seed)
    return ch.X, ch.S, datasets.Goodwin()


CHAINS = {
    "gaussian MALA, burn-in (d=3)": _gaussian_chain,
    "centred gaussian MALA, burn-in (d=3)": lambda n, seed: _gaussian_chain(
        n, seed, mean=(0.0, 0.0, 0.0)),
    "gaussian exact draws (d=4)": _gaussian_iid,
    "gaussian tempered T=4 (d=4)": _gaussian_tempered,
    "mixture MALA, burn-in (d=2)": _gmm,
    "logistic SGLD (d=4)": _logistic_sgld,
    "Goodwin MALA, burn-in (d=4)": _goodwin,
}


def _other_target(X, target, rng):
    """Scores of another density: the target moved by two standard deviations of X."""
    shift = 2.0 * X.std(axis=0) * rng.choice([-1.0, 1.0], X.shape[1])
    return target.score(X - shift)


MISUSES = {
    "correct": lambda X, S, t, rng: (X, S),
    "swapped": lambda X, S, t, rng: (S, X),
    "sign-flipped": lambda X, S, t, rng: (X, -S),
    "rows shuffled": lambda X, S, t, rng: (X, S[rng.permutation(len(S))]),
    "rows shifted by one": lambda X, S, t, rng: (X, np.roll(S, 1, axis=0)),
    "another target": lambda X, S, t, rng: (X, _other_target(X, t, rng)),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--method", default="skt")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    print(f"method {args.method}, n = {args.n}, size {args.size}, {args.seeds} seeds; "
          "cells: flagged runs / runs (the suspect named)")
    print("| chain | " + " | ".join(MISUSES) + " |")
    print("|---" * (len(MISUSES) + 1) + "|")
    for cname, make in CHAINS.items():
        hits = {m: 0 for m in MISUSES}
        named = {m: {} for m in MISUSES}
        for seed in range(args.seeds):
            X, S, target = make(args.n, seed)  # one chain per seed, every misuse of it
            for mname, misuse in MISUSES.items():
                Xm, Sm = misuse(X, S, target, np.random.default_rng(100 + seed))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", sc.DiagnosticWarning)
                    res = sc.compress(Xm, Sm, args.size, args.method, seed=seed)
                suspect = res.info["diagnostics"]["suspect"]
                if suspect is not None:
                    hits[mname] += 1
                    named[mname][suspect] = named[mname].get(suspect, 0) + 1
        row = []
        for mname in MISUSES:
            what = ", ".join(f"{k} {v}" for k, v in sorted(named[mname].items()))
            row.append(f"{hits[mname]}/{args.seeds}" + (f" ({what})" if what else ""))
        print(f"| {cname} | " + " | ".join(row) + " |", flush=True)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
