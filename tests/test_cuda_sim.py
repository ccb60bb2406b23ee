"""The ``cuda`` backend's kernels and their host driver, run on the CPU simulator.

tests/support/cudasim compiles the CUDA sources of stein_coreset/engine/cuda/src_cuda with g++
against a model of CUDA's execution (threads, __syncthreads, shared memory per block, concurrent
blocks for the grid barriers, graphs as replayed launches) and stands in for CuPy, so
:class:`stein_coreset.engine.cuda.kernel.CudaKernel` runs unchanged. Every kernel is checked
against the C++ evaluator and loops on the same input, as tests/test_cuda_backend.py does on a
GPU, but on any machine with a C++ compiler: a kernel's logic is tested in CI, which has no GPU.
"""

import shutil

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset.engine import KernelMatrix, get_backend
from stein_coreset.engine.cpu import bridge
from stein_coreset.engine.cuda import config as cuda_config
from stein_coreset.kernels import centred_kernel_matrix

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the simulator needs g++")

N = 150
BASES = [sc.IMQ(sigma=2.0), sc.IMQ(sigma=1.5, beta=-0.3), sc.Gaussian(sigma=1.7),
         sc.Matern(sigma=2.0, nu=1.5), sc.Matern(sigma=2.0, nu=2.5)]


@pytest.fixture
def sim(monkeypatch):
    from support import cudasim

    return cudasim.install(monkeypatch)


@pytest.fixture(params=["persistent", "graph"])
def loop_mode(request, monkeypatch):
    monkeypatch.setenv("STEIN_CORESET_CUDA_LOOP", request.param)
    return request.param


def _chain(n=N, d=3, seed=7):
    rng = np.random.default_rng(seed)
    X = 0.7 + 1.5 * rng.standard_normal((n, d))
    return X, -X


def _pair(cp, base=BASES[0], kind="stein", n=N, d=3):
    """(C++ kernel matrix, the CudaKernel of the same matrix on the simulator)."""
    from stein_coreset.engine.cuda.kernel import CudaKernel

    X, S = _chain(n, d)
    if kind == "centred":
        Kc = centred_kernel_matrix(base, X)
    elif kind == "stein":
        Kc = sc.SteinKernel(base).bind(X, S)
    else:
        Kc = KernelMatrix(base, X)
    assert Kc.backend.name == "cpu"

    def dev(a):
        return None if a is None else cp.asarray(a)

    Kg = CudaKernel(int(Kc.base.code), float(Kc.base.sigma), float(Kc.base.beta), dev(Kc.U),
                    dev(Kc.T), dev(Kc.mean), Kc.mean_all)
    return Kc, Kg


CUDA = get_backend("cuda")


class _OnDevice:
    """What the cuda backend's loops need of a kernel matrix: the simulated CudaKernel in its
    cache."""

    backend = CUDA

    def __init__(self, Kg):
        self._cache = {"cuda": Kg}
        self.n = Kg.n


