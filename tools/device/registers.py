"""Register and occupancy report of every CUDA kernel, from ptxas through NVRTC (no GPU needed).

    python tools/device/registers.py [--arch sm_90] [--json registers.json]

For each kernel of the two modules (``kernels`` and ``dksd``): registers per thread (as ptxas
gives them, and as allocated, in units of 8), static shared memory, spill stores and stack,
the threads per block it is launched with, and how many such blocks one multiprocessor holds
by registers (a 64K-register file) and by shared memory (228 KiB, at most 48 KiB static per
block). Exit status 1 when a kernel leaves no headroom: it spills, a block of its launch size
does not fit a multiprocessor, or it uses more than ``REGISTER_CEILING`` registers a thread
(within a few of the 255 a thread can address: a compiler that needs a few more would spill),
unless ``EXEMPT`` names it with the reason. The device plan's dry run (device_run.sh) runs it.
"""

from __future__ import annotations

import argparse
import json
import sys

#: Registers a thread may use before a kernel counts as having no headroom (255 addressable).
REGISTER_CEILING = 240
#: Registers and shared memory of one multiprocessor (sm_90).
REGISTER_FILE, SMEM_PER_SM = 65536, 228 * 1024
#: Kernels allowed past REGISTER_CEILING, with why (printed in the report).
EXEMPT = {
    "amd_lowrank_k32": (
        "the fused AMD kernel for ranks 513-1024 keeps a row's 32 columns per lane in "
        "registers (Low-rank Debiasing reaches rank 513 at tau = 0.4 only above n = 2^22.5); "
        "it is launched as a persistent grid of one 256-thread block per multiprocessor "
        "(amd_grid), which its 256 allocated registers fill exactly, with no spill: a second "
        "block is never wanted. A compiler needing 3 more registers would spill to local "
        "memory (slower, not wrong), which this report then fails on"
    ),
}


def launch_threads(name: str, block: int = 256) -> int:
    """Threads per block the host launches ``name`` with: every kernel uses CONFIG.block
    (256); the fused AMD kernels grow by warps while their registers allow (amd_grid), so
    their smallest block, 256, is the one that must fit."""
    return block


def report(arch: str = "sm_90") -> tuple[list[dict], list[str]]:
    from stein_coreset.engine.cuda import nvrtc
    from stein_coreset.engine.cuda.source import MODULES, cuda_source

    rows, failures = [], []
    for module in MODULES:
        for name, use in sorted(nvrtc.resource_usage(arch, cuda_source(module)).items()):
            if name.startswith("__internal"):
                continue
            threads = launch_threads(name)
            alloc = -(-use["registers"] // 8) * 8
            by_regs = REGISTER_FILE // max(alloc * threads, 1)
            by_smem = SMEM_PER_SM // use["smem"] if use["smem"] else 32
            why = []
            if use["spill"]:
                why.append(f"spills {use['spill']} bytes")
            if min(by_regs, by_smem) < 1 or use["smem"] > 48 * 1024:
                why.append("a block does not fit a multiprocessor")
            if use["registers"] > REGISTER_CEILING:
                if name in EXEMPT:
                    why.append("EXEMPT")
                else:
                    why.append(f"{use['registers']} registers > {REGISTER_CEILING}")
            row = {"module": module, "kernel": name, **use, "allocated": alloc,
                   "threads": threads, "blocks_per_sm": min(by_regs, by_smem),
                   "headroom": 255 - use["registers"], "verdict": "; ".join(why) or "ok"}
            rows.append(row)
            if why and why != ["EXEMPT"]:
                failures.append(f"{name}: {row['verdict']}")
    return rows, failures


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    from stein_coreset.engine.cuda import nvrtc

    if nvrtc.find_nvrtc() is None:
        print("register report: no libnvrtc here (pip install nvidia-cuda-nvrtc-cu12)")
        return 1
    rows, failures = report(args.arch)
    print(f"register report ({args.arch}, ceiling {REGISTER_CEILING} registers a thread):")
    print(f"{'kernel':<22}{'regs':>5}{'alloc':>6}{'smem':>7}{'spill':>6}{'threads':>8}"
          f"{'blocks/SM':>10}{'headroom':>9}  verdict")
    for r in rows:
        print(f"{r['kernel']:<22}{r['registers']:>5}{r['allocated']:>6}{r['smem']:>7}"
              f"{r['spill']:>6}{r['threads']:>8}{r['blocks_per_sm']:>10}{r['headroom']:>9}  "
              f"{r['verdict']}")
    for name, why in EXEMPT.items():
        print(f"exempt: {name}: {why}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"arch": args.arch, "ceiling": REGISTER_CEILING, "kernels": rows,
                       "exempt": EXEMPT, "failures": failures}, f, indent=1)
    if failures:
        print("NO HEADROOM: " + "; ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
