"""The ``stein-coreset`` command (also ``python -m stein_coreset``).

Sub-commands:

- ``demo``: simulate a biased MCMC run (a P-MALA chain with a long burn-in on the Goodwin
  oscillator posterior, or ``--target gmm``: a MALA chain on a 2-D Gaussian mixture started far
  from its modes), compress it with every implemented method and print method, kind, coreset
  size, KSD, energy distance to a long reference sample and time. ``--plot FILE.png`` draws the
  chain, its burn-in, each coreset (point size proportional to weight) and KSD-vs-size curves.
- ``compress POINTS --scores SCORES``: compress arrays read from ``.npy``, ``.npz`` or ``.csv``
  files (``--x-columns`` / ``--score-columns`` split one table) and write the coreset (indices,
  weights, points, draws, run info) to an ``.npz`` file. A second positional file is never
  read as scores.
  ``compress CHAIN... [--workers N | --scheduler ADDRESS] [--block-size M]``: several chain files
  (or any of those flags) go to :func:`stein_coreset.distributed.run_cli` (Dask, extra ``dask``):
  one block per chain, read on the workers, same output file.
- ``methods``: list the methods.

This module parses, calls and prints: argument values are validated by ``compress`` (and the
demo harness, :mod:`stein_coreset.demo`); their ``ValueError`` / ``TypeError`` become one line on
stderr with exit code 2 (``--debug`` shows the traceback instead). The ``compress`` command, with
its checks of files and flags, is :mod:`stein_coreset.cli_compress`.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys

from .cli_compress import CLIError, cmd_compress
from .demo import demo_chain, run_demo  # noqa: F401 (demo_chain: re-exported for callers)

# ---------------------------------------------------------------------------------------------
# demo (the harness lives in stein_coreset.demo)
# ---------------------------------------------------------------------------------------------


def _cmd_demo(args) -> int:
    return run_demo(
        target=args.target,
        n=args.n,
        size=args.size,
        seed=args.seed,
        reference=args.reference,
        methods=args.methods,
        plot=args.plot,
        no_curves=args.no_curves,
        save_chain=args.save_chain,
        progress=args.progress,
        force=args.force,
    )


# ---------------------------------------------------------------------------------------------
# methods
# ---------------------------------------------------------------------------------------------


def _cmd_methods(args) -> int:
    from .compress import METHODS

    for name, m in METHODS.items():
        tag = "debiased" if m.debiased else "baseline"
        print(f"{name:<12}{m.kind:<10}{tag:<10}{m.summary}")
    return 0


# ---------------------------------------------------------------------------------------------
# Parser and entry point
# ---------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
    )
    p = argparse.ArgumentParser(
        prog="stein-coreset",
        description="Debiased distribution compression: summarise a biased sample (MCMC with "
        "burn-in, approximate or tempered chains) with a few weighted points, using the scores "
        "grad log p at the points.",
    )
    p.add_argument("--debug", action="store_true", default=False, help="show tracebacks")
    # the version is written once, in meson.build; the build puts it in the package metadata
    version = importlib.metadata.version("stein_coreset")
    p.add_argument("--version", action="version", version=f"%(prog)s {version}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        parents=[common],
        help="compress a simulated biased MCMC chain with every method",
        description="Simulate a biased MCMC chain and compress it with every implemented method.",
    )
    demo.add_argument(
        "--target",
        choices=("goodwin", "gmm"),
        default="goodwin",
        help="goodwin: P-MALA on the Goodwin ODE posterior (d = 4, default); "
        "gmm: MALA on a 2-D Gaussian mixture",
    )
    demo.add_argument("--n", type=int, default=None, help="chain length (default 4096)")
    demo.add_argument("--size", type=int, default=None, help="coreset size (default sqrt(n))")
    demo.add_argument("--seed", type=int, default=0, help="seed of the chain and the methods")
    demo.add_argument(
        "--reference",
        type=int,
        default=None,
        metavar="N",
        help="size of the reference sample for the energy distance (default 2000 for goodwin, "
        "4000 for gmm)",
    )
    demo.add_argument("--methods", default=None, help="comma-separated subset of the methods")
    demo.add_argument("--plot", metavar="FILE.png", default=None, help="write a figure")
    demo.add_argument(
        "--no-curves", action="store_true", help="with --plot: skip the KSD-vs-size curves"
    )
    demo.add_argument(
        "--save-chain",
        metavar="FILE.npz",
        default=None,
        help="also save the simulated chain (X, S, ...) for `stein-coreset compress FILE.npz`",
    )
    demo.add_argument("--force", action="store_true",
                      help="replace an existing --plot or --save-chain file")
    demo.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None,
        help="progress on stderr (default: on when stderr is a terminal)",
    )
    demo.set_defaults(func=_cmd_demo)

    comp = sub.add_parser(
        "compress",
        parents=[common],
        help="compress points (and scores) read from files",
        description="Compress the points in FILE, with the scores grad log p from --scores "
        "(or the same .npz, or --score-columns), and write indices, weights, points, draws "
        "and the run's info to an .npz file. Files: .npy, .npz "
        "(FILE.npz:NAME picks an array; by default X/points and S/scores), .csv. Several chain "
        "files, or --workers/--scheduler/--block-size/--scores: compress them on Dask, one "
        "block per chain (docs/distributed.md).",
    )
    comp.add_argument(
        "files",
        metavar="FILE",
        nargs="+",
        help="(n, d) points (.npy, .npz[:NAME] or .csv), with their scores from --scores, "
        "from the same .npz (X and S) or from --score-columns. Several chain files (.npz with "
        "points and scores, or .npy points with --scores), or any of "
        "--workers/--scheduler/--block-size: the distributed path (needs the extra 'dask'), "
        "one block per chain",
    )
    comp.add_argument("--method", required=True, help="method name (see `stein-coreset methods`)")
    comp.add_argument("--size", type=int, required=True, help="coreset size")
    comp.add_argument(
        "--out", default="coreset.npz",
        help="output .npz (default coreset.npz); '-' (or /dev/null): print the summary only",
    )
    comp.add_argument("--force", action="store_true",
                      help="replace an existing --out file (refused by default)")
    comp.add_argument("--rank", type=int, default=None, help="rank of the low-rank methods")
    comp.add_argument(
        "--bandwidth",
        type=float,
        default=None,
        help="IMQ bandwidth sigma of the Stein kernel (default: median M-distance)",
    )
    comp.add_argument(
        "--precond",
        metavar="M",
        default=None,
        help="preconditioner M of the Stein kernel: 'scale' (default: each coordinate scaled by "
        "its standard deviation, so the result does not depend on units), 'identity', or a "
        "(d, d) SPD matrix from .npy/.npz/.csv",
    )
    comp.add_argument("--seed", type=int, default=None)
    comp.add_argument(
        "--scores",
        nargs="+",
        default=None,
        metavar="SCORES",
        help="the scores grad log p at the points (.npy / .npz[:NAME] / .csv), one file per "
        "FILE in the same order; needed by the debiased methods unless FILE is an .npz holding "
        "them (X and S) or --score-columns picks them",
    )
    comp.add_argument(
        "--x-columns",
        default=None,
        metavar="COLS",
        help="columns of FILE holding the points (0-based indices, ranges a:b, or CSV header "
        "names, comma separated; default: every column not in --score-columns)",
    )
    comp.add_argument(
        "--score-columns",
        default=None,
        metavar="COLS",
        help="columns of FILE holding the scores, for one table with both (e.g. 4:8 or "
        "ds1,ds2)",
    )
    comp.add_argument(
        "--nan-policy",
        choices=("raise", "omit"),
        default="raise",
        help="rows with NaN/inf: raise an error (default) or omit them",
    )
    comp.add_argument(
        "--option",
        action="append",
        metavar="NAME=VALUE",
        help="method-specific option, repeatable (e.g. --option tau=0.4)",
    )
    comp.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None,
        help="progress on stderr (default: on when stderr is a terminal)",
    )
    comp.add_argument(
        "--no-diagnostics", dest="diagnostics", action="store_false", default=True,
        help="skip the checks of the scores (swapped, sign-flipped, misaligned; "
        "docs/diagnostics.md) and their warnings",
    )
    dist = comp.add_argument_group(
        "distributed (stein_coreset.distributed, extra 'dask'; docs/distributed.md)"
    )
    dist.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="run on a loopback LocalCluster of N single-threaded worker processes (not with "
        "--scheduler)",
    )
    dist.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run on the running Dask scheduler at ADDRESS (e.g. tcp://10.0.0.1:8786)",
    )
    dist.add_argument(
        "--block-size",
        type=int,
        default=None,
        metavar="M",
        help="size of each block coreset and intermediate reduce (default --size)",
    )
    comp.set_defaults(func=cmd_compress)

    meth = sub.add_parser("methods", parents=[common], help="list the compression methods")
    meth.set_defaults(func=_cmd_methods)
    return p


def main(argv=None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("stein-coreset: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if args.debug:
            raise
        known = (CLIError, ValueError, TypeError, OSError, MemoryError)
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if not isinstance(e, known):
            msg = f"{type(e).__name__}: {msg} (run with --debug for the traceback)"
        print(f"stein-coreset: error: {msg}", file=sys.stderr)
        return 2
