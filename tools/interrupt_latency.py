"""Ctrl-C latency of the public entries: the seconds from a SIGINT to the KeyboardInterrupt.

Each case runs in a child process (as a terminal's Ctrl-C reaches a program): the child builds
its input, says when the call starts, and the parent sends SIGINT ``--after`` seconds later;
the child reports when the KeyboardInterrupt reached it (or when the call returned, if the
signal did not stop it). With ``--full`` the uninterrupted run time of each case is measured
too, which shows that the size makes the call long enough to be worth interrupting (the issue
asked for >= 10 s).

Usage::

    python tools/interrupt_latency.py                      # every case, the default sizes
    python tools/interrupt_latency.py --cases ksd mmd --full
    python tools/interrupt_latency.py --scale 0.5          # smaller sizes (n * 0.5)

Prints a Markdown table: case, size, full run time (with ``--full``), latency.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

#: case -> (size description, code building the input, the call); ``N`` is the size.
CASES = {
    "ksd": (
        "n = {N}, d = 2",
        "X = rng.standard_normal((N, 2)); S = -X; k = sc.SteinKernel(sc.IMQ(1.0))",
        "sc.ksd(X, S, kernel=k)",
        120_000,
    ),
    "mmd": (
        "n = n' = {N}, d = 2, max_pairs=None",
        "X = rng.standard_normal((N, 2)); Y = rng.standard_normal((N, 2)) + 0.1",
        "sc.mmd(X, Y, kernel=sc.IMQ(1.0), max_pairs=None)",
        80_000,
    ),
    "energy_distance": (
        "n = n' = {N}, d = 2, max_pairs=None",
        "X = rng.standard_normal((N, 2)); Y = rng.standard_normal((N, 2)) + 0.1",
        "sc.energy_distance(X, Y, max_pairs=None)",
        15_000,
    ),
    "dksd_pass": (
        "estimators.loss(Gaussian, dksd), n = {N}, d = 2",
        "from stein_coreset import estimators as est; X = rng.standard_normal((N, 2)); "
        "model = est.Gaussian(d=2); theta = np.array([0.0, 0.0, 1.0])",
        "est.loss(model, theta, X, discrepancy='dksd', kernel=sc.IMQ(1.0))",
        80_000,
    ),
    "check_scores": (
        "20 checks (input and a 50-point result), n = {N}, d = 2000",
        "from stein_coreset.diagnostics import check_scores; "
        "X = rng.standard_normal((N, 2000)); S = -X; idx = np.arange(0, N, N // 50); "
        "w = np.full(idx.size, 1.0 / idx.size)",
        "for _ in range(20): check_scores(X, S, w, idx, warn=False)",
        4000,
    ),
}

CHILD = r"""
import json, signal, sys, time
# Python's own handler, as in a terminal (a job started in the background inherits SIGINT
# ignored, and Python then keeps it ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np
import stein_coreset as sc
N = {N}
rng = np.random.default_rng(0)
{setup}
print("START", flush=True)
t0 = time.time()
try:
    {call}
    print(json.dumps({{"done": time.time(), "t0": t0}}), flush=True)
except KeyboardInterrupt:
    print(json.dumps({{"interrupted": time.time(), "t0": t0}}), flush=True)
"""


def _child_code(case: str, n: int) -> str:
    _, setup, call, _ = CASES[case]
    return CHILD.format(N=n, setup=setup, call=call)


def run_case(case: str, n: int, after: float | None, timeout: float) -> dict:
    """One child run: SIGINT ``after`` seconds into the call (None: no signal)."""
    code = _child_code(case, n)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("START"):
        err = p.communicate()[1]
        raise RuntimeError(f"{case}: the child failed before the call:\n{err}")
    sent = None
    if after is not None:
        time.sleep(after)
        sent = time.time()
        p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return {"timeout": True}
    try:
        rec = json.loads(out.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise RuntimeError(f"{case}: no report from the child:\n{out}\n{err}") from None
    rec["sent"] = sent
    return rec


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    p.add_argument("--scale", type=float, default=1.0, help="multiply every default size")
    p.add_argument("--after", type=float, default=3.0, help="seconds into the call to SIGINT")
    p.add_argument("--full", action="store_true", help="also time each call uninterrupted")
    p.add_argument("--timeout", type=float, default=600.0)
    a = p.parse_args(argv)
    print(f"# {os.uname().nodename}, {os.cpu_count()} CPUs, "
          f"{sys.executable} ({time.strftime('%Y-%m-%d %H:%M')})")
    print("| case | size | uninterrupted (s) | SIGINT after (s) | latency (s) |")
    print("|---|---|---|---|---|")
    for case in a.cases:
        n = max(16, int(CASES[case][3] * a.scale))
        full = "-"
        if a.full:
            r = run_case(case, n, None, a.timeout)
            full = "> timeout" if r.get("timeout") else f"{r['done'] - r['t0']:.1f}"
        r = run_case(case, n, a.after, a.timeout)
        if r.get("timeout"):
            lat = f"> {a.timeout:.0f} (timeout)"
        elif "interrupted" in r:
            lat = f"{r['interrupted'] - r['sent']:.2f}"
        else:
            lat = f"not interrupted: returned {r['done'] - r['sent']:.2f} s after the signal"
        size = CASES[case][0].format(N=n)
        print(f"| {case} | {size} | {full} | {a.after:g} | {lat} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
