#!/usr/bin/env python
"""GPU check: every method on the same seeded input with NumPy and with CuPy.

Checks that results agree (same indices for deterministic methods; KSD within 1e-6 relative
otherwise), that CuPy inputs give CuPy outputs on the same device, and prints a timing table
(CPU vs GPU) with the host-transfer volume of each method. Exits non-zero on any disagreement.

    python tools/gpu_check.py                 # n = 2^14 and 2^16, d = 4
    python tools/gpu_check.py --n 4096 --methods st skt

Needs CuPy and a CUDA device (``pip install ".[gpu]"``); see docs/gpu.md.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def biased_chain(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = 0.7 + 1.5 * rng.standard_normal((n, d))
    return X, -X


def run(method, X, S, size, seed):
    import stein_coreset as sc

    t0 = time.perf_counter()
    res = sc.compress(X, S, size=size, method=method, seed=seed,
                      kernel=sc.SteinKernel(sc.IMQ(sigma=float(np.sqrt(2 * X.shape[1])))))
    try:  # make GPU timings honest: wait for the device
        import cupy

        cupy.cuda.Device().synchronize()
    except Exception:
        pass
    return res, time.perf_counter() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, nargs="+", default=[1 << 14, 1 << 16])
    p.add_argument("--d", type=int, default=4)
    p.add_argument("--methods", nargs="+", default=None)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    import stein_coreset as sc
    from stein_coreset import _array_api as aa

    try:
        import cupy
    except ImportError:
        print("gpu_check: CuPy is not installed (pip install '.[gpu]')", file=sys.stderr)
        return 2
    dev = cupy.cuda.Device()
    print(f"CuPy {cupy.__version__}, device {dev.id}: "
          f"{cupy.cuda.runtime.getDeviceProperties(dev.id)['name'].decode()}")
    methods = args.methods or sc.available_methods()
    deterministic = {"standard", "st"}
    failures = []
    header = (f"{'method':<11}{'n':>8}{'size':>6}{'CPU s':>9}{'GPU s':>9}{'ratio':>7}"
              f"{'KSD cpu':>11}{'rel diff':>10}{'to host MB':>11}{'from host MB':>13}  agree")
    print(header)
    print("-" * len(header))
    for n in args.n:
        Xh, Sh = biased_chain(n, args.d, args.seed)
        Xg, Sg = cupy.asarray(Xh), cupy.asarray(Sh)
        size = int(round(np.sqrt(n)))
        for method in methods:
            ref, t_cpu = run(method, Xh, Sh, size, args.seed)
            run(method, Xg[:512], Sg[:512], 16, args.seed)  # warm-up: kernels compile
            before = dict(aa.TRANSFERS)
            res, t_gpu = run(method, Xg, Sg, size, args.seed)
            mb_to = (aa.TRANSFERS["to_host_bytes"] - before.get("to_host_bytes", 0)) / 1e6
            mb_from = (aa.TRANSFERS["from_host_bytes"] - before.get("from_host_bytes", 0)) / 1e6
            ok = all(isinstance(a, cupy.ndarray) and a.device == dev
                     for a in (res.indices, res.weights, res.points))
            rel = abs(res.ksd - ref.ksd) / max(abs(ref.ksd), 1e-300)
            if method in deterministic:
                ok &= np.array_equal(cupy.asnumpy(res.indices), ref.indices)
            ok &= rel <= 1e-6
            if not ok:
                failures.append((method, n))
            print(f"{method:<11}{n:>8}{len(res):>6}{t_cpu:>9.3f}{t_gpu:>9.3f}{t_cpu / t_gpu:>7.2f}"
                  f"{ref.ksd:>11.4g}{rel:>10.1e}{mb_to:>11.2f}{mb_from:>13.2f}  {'yes' if ok else 'NO'}")
    if failures:
        print(f"DISAGREEMENT: {failures}", file=sys.stderr)
        return 1
    print("all methods agree")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