@pytest.mark.parametrize("base", BASES, ids=repr)
@pytest.mark.parametrize("kind", ["stein", "base", "centred"])
def test_simulated_blocks_diag_and_products_match_cpp(sim, base, kind):
    Kc, Kg = _pair(sim, base, kind)
    rows = np.array([0, 5, N - 1, 5, 123])
    np.testing.assert_allclose(sim.asnumpy(Kg.gram(rows)), Kc.block(rows), rtol=1e-12,
                               atol=1e-13)
    cols = np.array([3, 3, 100])
    np.testing.assert_allclose(sim.asnumpy(Kg.gram(rows, cols)), Kc.block(rows, cols),
                               rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(sim.asnumpy(Kg.diag()), Kc.diag(), rtol=1e-12, atol=1e-13)
    w = np.random.default_rng(0).random(Kc.n)
    np.testing.assert_allclose(sim.asnumpy(Kg.matvec(sim.asarray(w))), Kc.matvec(w),
                               rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("base", BASES[::2], ids=repr)
def test_simulated_stein_thinning_picks_what_the_cpp_loop_picks(sim, base, loop_mode):
    Kc, Kg = _pair(sim, base)
    for m in (1, 7, 40):
        np.testing.assert_array_equal(CUDA.stein_thinning(_OnDevice(Kg), m),
                                      Kc.stein_thinning(m))


def test_simulated_persistent_stein_thinning_spans_launches(sim, monkeypatch):
    """More steps than one persistent launch: the state carried between launches."""

    monkeypatch.setattr(cuda_config, "PERSISTENT_STEPS", 9)
    monkeypatch.setattr(cuda_config, "GRAPH_STEPS", 4)
    Kc, Kg = _pair(sim)
    for mode in ("persistent", "graph"):
        monkeypatch.setenv("STEIN_CORESET_CUDA_LOOP", mode)
        np.testing.assert_array_equal(Kg.stein_thinning(31), Kc.stein_thinning(31))


@pytest.mark.parametrize("kind", ["stein", "centred"])
@pytest.mark.parametrize("n_idx,t", [(128, 3), (150, 4), (64, 6)])
def test_simulated_kt_split_matches_cpp_for_the_same_seed(sim, kind, n_idx, t, loop_mode):
    Kc, Kg = _pair(sim, kind=kind)
    idx = np.random.default_rng(n_idx).integers(0, Kc.n, n_idx).astype(np.int64)
    a = Kc.kt_split(idx, t, 0.5, 99)
    b = CUDA.kt_split(_OnDevice(Kg), idx, t, 0.5, 99)
    assert b.shape == a.shape
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("per_launch", [None, 2])
def test_simulated_kt_halvings_match_cpp(sim, loop_mode, per_launch, monkeypatch):
    """COMPRESS's level of halvings as one device round (coreset l the row l, its uniforms
    from its own seed): each row split as the C++ splits it, also when a persistent round
    takes the rows a few coresets at a time (per_launch)."""

    if per_launch:
        monkeypatch.setattr(cuda_config, "KTS_MAX_CORESETS", per_launch)
    Kc, Kg = _pair(sim)
    blocks = np.random.default_rng(2).integers(0, Kc.n, size=(5, 96)).astype(np.int64)
    blocks[3] = np.sort(blocks[3] % 6)  # repeated points
    seeds = np.array([3, 1, 4, 1, 5], dtype=np.uint64) * 2654435761
    a = Kc.kt_halvings(blocks, 0.25, seeds)
    b = CUDA.kt_halvings(_OnDevice(Kg), blocks, 0.25, seeds)
    assert b.shape == a.shape == (5, 2, 48)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("sorted_sweeps", [False, True])
@pytest.mark.parametrize("passes", [1, 3])
def test_simulated_kt_swap_matches_cpp(sim, passes, sorted_sweeps):
    Kc, Kg = _pair(sim)
    I0 = np.random.default_rng(3).integers(0, Kc.n, 12).astype(np.int64)
    a, b = I0.copy(), I0.copy()
    na = Kc.kt_swap_refine(a, passes, sorted_sweeps)
    nb = CUDA.kt_swap_refine(_OnDevice(Kg), b, passes, sorted_sweeps)
    np.testing.assert_array_equal(a, b)
    assert na == nb > 0


@pytest.mark.parametrize("kind", ["stein", "centred"])
@pytest.mark.parametrize("fmt", [0, 1])
@pytest.mark.parametrize("steps_per_launch", [4096, 5])
def test_simulated_kt_swap_ls_matches_cpp(sim, kind, fmt, steps_per_launch, monkeypatch):
    """KT-Swap-LS (Alg. G.2) on the device: the C++'s swaps, weights (to the last bits: same
    terms in the same order) and final w^T K w, simplex (fmt 0) or constant-preserving (1),
    in one launch or spread over several; a visited point of weight 0 or 1 is skipped."""

    monkeypatch.setattr(cuda_config, "PERSISTENT_STEPS", steps_per_launch)
    monkeypatch.setenv("STEIN_CORESET_CUDA_LOOP", "persistent")
    Kc, Kg = _pair(sim, kind=kind)
    rng = np.random.default_rng(fmt)
    supp = rng.choice(Kc.n, 14, replace=False)
    w = rng.random(14) + 0.2
    if fmt == 1:
        w[::4] *= -0.3
    dense = np.zeros(Kc.n)
    dense[supp] = w / w.sum()
    order = np.concatenate([supp, supp[:5], [int(np.flatnonzero(dense == 0)[0])]])
    a, b = dense.copy(), dense.copy()
    Da = Kc.kt_swap_ls(a, order, fmt)
    Db = CUDA.kt_swap_ls(_OnDevice(Kg), b, order, fmt)
    assert not np.array_equal(np.flatnonzero(a), np.sort(supp))  # some swaps happened
    np.testing.assert_array_equal(np.flatnonzero(a), np.flatnonzero(b))
    np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-15)
    assert Db == pytest.approx(Da, rel=1e-12)


@pytest.mark.parametrize("blocks", ["1", "2"])
def test_simulated_argmin_loops_on_fewer_blocks_pick_the_same(sim, blocks, monkeypatch):
    """STEIN_CORESET_CUDA_LOOP_BLOCKS caps the persistent argmin loops' grid below one block per
    multiprocessor (3 here): Stein thinning, KT-SPLIT and KT-Swap-LS still pick as the C++
    does, each block now sweeping more of the points per step."""
    monkeypatch.setenv("STEIN_CORESET_CUDA_LOOP", "persistent")
    monkeypatch.setenv("STEIN_CORESET_CUDA_LOOP_BLOCKS", blocks)
    Kc, Kg = _pair(sim)
    np.testing.assert_array_equal(CUDA.stein_thinning(_OnDevice(Kg), 40),
                                  Kc.stein_thinning(40))
    idx = np.random.default_rng(5).integers(0, Kc.n, 128).astype(np.int64)
    np.testing.assert_array_equal(CUDA.kt_split(_OnDevice(Kg), idx, 3, 0.5, 99),
                                  Kc.kt_split(idx, 3, 0.5, 99))
    dense = np.zeros(Kc.n)
    supp = np.random.default_rng(6).choice(Kc.n, 14, replace=False)
    dense[supp] = 1.0 / 14
    order = np.concatenate([supp, supp[:5]])
    a, b = dense.copy(), dense.copy()
    Da = Kc.kt_swap_ls(a, order, 0)
    Db = CUDA.kt_swap_ls(_OnDevice(Kg), b, order, 0)
    np.testing.assert_array_equal(np.flatnonzero(a), np.flatnonzero(b))
    assert Db == pytest.approx(Da, rel=1e-12)
    grids = {}
    for name, nb, _ in sim.launch_log:
        grids.setdefault(name, set()).add(nb)
    for name in ("st_persistent", "kts_persistent", "ksls_persistent"):
        assert grids[name] == {int(blocks)}


def test_loop_blocks_caps_the_grid_and_refuses_nonsense(monkeypatch):
    from stein_coreset.engine.cuda.config import loop_blocks

    monkeypatch.delenv("STEIN_CORESET_CUDA_LOOP_BLOCKS", raising=False)
    assert loop_blocks(132) == 132
    monkeypatch.setenv("STEIN_CORESET_CUDA_LOOP_BLOCKS", "33")
    assert loop_blocks(132) == 33 and loop_blocks(16) == 16
    for bad in ("0", "-4", "many"):
        monkeypatch.setenv("STEIN_CORESET_CUDA_LOOP_BLOCKS", bad)
        with pytest.raises(ValueError, match="positive integer"):
            loop_blocks(132)


def _rpc_state(K, n, rank, seed):
    """(sw, d, Ft, pivots, u, tol) at the start of weighted RPCholesky, as rpcholesky.py sets
    it up: weights with zeros, d = diag(K) w."""
    rng = np.random.default_rng(seed)
    w = rng.random(n)
    w[::9] = 0.0
    w /= w.sum()
    sw = np.sqrt(w)
    d = np.asarray(K.diag(), dtype=np.float64) * w
    d = np.where(d > 0.0, d, 0.0)
    Ft = np.zeros((rank, n))
    piv = np.zeros(rank, dtype=np.int64)
    return sw, d, Ft, piv, rng.random(rank), 1e-14 * float(np.sum(d))


@pytest.mark.parametrize("kind", ["stein", "centred", "base"])
@pytest.mark.parametrize("n,rank,chunks", [(150, 12, 1), (150, 12, 4), (37, 30, 2), (7, 5, 1)])
def test_simulated_weighted_rpcholesky_matches_cpp(sim, kind, n, rank, chunks):
    """The device loop draws the C++'s pivots and computes its factor term by term (the same
    bits), its residual diagonal too, whether run in one launch or in several."""
    Kc, Kg = _pair(sim, kind=kind, n=n)
    sw, d, Ft, piv, u, tol = _rpc_state(Kc, n, rank, seed=n + rank)
    dc, Fc, pc = d.copy(), Ft.copy(), piv.copy()
    dd, Fd, pd = sim.asarray(d), sim.asarray(Ft), sim.asarray(piv)
    swd = sim.asarray(sw)
    bounds = np.linspace(0, rank, chunks + 1).astype(int)
    for i0, i1 in zip(bounds[:-1], bounds[1:], strict=True):
        rc = bridge.weighted_rpcholesky_steps(Kc, sw, dc, Fc, pc, i0, i1, u[i0:i1], tol)
        rg = Kg.weighted_rpcholesky(swd, dd, Fd, pd, i0, i1, u[i0:i1], tol)
        assert rg == rc
    np.testing.assert_array_equal(np.asarray(pd), pc)
    assert len(set(pc[:rc].tolist())) == rc  # distinct pivots
    np.testing.assert_allclose(np.asarray(Fd), Fc, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(np.asarray(dd), dc, rtol=1e-12, atol=1e-15)


def test_simulated_weighted_rpcholesky_stops_where_the_cpp_stops(sim):
    """A kernel matrix of rank 4 (four distinct points, repeated): the residual vanishes and
    both loops stop at the same step, with the same pivots."""
    from stein_coreset.engine.cuda.kernel import CudaKernel

    X = np.repeat(np.random.default_rng(2).standard_normal((4, 3)), 12, axis=0)
    Kc = KernelMatrix(sc.Gaussian(sigma=1.5), X)
    Kg = CudaKernel(int(Kc.base.code), float(Kc.base.sigma), float(Kc.base.beta),
                    sim.asarray(Kc.U))
    sw, d, Ft, piv, u, tol = _rpc_state(Kc, 48, 10, seed=5)
    dd, Fd, pd = sim.asarray(d), sim.asarray(Ft), sim.asarray(piv)
    rc = bridge.weighted_rpcholesky_steps(Kc, sw, d, Ft, piv, 0, 10, u, tol)
    rg = Kg.weighted_rpcholesky(sim.asarray(sw), dd, Fd, pd, 0, 10, u, tol)
    assert rg == rc < 10
    np.testing.assert_array_equal(np.asarray(pd)[:rc], piv[:rc])
    with pytest.raises(ValueError, match="rank"):
        Kg.weighted_rpcholesky(sim.asarray(sw), dd, sim.zeros((5000, 48)), sim.zeros(5000,
                               dtype=np.int64), 0, 1, u, tol)


def _amd_problem(n, r, seed=0):
    """(F float32, res, w0) of an AMD problem: a support with holes, positive residual."""
    rng = np.random.default_rng(seed)
    F = (0.5 * rng.standard_normal((n, r))).astype(np.float32)
    res = rng.random(n)
    w = rng.random(n)
    w[::7] = 0.0
    return F, res, w / w.sum()


@pytest.mark.parametrize("n,r,t0,steps", [
    (150, 5, 0, 9),     # one lane's column each (KPL 1 at the simulator's 8-lane warps)
    (61, 20, 3, 6),     # a later round (t0 > 0), r not a multiple of the warp (KPL 4)
    (5, 3, 0, 4),       # fewer rows than warps: most warps hold no row
    (90, 130, 0, 3),    # KPL 32 (r > 16 warps of 8 columns)
    (40, 7, 2, 0),      # no steps: w, v untouched
])
def test_simulated_fused_amd_matches_the_cpp_steps(sim, n, r, t0, steps):
    """The fused AMD kernel's iterates are the C++ loop's, up to the order of double sums."""
    from stein_coreset.engine.cpu import _core
    from stein_coreset.engine.cuda import amd as cuda_amd

    F, res, w0 = _amd_problem(n, r)
    eta = 0.05
    wc, vc = w0.copy(), w0.copy()
    _core.amd_lowrank(F, res, wc, vc, t0, steps, eta, 1)
    wd, vd = sim.asarray(w0), sim.asarray(w0)
    cuda_amd.amd_lowrank(sim.asarray(F), sim.asarray(res), wd, vd, t0, steps, eta)
    np.testing.assert_allclose(np.asarray(wd), wc, rtol=1e-12, atol=0)
    np.testing.assert_allclose(np.asarray(vd), vc, rtol=1e-12, atol=0)
    assert np.all(np.asarray(wd)[::7] == 0.0)  # off the support for good
    if steps:
        assert not np.allclose(wc, w0)  # the steps moved the weights


def test_simulated_fused_amd_spans_launches_and_underflow(sim, monkeypatch):
    """Steps split over persistent launches carry F^T w, F^T v and the pending normalisation
    between them; a large step size drives weights to underflow (log domain, v_i = 0)."""
    from stein_coreset.engine.cpu import _core
    from stein_coreset.engine.cuda import amd as cuda_amd

    monkeypatch.setattr(cuda_config, "PERSISTENT_STEPS", 4)
    F, res, w0 = _amd_problem(70, 6, seed=1)
    for eta, steps in ((0.05, 11), (400.0, 9)):
        wc, vc = w0.copy(), w0.copy()
        _core.amd_lowrank(F, res, wc, vc, 0, steps, eta, 1)
        wd, vd = sim.asarray(w0), sim.asarray(w0)
        seen = []
        cuda_amd.amd_lowrank(sim.asarray(F), sim.asarray(res), wd, vd, 0, steps, eta, seen.append)
        assert seen == sorted({min(s, steps) for s in range(4, steps + 4, 4)})
        np.testing.assert_allclose(np.asarray(wd), wc, rtol=1e-11, atol=1e-300)
        np.testing.assert_allclose(np.asarray(vd), vc, rtol=1e-11, atol=1e-300)
    assert np.count_nonzero(vc == 0.0) > np.count_nonzero(w0 == 0.0)  # some v_i underflowed


@pytest.mark.parametrize("n,r,grid", [
    (90, 20, (3, 32)),     # blocks of four warps: more rows than two warps of a block take
    (1600, 5, (3, 64)),    # as many warps as the kernel's limit allows
    (40, 7, (3, 16)),      # few rows: the base block
])
def test_simulated_fused_amd_with_larger_blocks_matches_the_cpp_steps(monkeypatch, n, r, grid):
    """Blocks of more warps than BLOCK (the device's limit for the kernel permitting) change
    only the order of the double sums: the iterates are the C++ loop's."""
    from support import cudasim

    from stein_coreset.engine.cpu import _core
    from stein_coreset.engine.cuda import amd as cuda_amd

    sim = cudasim.install(monkeypatch, max_threads=64)
    assert cuda_amd.amd_grid(n, 3, 64) == grid
    F, res, w0 = _amd_problem(n, r, seed=2)
    eta, steps = 0.05, 7
    wc, vc = w0.copy(), w0.copy()
    _core.amd_lowrank(F, res, wc, vc, 2, steps, eta, 1)
    wd, vd = sim.asarray(w0), sim.asarray(w0)
    cuda_amd.amd_lowrank(sim.asarray(F), sim.asarray(res), wd, vd, 2, steps, eta)
    assert {(nb, t) for name, nb, t in sim.launch_log if name.startswith("amd")} == {grid}
    np.testing.assert_allclose(np.asarray(wd), wc, rtol=1e-12, atol=0)
    np.testing.assert_allclose(np.asarray(vd), vc, rtol=1e-12, atol=0)
    assert not np.allclose(wc, w0)


def test_fused_amd_grid_grows_blocks_while_warps_have_rows():
    """One block per multiprocessor (fewer for tiny n), BLOCK threads, grown by whole warps
    up to the kernel's limit while each warp keeps about a batch of WARP rows."""
    from stein_coreset.engine.cuda import amd as cuda_amd
    from stein_coreset.engine.cuda import config as cuda_config

    W, B = cuda_config.CONFIG.warp, cuda_config.CONFIG.block
    assert cuda_amd.amd_grid(1 << 20, 132, 512) == (132, 512)
    assert cuda_amd.amd_grid(1 << 20, 132, 1024) == (132, 1024)
    assert cuda_amd.amd_grid(1 << 16, 132, 1024) == (132, 16 * W)  # 31 rows a warp
    assert cuda_amd.amd_grid(1 << 12, 132, 1024) == (132, B)
    assert cuda_amd.amd_grid(100, 132, 1024) == (13, B)
    assert cuda_amd.amd_grid(1 << 20, 132, 320) == (132, 320)  # the kernel's registers bound it
    for n in (1, 7, 1000, 1 << 14, 1 << 17, 1 << 22):
        for sms, most in ((1, 1024), (16, 320), (132, 736), (144, 1024)):
            nb, threads = cuda_amd.amd_grid(n, sms, most)
            assert 1 <= nb <= sms and threads % W == 0
            assert B <= threads <= min(cuda_config.AMD_MAX_BLOCK, most)
            if threads > B:  # every warp of the grid still gets close to a batch of rows
                assert n / (nb * (threads // W - 1)) > W


def test_fused_amd_refuses_a_rank_it_does_not_hold(sim):
    from stein_coreset.engine.cuda import amd as cuda_amd
    from stein_coreset.engine.cuda import config as cuda_config

    F, res, w0 = _amd_problem(10, 3)
    big = sim.zeros((10, cuda_config.CONFIG.warp * cuda_config.AMD_KPL[-1] + 1), dtype=np.float32)
    with pytest.raises(ValueError, match="rank"):
        cuda_amd.amd_lowrank(big, sim.asarray(res), sim.asarray(w0), sim.asarray(w0), 0, 2, 0.1)
    with pytest.raises(ValueError, match="contiguous"):
        cuda_amd.amd_lowrank(sim.asarray(F), sim.asarray(res), sim.asarray(w0)[::2],
                          sim.asarray(w0), 0, 2, 0.1)


def _dksd_problem(n, d, full, comps, seed=5):
    rng = np.random.default_rng(seed)
    U = 1.2 * rng.standard_normal((n, d))
    V = rng.standard_normal((n, d))
    F = 0.5 + 0.3 * rng.standard_normal((n, d, d) if full else (n, d))
    if comps == "shared":
        codes, sig, bet = [0] * d, [1.3] * d, [-0.5] * d
    else:  # one base kernel per component: every compiled one in turn (and IMQ beta -0.3)
        from stein_coreset.engine.cuda.source import KNOWN_BASES

        known = sorted(KNOWN_BASES.values())
        codes = np.resize(known + [KNOWN_BASES["IMQ"]], d)
        sig = np.resize(np.resize([1.1, 0.9, 2.0, 1.5, 0.7], len(known) + 1), d)
        bet = np.resize([-0.5] * len(known) + [-0.3], d)
    return (U, V, F, np.array(codes, dtype=np.intc), np.array(sig, dtype=float),
            np.array(bet, dtype=float), np.linspace(0.5, 2.0, d))


@pytest.mark.parametrize("full", [False, True], ids=["diagonal", "full"])
@pytest.mark.parametrize("comps", ["shared", "per_component"])
@pytest.mark.parametrize("need_grad", [False, True], ids=["value", "adjoints"])
@pytest.mark.parametrize("n,d", [(37, 3), (5, 5), (150, 2), (20, 9)])
def test_simulated_dksd_pass_is_the_cpp_pass(sim, full, comps, need_grad, n, d):
    """The CUDA rows of the DKSD pair pass give the C++ pass's value and adjoints to rounding:
    the same terms (radial.inc), a row's pairs in column order (the C++ sums them in vectorised
    column blocks, so the last bits differ); the adjoint sums in registers (d <= 8 diagonal, 4
    full) or in device memory (d = 5 full, d = 9)."""
    from stein_coreset.engine.cpu import _core
    from stein_coreset.engine.cuda import dksd as cuda_dksd

    U, V, F, codes, sig, bet, lam = _dksd_problem(n, d, full, comps)
    ref = _core.dksd_pass(U, V, F.reshape(-1), full, codes, sig, bet, lam, need_grad, 2)
    got = cuda_dksd.dksd_pass(sim.asarray(U), sim.asarray(V), sim.asarray(F), full, codes, sig,
                          bet, lam, need_grad)
    assert got[0] == pytest.approx(ref[0], rel=1e-12, abs=1e-15)
    if not need_grad:
        assert got[1] is None and got[2] is None
        return
    assert got[1].shape == (n, d) and got[2].shape == F.shape
    for g, r in ((got[1], ref[1]), (got[2], ref[2])):
        np.testing.assert_allclose(np.asarray(g), r, rtol=1e-11, atol=1e-13 * np.abs(r).max())


def test_simulated_dksd_pass_refuses_what_it_cannot_run(sim):
    from stein_coreset.engine.cuda import dksd as cuda_dksd

    U, V, F, codes, sig, bet, lam = _dksd_problem(6, 2, False, "shared")
    a = [sim.asarray(U), sim.asarray(V), sim.asarray(F)]
    with pytest.raises(ValueError, match="one entry per coordinate"):
        cuda_dksd.dksd_pass(*a, False, codes[:1], sig, bet, lam, False)
    with pytest.raises(ValueError, match="unknown base kernel code"):
        cuda_dksd.dksd_pass(*a, False, np.array([0, 7], dtype=np.intc), sig, bet, lam, False)
    with pytest.raises(ValueError, match="F must have 12 entries"):
        cuda_dksd.dksd_pass(*a[:2], sim.asarray(F[:3]), False, codes, sig, bet, lam, False)
    with pytest.raises(ValueError, match="at least 2 points"):
        cuda_dksd.dksd_pass(a[0][:1], a[1][:1], a[2][:1], False, codes, sig, bet, lam, False)


def test_every_compiled_base_kernel_is_simulated():
    """The CUDA source knows the base kernels the C++ knows (one list,
    engine/shared/base_kernels.inc,
    which both include), with codes 0, 1, 2, ..., and BASES holds each of them, so the tests
    above compare every compiled kernel's CUDA entries with its C++ ones."""
    from stein_coreset.engine import COMPILED_KERNELS
    from stein_coreset.engine.cpu import bridge
    from stein_coreset.engine.cuda import source as cuda_src

    codes = bridge.BASE_KERNEL_CODES
    assert cuda_src.KNOWN_BASES == codes
    assert sorted(codes.values()) == list(range(len(codes)))
    assert {b.code for b in BASES} == set(codes.values())
    assert {type(b) for b in BASES} == set(COMPILED_KERNELS)
    assert "enum BaseKind" not in cuda_src.nvrtc_prelude()  # it comes from the shared list
    src = cuda_src.cuda_source()
    assert src.startswith(cuda_src.nvrtc_prelude()) and src.count("enum BaseKind") == 1


def test_simulator_catches_a_wrong_kernel(monkeypatch):
    """The comparison can fail: Stein thinning that adds k_P once instead of twice is caught."""
    from support import cudasim

    from stein_coreset.engine.cuda import source as cuda_src

    assert cuda_src.cuda_source().count("s += 2.0 * kp_entry(K, j, i);") == 2
    cp = cudasim.install(monkeypatch, edit=lambda src: src.replace(
        "s += 2.0 * kp_entry(K, j, i);", "s += kp_entry(K, j, i);"))
    Kc, Kg = _pair(cp)
    assert not np.array_equal(Kg.stein_thinning(40), Kc.stein_thinning(40))


def test_simulator_catches_a_missing_warp_reduction(monkeypatch):
    """AMD whose rows' dot products skip the sum over the warp's lanes is caught (the
    shuffles are simulated, not assumed)."""
    from support import cudasim

    from stein_coreset.engine.cpu import _core
    from stein_coreset.engine.cuda import amd as cuda_amd
    from stein_coreset.engine.cuda import source as cuda_src

    assert cuda_src.cuda_source().count("g = warp_sum(g);") == 1
    cp = cudasim.install(monkeypatch, edit=lambda src: src.replace("g = warp_sum(g);", ""))
    F, res, w0 = _amd_problem(60, 20)
    wc, vc = w0.copy(), w0.copy()
    _core.amd_lowrank(F, res, wc, vc, 0, 5, 0.05, 1)
    wd = cp.asarray(w0)
    cuda_amd.amd_lowrank(cp.asarray(F), cp.asarray(res), wd, cp.asarray(w0), 0, 5, 0.05)
    # outside the tolerance the device check uses (F's float32 rounding, to first order)
    tol = cuda_amd.amd_rounding_tolerance(F, res, 5, 0.05)
    assert 0 < tol < 1e-3
    assert not np.allclose(np.asarray(wd), wc, rtol=tol, atol=0)


def test_simulator_rewrites_shared_declarations_per_block():
    from support import cudasim

    out = cudasim.rewrite_shared("__shared__ long long a[4], b[N]; __shared__ bool last;")
    assert out == ("auto& a = sim::shared<long long[4]>(0); "
                   "auto& b = sim::shared<long long[N]>(1); "
                   "auto& last = sim::shared<bool>(2);")



def test_buffers_for_device_arrays_are_checked_against_the_device_memory(sim, monkeypatch):
    """The stand-in CuPy's device has 8 GiB free of 16: a larger buffer for its arrays is
    refused with the estimate and the device's figures; host arrays keep the host's limit."""
    from stein_coreset import _validation as val

    monkeypatch.setattr(val, "physical_memory", lambda: 32 * 2**30)
    a = sim.zeros(3)
    val.check_buffer(7.5 * 2**30, "rank", "a test buffer", like=a)
    with pytest.raises(ValueError, match=r"rank: a test buffer would need 9 GiB of device "
                                         r"memory; 8 GiB of 16 GiB are free on CUDA device 0"):
        val.check_buffer(9 * 2**30, "rank", "a test buffer", like=a)
    val.check_buffer(9 * 2**30, "rank", "a test buffer", like=np.zeros(3))  # host: 9 GiB fits


# ---- the persistent kernels' safety: co-residency guaranteed, never assumed ------------------

def _st_persistent_args(cp, Kg, nb, m=20):
    """The arguments of one st_persistent launch of m steps on nb blocks, and its barrier."""
    bar = cp.zeros(2, dtype=np.uint32)
    args = Kg._params + (Kg.diag(), cp.empty(2 * nb), cp.empty(2 * nb, dtype=np.int64),
                         cp.asarray(np.array([0, -1], dtype=np.int64)), bar,
                         cp.zeros(m, dtype=np.int64), np.int64(m))
    return args, bar


def test_a_persistent_grid_larger_than_the_device_holds_is_refused_at_launch(monkeypatch):
    """3 multiprocessors x 2 blocks: a grid of 7 is refused before anything runs, naming the
    kernel (and the driver's cooperative launch refuses it too); a grid of 6 runs. A kernel
    whose block no longer fits a multiprocessor is refused when its grid is sized."""
    from support import cudasim

    from stein_coreset.engine.cuda import launch as cuda_launch

    cp = cudasim.install(monkeypatch, blocks_per_sm=2)
    Kc, Kg = _pair(cp)
    fn = Kg._fn("st_persistent")
    stream = cp.cuda.Stream()
    args, bar = _st_persistent_args(cp, Kg, 7)
    with pytest.raises(cuda_launch.PersistentLaunchError,
                       match=r"st_persistent: a grid of 7 blocks of 16 threads exceeds the 6"):
        cuda_launch.launch_persistent(fn, "st_persistent", 7, 16, args, stream, bar, 0)
    params, keep = cuda_launch._kernel_params(args)
    with pytest.raises(cudasim.CUDADriverError, match="COOPERATIVE_LAUNCH_TOO_LARGE"):
        cp.cuda.driver.launchCooperativeKernel(fn.kernel.ptr, 7, 1, 1, 16, 1, 1, 0, 0,
                                               cudasim.ctypes.addressof(params))
    args, bar = _st_persistent_args(cp, Kg, 6)
    cuda_launch.launch_persistent(fn, "st_persistent", 6, 16, args, stream, bar, 0)
    np.testing.assert_array_equal(np.asarray(args[-2]), Kc.stein_thinning(20))

    monkeypatch.setattr(cp.cuda.driver, "occupancyMaxActiveBlocksPerMultiprocessor",
                        lambda ptr, threads, smem: 0)
    with pytest.raises(cuda_launch.PersistentLaunchError,
                       match="st_persistent: a block of 16 threads does not fit"):
        Kg.stein_thinning(5)


def test_two_threads_launching_persistent_loops_at_once_both_finish(monkeypatch):
    """Two Python threads (or Dask's threaded scheduler) each run a persistent Stein thinning;
    the launches are made to meet (a gate before the driver's launch that waits up to 2 s
    for the other thread). The process-wide lock serialises them, so both finish with the
    C++ picks instead of sharing the multiprocessors and waiting for each other."""
    import threading

    from support import cudasim

    cp = cudasim.install(monkeypatch)
    Kc1, Kg1 = _pair(cp)
    Kc2, Kg2 = _pair(cp, BASES[2])
    real = cp.cuda.driver.launchCooperativeKernel
    gate = threading.Barrier(2)

    def meet_then_launch(*a):
        try:
            gate.wait(timeout=2.0)
        except threading.BrokenBarrierError:  # the other thread is not launching now
            pass
        real(*a)

    monkeypatch.setattr(cp.cuda.driver, "launchCooperativeKernel", meet_then_launch)
    got, errors = {}, []

    def run(key, Kg):
        try:
            got[key] = Kg.stein_thinning(60)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    workers = [threading.Thread(target=run, args=(1, Kg1)),
               threading.Thread(target=run, args=(2, Kg2))]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert not errors, errors
    np.testing.assert_array_equal(got[1], Kc1.stein_thinning(60))
    np.testing.assert_array_equal(got[2], Kc2.stein_thinning(60))


def test_a_grid_barrier_that_never_completes_raises_naming_the_kernel(monkeypatch):
    """Every persistent kernel told its grid has one block more than it launches: the barrier
    never completes, a block gives up after the budget (1 s here), every block leaves, and the
    host raises naming the kernel, instead of hanging."""
    from support import cudasim

    from stein_coreset.engine.cuda import launch as cuda_launch
    from stein_coreset.engine.cuda import source as cuda_src

    call = "if (!grid_barrier(bar, nb)) return;"
    assert cuda_src.cuda_source().count(call) == 8
    cp = cudasim.install(monkeypatch, barrier_s=1.0, edit=lambda src: src.replace(
        call, "if (!grid_barrier(bar, nb + 1)) return;"))
    Kc, Kg = _pair(cp)
    with pytest.raises(cuda_launch.PersistentLaunchError,
                       match="st_persistent: its grid barrier waited past its budget"):
        Kg.stein_thinning(10)


# ---- NaN never wins the argmin, and never reaches it -----------------------------------------

_ARGMIN_TEST_KERNEL = r"""
// the argmin the loops use, over v[0..n) on one launch of any grid: each block's
// block_argmin, then block 0 combines the partials as the persistent kernels do
extern "C" __global__ void test_argmin(const double* v, long long n, double* pval,
                                       long long* pidx, unsigned int* counter,
                                       long long* out) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const ArgMin mine = block_argmin(i < n ? v[i] : 1.0 / 0.0,
                                     i < n ? i : 0x7fffffffffffffffLL);
    if (!publish_and_check_last(mine, pval, pidx, counter, gridDim.x)) return;
    const ArgMin best = combine_partials(pval, pidx, gridDim.x);
    if (threadIdx.x == 0) out[0] = best.i;
}
"""


def _device_argmin(cp, v):
    from stein_coreset.engine.cuda import config as cuda_config
    from stein_coreset.engine.cuda import source as cuda_src

    fn = cuda_src.module(0).get_function("test_argmin")
    nb = -(-v.size // cuda_config.CONFIG.block)
    out = cp.zeros(1, dtype=np.int64)
    fn((nb,), (cuda_config.CONFIG.block,), (cp.asarray(v), np.int64(v.size), cp.empty(nb),
                                      cp.empty(nb, dtype=np.int64), cp.zeros(1, dtype=np.uint32),
                                      out))
    return int(out[0])


def test_a_nan_never_wins_the_device_argmin(monkeypatch):
    """NaN in lane 0 of a warp, in the first entry of a block, everywhere but one entry, or
    beside a tie: the pick is the first minimum of the numbers (warp shuffles, the block's
    warps and the blocks' partials all order NaN after every number)."""
    from support import cudasim

    cp = cudasim.install(monkeypatch, edit=lambda src: src + _ARGMIN_TEST_KERNEL)
    rng = np.random.default_rng(3)
    n = 50  # 4 blocks of 16 threads, warps of 8
    for nan_at in ([0], [0, 8, 16, 32], [16], list(range(0, n, 2)), [i for i in range(n)
                                                                    if i != 37]):
        v = rng.random(n) + 1.0
        v[5] = v[41] = 0.5  # a tie: the smaller index wins
        v[nan_at] = np.nan
        finite = np.where(np.isnan(v), np.inf, v)
        assert _device_argmin(cp, v) == int(np.argmin(finite)), nan_at


@pytest.mark.parametrize("where", ["X", "S"])
def test_device_argmin_loops_refuse_a_nan_before_the_loop(sim, where):
    """A NaN (or inf) in the points or scores on the device is a ValueError before Stein
    thinning, KT-Swap or KT-Swap-LS runs, not a loop over NaNs."""
    from stein_coreset.engine.cuda.kernel import CudaKernel

    Kc, Kg = _pair(sim)
    U, T = np.array(Kc.U), np.array(Kc.T)
    (U if where == "X" else T)[7, 1] = np.nan if where == "X" else np.inf
    bad = CudaKernel(int(Kc.base.code), float(Kc.base.sigma), float(Kc.base.beta),
                     sim.asarray(U), sim.asarray(T))
    for run in (lambda: bad.stein_thinning(5),
                lambda: bad.kt_swap_refine(np.arange(10, dtype=np.int64), 1),
                lambda: bad.kt_swap_ls(np.full(Kc.n, 1.0 / Kc.n), np.arange(Kc.n), True)):
        with pytest.raises(ValueError, match="X, S: .* NaN or an infinity"):
            run()
