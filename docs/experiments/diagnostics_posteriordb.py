"""False alarms and detections of compress's input diagnostics on real posteriors (posteriordb),
the tuning and the validation set apart (docs/diagnostics.md).

For every posterior of ``stein_coreset.datasets.posteriordb.split()`` (the folder from
``$STEIN_CORESET_POSTERIORDB`` or ``--root``), four samples per seed, in the unconstrained
space Stan samples in, with the correct scores (Jacobian included) at every row:

- ``reference``: 1000 of posteriordb's reference draws (a random subset of every other draw):
  exact draws;
- ``short warm-up``: PyStan NUTS, 2 chains x (25 warm-up draws, kept, + 475): the burn-in from
  Stan's random inits, and a step size and metric adapted on 25 iterations;
- ``tempered``: P-MALA on p^(1/2) started at a reference draw (over-dispersed everywhere);
- ``thinned``: NUTS, 1 chain x (50 warm-up, kept, + 5000), every 5th draw kept.

Each sample, correct and with four misuses (X and S swapped, S sign-flipped, rows of S shuffled
or shifted by one), runs through ``stein_coreset.compress`` with st, skt and sr (size 30); a
call counts as flagged when ``res.info["diagnostics"]["suspect"]`` is set; for correct scores
the result's worst mean error in reference sds is kept too (``_diagnostic_runs.py``). The
samples are cached in ``_cache/diagnostics_posteriordb/``. Writes
``diagnostics_posteriordb.json`` and prints the tables.

    python docs/experiments/diagnostics_posteriordb.py --set tuning [--seeds 2]
    python docs/experiments/diagnostics_posteriordb.py --set validation [--seeds 2]
    python docs/experiments/diagnostics_posteriordb.py --table
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import _diagnostic_runs as runs
import numpy as np
from _common import CACHE, HERE

from stein_coreset.datasets import posteriordb as pdb

OUT = os.path.join(HERE, "diagnostics_posteriordb.json")
KINDS = ("reference", "short warm-up", "tempered", "thinned")
N = 1000


def sample(post, kind: str, seed: int):
    """(X, S) of one sample of the posterior, unconstrained, with the scores of p."""
    if kind == "reference":
        ref = post.reference_unconstrained(thin=2)
        rows = np.sort(np.random.default_rng(seed).choice(ref.shape[0], N, replace=False))
        X = ref[rows]
        return X, post.scores(X)
    if kind == "short warm-up":
        ch = post.nuts(num_warmup=25, num_samples=475, num_chains=2, seed=100 + seed)
    elif kind == "tempered":
        ch = post.tempered(n=N, T=2.0, seed=seed)
    elif kind == "thinned":
        ch = post.nuts(num_warmup=50, num_samples=5000, num_chains=1, seed=200 + seed, thin=5)
    else:
        raise ValueError(kind)
    return ch.X, ch.S


def cached(post, kind: str, seed: int):
    path = os.path.join(CACHE, "diagnostics_posteriordb",
                        f"{post.name}_{kind.replace(' ', '_')}_{seed}.npz")
    if os.path.exists(path):
        z = np.load(path)
        return z["X"], z["S"]
    X, S = sample(post, kind, seed)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.savez(path, X=X, S=S)
    return X, S


def truth(post):
    """Mean and sd of the unconstrained reference draws (cached)."""
    path = os.path.join(CACHE, "diagnostics_posteriordb", f"{post.name}_truth.npz")
    if os.path.exists(path):
        z = np.load(path)
        return z["m"], z["s"]
    ref = post.reference_unconstrained(thin=2)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.savez(path, m=ref.mean(0), s=ref.std(0))
    return ref.mean(0), ref.std(0)


def tables(data: dict) -> list:
    recs = data["records"]
    m = data["meta"]
    lines = [f"`{m['command']}` (each set in its own run), commit {m['commit']}, {m['machine']}; "
             f"methods {', '.join(m['methods'])}, size {m['size']}, seeds 0-{m['seeds'] - 1}; a "
             "cell is flagged calls / calls (the suspect named).", ""]
    for part in ("tuning", "validation"):
        mine = [r for r in recs if r["set"] == part]
        if mine:
            names = sorted({r["target"] for r in mine})
            lines += runs.summary_lines(f"{part} set ({len(names)} posteriors)", mine)
    for part in ("tuning", "validation"):
        mine = [r for r in recs if r["set"] == part]
        if not mine:
            continue
        lines += ["", f"#### {part.capitalize()} set, by sample", ""]
        lines += runs.detection_table(mine, lambda r: r["kind"], rows=list(KINDS))
        lines += ["", f"#### {part.capitalize()} set, by posterior", ""]
        lines += runs.detection_table(mine, lambda r: r["target"])
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=("tuning", "validation"), default=None)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--size", type=int, default=30)
    ap.add_argument("--methods", nargs="+", default=["st", "skt", "sr"])
    ap.add_argument("--names", nargs="+", default=None, help="only these posteriors")
    ap.add_argument("--root", default=None)
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--table", action="store_true", help="print the tables of --out and stop")
    args = ap.parse_args(argv)
    if args.table:
        print("\n".join(tables(runs.load(args.out))))
        return
    if args.set is None and args.names is None:
        ap.error("name a --set (tuning or validation) or --names")
    split = pdb.split(args.root)
    names = args.names or split[args.set]
    old = runs.load(args.out)["records"] if os.path.exists(args.out) else []
    keep = [r for r in old if r["target"] not in names]  # the other set's records stay
    t0 = time.perf_counter()
    records = []
    for name in names:
        t1 = time.perf_counter()
        post = pdb.load(name, args.root)
        part = "validation" if name in split["validation"] else "tuning"
        tr = truth(post)
        for kind in KINDS:
            for seed in range(args.seeds):
                X, S = cached(post, kind, seed)
                records += runs.run_sample(
                    X, S, {"set": part, "target": name, "kind": kind, "seed": seed},
                    methods=args.methods, size=args.size, seed=seed, truth=tr)
        mine = [r for r in records if r["target"] == name]
        print(f"{name} ({part}, d = {post.d}): " + " ".join(
            f"{m} {runs.cell([r for r in mine if r['misuse'] == m])}" for m in runs.MISUSES)
            + f" ({time.perf_counter() - t1:.0f} s)", flush=True)
    meta = runs.meta("python docs/experiments/diagnostics_posteriordb.py " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:]) if not a.startswith("/")))
    meta.update({"methods": args.methods, "size": args.size, "seeds": args.seeds,
                 "seconds": round(time.perf_counter() - t0)})
    runs.save(args.out, meta, keep + records)
    print("\n".join(tables(runs.load(args.out))))


if __name__ == "__main__":
    main()
