"""The ``stein-coreset`` command (also ``python -m stein_coreset``).

Sub-commands:

- ``demo``: simulate a biased MCMC run (a P-MALA chain with a long burn-in on the Goodwin
  oscillator posterior, or ``--target gmm``: a MALA chain on a 2-D Gaussian mixture started far
  from its modes), compress it with every implemented method and print method, kind, coreset
  size, KSD, energy distance to a long reference sample and time. ``--plot FILE.png`` draws the
  chain, its burn-in, each coreset (point size proportional to weight) and KSD-vs-size curves.
- ``compress POINTS [SCORES]``: compress arrays read from ``.npy``, ``.npz`` or ``.csv`` files and
  write the coreset (indices, weights, points, run info) to an ``.npz`` file.
- ``methods``: list the methods and whether they are implemented in this build.

Errors are one line on stderr and exit code 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import sys
import time

import numpy as np

#: Array names looked up, in order, in an ``.npz`` file when none is given.
POINT_KEYS = ("X", "points", "samples", "x", "theta")
SCORE_KEYS = ("S", "scores", "grad", "gradients", "score")


class CLIError(Exception):
    """An error reported as one line on stderr with exit code 2."""


# ---------------------------------------------------------------------------------------------
# Reading and writing arrays
# ---------------------------------------------------------------------------------------------


def _split_key(spec: str):
    """``file.npz:name`` -> ("file.npz", "name"); anything else -> (spec, None)."""
    base, sep, key = spec.rpartition(":")
    if sep and base.lower().endswith(".npz") and key and os.sep not in key:
        return base, key
    return spec, None


def _read_csv(path: str) -> np.ndarray:
    with open(path) as f:
        first = f.readline()
    skip = 0
    try:
        [float(v) for v in first.strip().split(",") if v.strip()]
    except ValueError:
        skip = 1  # a header line
    try:
        A = np.genfromtxt(path, delimiter=",", skip_header=skip, dtype=np.float64)
    except ValueError as e:
        raise CLIError(f"{path}: not a numeric CSV table ({e})") from None
    return A


def load_array(spec: str, what: str, keys=POINT_KEYS) -> np.ndarray:
    """Read a 2-D float array from ``.npy``, ``.npz`` (``file.npz:name`` picks an array) or
    ``.csv`` (comma separated, one optional header line). 1-D input becomes one column."""
    path, key = _split_key(spec)
    if not os.path.exists(path):
        raise CLIError(f"{what}: file not found: {path}")
    if os.path.isdir(path):
        raise CLIError(f"{what}: {path} is a directory, not a file")
    ext = os.path.splitext(path)[1].lower()
    try:
        if ext == ".npy":
            A = np.load(path, allow_pickle=False)
        elif ext == ".npz":
            with np.load(path, allow_pickle=False) as z:
                names = list(z.files)
                if key is None:
                    found = [k for k in keys if k in names]
                    if found:
                        key = found[0]
                    elif len(names) == 1:
                        key = names[0]
                    else:
                        raise CLIError(
                            f"{what}: {path} holds arrays {', '.join(names) or '(none)'}; "
                            f"pick one with {path}:NAME"
                        )
                elif key not in names:
                    raise CLIError(
                        f"{what}: {path} has no array {key!r}; it holds {', '.join(names)}"
                    )
                A = z[key]
        elif ext == ".csv":
            A = _read_csv(path)
        else:
            raise CLIError(
                f"{what}: unsupported file type {ext or '(none)'!r} of {path}; "
                "use .npy, .npz or .csv"
            )
    except CLIError:
        raise
    except (ValueError, OSError, EOFError) as e:
        raise CLIError(f"{what}: cannot read {path}: {e}") from None
    A = np.asarray(A)
    if A.dtype.kind not in "fiub":
        raise CLIError(f"{what}: {path} holds {A.dtype} data, not numbers")
    A = A.astype(np.float64)
    if A.ndim == 1:
        A = A[:, None]
    if A.ndim != 2 or A.shape[0] == 0:
        raise CLIError(f"{what}: expected a 2-D (n, d) array in {spec}, got shape {A.shape}")
    return A


def _scores_from_points_file(points_spec: str):
    """When SCORES is omitted and POINTS is an .npz holding scores too, use those."""
    path, _ = _split_key(points_spec)
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


def _check_method(name: str):
    from .compress import ALL_METHOD_NAMES, available_methods

    if name not in ALL_METHOD_NAMES:
        raise CLIError(f"unknown method {name!r}; valid methods: {', '.join(ALL_METHOD_NAMES)}")
    if name not in available_methods():
        raise CLIError(
            f"method {name!r} is not implemented in this build; "
            f"available: {', '.join(available_methods())}"
        )


def _kernel_from_args(args, X):
    """The Stein kernel of ``--bandwidth`` / ``--precond`` (None: compress's default)."""
    import stein_coreset as sc

    if args.bandwidth is None and args.precond is None:
        return None
    M = None
    if args.precond is not None:
        M = load_array(args.precond, "--precond", ("M", "precond", "cov"))
        d = X.shape[1]
        if M.shape != (d, d):
            raise CLIError(f"--precond must be a ({d}, {d}) matrix, got shape {M.shape}")
    if args.bandwidth is not None and not args.bandwidth > 0:
        raise CLIError(f"--bandwidth must be positive, got {args.bandwidth}")
    good = np.isfinite(X).all(axis=1)
    sigma = args.bandwidth or sc.median_bandwidth(X[good], M=M)
    return sc.SteinKernel(sc.IMQ(sigma=sigma), M=M)


def _cmd_compress(args) -> int:
    import stein_coreset as sc

    from .compress import METHODS

    _check_method(args.method)
    options = _parse_options(args.option)
    X = load_array(args.points, "POINTS", POINT_KEYS)
    scores = args.scores or _scores_from_points_file(args.points)
    S = load_array(scores, "SCORES", SCORE_KEYS) if scores else None
    if S is None and METHODS[args.method].debiased:
        raise CLIError(
            f"method {args.method!r} is debiased and needs SCORES (grad log p at the points)"
        )
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
    out = args.out if args.out.lower().endswith(".npz") else args.out + ".npz"
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
        bandwidth=None if kernel is None else kernel.base.sigma,
        precond_file=args.precond,
    )
    np.savez(
        out,
        indices=np.asarray(res.indices, dtype=np.int64),
        weights=np.asarray(res.weights, dtype=np.float64),
        points=np.asarray(res.points, dtype=np.float64),
        method=np.asarray(res.method),
        kind=np.asarray(res.kind),
        ksd=np.asarray(np.nan if res.ksd is None else res.ksd),
        info=np.asarray(json.dumps(_jsonable(info))),
    )
    ksd = "n/a (no scores)" if res.ksd is None else f"{res.ksd:.4g}"
    dropped = f", dropped {n_bad} rows with NaN/inf" if n_bad else ""
    print(
        f"{res.method}: {len(res)} of {X.shape[0]} points ({res.kind} weights), KSD {ksd}, "
        f"{info['time_s']:.2f} s{dropped} -> {out}"
    )
    return 0


