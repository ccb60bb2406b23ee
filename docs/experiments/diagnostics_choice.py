"""How the test of "does S belong to X" was chosen (docs/diagnostics.md, "Why a
nearest-neighbour test"): three candidate statistics on correct and on shuffled scores of the
hand-written targets (``_diagnostic_targets.py``), before any threshold.

- ``linear R^2``: the share of the variance of S a linear function of X explains (the rule
  this replaced; near 0 for unrelated rows);
- ``KSD permutation z``: KSD^2 of (X, S) minus the mean KSD^2 of (X, S[perm]) over 16
  permutations, in their sds, on 512 evenly spaced rows, with the library's default Stein
  kernel (correct scores should be well below 0);
- ``nn_rank_z`` and ``nn_sign_z``: ``stein_coreset.diagnostics.score_field_test`` (about
  N(0, 1) for unrelated rows, large for a score field).

    python docs/experiments/diagnostics_choice.py [--seeds 2] [--n 4096]
"""

from __future__ import annotations

import argparse
import warnings

import _diagnostic_targets as dt
import numpy as np
from _common import sc  # noqa: F401  (the installed package first)

from stein_coreset.diagnostics import score_field_test
from stein_coreset.kernels import DEFAULT_KERNEL


def linear_r2(X, S) -> float:
    """Mean over j of the R^2 of the least-squares fit of s_j on (1, x)."""
    A = np.column_stack([np.ones(len(X)), X - X.mean(0)])
    coef, *_ = np.linalg.lstsq(A, S, rcond=None)
    resid = S - A @ coef
    var = S.var(axis=0)
    ok = var > 0
    return float(np.mean(1.0 - resid.var(axis=0)[ok] / var[ok])) if ok.any() else float("nan")


def ksd_permutation_z(X, S, rows: int = 512, perms: int = 16, seed: int = 0) -> float:
    n = len(X)
    idx = np.floor((np.arange(min(n, rows)) + 0.5) * n / min(n, rows)).astype(np.int64)
    Xs, Ss = X[idx], S[idx]
    kern = DEFAULT_KERNEL.resolve(Xs)  # what compress uses: scale-free M, median bandwidth

    def u_stat(T):
        K = kern.matrix(Xs, T)
        np.fill_diagonal(K, 0.0)
        return K.sum() / (len(idx) * (len(idx) - 1))

    rng = np.random.default_rng(seed)
    null = np.array([u_stat(Ss[rng.permutation(len(idx))]) for _ in range(perms)])
    return float((u_stat(Ss) - null.mean()) / null.std())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--n", type=int, default=4096)
    args = ap.parse_args(argv)
    out = {"correct": [], "shuffled": []}
    for name, target in dt.TARGETS.items():
        for kind in dt.SAMPLES:
            for seed in range(args.seeds):
                X, S = dt.make(target, kind, args.n, seed)
                rng = np.random.default_rng(100 + seed)
                for case, T in (("correct", S), ("shuffled", S[rng.permutation(len(S))])):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        f = score_field_test(X, T)
                        row = (linear_r2(X, T), ksd_permutation_z(X, T), f["nn_rank_z"],
                               f["nn_sign_z"])
                    out[case].append(row)
            c = np.array(out["correct"][-args.seeds:], dtype=float)
            print(f"{name} / {kind}: correct R^2 {np.round(c[:, 0], 3)}, KSD z "
                  f"{np.round(c[:, 1], 1)}, nn_rank_z {np.round(c[:, 2], 1)}, nn_sign_z "
                  f"{np.round(c[:, 3], 1)}", flush=True)
    print("\n| statistic | correct scores: min / median / max | shuffled rows: min / max |")
    print("|---|---|---|")
    names = ("linear R^2", "KSD permutation z", "nn_rank_z", "nn_sign_z")
    for j, label in enumerate(names):
        c = np.array([r[j] for r in out["correct"]], dtype=float)
        s = np.array([r[j] for r in out["shuffled"]], dtype=float)
        c, s = c[np.isfinite(c)], s[np.isfinite(s)]
        print(f"| {label} | {c.min():.3g} / {np.median(c):.3g} / {c.max():.3g} | "
              f"{s.min():.3g} / {s.max():.3g} |")
    c = np.array(out["correct"], dtype=float)
    print(f"\n{len(c)} correct-score samples; linear R^2 below 0.05 (the old threshold): "
          f"{int(np.sum(c[:, 0] < 0.05))}; KSD z above -3 (correct not distinguishable from "
          f"permuted): {int(np.sum(c[:, 1] > -3))}; KSD z above 0: {int(np.sum(c[:, 1] > 0))}; "
          f"max(nn_rank_z, |nn_sign_z|) below 4: "
          f"{int(np.sum(np.maximum(c[:, 2], np.abs(c[:, 3])) < 4))}")


if __name__ == "__main__":
    main()
