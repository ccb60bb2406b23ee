"""The ``stein-coreset`` command (also ``python -m stein_coreset``).

Sub-commands:

- ``demo``: simulate a biased MCMC run (a P-MALA chain with a long burn-in on the Goodwin
  oscillator posterior, or ``--target gmm``: a MALA chain on a 2-D Gaussian mixture started far
  from its modes), compress it with every implemented method and print method, kind, coreset
  size, KSD, energy distance to a long reference sample and time. ``--plot FILE.png`` draws the
  chain, its burn-in, each coreset (point size proportional to weight) and KSD-vs-size curves.
- ``compress POINTS [SCORES]``: compress arrays read from ``.npy``, ``.npz`` or ``.csv`` files and
  write the coreset (indices, weights, points, run info) to an ``.npz`` file.
- ``methods``: list the methods.

This module parses, calls and prints: argument values are validated by ``compress`` (and the
demo harness, :mod:`stein_coreset.demo`); their ``ValueError`` / ``TypeError`` become one line on
stderr with exit code 2 (``--debug`` shows the traceback instead). The checks left here are about
files and flags: readable arrays, POINTS and SCORES of one shape, NaN rows counted in the
``--nan-policy`` vocabulary, a (d, d) ``--precond``.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys

import numpy as np

from . import _io
from .demo import demo_chain, run_demo  # noqa: F401 (demo_chain: re-exported for callers)

#: Array names looked up, in order, in an ``.npz`` file when none is given.
POINT_KEYS, SCORE_KEYS = _io.POINT_KEYS, _io.SCORE_KEYS


class CLIError(Exception):
    """An error reported as one line on stderr with exit code 2."""


# ---------------------------------------------------------------------------------------------
# Reading and writing arrays
# ---------------------------------------------------------------------------------------------


def load_array(spec: str, what: str, keys=POINT_KEYS) -> np.ndarray:
    """Read a 2-D float array from ``.npy``, ``.npz`` (``file.npz:name`` picks an array) or
    ``.csv`` (comma separated, one optional header line, one row per point); 1-D ``.npy``/``.npz``
    input becomes one column (stein_coreset._io.load_points)."""
    try:
        return _io.load_points(spec, what, keys)
    except (ValueError, OSError) as e:
        raise CLIError(str(e)) from None


def _scores_from_points_file(points_spec: str):
    """When SCORES is omitted and POINTS is an .npz holding scores too, use those."""
    path, _ = _io.split_key(points_spec)
    if not path.lower().endswith(".npz") or not os.path.exists(path):
        return None
    with np.load(path, allow_pickle=False) as z:
        for k in SCORE_KEYS:
            if k in z.files:
                return f"{path}:{k}"
    return None


def _parse_options(items):
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise CLIError(f"--option expects NAME=VALUE, got {item!r}")
        try:
            out[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[name] = value
    return out


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return v.tolist() if v.size <= 64 else f"array{v.shape}"
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return repr(v)


# ---------------------------------------------------------------------------------------------
# compress
# ---------------------------------------------------------------------------------------------


def _kernel_from_args(args, X):
    """The Stein kernel of ``--bandwidth`` / ``--precond`` (None: compress's default; without
    ``--bandwidth`` compress resolves the median M-distance bandwidth)."""
    import stein_coreset as sc

    if args.bandwidth is None and args.precond is None:
        return None
    M = None
    if args.precond is not None:
        M = load_array(args.precond, "--precond", ("M", "precond", "cov"))
        d = X.shape[1]
        if M.shape != (d, d):
            raise CLIError(f"--precond must be a ({d}, {d}) matrix, got shape {M.shape}")
    base = None if args.bandwidth is None else sc.IMQ(sigma=args.bandwidth)
    return sc.SteinKernel(base, M=M)


def _cmd_compress(args) -> int:
    import stein_coreset as sc

    options = _parse_options(args.option)
    X = load_array(args.points, "POINTS", POINT_KEYS)
    scores = args.scores or _scores_from_points_file(args.points)
    S = load_array(scores, "SCORES", SCORE_KEYS) if scores else None
    if S is not None and S.shape != X.shape:
        raise CLIError(
            f"shape mismatch: SCORES has shape {S.shape} but POINTS has shape {X.shape}; "
            "they need one score row per point"
        )
    bad = ~np.isfinite(X).all(axis=1)
    if S is not None:
        bad |= ~np.isfinite(S).all(axis=1)
    n_bad = int(bad.sum())
    if n_bad and args.nan_policy == "raise":
        where = "POINTS or SCORES" if S is not None else "POINTS"
        raise CLIError(
            f"{n_bad} of the {X.shape[0]} rows of {where} contain NaN or inf; "
            "pass --nan-policy omit to drop them"
        )
    try:  # the output never replaces an input (np.savez appends .npz: --out chain is chain.npz)
        out = _io.refuse_overwrite_input(args.out, [args.points, scores, args.precond])
    except ValueError as e:
        raise CLIError(str(e)) from None
    out_dir = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(out_dir):
        raise CLIError(f"--out: directory does not exist: {out_dir}")
    kernel = _kernel_from_args(args, X)
    res = sc.compress(
        X,
        S,
        size=args.size,
        method=args.method,
        kernel=kernel,
        rank=args.rank,
        seed=args.seed,
        progress=args.progress,
        nan_policy=args.nan_policy,
        **options,
    )
    info = dict(res.info)
    info.update(
        method=res.method,
        kind=res.kind,
        size=len(res),
        requested_size=args.size,
        n=int(X.shape[0]),
        d=int(X.shape[1]),
        ksd=res.ksd,
        points_file=args.points,
        scores_file=scores,
        seed=args.seed,
        options=options,
        precond_file=args.precond,
    )
    # written atomically: an error or Ctrl-C never leaves a partial file behind
    _io.write_atomic(out, lambda f: np.savez(
        f,
        indices=np.asarray(res.indices, dtype=np.int64),
        weights=np.asarray(res.weights, dtype=np.float64),
        points=np.asarray(res.points, dtype=np.float64),
        method=np.asarray(res.method),
        kind=np.asarray(res.kind),
        ksd=np.asarray(np.nan if res.ksd is None else res.ksd),
        info=np.asarray(json.dumps(_jsonable(info))),
    ))
    ksd = "n/a (no scores)" if res.ksd is None else f"{res.ksd:.4g}"
    dropped = f", dropped {n_bad} rows with NaN/inf" if n_bad else ""
    print(
        f"{res.method}: {len(res)} of {X.shape[0]} points ({res.kind} weights), KSD {ksd}, "
        f"{info['time_s']:.2f} s{dropped} -> {out}"
    )
    return 0


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
    demo.add_argument("--progress", action="store_true", help="show progress bars")
    demo.set_defaults(func=_cmd_demo)

    comp = sub.add_parser(
        "compress",
        parents=[common],
        help="compress points (and scores) read from files",
        description="Compress the points in POINTS, with the scores grad log p in SCORES, and "
        "write indices, weights, points and the run's info to an .npz file. Files: .npy, .npz "
        "(FILE.npz:NAME picks an array; by default X/points and S/scores), .csv.",
    )
    comp.add_argument("points", metavar="POINTS", help="(n, d) points: .npy, .npz[:NAME] or .csv")
    comp.add_argument(
        "scores",
        metavar="SCORES",
        nargs="?",
        default=None,
        help="(n, d) scores grad log p at the points (needed by the debiased methods)",
    )
    comp.add_argument("--method", required=True, help="method name (see `stein-coreset methods`)")
    comp.add_argument("--size", type=int, required=True, help="coreset size")
    comp.add_argument("--out", default="coreset.npz", help="output .npz (default coreset.npz)")
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
        help="(d, d) SPD preconditioner M of the kernel, from .npy/.npz/.csv (default identity)",
    )
    comp.add_argument("--seed", type=int, default=None)
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
    comp.add_argument("--progress", action="store_true", help="show a progress bar")
    comp.set_defaults(func=_cmd_compress)

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
