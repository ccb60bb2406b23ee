"""Which candidate wins KT-Swap in skt and lskt (docs/choosing_a_method.md, "What each stage
bought"): the best KT-SPLIT / KT-Compress++ candidate, or the Stein thinning baseline.

    python docs/experiments/stage_winners.py [--seeds 5]

Prints one markdown row per (input, n, method): the baseline's wins over the seeds and the
median KSD of both finalists after the swaps (``res.info["stages"]``).
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import stein_coreset as sc
from stein_coreset import datasets


def _biased_gaussian(n, seed, d=2):
    X = 0.7 + 1.5 * np.random.default_rng(seed).standard_normal((n, d))
    return X, -X


def _mixture(n, seed):
    ch = datasets.gmm_chain(n, seed=seed)
    return ch.X, ch.S


INPUTS = {"biased Gaussian, d = 2": _biased_gaussian, "mixture MALA chain": _mixture}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--log2n", type=int, nargs="+", default=[12, 14])
    args = ap.parse_args(argv)
    print("| input | n | m | method | baseline won | KSD, swapped baseline "
          "| KSD, swapped KT candidate |")
    print("|---|---|---|---|---|---|---|")
    for name, make in INPUTS.items():
        for lg in args.log2n:
            n = 2**lg
            m = int(round(n**0.5))
            for method, thin in (("skt", "kt_split"), ("lskt", "kt_compress")):
                won, ksd = 0, []
                for seed in range(args.seeds):
                    X, S = make(n, seed)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", sc.DiagnosticWarning)
                        st = sc.compress(X, S, m, method, seed=seed).info["stages"]
                    won += st["winner"] == "baseline"
                    ksd.append((st["kt_swap"]["ksd_baseline"], st["kt_swap"][f"ksd_{thin}"]))
                med = np.median(np.array(ksd), axis=0)
                print(f"| {name} | 2^{lg} | {m} | {method} | {won}/{args.seeds} | "
                      f"{med[0]:.4g} | {med[1]:.4g} |", flush=True)


if __name__ == "__main__":
    main()
