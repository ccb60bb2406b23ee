"""KT-Swap-LS (Alg. G.2): greedy line-search swaps in the simplex (SPLX) and constant-preserving
(CP) formats."""

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset.algorithms import kt_swap_ls
from stein_coreset.engine.cpu import bridge


def _problem(n=300, seed=0, s=12):
    rng = np.random.default_rng(seed)
    X = 0.7 + 1.5 * rng.standard_normal((n, 2))
    K = sc.SteinKernel(sc.IMQ(1.5)).bind(X, -X)
    idx = rng.choice(n, s, replace=False)
    w = rng.dirichlet(np.ones(s))
    return K, K.dense(), idx, w


def _mmd2(Kd, idx, w):
    return float(w @ Kd[np.ix_(idx, idx)] @ w)


def _swap_one(K, idx, w, fmt):
    """One KT-Swap-LS step: the C++ routine visiting only idx[0] (kt_swap_ls visits them all)."""
    from stein_coreset.algorithms.swap_ls import SWAP_LS_FORMATS
    from stein_coreset.engine.cpu import _core

    dense = np.zeros(K.n)
    dense[idx] = w
    _core.kt_swap_ls(bridge.handle(K), dense, np.asarray(idx[:1], dtype=np.int64),
                     SWAP_LS_FORMATS[fmt])
    out = np.flatnonzero(dense)
    return out, dense[out]


@pytest.mark.parametrize("fmt", ["splx", "cp"])
@pytest.mark.parametrize("seed", range(3))
def test_kt_swap_ls_never_increases_mmd_at_any_swap(fmt, seed):
    K, Kd, idx, w = _problem(seed=seed)
    if fmt == "cp":
        w = w + np.random.default_rng(seed).normal(0, 0.3, w.size)
        w /= w.sum()
    before = _mmd2(Kd, idx, w)
    for i in list(idx):
        pos = np.flatnonzero(idx == i)
        if pos.size == 0:  # swapped out already
            continue
        first = np.concatenate([pos, np.delete(np.arange(idx.size), pos)])
        idx, w = _swap_one(K, idx[first], w[first], fmt)
        after = _mmd2(Kd, idx, w)
        assert after <= before * (1 + 1e-12) + 1e-15
        before = after
    # The whole pass through the public function is non-increasing too.
    K, Kd, idx, w = _problem(seed=seed + 10)
    new_idx, new_w = kt_swap_ls(K, idx, w, fmt)
    assert _mmd2(Kd, new_idx, new_w) <= _mmd2(Kd, idx, w) * (1 + 1e-12)


@pytest.mark.parametrize("fmt", ["splx", "cp"])
def test_single_swap_matches_brute_force_line_search(fmt):
    K, Kd, idx, w = _problem(n=80, seed=3, s=6)
    i = idx[0]
    new_idx, new_w = _swap_one(K, idx, w, fmt)
    # Brute force: remove i, renormalise, then best (k, t) over all k and a fine grid of t plus
    # the closed-form optimum, by direct evaluation of the quadratic form.
    base = np.zeros(K.n)
    base[idx] = w
    base[i] = 0.0
    base /= base.sum()
    best = _mmd2(Kd, idx, w)  # putting i back reproduces the input
    for k in range(K.n):
        ek = np.zeros(K.n)
        ek[k] = 1.0
        a = base @ Kd @ base
        b = base @ Kd[:, k]
        c = Kd[k, k]
        t = (a - b) / (a - 2 * b + c) if a - 2 * b + c > 0 else 0.0
        if fmt == "splx":
            t = min(max(t, 0.0), 1.0)
        v = (1 - t) * base + t * ek
        best = min(best, float(v @ Kd @ v))
    got = _mmd2(Kd, new_idx, new_w)
    assert got == pytest.approx(best, rel=1e-10, abs=1e-14)


def test_kt_swap_ls_splx_output_stays_in_simplex(xp):
    K0, Kd, idx, w = _problem(seed=4, s=15)
    X = K0.U  # identity preconditioner: U = X
    K = sc.SteinKernel(sc.IMQ(1.5)).bind(xp.asarray(X), xp.asarray(-X))
    new_idx, new_w = kt_swap_ls(K, idx, xp.asarray(w), "splx")
    xp.same_place(new_w, K.U)
    wh = xp.to_numpy(new_w)
    assert new_idx.dtype == np.int64 and np.unique(new_idx).size == new_idx.size <= 15
    assert np.all(wh >= 0) and np.all(wh <= 1)
    assert wh.sum() == pytest.approx(1.0, abs=1e-12)
    assert _mmd2(Kd, new_idx, wh) < _mmd2(Kd, idx, w)


