"""The ``stein-coreset demo`` harness: simulate a biased MCMC run, compress it with every method,
print a table (method, kind, size, KSD, energy distance to a reference sample, time) and
optionally plot the chain, each coreset and KSD-vs-size curves (matplotlib).

The command line (:mod:`stein_coreset.cli`) parses the flags and calls :func:`run_demo`.
"""

from __future__ import annotations

import math
import os
import sys
import time

import numpy as np

from . import _io

__all__ = ["DemoError", "demo_chain", "run_methods", "run_demo", "size_curves", "plot_demo"]


DEMO_DEFAULT_N = {"goodwin": 4096, "gmm": 4096}


class DemoError(ValueError):
    """A bad demo argument or environment (the command line prints it as one line)."""


def require_matplotlib():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise DemoError(
            "--plot needs matplotlib, which is not installed: pip install -r "
            "requirements/plot.txt in the stein_coreset source tree (or pip install matplotlib)"
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
    raise DemoError(f"unknown --target {target!r}; use goodwin or gmm")


def _demo_methods(requested):
    from .compress import available_methods

    valid = available_methods()
    if not requested:
        return valid
    names = [m.strip() for m in requested.split(",") if m.strip()]
    for m in names:
        if m not in valid:
            raise DemoError(f"unknown method {m!r}; valid methods: {', '.join(valid)}")
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


def _role(method: str) -> str:
    from .compress import METHODS

    if method not in METHODS:
        return "-"
    return "debiased" if METHODS[method].debiased else "baseline"


def _fmt_row(row) -> str:
    if "error" in row:
        return f"{row['method']:<12}failed: {row['error']}"[:160]
    return (
        f"{row['method']:<12}{_role(row['method']):<10}{row['kind']:<10}{row['size']:>6}"
        f"{row['ksd']:>12.4g}{row['energy']:>12.4g}{row['time']:>10.2f}"
    )


def run_demo(
    *,
    target: str = "goodwin",
    n: int | None = None,
    size: int | None = None,
    seed: int = 0,
    reference: int | None = None,
    methods: str | None = None,
    plot: str | None = None,
    no_curves: bool = False,
    save_chain: str | None = None,
    progress: bool | None = None,
    force: bool = False,
) -> int:
    """Simulate a biased chain, compress it with each method, print the table (and plot).

    ``progress``: bars on stderr for the simulation and the long methods (default: on when
    stderr is a terminal). ``plot`` and ``save_chain`` (``.png`` / ``.npz`` appended when the
    name has no extension) are checked before the simulation and written atomically
    (:mod:`stein_coreset._output`): an existing file is replaced only with ``force``.

    Returns the exit code: 0, or 1 when a method failed (the others still run).
    Raises :class:`DemoError` on a bad argument, before any simulation.
    """
    import stein_coreset as sc

    from ._progress import resolve as resolve_progress

    methods_progress = progress  # None stays "bars on a terminal" for compress: no stage lines
    progress = resolve_progress(progress)
    plt = require_matplotlib() if plot else None
    plot_out, chain_out = _check_outputs(plot, save_chain, force)
    names = _demo_methods(methods)
    n = DEMO_DEFAULT_N[target] if n is None else n
    if n < 16:
        raise DemoError(f"--n must be at least 16, got {n}")
    size = int(round(math.sqrt(n))) if size is None else size
    if not 1 <= size <= n:
        raise DemoError(f"--size must be between 1 and n = {n}, got {size}")

    t0 = time.perf_counter()
    if reference is not None and reference < 10:
        raise DemoError(f"--reference must be at least 10, got {reference}")
    print(
        f"demo: simulating a biased MCMC chain of {n} states on the {target} target "
        "(the input to compress) ...",
        flush=True,
    )
    chain = demo_chain(target, n, seed, progress, reference)
    t_sim = time.perf_counter() - t0
    if chain_out is not None:
        arrays = dict(
            X=chain.X,
            S=chain.S,
            log_density=chain.log_density,
            reference=chain.reference if chain.reference is not None else np.empty((0, 0)),
        )
        path = _write(chain_out, lambda f: np.savez(f, **arrays))
        print(f"saved the chain to {path} (arrays X, S, log_density, reference)")
    from .kernels import DEFAULT_KERNEL

    # compress's own default (scale-free) kernel, fixed once on the chain so every row is
    # measured with the same one
    kernel = DEFAULT_KERNEL.resolve(chain.X)
    if target == "goodwin":
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
        f"  KSD: kernel Stein discrepancy to the target P (IMQ Stein kernel, coordinates scaled "
        f"by their sd, median bandwidth {kernel.base.sigma:.3g}); energy: energy distance to an "
        "independent reference sample. Lower is better for both."
    )
    print(
        "  debiased: methods that use the scores to correct the chain's bias (st, skt, lskt, "
        "sr, lsr, sc, lsc); baseline: methods that compress the chain as it is. kind: equal, "
        "simplex (weights >= 0) or constant (signed) weights; size: distinct points."
    )
    header = (
        f"{'method':<12}{'role':<10}{'kind':<10}{'size':>6}{'KSD':>12}{'energy':>12}"
        f"{'time (s)':>10}"
    )
    print(header)
    print("-" * len(header))
    full = {
        "method": "(input)",
        "kind": "equal",
        "size": n,
        "ksd": sc.ksd(chain.X, chain.S, kernel=kernel),
        # the whole chain, whatever --n asked for (energy_distance refuses > 2^32 pairs)
        "energy": sc.energy_distance(chain.X, chain.reference, max_pairs=None),
        "time": 0.0,
    }
    print(_fmt_row(full))
    rows = run_methods(
        chain,
        names,
        size,
        kernel,
        seed,
        progress=methods_progress,
        on_row=lambda r: print(_fmt_row(r), flush=True),
    )
    if plt is not None:
        curves = {} if no_curves else size_curves(chain, rows, size, kernel, seed)
        print(f"wrote {plot_demo(plt, plot_out, chain, rows, curves, target)}")
    failed = [r["method"] for r in rows if "error" in r]
    if failed:
        print(f"stein-coreset: error: method(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def size_curves(chain, rows, size, kernel, seed):
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


def plot_demo(plt, path, chain, rows, curves, target):
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
        ax.set_title(f"{r['method']}: {_role(r['method'])}, {r['kind']}, {r['size']} pts",
                     fontsize=9)
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
        "KSD vs coreset size, lower is better\n(solid: debiased, dashed: baselines)",
        fontsize=9,
    )
    if curves:
        ax.legend(fontsize=7, ncol=2)
    from matplotlib.lines import Line2D

    keys = [
        Line2D([], [], color="0.8", lw=1, label="chain"),
        Line2D([], [], color="tab:red", lw=1, label="burn-in"),
        Line2D([], [], ls="", marker="o", color="tab:blue", mec="k", label="coreset point"),
        Line2D([], [], ls="", marker="o", color="tab:orange", mec="k",
               label="negative weight (sc, lsc, ct)"),
    ]
    fig.legend(handles=keys, loc="lower left", fontsize=7, ncol=4,
               title="dot area ~ |weight| (equal weights: one size; a point drawn k times is k x)",
               title_fontsize=7)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    if not isinstance(path, _io.Output):  # a plain path: replaced, as savefig does
        path = _io.check_output(path, force=True, what="plot", suffix=_plot_suffix(path))
    fmt = os.path.splitext(path.name)[1].lstrip(".").lower() or "png"
    try:
        return _write(path, lambda f: fig.savefig(f, dpi=72, format=fmt))
    finally:
        plt.close(fig)


