"""Behaviour fingerprint of every ``compress`` method: the selections, weights and KSD on fixed
biased inputs, so that a refactor can show it changed nothing.

    python tools/fingerprint.py --out before.json            # on the old code
    python tools/fingerprint.py --compare before.json        # on the new code: exit 1 on a change

Indices must match exactly; weights and KSD to ``--rtol`` (default 1e-9); equal-weighted
results also record their draws (``draw_indices``, compared when both sides have them). Extra
keyword arguments for ``compress`` (e.g. ``n_threads``) are passed with ``--kw name=value`` (a
JSON value); a method option (e.g. ``--kw 'stop="fixed"'``) only to the methods that have it.

``--pre-26`` runs with the defaults before the scale-free kernel (identity preconditioner,
Low-rank Debiasing rank n^0.5 and ``stop="ksd"``), so a fingerprint taken
with those defaults can still be compared: the scale-free kernel, tau 0.4 and stop "auto"
changed every debiased and kernel-based selection, on purpose, and nothing else.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np


def _cases():
    rng = np.random.default_rng(12345)
    X1 = 0.7 + 1.5 * rng.standard_normal((1024, 3))
    X2 = 0.5 + 1.2 * rng.standard_normal((600, 5))  # n not a power of two
    return {"n1024_d3": (X1, -X1, 32), "n600_d5": (X2, -X2, 24)}


METHODS = (
    "standard", "iid", "st", "skt", "kt", "lskt", "compresspp",
    "rt", "ct", "sr", "sc", "lsr", "lsc",
)


def fingerprint(extra: dict, pre_26: bool = False) -> dict:
    import stein_coreset as sc
    from stein_coreset.compress import METHODS as table

    if pre_26:
        extra = {"kernel": sc.SteinKernel(M=None), "tau": 0.5, "stop": "ksd", **extra}
        # (tau is replaced by the rank the algorithms computed before; see below)

    options = {k for spec in table.values() for k in spec.options}

    out = {}
    for cname, (X, S, size) in _cases().items():
        for method in METHODS:
            # a method option (e.g. stop=...) goes only to the methods that have it
            own = table[method].options
            kw = {k: v for k, v in extra.items() if k not in options or k in own}
            if "tau" in kw and (not table[method].uses_rank or table[method].debias != "ld"):
                del kw["tau"]  # sr / sc / rt / ct: their RT/CT count default did not change
            if pre_26 and table[method].debias == "ld":
                # with the old defaults the LD rank came from the (thinned) n inside the algorithm
                del kw["tau"]
                if method == "lskt":
                    n_used = sc.compress(X, S, size=size, method=method, seed=7, **kw).info[
                        "n_thinned"]
                    kw["rank"] = math.ceil(math.sqrt(n_used))
                else:
                    kw["rank"] = max(1, round(math.sqrt(X.shape[0])))
            res = sc.compress(X, S, size=size, method=method, seed=7, **kw)
            out[f"{cname}/{method}"] = {
                "indices": np.asarray(res.indices).tolist(),
                "weights": np.asarray(res.weights).tolist(),
                "ksd": res.ksd,
            }
            if getattr(res, "draw_indices", None) is not None:
                out[f"{cname}/{method}"]["draw_indices"] = np.asarray(res.draw_indices).tolist()
    return out


def compare(old: dict, new: dict, rtol: float) -> list[str]:
    bad = []
    for key, a in old.items():
        b = new.get(key)
        if b is None:
            bad.append(f"{key}: missing")
            continue
        if a["indices"] != b["indices"]:
            bad.append(f"{key}: indices differ")
            continue
        if "draw_indices" in a and "draw_indices" in b and a["draw_indices"] != b["draw_indices"]:
            bad.append(f"{key}: draws differ")
            continue
        wa, wb = np.asarray(a["weights"]), np.asarray(b["weights"])
        if not np.allclose(wa, wb, rtol=rtol, atol=rtol * 1e-3):
            bad.append(f"{key}: weights differ by {np.max(np.abs(wa - wb)):.3g}")
        if a["ksd"] is not None and not math.isclose(a["ksd"], b["ksd"], rel_tol=rtol):
            bad.append(f"{key}: ksd {a['ksd']!r} -> {b['ksd']!r}")
    return bad


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", help="write the fingerprint to this JSON file")
    p.add_argument("--compare", help="compare with this JSON file; exit 1 on any difference")
    p.add_argument("--rtol", type=float, default=1e-9)
    p.add_argument("--kw", action="append", default=[], help="extra compress option name=value")
    p.add_argument("--pre-26", action="store_true",
                   help="the defaults before the scale-free kernel (identity M, LD tau 0.5, "
                        "stop='ksd')")
    args = p.parse_args(argv)
    extra = {}
    for kv in args.kw:
        k, v = kv.split("=", 1)
        extra[k] = json.loads(v)
    fp = fingerprint(extra, pre_26=args.pre_26)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(fp, f)
    if args.compare:
        with open(args.compare) as f:
            old = json.load(f)
        bad = compare(old, fp, args.rtol)
        for line in bad:
            print(line)
        print(f"{len(old) - len(bad)} of {len(old)} cases unchanged")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