def test_kt_swap_ls_cp_output_sums_to_one():
    K, Kd, idx, w = _problem(seed=5, s=15)
    w = w - 0.05
    w /= w.sum()
    new_idx, new_w = kt_swap_ls(K, idx, w, "cp")
    assert new_idx.size <= 15
    assert new_w.sum() == pytest.approx(1.0, abs=1e-12)
    assert _mmd2(Kd, new_idx, new_w) < _mmd2(Kd, idx, w)


def test_kt_swap_ls_single_point_of_full_weight_is_left_alone():
    K, Kd, idx, w = _problem(seed=6)
    new_idx, new_w = kt_swap_ls(K, idx[:1], [1.0], "splx")
    assert list(new_idx) == [idx[0]] and list(new_w) == [1.0]


@pytest.mark.parametrize(
    "args,err,match",
    [
        (([0, 1], [0.5, 0.5], "l1"), ValueError, "fmt must be 'splx' or 'cp'"),
        (([0, 1], [1.5, -0.5], "splx"), ValueError, "non-negative"),
        (([0, 0], [0.5, 0.5], "splx"), ValueError, "distinct"),
        (([0, 1], [0.5, 0.6], "cp"), ValueError, "sum to 1"),
        (([0, 300], [0.5, 0.5], "cp"), ValueError, r"indices must lie in \[0, 300\)"),
        (([0, 1], [0.5], "cp"), ValueError, "same length"),
        (([0.0, 1.0], [0.5, 0.5], "cp"), TypeError, "indices must hold integers"),
    ],
)
def test_kt_swap_ls_bad_input(args, err, match):
    K, _, _, _ = _problem()
    with pytest.raises(err, match=match):
        kt_swap_ls(K, *args)


def _reference_pass(Kd, dense, order, splx):
    """Alg. G.2 from its definition, on the dense matrix: for each visited i, remove it and
    renormalise, line-search every candidate k, and keep the best only if it lowers w^T K w."""
    w = dense.copy()
    for i in order:
        wi = w[i]
        if wi == 0.0 or abs(1.0 - wi) < 1e-9:
            continue
        D_old = w @ Kd @ w
        v = w.copy()
        v[i] = 0.0
        v /= 1.0 - wi
        g = Kd @ v
        D = v @ g
        kd = np.diag(Kd)
        den = D - 2 * g + kd
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(den > 0, (D - g) / den, 0.0)
        if splx:
            t = np.clip(t, 0.0, 1.0)
        Dk = (1 - t) ** 2 * D + 2 * t * (1 - t) * g + t**2 * kd
        k = int(np.argmin(Dk))
        if Dk[k] < D_old * (1 - 1e-12):
            w = (1 - t[k]) * v
            w[k] += t[k]
    return w


@pytest.mark.parametrize("fmt", ["splx", "cp"])
def test_a_whole_pass_matches_the_definition_and_not_the_team(fmt):
    """Every swap of a pass (visiting the support twice) as the definition makes it, on one
    team region of two steps a swap; the same bits on 1, 2 and 3 threads."""
    from stein_coreset.algorithms.swap_ls import SWAP_LS_FORMATS
    from stein_coreset.engine.cpu import _core

    K, Kd, idx, w = _problem(n=2000, seed=4, s=20)
    if fmt == "cp":
        w = w + np.random.default_rng(4).normal(0, 0.3, w.size)
        w /= w.sum()
    dense = np.zeros(K.n)
    dense[idx] = w
    order = np.concatenate([idx, idx]).astype(np.int64)
    want = _reference_pass(Kd, dense, order, fmt == "splx")
    outs = []
    for k in (1, 2, 3):
        d = dense.copy()
        D = _core.kt_swap_ls(bridge.handle(K), d, order, SWAP_LS_FORMATS[fmt], k)
        outs.append(d)
        assert D == pytest.approx(d @ Kd @ d, rel=1e-9)
    np.testing.assert_array_equal(np.flatnonzero(outs[0]), np.flatnonzero(want))
    np.testing.assert_allclose(outs[0], want, rtol=1e-9, atol=1e-13)
    assert not np.array_equal(np.flatnonzero(want), np.sort(idx))  # swaps happened
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