# ---------------------------------------------------------------------------------------------
# demo
# ---------------------------------------------------------------------------------------------

DEMO_DEFAULT_N = {"goodwin": 4096, "gmm": 4096}


def _require_matplotlib():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CLIError(
            "--plot needs matplotlib, which is not installed: pip install 'stein_coreset[plot]'"
        ) from None
    return plt


def demo_chain(
    target: str, n: int, seed: int, progress: bool = False, n_reference: int | None = None
):
    """The demo's input: a biased chain with scores and a reference sample."""
    from . import datasets

    kw = {} if n_reference is None else {"n_reference": n_reference}
    if target == "goodwin":
        return datasets.goodwin_chain(n, seed=seed, progress=progress, **kw)
    if target == "gmm":
        return datasets.gmm_chain(n, seed=seed, progress=progress, **kw)
    raise CLIError(f"unknown --target {target!r}; use goodwin or gmm")


def _demo_methods(requested):
    from .compress import available_methods

    if not requested:
        return available_methods()
    names = [m.strip() for m in requested.split(",") if m.strip()]
    for m in names:
        _check_method(m)
    return names


def run_methods(chain, methods, size, kernel, seed, progress=False, on_row=None):
    """Compress ``chain`` with each method; one dict per method (or per failure)."""
    import stein_coreset as sc

    rows = []
    for method in methods:
        t0 = time.perf_counter()
        try:
            res = sc.compress(
                chain.X,
                chain.S,
                size=size,
                method=method,
                kernel=kernel,
                seed=seed,
                progress=progress,
            )
        except Exception as e:  # one broken method must not hide the others
            row = {"method": method, "error": f"{type(e).__name__}: {e}"}
        else:
            dt = time.perf_counter() - t0
            ed = (
                sc.energy_distance(res.points, chain.reference, wx=res.weights)
                if chain.reference is not None
                else math.nan
            )
            row = {
                "method": method,
                "kind": res.kind,
                "size": len(res),
                "ksd": res.ksd,
                "energy": ed,
                "time": dt,
                "result": res,
            }
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