def _plot_suffix(path: str) -> str | None:
    """``.png`` for a name without an extension (as matplotlib appends it), else none."""
    return None if os.path.splitext(path)[1] else ".png"


def _check_outputs(plot, save_chain, force: bool):
    """``--plot`` and ``--save-chain`` checked before the simulation (the one output path,
    :func:`stein_coreset._io.check_output`): each names a new file (or an existing one with
    ``--force``), a device, or nothing; never the same file."""
    hint = "pass --force to replace it"
    try:
        plot_out = None if not plot else _io.check_output(
            plot, force=force, what="--plot", suffix=_plot_suffix(plot), force_hint=hint)
        chain_out = None if not save_chain else _io.check_output(
            save_chain, force=force, what="--save-chain", suffix=".npz", force_hint=hint)
    except (ValueError, OSError) as e:
        raise DemoError(str(e)) from None
    if (plot_out is not None and chain_out is not None and not plot_out.stream
            and os.path.realpath(plot_out.path) == os.path.realpath(chain_out.path)):
        raise DemoError(f"--plot and --save-chain name the same file {plot_out.name}")
    return plot_out, chain_out


def _write(target, writer) -> str:
    try:
        return _io.write_output(target, writer)
    except OSError as e:
        raise DemoError(str(e)) from None
