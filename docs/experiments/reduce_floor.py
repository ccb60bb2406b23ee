"""What limits the distributed path's final KSD: an experiment, not a benchmark.

    python docs/experiments/reduce_floor.py            # n = 2^18, 16 blocks, m = 256 (~1 min)

On the input of asv_benchmarks/scripts/distributed_bench.py (``make_input``: 16 blocks of n / 16
rows, blocks b with b % 8 in {0, 3} burn-in 1.5 z + 6, the rest i.i.d. from P = N(0, I4)) at a
quarter of its scale, it prints the KSD against P of

- (a) standard thinning to m^2 rows, then skt to m (seeds 0, 1, 2): what a user does today;
- the map: skt of each block to f m rows (``--block-factor``), and the block coresets' KSDs;
- reduce 1: skt of the union of the block coresets to m (the library's reduce);
- reduce 2 (not in the library): the best mixture sum_b lambda_b mu_b of the block coresets
  (a B x B simplex QP on their Gram, one pass over the union's kernel), then Resample and KT
  to m; it prints the mixture's own KSD, the input quality the final thinning starts from.

The point it makes: every route lands at about the same final KSD, far above its input's
(the mixture's) KSD, because the final step -- Stein thinning's first m picks refined by
KT-Swap, which wins SKT's shortlist -- has an error floor at m points of its own, which (a)
already reaches from m^2 rows (Rem. 2).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import stein_coreset as sc
from stein_coreset.algorithms.kernel_thinning import kernel_thinning
from stein_coreset.algorithms.resample import resample, standard_thinning
from stein_coreset.algorithms.weights import equal_weights, simplex_weights

D = 4
BURN = (0, 3)  # b % 8 in BURN: a burn-in block


def make_input(n: int, n_blocks: int, seed: int) -> np.ndarray:
    """The distributed bench's input in one process: block b (n / n_blocks rows) is N(0, I_4)
    from ``default_rng([seed, b])``, or burn-in 1.5 z + 6 when b % 8 is in BURN."""
    rows = n // n_blocks
    blocks = []
    for b in range(n_blocks):
        X = np.random.default_rng([seed, b]).standard_normal((rows, D))
        blocks.append(1.5 * X + 6.0 if b % 8 in BURN else X)
    return np.concatenate(blocks)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log2n", type=int, default=18)
    p.add_argument("--blocks", type=int, default=16)
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--block-factor", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    n, B, m = 1 << a.log2n, a.blocks, a.size
    nb = n // B
    X = make_input(n, B, a.seed)
    S = -X
    burn = np.array([b % 8 in BURN for b in range(B)])
    kern = sc.SteinKernel(sc.IMQ(sc.median_bandwidth(X[:: max(1, n // 1000)])))

    sub = standard_thinning(n, min(n, m * m))
    t = time.perf_counter()
    ka = [sc.compress(X[sub], S[sub], size=m, method="skt", kernel=kern, seed=s).ksd
          for s in range(3)]
    print(f"(a) standard thinning to {sub.size}, skt to {m}, seeds 0-2: KSD "
          f"{', '.join(f'{k:.5f}' for k in ka)} ({(time.perf_counter() - t) / 3:.1f} s each)")

    t = time.perf_counter()
    parts = []
    for b in range(B):
        r = sc.compress(X[b * nb:(b + 1) * nb], S[b * nb:(b + 1) * nb], size=a.block_factor * m,
                        method="skt", kernel=kern, seed=b + 1)
        parts.append((np.asarray(r.indices) + b * nb, np.asarray(r.weights), r.ksd))
    ks = np.array([q[2] for q in parts])
    print(f"map: {B} blocks of {nb} to {a.block_factor * m} rows, {time.perf_counter() - t:.1f} s;"
          f" block KSD burn-in {ks[burn].min() if burn.any() else math.nan:.3g}.., "
          f"others {np.median(ks[~burn]):.5f} (median)")
    U = np.concatenate([q[0] for q in parts])
    t = time.perf_counter()
    r1 = sc.compress(X[U], S[U], size=m, method="skt", kernel=kern, seed=99)
    print(f"reduce 1, skt of the union ({U.size} rows): KSD {r1.ksd:.5f} "
          f"({time.perf_counter() - t:.1f} s)")

    t = time.perf_counter()
    K = kern.bind(X[U], S[U])
    offs = np.cumsum([0] + [q[0].size for q in parts])
    G = np.zeros((B, B))
    for b in range(B):
        for c in range(b, B):
            blk = np.asarray(K.block(np.arange(offs[b], offs[b + 1]),
                                     np.arange(offs[c], offs[c + 1])))
            G[b, c] = G[c, b] = parts[b][1] @ blk @ parts[c][1]
    lam = simplex_weights(G, np.full(B, 1.0 / B))
    w = np.concatenate([lam[b] * parts[b][1] for b in range(B)])
    g = np.random.default_rng(7)
    n_prime = m << max(0, math.ceil(math.log2(U.size / m)))
    idx = kernel_thinning(K, m, indices=np.sort(resample(w, n_prime, g, check_input=False)),
                          rng=g, check_input=False)
    uq, ww = equal_weights(idx, m)
    k2 = sc.ksd(X[U[uq]], S[U[uq]], weights=ww, kernel=kern)
    print(f"reduce 2, mixture QP (burn-in blocks' lambda {lam[burn].sum():.3g}; "
          f"mixture KSD {math.sqrt(max(lam @ G @ lam, 0.0)):.5f}) then KT: KSD {k2:.5f} "
          f"({time.perf_counter() - t:.1f} s)")


if __name__ == "__main__":
    main()