def _fmt_row(row) -> str:
    if "error" in row:
        return f"{row['method']:<12}failed: {row['error']}"[:160]
    return (
        f"{row['method']:<12}{row['kind']:<10}{row['size']:>6}{row['ksd']:>12.4g}"
        f"{row['energy']:>12.4g}{row['time']:>10.2f}"
    )


def _cmd_demo(args) -> int:
    import stein_coreset as sc

    from .compress import ALL_METHOD_NAMES, available_methods

    plt = _require_matplotlib() if args.plot else None
    for flag, path in (("--plot", args.plot), ("--save-chain", args.save_chain)):
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise CLIError(f"{flag}: directory does not exist: {os.path.dirname(path)}")
    methods = _demo_methods(args.methods)
    n = args.n or DEMO_DEFAULT_N[args.target]
    if n < 16:
        raise CLIError(f"--n must be at least 16, got {n}")
    size = args.size or int(round(math.sqrt(n)))
    if not 1 <= size <= n:
        raise CLIError(f"--size must be between 1 and n = {n}, got {size}")

    t0 = time.perf_counter()
    if args.reference is not None and args.reference < 10:
        raise CLIError(f"--reference must be at least 10, got {args.reference}")
    chain = demo_chain(args.target, n, args.seed, args.progress, args.reference)
    t_sim = time.perf_counter() - t0
    if args.save_chain:
        path = args.save_chain if args.save_chain.endswith(".npz") else args.save_chain + ".npz"
        np.savez(
            path,
            X=chain.X,
            S=chain.S,
            log_density=chain.log_density,
            reference=chain.reference if chain.reference is not None else np.empty((0, 0)),
        )
        print(f"saved the chain to {path} (arrays X, S, log_density, reference)")
    kernel = sc.SteinKernel(sc.IMQ(sigma=sc.median_bandwidth(chain.X)))
    if args.target == "goodwin":
        what = "P-MALA chain on the Goodwin oscillator posterior (d = 4, log-parameters)"
    else:
        what = "MALA chain on a 2-D Gaussian mixture, started far from its modes"
    print(f"demo: {what}")
    print(
        f"  n = {n} states (acceptance {chain.acceptance_rate:.2f}, burn-in ~ "
        f"{chain.info.get('burn_in', '?')} states, simulated in {t_sim:.1f} s); "
        f"reference sample of {len(chain.reference)}; coreset size {size}"
    )
    print(
        f"  Stein kernel: IMQ, median bandwidth {kernel.base.sigma:.3g}; energy distance to the "
        "reference sample"
    )
    header = f"{'method':<12}{'kind':<10}{'size':>6}{'KSD':>12}{'energy':>12}{'time (s)':>10}"
    print(header)
    print("-" * len(header))
    full = {
        "method": "(input)",
        "kind": "equal",
        "size": n,
        "ksd": sc.ksd(chain.X, chain.S, kernel=kernel),
        "energy": sc.energy_distance(chain.X, chain.reference),
        "time": 0.0,
    }
    print(_fmt_row(full))
    rows = run_methods(
        chain,
        methods,
        size,
        kernel,
        args.seed,
        progress=args.progress,
        on_row=lambda r: print(_fmt_row(r), flush=True),
    )
    missing = [m for m in ALL_METHOD_NAMES if m not in available_methods()]
    if missing and not args.methods:
        print(f"not yet implemented: {', '.join(missing)}")
    if plt is not None:
        curves = {} if args.no_curves else _size_curves(chain, rows, size, kernel, args.seed)
        _plot_demo(plt, args.plot, chain, rows, curves, args.target)
        print(f"wrote {args.plot}")
    failed = [r["method"] for r in rows if "error" in r]
    if failed:
        print(f"stein-coreset: error: method(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _size_curves(chain, rows, size, kernel, seed):
    """KSD of each method at four coreset sizes up to ``size`` (the table's run is reused)."""
    import stein_coreset as sc

    sizes = sorted({int(s) for s in np.geomspace(min(8, size), size, 4).round()})
    ok = [r for r in rows if "error" not in r]
    print(f"KSD-vs-size curves: m in {sizes} for {len(ok)} methods", flush=True)
    curves = {}
    for r in ok:
        vals = []
        for m in sizes:
            if m == size:
                vals.append(r["ksd"])
                continue
            try:
                res = sc.compress(
                    chain.X, chain.S, size=m, method=r["method"], kernel=kernel, seed=seed
                )
                vals.append(res.ksd)
            except Exception:
                vals.append(math.nan)
        curves[r["method"]] = (sizes, vals)
    return curves


def _plot_demo(plt, path, chain, rows, curves, target):
    ok = [r for r in rows if "error" not in r]
    k = len(ok)
    ncols = min(4, max(k, 1))
    nrows = -(-k // ncols) if k else 1
    fig = plt.figure(figsize=(2.7 * ncols + 4.0, 2.5 * max(nrows, 1) + 0.4))
    gs = fig.add_gridspec(max(nrows, 1), ncols + 2)
    X = chain.X
    b = int(chain.info.get("burn_in", 0))
    label = ("log a1", "log a2") if target == "goodwin" else ("x1", "x2")
    lim_lo, lim_hi = X[:, :2].min(axis=0), X[:, :2].max(axis=0)
    pad = 0.05 * (lim_hi - lim_lo)
    for i, r in enumerate(ok):
        ax = fig.add_subplot(gs[i // ncols, i % ncols])
        ax.plot(X[:, 0], X[:, 1], color="0.8", lw=0.4, zorder=1)
        ax.plot(X[:b, 0], X[:b, 1], color="tab:red", lw=0.6, alpha=0.6, zorder=2)
        res = r["result"]
        P = np.asarray(res.points)
        w = np.asarray(res.weights)
        sz = np.clip(25.0 * np.abs(w) * len(w), 2.0, 400.0)  # equal weights: 25 pt^2
        col = np.where(w >= 0, "tab:blue", "tab:orange")
        ax.scatter(P[:, 0], P[:, 1], s=sz, c=col, edgecolors="k", linewidths=0.3, zorder=3)
        ax.set_title(f"{r['method']} ({r['kind']}, m={r['size']})", fontsize=9)
        ax.set_xlim(lim_lo[0] - pad[0], lim_hi[0] + pad[0])
        ax.set_ylim(lim_lo[1] - pad[1], lim_hi[1] + pad[1])
        ax.tick_params(labelsize=7)
        if i % ncols == 0:
            ax.set_ylabel(label[1], fontsize=8)
        ax.set_xlabel(label[0], fontsize=8)
    ax = fig.add_subplot(gs[:, ncols:])
    from .compress import METHODS

    for i, (method, (sizes, vals)) in enumerate(curves.items()):
        debiased = method in METHODS and METHODS[method].debiased
        ax.plot(
            sizes,
            vals,
            "-" if debiased else "--",
            color=plt.cm.tab20(i % 20),
            marker="o",
            ms=3,
            label=method,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("coreset size m")
    ax.set_ylabel("KSD (MMD to P)")
    ax.set_title(
        "KSD vs coreset size (dashed: unbiased baselines)\n(chain in grey, burn-in in red)",
        fontsize=9,
    )
    if curves:
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
# methods
# ---------------------------------------------------------------------------------------------


def _cmd_methods(args) -> int:
    from .compress import ALL_METHOD_NAMES, METHODS

    for name in ALL_METHOD_NAMES:
        if name in METHODS:
            m = METHODS[name]
            tag = "debiased" if m.debiased else "baseline"
            print(f"{name:<12}{m.kind:<10}{tag:<10}{m.summary}")
        else:
            print(f"{name:<12}{'-':<10}{'-':<10}not implemented in this build")
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
        known = (CLIError, ValueError, TypeError, OSError, NotImplementedError, MemoryError)
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if not isinstance(e, known):
            msg = f"{type(e).__name__}: {msg} (run with --debug for the traceback)"
        print(f"stein-coreset: error: {msg}", file=sys.stderr)
        return 2
