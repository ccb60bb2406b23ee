"""Every CUDA kernel of the ``cuda`` backend once, at small n, each result against the C++.

What ``tools/device/device_run.sh`` runs under ``compute-sanitizer --tool racecheck`` and
``--tool synccheck`` (so small: the sanitizers slow kernels down a hundredfold), then once more
with ``--full`` on grids of one block per multiprocessor (n = 2 x multiprocessors x 256 points),
the size at which every persistent kernel's grid is whole. Both loop modes run (persistent and
graph), so every entry point of the two modules (``kernels``, ``dksd``) is launched; the script
fails if one was not (the compiled modules are wrapped through
``stein_coreset.engine.cuda.config.CONFIG.compiler`` to record the kernels fetched) or if a
result differs from the C++'s.

    python tools/device/kernel_tour.py [--full] [--json tour.json]

On a machine without a GPU, ``--simulate`` runs it on the tests' CPU simulator
(tests/support/cudasim), as the device script's dry run does.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def _simulate():
    """Point the library at the CPU simulator (tests/support/cudasim) instead of CuPy."""
    sys.path.insert(0, str(ROOT / "tests"))
    from support import cudasim

    from stein_coreset.engine.cuda import config as cuda_config
    from stein_coreset.engine.cuda import source as cuda_src

    cp = cudasim.fake_cupy(prelude=cuda_src.nvrtc_prelude())
    sys.modules["cupy"] = cp
    cuda_config.CONFIG.block, cuda_config.CONFIG.warp = 16, 8
    cuda_config.CONFIG.compiler = lambda src, opts, dev: cp.RawModule(code=src, options=opts)
    return cp


class _Recording:
    def __init__(self, module, seen):
        self.module, self.seen = module, seen

    def get_function(self, name):
        self.seen.add(name)
        return self.module.get_function(name)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--full", action="store_true",
                   help="grids of one block per multiprocessor (n = 2 x SMs x block)")
    p.add_argument("--simulate", action="store_true", help="the CPU simulator, no GPU")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    cp = _simulate() if args.simulate else __import__("cupy")

    import stein_coreset as sc
    from stein_coreset.algorithms.amd import LowRankPlusDiagonal, amd
    from stein_coreset.engine.cpu import _core, bridge
    from stein_coreset.engine.cuda import (
        amd as cuda_amd,
    )
    from stein_coreset.engine.cuda import (
        config as cuda_config,
    )
    from stein_coreset.engine.cuda import (
        dksd as cuda_dksd,
    )
    from stein_coreset.engine.cuda import (
        kernel as cuda_kernel,
    )
    from stein_coreset.engine.cuda import (
        source as cuda_src,
    )

    seen: set[str] = set()
    compile_ = cuda_config.CONFIG.compiler

    def recording(src, opts, dev):
        if compile_ is not None:
            return _Recording(compile_(src, opts, dev), seen)
        with cp.cuda.Device(dev):
            return _Recording(cp.RawModule(code=src, options=opts), seen)

    cuda_config.CONFIG.compiler = recording
    # the entry points: extern "C" kernels, and those the two macros instantiate
    entries = {f"amd_lowrank_k{k}" for k in cuda_config.AMD_KPL}
    entries |= {f"dksd_rows_{'full_' if full else ''}d{d}" for full, most in
                cuda_config.DKSD_REGISTER_D.items() for d in range(1, most + 1)}
    for part in cuda_src.MODULES:
        entries |= {e for e in re.findall(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(',
                                          cuda_src.cuda_source(part)) if e != "NAME"}

    sms = int(cp.cuda.Device(0).attributes["MultiProcessorCount"])
    n = 2 * sms * cuda_config.CONFIG.block if args.full else 96
    rng = np.random.default_rng(0)
    X = 0.7 + 1.5 * rng.standard_normal((n, 3))
    Kc = sc.SteinKernel(sc.IMQ(sigma=2.0)).bind(X, -X)
    Kg = sc.SteinKernel(sc.IMQ(sigma=2.0)).bind(cp.asarray(X), -cp.asarray(X)) \
        if not args.simulate else None
    Kcu = cuda_kernel.CudaKernel(int(Kc.base.code), float(Kc.base.sigma), float(Kc.base.beta),
                           cp.asarray(Kc.U), cp.asarray(Kc.T))
    failures, rows = [], []

    def check(name, ok):
        rows.append({"check": name, "ok": bool(ok)})
        print(f"{'ok  ' if ok else 'FAIL'} {name}", flush=True)
        if not ok:
            failures.append(name)

    t0 = time.perf_counter()
    rows_idx = np.arange(0, n, 7, dtype=np.int64)
    check("kp_gram / kp_diag / matvec", np.allclose(
        cp.asnumpy(Kcu.gram(rows_idx)), Kc.block(rows_idx), rtol=1e-12, atol=1e-13)
        and np.allclose(cp.asnumpy(Kcu.diag()), Kc.diag(), rtol=1e-12, atol=1e-13)
        and np.allclose(cp.asnumpy(Kcu.matvec(cp.asarray(np.ones(n) / n))),
                        Kc.matvec(np.ones(n) / n), rtol=1e-11, atol=1e-11))
    m = min(n, 40)
    idx = np.arange(n, dtype=np.int64)[: 1 << int(np.log2(min(n, 128)))]
    dense = np.zeros(n)
    dense[rng.choice(n, 12, replace=False)] = 1.0 / 12
    order = np.flatnonzero(dense)
    for mode in ("persistent", "graph"):
        os.environ["STEIN_CORESET_CUDA_LOOP"] = mode
        check(f"Stein thinning ({mode})",
              np.array_equal(Kcu.stein_thinning(m), Kc.stein_thinning(m)))
        u = _core.kt_split_uniforms(idx.size, 3, 7)
        check(f"KT-SPLIT ({mode})", np.array_equal(
            Kcu.kt_split(idx, 3, 0.5, u), Kc.kt_split(idx, 3, 0.5, 7, u)))
        I1, I2 = idx[:16].copy(), idx[:16].copy()
        Kcu.kt_swap_refine(I1, 1)
        Kc.kt_swap_refine(I2, 1)
        check(f"KT-Swap ({mode})", np.array_equal(I1, I2))
    os.environ["STEIN_CORESET_CUDA_LOOP"] = "persistent"
    a, b = dense.copy(), dense.copy()
    Kcu.kt_swap_ls(a, order, True)
    Kc.kt_swap_ls(b, order, 0)
    check("KT-Swap-LS (persistent)", np.allclose(a, b, rtol=1e-12, atol=1e-15))
    rank = 8
    sw = np.ones(n)
    d0 = np.maximum(np.asarray(Kc.diag(), dtype=np.float64), 0.0)
    uu = rng.random(rank)
    tol = 1e-14 * float(np.sum(d0))
    dg, Ft, piv = cp.asarray(d0), cp.zeros((rank, n)), cp.zeros(rank, dtype=np.int64)
    stop = Kcu.weighted_rpcholesky(cp.asarray(sw), dg, Ft, piv, 0, rank, uu, tol)
    dh, Fh, ph = d0.copy(), np.zeros((rank, n)), np.zeros(rank, dtype=np.int64)
    stop_c = bridge.weighted_rpcholesky_steps(Kc, sw, dh, Fh, ph, 0, rank, uu, tol)
    check("weighted RPCholesky (persistent)",
          stop == stop_c and np.array_equal(cp.asnumpy(piv), ph))
    F = 0.3 * rng.standard_normal((n, 5))
    dgF = np.sum(F * F, axis=1) + rng.random(n)
    ref = amd(LowRankPlusDiagonal(F, dgF), 20)
    tol = cuda_amd.amd_rounding_tolerance(F, dgF - np.sum(F * F, axis=1), 20)
    for k in cuda_config.AMD_KPL:  # every instantiation, on a factor of its largest rank
        r = k * cuda_config.CONFIG.warp
        Fk = 0.3 * rng.standard_normal((n, r)).astype(np.float32)
        res = rng.random(n)
        w0 = np.full(n, 1.0 / n)
        wc, vc = w0.copy(), w0.copy()
        _core.amd_lowrank(Fk, res, wc, vc, 0, 5, 0.01, 1)
        wd, vd = cp.asarray(w0), cp.asarray(w0)
        cuda_amd.amd_lowrank(cp.asarray(Fk), cp.asarray(res), wd, vd, 0, 5, 0.01)
        rtol = cuda_amd.amd_rounding_tolerance(Fk, res, 5, 0.01)
        check(f"fused AMD rank {r}", np.allclose(cp.asnumpy(wd), wc, rtol=rtol, atol=1e-300))
    if Kg is not None:
        got = cp.asnumpy(amd(LowRankPlusDiagonal(cp.asarray(F), cp.asarray(dgF)), 20))
        check("AMD through the engine", np.allclose(got, ref, rtol=tol, atol=1e-300))
    for full, most in cuda_config.DKSD_REGISTER_D.items():  # every register width, and beyond
        for d in range(1, most + 2):
            Ud, Vd = rng.standard_normal((40, d)), rng.standard_normal((40, d))
            Fd = np.ones((40, d, d)) * np.eye(d) if full else np.ones((40, d))
            comps = (np.full(d, cuda_src.KNOWN_BASES["IMQ"], dtype=np.intc), np.full(d, 1.5),
                     np.full(d, -0.5), np.linspace(0.5, 2.0, d))
            ref = _core.dksd_pass(Ud, Vd, Fd.reshape(-1), full, *comps, True, 1)
            got = cuda_dksd.dksd_pass(cp.asarray(Ud), cp.asarray(Vd), cp.asarray(Fd), full,
                                  *comps, True)
            check(f"DKSD pass d={d} {'full' if full else 'diagonal'}",
                  np.isclose(got[0], ref[0], rtol=1e-10)
                  and np.allclose(cp.asnumpy(got[1]), ref[1], rtol=1e-9, atol=1e-12))
    missing = sorted(entries - seen)
    check(f"every kernel launched ({len(seen)} of {len(entries)})", not missing)
    if missing:
        print("not launched:", ", ".join(missing))
    out = {"n": n, "sms": sms, "full": args.full, "seconds": time.perf_counter() - t0,
           "checks": rows, "kernels": sorted(seen), "missing": missing}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
