"""KT-SPLIT, KT-Swap targeting P (Alg. D.3) and Kernel Thinning (Alg. D.2) against definitions."""

import math
import sys
from collections import Counter

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset.algorithms import kernel_thinning, kt_split, kt_swap, stein_thinning
from stein_coreset.engine import KernelMatrix
from stein_coreset.kernels import centred_kernel_matrix


def _stein(n=256, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = 0.5 + 1.3 * rng.standard_normal((n, d))
    return sc.SteinKernel(sc.IMQ(sigma=1.0)).bind(X, -X)


def _mmd2(Kd, idx):
    idx = np.asarray(idx)
    return Kd[np.ix_(idx, idx)].sum() / idx.size**2


def _reference_halve(Kd, seq, log_mult, u):
    """Kernel halving (self-balancing Hilbert walk), written from its definition."""
    left, right, sig2 = [], [], 0.0
    for k in range(len(seq) // 2):
        x1, x2 = seq[2 * k], seq[2 * k + 1]
        b2 = Kd[x1, x1] + Kd[x2, x2] - 2 * Kd[x1, x2]
        a = max(math.sqrt(max(sig2 * b2 * log_mult, 0.0)), b2)
        if sig2 == 0:
            sig2 = max(b2, 0.0)
        elif a != 0:
            sig2 += b2 * max(0.0, 1 + (b2 / a - 2) * sig2 / a)
        a = a if a > 0 else 1.0
        # <psi, k(x1, .) - k(x2, .)> with psi = sum_right k(x, .) - sum_left k(x, .)
        alpha = sum(Kd[r, x1] - Kd[r, x2] for r in right) - sum(Kd[l, x1] - Kd[l, x2] for l in left)
        if u[k] <= 0.5 * (1 - alpha / a):
            left.append(x2), right.append(x1)
        else:
            left.append(x1), right.append(x2)
    return left, right


def _reference_split(Kd, seq, t, delta, uniforms, per_step=False):
    N = len(seq)
    base = 2 * math.log(2 * N * t / delta)
    cores = [list(seq)]
    for j in range(t):
        nxt, off = [], 0
        for c in cores:
            half = len(c) // 2
            log_mult = 2 * math.log(2 / delta) if per_step else base - 2 * j * math.log(2)
            L, R = _reference_halve(Kd, c, log_mult, uniforms[j, off:])
            nxt += [L, R]
            off += half
        cores = nxt
    return cores


@pytest.mark.parametrize("t, grouped", [(1, False), (3, False), (3, True)])
def test_kt_split_equals_reference_halving(t, grouped):
    K = _stein(n=96)
    rng = np.random.default_rng(5)
    seq = rng.integers(0, K.n, size=88)  # with repeats, 88 = 8 * 11
    if grouped:  # repeats next to each other (as SKT passes them): pairs of one point
        seq = np.sort(rng.integers(0, 30, size=88))
    u = rng.random((t, seq.size // 2))
    got = kt_split(K, seq, t, delta=0.5, uniforms=u)
    want = _reference_split(K.dense(), seq, t, 0.5, u)
    assert len(got) == 2**t
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_a_long_kt_split_equals_reference_halving_across_batches_and_chunks(n_threads):
    """The walk's inner products are formed for batches of 32 pairs from a tile over the
    children before the batch, summed in chunks of 512 children, each pair continuing its last
    chunk child by child: 1150 pairs cross batch and chunk bounds (and, on two threads, the
    round whose two halvings run together), with repeats and d = 12, against the definition."""
    rng = np.random.default_rng(8)
    X = 0.5 + 1.3 * rng.standard_normal((1500, 12))
    K = sc.SteinKernel(sc.IMQ(sigma=5.0)).bind(X, -X, n_threads=n_threads)
    seq = rng.integers(0, K.n, size=2300)
    seq[1000:1040] = seq[1000]  # pairs of one point inside a batch
    u = rng.random((2, seq.size // 2))
    got = kt_split(K, seq, 2, delta=0.5, uniforms=u)
    want = _reference_split(K.dense(), seq, 2, 0.5, u)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_kt_split_per_step_delta_uses_delta_in_every_threshold():
    """delta_rule="per_step": a = max(b sigma sqrt(2 log(2 / delta)), b^2) in every round
    (goodpoints.jax's kernel_halve), against the reference walk."""
    K = _stein(n=96)
    rng = np.random.default_rng(6)
    seq = rng.integers(0, K.n, size=88)
    u = rng.random((3, 44))
    got = kt_split(K, seq, 3, delta=0.5, uniforms=u, delta_rule="per_step")
    want = _reference_split(K.dense(), seq, 3, 0.5, u, per_step=True)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    with pytest.raises(ValueError, match="delta_rule"):
        kt_split(K, seq, 3, delta=0.5, uniforms=u, delta_rule="paper")


def test_kt_split_one_round_equals_goodpoints_halve():
    ktc = pytest.importorskip("goodpoints.ktc")  # the `peers` extra

    X = np.random.default_rng(1).normal(size=(200, 2))
    K = centred_kernel_matrix(sc.Gaussian(sigma=1.0), X)
    u = np.random.default_rng(2).random(100)
    want = np.empty((2, 100), dtype=np.int64)
    ktc.halve_K(np.ascontiguousarray(K.dense()), 0.5, u, want)
    got = kt_split(K, np.arange(200), 1, delta=0.5, uniforms=u)
    np.testing.assert_array_equal(np.stack(got), want)


def test_kt_split_partitions_the_input_multiset():
    K = _stein(n=64)
    seq = np.random.default_rng(0).integers(0, 64, size=203)  # odd lengths along the way
    out = kt_split(K, seq, 3, rng=1)
    size = 203 // 8
    assert len(out) == 8 and all(o.size == size and o.dtype == np.int64 for o in out)
    used = Counter(np.concatenate(out).tolist())
    have = Counter(seq.tolist())
    assert all(used[k] <= have[k] for k in used)  # only dropped leftovers go missing
    assert sum(used.values()) == 8 * size


def test_kt_split_same_seed_same_result():
    K = _stein(n=512)
    a = kt_split(K, np.arange(512), 4, rng=np.random.default_rng(3))
    b = kt_split(K, np.arange(512), 4, rng=np.random.default_rng(3))
    c = kt_split(K, np.arange(512), 4, rng=np.random.default_rng(4))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_kt_split_halves_are_closer_than_random_halves():
    X = np.random.default_rng(0).normal(size=(1024, 2))
    K = centred_kernel_matrix(sc.Gaussian(sigma=1.0), X)
    Kd = K.dense()

    def gap(L, R):  # MMD^2 between the two halves
        w = np.zeros(K.n)
        np.add.at(w, L, 1.0 / len(L))
        np.add.at(w, R, -1.0 / len(R))
        return w @ Kd @ w

    kt = [gap(*kt_split(K, np.arange(1024), 1, rng=s)) for s in range(5)]
    perm = [np.random.default_rng(s).permutation(1024) for s in range(5)]
    rnd = [gap(p[:512], p[512:]) for p in perm]
    assert np.median(kt) < 0.2 * np.median(rnd)


def _reference_swap(Kd, I):
    """One pass of Alg. D.3's swaps from the definition: each I_j replaced by the minimiser of
    the coreset's MMD^2 (kept when no point is strictly better)."""
    I = list(I)
    for j in range(len(I)):
        cur = _mmd2(Kd, I)
        vals = [_mmd2(Kd, I[:j] + [i] + I[j + 1 :]) for i in range(Kd.shape[0])]
        best = int(np.argmin(vals))
        if vals[best] < cur - 1e-13 * abs(cur):
            I[j] = best
    return np.array(I)


@pytest.mark.parametrize("order", ["sorted", "given"])
@pytest.mark.parametrize("passes", [1, 3])
def test_kt_swap_equals_reference_swaps(order, passes):
    """'sorted' sweeps the coreset in increasing index order, re-sorted before every sweep
    (goodpoints' kernel_swap); 'given' sweeps the positions as given."""
    K = _stein(n=80, seed=2)
    Kd = K.dense()
    rng = np.random.default_rng(0)
    cands = [rng.integers(0, 80, size=10) for _ in range(4)]
    want = min(cands, key=lambda c: _mmd2(Kd, c))
    for _ in range(passes):
        want = _reference_swap(Kd, np.sort(want) if order == "sorted" else want)
    got = kt_swap(K, cands, passes=passes, order=order)
    np.testing.assert_array_equal(np.sort(got), np.sort(want))
    if order == "given":
        np.testing.assert_array_equal(got, want)


def test_kt_swap_order_is_validated():
    K = _stein(n=40)
    with pytest.raises(ValueError, match="swap_order"):
        kt_swap(K, [np.arange(4)], order="random")


def test_kt_swap_never_increases_mmd():
    K = _stein(n=300, seed=4)
    Kd = K.dense()
    rng = np.random.default_rng(1)
    for trial in range(5):
        cands = [rng.integers(0, 300, size=16) for _ in range(3)]
        base = rng.integers(0, 300, size=16)
        out = kt_swap(K, cands, baseline=base, passes=1 + trial % 2)
        start = min(min(_mmd2(Kd, c) for c in cands), _mmd2(Kd, base))
        assert _mmd2(Kd, out) <= start * (1 + 1e-12)


def test_kt_swap_keeps_a_better_baseline():
    K = _stein(n=400, seed=6)
    st = stein_thinning(K, 16)
    rng = np.random.default_rng(0)
    bad = [rng.integers(0, 400, size=16)]
    out = kt_swap(K, bad, baseline=st)
    Kd = K.dense()
    assert _mmd2(Kd, out) <= _mmd2(Kd, st) * (1 + 1e-12)


def test_kernel_thinning_beats_iid_and_has_m_points():
    X = np.random.default_rng(0).normal(size=(2048, 2))
    K = centred_kernel_matrix(sc.Gaussian(sigma=1.0), X)
    idx = kernel_thinning(K, 32, rng=0)
    assert idx.shape == (32,) and idx.dtype == np.int64
    kt = K.quad(np.bincount(idx, minlength=2048) / 32.0)
    iid = np.median(
        [
            K.quad(np.bincount(np.random.default_rng(s).choice(2048, 32), minlength=2048) / 32.0)
            for s in range(5)
        ]
    )
    assert kt < 0.25 * iid


def test_kernel_thinning_with_multiplicity_and_namespaces(xp):
    rng = np.random.default_rng(0)
    X = 0.3 + rng.standard_normal((200, 2))
    Ks = sc.SteinKernel(sc.IMQ(sigma=1.0))
    Kx = Ks.bind(xp.asarray(X), xp.asarray(-X))
    Kn = Ks.bind(X, -X)
    st = stein_thinning(Kn, 128)
    a = kernel_thinning(Kx, 16, indices=st, rng=7, baseline=st[:16])
    b = kernel_thinning(Kn, 16, indices=st, rng=7, baseline=st[:16])
    np.testing.assert_array_equal(a, b)


def test_kt_bad_input():
    K = _stein(n=64)
    with pytest.raises(ValueError, match="power of two"):
        kernel_thinning(K, 24)
    with pytest.raises(ValueError, match="t"):
        kt_split(K, np.arange(10), 4)
    with pytest.raises(ValueError, match="delta"):
        kt_split(K, np.arange(64), 1, delta=1.5)
    with pytest.raises(ValueError, match="indices"):
        kt_split(K, np.array([0, 64]), 1)
    with pytest.raises(ValueError, match="size"):
        kt_swap(K, [np.arange(4), np.arange(5)])
    with pytest.raises(ValueError, match="baseline"):
        kt_swap(K, [np.arange(4)], baseline=np.arange(3))
    with pytest.raises(TypeError, match="K"):
        kt_swap(np.eye(4), [np.arange(2)])
    assert isinstance(K, KernelMatrix)


def test_results_do_not_depend_on_the_number_of_threads():
    """KT-SPLIT's random streams and every parallel sum are fixed per coreset / chunk, so one
    seed gives one answer whatever OMP_NUM_THREADS is."""
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np, stein_coreset as sc\n"
        "from stein_coreset.algorithms import kt_split, kt_swap, stein_thinning\n"
        "X = np.random.default_rng(0).normal(size=(3000, 3))\n"
        "K = sc.SteinKernel(sc.IMQ(sigma=1.0)).bind(X, -X)\n"
        "c = kt_split(K, np.arange(3000), 3, rng=1)\n"
        "s = stein_thinning(K, 375)\n"
        "print(np.concatenate(c + [kt_swap(K, c, baseline=s), s]).tolist())\n"
    )
    outs = []
    for threads in ("1", "2"):
        env = dict(os.environ, OMP_NUM_THREADS=threads)
        run = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + "/tests",
        )
        outs.append(run.stdout)
    assert outs[0] == outs[1]


def test_skt_more_swap_sweeps_never_raise_the_ksd():
    """Same seed, same KT-SPLIT candidates and shortlist: every further sweep can only lower the
    MMD of each shortlisted coreset, so the default 4 sweeps are at most 1 sweep's KSD."""
    X = 0.7 + 1.5 * np.random.default_rng(3).standard_normal((1024, 2))
    kern = sc.SteinKernel(sc.IMQ(sigma=2.0))
    for seed in range(3):
        one = sc.compress(X, -X, size=32, method="skt", kernel=kern, seed=seed, swap_passes=1)
        dflt = sc.compress(X, -X, size=32, method="skt", kernel=kern, seed=seed)
        assert dflt.ksd <= one.ksd * (1 + 1e-9)


@pytest.mark.parametrize("rule", ["total", "per_step"])
def test_symmetrized_halvings_equal_the_halving_definition_row_by_row(rule):
    """COMPRESS's level of halvings as one round (kernel_thinning.symmetrized_halvings): row l
    is the reference walk on the uniforms of its own seed, then the half its coin picks, with
    the generator drawn seed, coin, seed, coin, ... as B separate calls would draw it; on 1, 2
    and 3 threads (one halving per member, or all pairs together)."""
    from stein_coreset.engine.cpu import _core

    rng0 = np.random.default_rng(11)
    K = _stein(n=120)
    B, N = 5, 40
    blocks = rng0.integers(0, K.n, size=(B, N))
    blocks[1] = np.sort(rng0.integers(0, 12, size=N))  # repeats next to each other
    delta = 0.3
    d = delta if rule == "total" else delta * N
    want_rng = np.random.default_rng(4)
    want = []
    for row in blocks:
        seed = int(want_rng.integers(2**63))
        keep = int(want_rng.integers(2))
        u = _core.kt_split_uniforms(N, 1, seed)
        want.append(_reference_halve(K.dense(), row, 2 * math.log(2 * N / d), u)[keep])
    after = want_rng.bit_generator.state
    kt_mod = sys.modules["stein_coreset.algorithms.kernel_thinning"]  # (the name is shadowed)
    for k in (1, 2, 3):
        rng = np.random.default_rng(4)
        got = kt_mod.symmetrized_halvings(K.with_threads(k), blocks, delta, rng, rule)
        np.testing.assert_array_equal(got, np.array(want))
        assert rng.bit_generator.state == after  # the same draws consumed


def test_kt_halvings_equal_separate_kt_split_calls_on_a_team():
    """The C++ round of B halvings (engine/cpu/src_cpp/kt_split.cpp kt_halvings) gives each row
    what a
    t = 1 kt_split of that row gives for its seed, whether the round runs halving by halving
    or pair by pair on the team (fewer rows than threads), and checks its arguments."""
    from stein_coreset.engine.cpu import bridge

    X = 0.7 + 1.5 * np.random.default_rng(0).standard_normal((3000, 3))
    for B, N in ((6, 512), (1, 2048), (3, 998)):
        blocks = np.random.default_rng(B).integers(0, 3000, size=(B, N))
        seeds = np.arange(17, 17 + B, dtype=np.uint64) * 7919
        for k in (1, 2, 4):
            K = sc.SteinKernel(sc.IMQ(sigma=2.0)).bind(X, -X, n_threads=k)
            got = K.kt_halvings(blocks, 0.2, seeds)
            assert got.shape == (B, 2, N // 2)
            for l in range(B):
                np.testing.assert_array_equal(
                    got[l], K.kt_split(blocks[l], 1, 0.2, int(seeds[l])))
    from stein_coreset.engine.cpu import _core

    with pytest.raises(ValueError, match="one seed per block"):
        _core.kt_halvings(bridge.handle(K), blocks, 0.2, seeds[:1])
    with pytest.raises(IndexError, match="out of range"):
        _core.kt_halvings(bridge.handle(K), blocks + 3000, 0.2, seeds)
