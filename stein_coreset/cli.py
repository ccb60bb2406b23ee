"""The ``stein-coreset`` command (also ``python -m stein_coreset``)."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


class CLIError(Exception):
    """An error reported as one line on stderr with exit code 2."""


def _biased_gaussian_chain(n: int, d: int, seed: int):
    """A biased sample: target N(0, I_d), input from a shifted, over-dispersed Gaussian."""
    rng = np.random.default_rng(seed)
    X = 0.7 + 1.5 * rng.standard_normal((n, d))
    return X, -X


def _demo(args) -> int:
    import stein_coreset as sc

    X, S = _biased_gaussian_chain(args.n, 2, args.seed)
    size = args.size or int(round(np.sqrt(args.n)))
    print(
        f"demo: biased sample of n = {args.n} points from N(0.7, 1.5^2 I_2), target N(0, I_2); "
        f"coreset size {size}"
    )
    header = f"{'method':<12}{'kind':<10}{'size':>6}{'KSD':>12}{'time (s)':>11}"
    print(header)
    print("-" * len(header))
    from stein_coreset.compress import ALL_METHOD_NAMES

    missing = []
    for method in ALL_METHOD_NAMES:
        if method not in sc.available_methods():
            missing.append(method)
            continue
        t0 = time.perf_counter()
        res = sc.compress(X, S, size=size, method=method, seed=args.seed)
        dt = time.perf_counter() - t0
        print(f"{method:<12}{res.kind:<10}{len(res):>6}{res.ksd:>12.4g}{dt:>11.3f}")
    if missing:
        print(f"not yet implemented: {', '.join(missing)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stein-coreset", description=__doc__)
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="compress a simulated biased chain with every method")
    demo.add_argument("--n", type=int, default=4096, help="chain length (default 4096)")
    demo.add_argument("--size", type=int, default=None, help="coreset size (default sqrt(n))")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=_demo)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (CLIError, ValueError, TypeError, OSError, NotImplementedError) as e:
        if args.debug:
            raise
        print(f"stein-coreset: error: {e}", file=sys.stderr)
        return 2
