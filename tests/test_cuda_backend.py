"""The engine's backend choice and the `cuda` backend.

Without a GPU: the backend vocabulary, the refusal of kernels the compiled code does not know,
the CUDA source compiling with NVRTC (from the nvidia-cuda-nvrtc wheel, no device needed), and
the uniforms the CUDA KT-SPLIT draws reproducing the C++ split. With a GPU (CuPy and a device):
every CUDA kernel against the C++ evaluator and loops on the same input.
"""

import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import stein_coreset as sc
from stein_coreset.engine import BACKENDS, KernelMatrix, get_backend
from stein_coreset.engine.cpu import _core, bridge
from stein_coreset.engine.cuda import config as cuda_config


def _chain(n=300, d=3, seed=1):
    rng = np.random.default_rng(seed)
    X = 0.7 + 1.5 * rng.standard_normal((n, d))
    return X, -X


class Cauchy(sc.IMQ):
    """A user kernel that keeps IMQ's `code` but is (1 + r^2 / s^2)^-1: a different radial."""

    def radial(self, xp, q):
        s2 = self.sigma**2
        ib = 1.0 / (1.0 + q / s2)
        return ib, -ib * ib / s2, 2.0 * (q / s2) * ib * ib * ib / s2


# ---- backend choice ----------------------------------------------------------------------

def test_backend_is_chosen_once_from_the_namespace_and_the_kernel():
    import array_api_compat.numpy as npx

    assert BACKENDS == ("cpu", "cuda", "xp")
    assert get_backend("auto", npx, sc.IMQ()).name == "cpu"
    assert get_backend("cpu", npx, sc.IMQ()).name == "cpu"
    assert get_backend("xp", npx, sc.IMQ()).name == "xp"
    assert get_backend("auto", npx, Cauchy()).name == "xp"
    strict = pytest.importorskip("array_api_strict")
    assert get_backend("auto", strict, sc.Gaussian()).name == "xp"


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_compiled_backends_refuse_a_kernel_they_do_not_know(backend):
    import array_api_compat.numpy as npx

    with pytest.raises(ValueError, match="Cauchy"):
        get_backend(backend, npx, Cauchy())


def test_cuda_backend_refuses_host_arrays():
    import array_api_compat.numpy as npx

    with pytest.raises(ValueError, match="CuPy"):
        get_backend("cuda", npx, sc.IMQ())
    with pytest.raises(ValueError, match="backend must be"):
        get_backend("gpu", npx, sc.IMQ())


def test_user_subclass_keeping_imq_code_is_evaluated_by_its_own_radial():
    X, S = _chain(80, 2)
    kern = sc.SteinKernel(Cauchy(sigma=1.3))
    K = kern.bind(X, S)
    assert K.backend.name == "xp"
    ref = KernelMatrix(Cauchy(sigma=1.3), X, S, backend="xp").dense()
    np.testing.assert_allclose(K.dense(), ref, rtol=1e-13)
    imq = sc.SteinKernel(sc.IMQ(sigma=1.3)).bind(X, S).dense()
    assert np.max(np.abs(K.dense() - imq)) > 1e-2  # it really is another kernel
    # Stein thinning needs only columns: it runs, on the user's kernel
    res = sc.compress(X, S, size=8, method="st", kernel=kern)
    d = ref.diagonal().copy()
    want = []
    score = d.copy()
    for _ in range(8):
        j = int(np.argmin(score))
        want.append(j)
        score += 2.0 * ref[:, j]
    assert sorted(set(want)) == res.indices.tolist()


def test_loops_without_a_reference_refuse_a_user_kernel_with_a_clear_error():
    X, S = _chain(64, 2)
    with pytest.raises(ValueError, match="Cauchy is not a base kernel the compiled loops know"):
        sc.compress(X, S, size=8, method="skt", kernel=sc.SteinKernel(Cauchy()), seed=0)


# ---- without a GPU: the CUDA source and the shared uniforms -------------------------------

def test_cuda_source_compiles_with_nvrtc():
    from stein_coreset.engine.cuda import nvrtc

    if nvrtc.find_nvrtc() is None:
        pytest.skip("no libnvrtc (pip install nvidia-cuda-nvrtc-cu12)")
    ptx = nvrtc.compile_ptx("compute_90")
    entries = set(re.findall(r"\.entry (\w+)", ptx))
    from stein_coreset.engine.cuda.config import DKSD_REGISTER_D
    from stein_coreset.engine.cuda.source import MODULES, cuda_source

    assert tuple(MODULES) == ("kernels", "dksd")
    dksd = set(re.findall(r"\.entry (\w+)", nvrtc.compile_ptx("compute_90",
                                                              cuda_source("dksd"))))
    assert dksd == {"dksd_rows"} | {f"dksd_rows_{'full_' if full else ''}d{d}"
                                    for full in (False, True)
                                    for d in range(1, DKSD_REGISTER_D[full] + 1)}
    assert not dksd & entries  # the engine's module does not carry the estimators' pass
    assert {"kp_gram", "kp_diag", "kp_matvec_partial", "sum_rows", "kp_index_sum", "st_step",
            "kts_step", "kts_swap_step", "st_persistent", "kts_persistent",
            "wrpc_persistent", "ksls_init", "ksls_persistent"} <= entries
    from stein_coreset.engine.cuda.config import AMD_KPL

    assert {f"amd_lowrank_k{k}" for k in AMD_KPL} <= entries
    # the scalar math is the shared header's, not a copy
    src = cuda_source()
    assert "radial_local" in src and "imq_half_local" in src


def test_persistent_kernels_fit_one_block_per_multiprocessor():
    """A persistent kernel's grid barrier waits for every block, so one block of BLOCK threads
    per multiprocessor must be resident at once (else it deadlocks): ptxas's registers and
    static shared memory for sm_90 (64K registers, 48 KiB static shared memory per block), and
    no spills in the AMD kernels, whose rows live in registers."""
    from stein_coreset.engine.cuda import nvrtc
    from stein_coreset.engine.cuda.config import BLOCK

    if nvrtc.find_nvrtc() is None:
        pytest.skip("no libnvrtc")
    use = nvrtc.resource_usage("sm_90")
    persistent = [k for k in use if k.endswith("_persistent") or k.startswith("amd_lowrank")]
    assert len(persistent) == 10
    for name in persistent:
        regs = -(-use[name]["registers"] // 8) * 8  # allocated in units of 8 per thread
        assert regs * BLOCK <= 65536, (name, use[name])
        assert use[name]["smem"] <= 48 * 1024, (name, use[name])
        if name.startswith("amd_lowrank"):
            assert use[name]["spill"] == 0, (name, use[name])


def test_dksd_rows_keep_their_adjoint_sums_in_registers():
    """The DKSD pass's variants for a compile-time d hold a row's adjoint sums in registers
    (their loops unrolled): no stack frame and no spills for sm_90; one of each exists for
    every d up to DKSD_REGISTER_D."""
    from stein_coreset.engine.cuda import nvrtc
    from stein_coreset.engine.cuda.config import DKSD_REGISTER_D
    from stein_coreset.engine.cuda.source import cuda_source

    if nvrtc.find_nvrtc() is None:
        pytest.skip("no libnvrtc")
    use = nvrtc.resource_usage("sm_90", cuda_source("dksd"))
    names = [f"dksd_rows_{'full_' if full else ''}d{d}" for full in (False, True)
             for d in range(1, DKSD_REGISTER_D[full] + 1)]
    for name in names:
        assert use[name]["stack"] == 0 and use[name]["spill"] == 0, (name, use[name])
    assert use["dksd_rows"]["spill"] == 0


def test_fused_amd_keeps_sixteen_warps_a_multiprocessor_up_to_rank_256():
    """The fused AMD kernel streams F's rows; its blocks grow to the driver's limit for it
    (``cuda_amd.amd_grid``), which its registers set: up to rank 256 (KPL <= 8) at most 128 a
    thread, so 16 warps of a multiprocessor keep F's loads in flight (8 did at 256 threads)."""
    from stein_coreset.engine.cuda import nvrtc
    from stein_coreset.engine.cuda.config import WARP

    if nvrtc.find_nvrtc() is None:
        pytest.skip("no libnvrtc")
    use = nvrtc.resource_usage("sm_90")
    for kpl in (1, 2, 4, 8):
        regs = -(-use[f"amd_lowrank_k{kpl}"]["registers"] // 8) * 8
        assert regs * 16 * WARP <= 65536, (kpl, use[f"amd_lowrank_k{kpl}"])


def test_nvrtc_reports_a_syntax_error_with_its_log():
    from stein_coreset.engine.cuda import nvrtc

    if nvrtc.find_nvrtc() is None:
        pytest.skip("no libnvrtc")
    with pytest.raises(RuntimeError, match="error"):
        nvrtc.compile_ptx(source='extern "C" __global__ void f() { int x = ; }')


@pytest.mark.parametrize("N,t", [(64, 3), (100, 2), (257, 5)])
def test_kt_split_uniforms_reproduce_the_seeded_split(N, t):
    X, S = _chain(300)
    K = sc.SteinKernel(sc.IMQ(sigma=2.0)).bind(X, S)
    rng = np.random.default_rng(N)
    idx = rng.integers(0, 300, N).astype(np.int64)
    seed = 1234567
    a = _core.kt_split(bridge.handle(K), idx, t, 0.5, seed, None, 1)
    u = _core.kt_split_uniforms(N, t, seed)
    assert u.shape == (t * (N // 2),) and np.all((u >= 0) & (u < 1))
    b = _core.kt_split(bridge.handle(K), idx, t, 0.5, 0, u, 1)
    np.testing.assert_array_equal(a, b)


# ---- with a GPU ------------------------------------------------------------------------------

def _cupy():
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no device")
        return cupy
    except Exception as e:  # no CuPy or no device
        pytest.skip(f"CuPy with a CUDA device is not usable here ({type(e).__name__})")


def _pair(base, stein=True, centred=False, n=700, d=4):
    cp = _cupy()
    X, S = _chain(n, d, seed=7)
    if centred:
        Kc = sc.kernels.centred_kernel_matrix(base, X)
        Kg = sc.kernels.centred_kernel_matrix(base, cp.asarray(X))
    elif stein:
        Kc = sc.SteinKernel(base).bind(X, S)
        Kg = sc.SteinKernel(base).bind(cp.asarray(X), cp.asarray(S))
    else:
        Kc = KernelMatrix(base, X)
        Kg = KernelMatrix(base, cp.asarray(X))
    assert Kc.backend.name == "cpu" and Kg.backend.name == "cuda"
    return cp, Kc, Kg


BASES = [sc.IMQ(sigma=2.0), sc.IMQ(sigma=1.5, beta=-0.3), sc.Gaussian(sigma=1.7),
         sc.Matern(sigma=2.0, nu=1.5), sc.Matern(sigma=2.0, nu=2.5)]


@pytest.mark.parametrize("base", BASES, ids=repr)
@pytest.mark.parametrize("kind", ["stein", "base", "centred"])
def test_cuda_blocks_diag_and_products_match_cpp(base, kind):
    cp, Kc, Kg = _pair(base, stein=kind == "stein", centred=kind == "centred")
    rows = np.array([0, 5, 699, 5, 123])
    np.testing.assert_allclose(cp.asnumpy(Kg.block(rows)), Kc.block(rows), rtol=1e-12, atol=1e-13)
    cols = np.array([3, 3, 600])
    np.testing.assert_allclose(cp.asnumpy(Kg.block(rows, cols)), Kc.block(rows, cols),
                               rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(cp.asnumpy(Kg.backend.kernel(Kg).diag()), Kc.diag(), rtol=1e-12,
                               atol=1e-13)
    w = np.random.default_rng(0).random(Kc.n)
    np.testing.assert_allclose(cp.asnumpy(Kg.matvec(cp.asarray(w))), Kc.matvec(w),
                               rtol=1e-11, atol=1e-11)


@pytest.fixture(params=["persistent", "graph"])
def loop_mode(request, monkeypatch):
    """Both ways the device loops run (STEIN_CORESET_CUDA_LOOP)."""
    monkeypatch.setenv("STEIN_CORESET_CUDA_LOOP", request.param)
    return request.param


def test_loop_mode_is_validated(monkeypatch):
    from stein_coreset.engine.cuda.config import loop_mode

    assert loop_mode() in ("persistent", "graph")
    monkeypatch.setenv("STEIN_CORESET_CUDA_LOOP", "threads")
    with pytest.raises(ValueError, match="STEIN_CORESET_CUDA_LOOP"):
        loop_mode()


@pytest.mark.parametrize("base", BASES, ids=repr)
def test_cuda_stein_thinning_picks_what_the_cpp_loop_picks(base, loop_mode):

    cp, Kc, Kg = _pair(base)
    for m in (1, 7, 700, 1000):  # 1000 > n: repeats; > one graph of steps
        np.testing.assert_array_equal(Kg.stein_thinning(m),
                                      Kc.stein_thinning(m))


@pytest.mark.parametrize("kind", ["stein", "centred"])
@pytest.mark.parametrize("N,t", [(512, 3), (700, 4), (256, 8), (9000, 2)])
def test_cuda_kt_split_matches_cpp_for_the_same_seed(kind, N, t, loop_mode):

    cp, Kc, Kg = _pair(sc.IMQ(sigma=2.0), centred=kind == "centred")
    idx = np.random.default_rng(N).integers(0, Kc.n, N).astype(np.int64)
    a = Kc.kt_split(idx, t, 0.5, 99)
    b = Kg.kt_split(idx, t, 0.5, 99)
    assert b.shape == a.shape
    # the same uniforms: a decision could flip only where u falls within rounding of its
    # probability (the walk's sums are added in another order), about 1e-13 per pair
    assert np.mean(np.all(a == b, axis=1)) == 1.0


@pytest.mark.parametrize("B,N,per_launch", [(64, 1024, None), (300, 256, 128), (1, 8192, None)])
def test_cuda_kt_halvings_match_cpp(B, N, per_launch, loop_mode, monkeypatch):
    """A COMPRESS level's halvings as one device round (and, per_launch, a persistent round
    taking the rows that many at a time) split each row as the C++ does."""

    if per_launch:
        monkeypatch.setattr(cuda_config, "KTS_MAX_CORESETS", per_launch)
    cp, Kc, Kg = _pair(sc.IMQ(sigma=2.0))
    blocks = np.random.default_rng(B).integers(0, Kc.n, size=(B, N)).astype(np.int64)
    seeds = np.arange(1, B + 1, dtype=np.uint64) * 0x9E3779B9
    a = Kc.kt_halvings(blocks, 0.1, seeds)
    b = Kg.kt_halvings(blocks, 0.1, seeds)
    assert b.shape == a.shape == (B, 2, N // 2)
    assert np.mean(np.all(a == b, axis=(1, 2))) == 1.0  # as for kt_split: rounding may flip


@pytest.mark.parametrize("fmt", [0, 1])
def test_cuda_kt_swap_ls_matches_cpp(fmt, monkeypatch):
    """KT-Swap-LS on the device (persistent loop): the C++'s support, weights and w^T K w."""

    monkeypatch.setenv("STEIN_CORESET_CUDA_LOOP", "persistent")
    monkeypatch.setattr(cuda_config, "PERSISTENT_STEPS", 7)  # several launches
    cp, Kc, Kg = _pair(sc.IMQ(sigma=2.0))
    rng = np.random.default_rng(fmt)
    supp = rng.choice(Kc.n, 30, replace=False)
    w = rng.random(30) + 0.2
    if fmt == 1:
        w[::4] *= -0.3
    dense = np.zeros(Kc.n)
    dense[supp] = w / w.sum()
    order = np.concatenate([supp, supp[:10]])
    a, b = dense.copy(), dense.copy()
    Da = Kc.kt_swap_ls(a, order, fmt)
    Db = Kg.kt_swap_ls(b, order, fmt)
    np.testing.assert_array_equal(np.flatnonzero(a), np.flatnonzero(b))
    np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-15)
    assert Db == pytest.approx(Da, rel=1e-10)


def test_cuda_compresspp_gives_the_cpu_selection(loop_mode):
    _compress_on_both(("compresspp",), 2**14, 128, chain_seed=2, seed=5)


@pytest.mark.parametrize("sorted_sweeps", [False, True])
@pytest.mark.parametrize("passes", [1, 3])
def test_cuda_kt_swap_matches_cpp(passes, sorted_sweeps):

    cp, Kc, Kg = _pair(sc.IMQ(sigma=2.0))
    I0 = np.random.default_rng(3).integers(0, Kc.n, 40).astype(np.int64)
    a, b = I0.copy(), I0.copy()
    na = Kc.kt_swap_refine(a, passes, sorted_sweeps)
    nb = Kg.kt_swap_refine(b, passes, sorted_sweeps)
    np.testing.assert_array_equal(a, b)
    assert na == nb


def _compress_on_both(methods, n, size, chain_seed, seed=3):
    """compress on NumPy and on CuPy arrays: the CuPy result stays on the device and has the
    CPU result's KSD (rel. 1e-6, i.e. the same selection up to a rounding tie)."""
    cp = _cupy()
    X, S = _chain(n, 4, seed=chain_seed)
    kern = sc.SteinKernel(sc.IMQ(sigma=float(np.sqrt(8))))
    for method in methods:
        ref = sc.compress(X, S, size=size, method=method, kernel=kern, seed=seed)
        got = sc.compress(cp.asarray(X), cp.asarray(S), size=size, method=method, kernel=kern,
                          seed=seed)
        assert isinstance(got.indices, cp.ndarray), method
        assert got.ksd == pytest.approx(ref.ksd, rel=1e-6), method


def test_cuda_compress_returns_device_arrays_and_the_cpu_selection(loop_mode):
    _compress_on_both(("st", "skt", "kt"), 2048, 32, chain_seed=5)


def test_cuda_refuses_a_block_larger_than_the_device_before_allocating():
    cp, Kc, Kg = _pair(sc.IMQ(sigma=2.0), n=64)
    with pytest.raises(MemoryError, match="GiB of device memory"):
        Kg.backend.kernel(Kg).check_fits(1e16, "a test buffer")
    Kg.backend.kernel(Kg).check_fits(8.0, "eight bytes")


@pytest.mark.parametrize("n,r", [(5000, 40), (3000, 300), (100, 7)])
def test_cuda_fused_amd_gives_the_cpp_weights(n, r, monkeypatch):
    """AMD on a low-rank K' (Alg. F.2) by the fused kernel (STEIN_CORESET_CUDA_AMD=fused),
    across persistent launches, against the C++ loop and the device's array-API loop."""
    from stein_coreset.algorithms.amd import LowRankPlusDiagonal, amd
    from stein_coreset.engine.cuda import amd as cuda_amd

    cp = _cupy()
    monkeypatch.setattr(cuda_config, "PERSISTENT_STEPS", 64)
    rng = np.random.default_rng(n)
    F = 0.3 * rng.standard_normal((n, r))
    dg = np.sum(F * F, axis=1) + rng.random(n)
    w0 = rng.random(n)
    w0[::5] = 0.0
    w0 /= w0.sum()
    ref = amd(LowRankPlusDiagonal(F, dg), 150, w0)
    opg = LowRankPlusDiagonal(cp.asarray(F), cp.asarray(dg))
    monkeypatch.setenv("STEIN_CORESET_CUDA_AMD", "fused")
    fused = cp.asnumpy(amd(opg, 150, cp.asarray(w0)))
    monkeypatch.setenv("STEIN_CORESET_CUDA_AMD", "xp")
    xp = cp.asnumpy(amd(opg, 150, cp.asarray(w0)))
    # the device's exp and log round differently from glibc's: the bound is how far F's float32
    # rounding moves the weights (cuda_amd.amd_rounding_tolerance, ~2e-3 here), far above that
    # and far below a wrong kernel's error
    tol = cuda_amd.amd_rounding_tolerance(F, dg - np.sum(F * F, axis=1), 150)
    np.testing.assert_allclose(fused, ref, rtol=tol, atol=1e-300)
    np.testing.assert_allclose(xp, ref, rtol=tol, atol=1e-300)


def test_cuda_lskt_with_fused_amd_matches_cpu(monkeypatch):
    cp = _cupy()
    X, S = _chain(4096, 4, seed=9)
    kern = sc.SteinKernel(sc.IMQ(sigma=float(np.sqrt(8))))
    ref = sc.compress(X, S, size=64, method="lskt", kernel=kern, seed=3)
    monkeypatch.setenv("STEIN_CORESET_CUDA_AMD", "fused")
    got = sc.compress(cp.asarray(X), cp.asarray(S), size=64, method="lskt", kernel=kern, seed=3)
    assert got.ksd == pytest.approx(ref.ksd, rel=1e-6)


def test_cuda_amd_mode_is_validated(monkeypatch):
    from stein_coreset.engine.cuda.config import amd_mode

    monkeypatch.delenv("STEIN_CORESET_CUDA_AMD", raising=False)
    assert amd_mode() == "fused"
    monkeypatch.setenv("STEIN_CORESET_CUDA_AMD", "fast")
    with pytest.raises(ValueError, match="STEIN_CORESET_CUDA_AMD"):
        amd_mode()


@pytest.mark.parametrize("kind", ["stein", "centred"])
def test_cuda_weighted_rpcholesky_matches_cpp(kind, loop_mode):
    """Weighted RPCholesky (Alg. F.1) on the device — the persistent kernel, or with the graph
    loops the array-API loop — draws the C++'s pivots and gives its factor."""
    from stein_coreset.algorithms import weighted_rpcholesky

    cp, Kc, Kg = _pair(sc.IMQ(sigma=2.0), centred=kind == "centred", n=3000)
    w = np.random.default_rng(4).random(Kc.n)
    w[::7] = 0.0
    w /= w.sum()
    for rank in (1, 60):
        pc, Fc = weighted_rpcholesky(Kc, w, rank, np.random.default_rng(rank))
        pg, Fg = weighted_rpcholesky(Kg, cp.asarray(w), rank, np.random.default_rng(rank))
        np.testing.assert_array_equal(pg, pc)
        np.testing.assert_allclose(cp.asnumpy(Fg), Fc, rtol=1e-10, atol=1e-13)


def test_cuda_low_rank_methods_match_cpu_with_the_device_loops(loop_mode):
    _compress_on_both(("lskt", "lsc", "ct"), 4096, 64, chain_seed=11)


def test_cuda_refuses_a_low_rank_run_larger_than_the_device_before_any_work():
    cp = _cupy()
    X = cp.asarray(np.random.default_rng(0).standard_normal((1 << 20, 4)))
    with pytest.raises(ValueError, match="GiB of device memory"):
        sc.compress(X, -X, size=64, method="lskt", tau=1.0)


@pytest.mark.parametrize("kind", ["diag", "full"])
@pytest.mark.parametrize("d", [3, 9])  # adjoint sums in registers (d = 3), in memory (d = 9)
def test_cuda_dksd_pass_gives_the_cpp_value_and_adjoints(kind, d):
    """The estimators' pair pass on CuPy input runs the CUDA rows (the engine's "cuda"), and
    gives the C++ pass's loss and adjoints to rounding; "xp" still runs the array-API pass."""
    from stein_coreset.estimators import dksd as D

    cp = _cupy()
    rng = np.random.default_rng(4)
    n = 300
    U, V = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    F = rng.random((n, d)) + 0.5 if kind == "diag" else rng.standard_normal((n, d, d))
    U[5] = U[9]  # a duplicate point: q = 0 off the diagonal
    comps = [(sc.IMQ(0.8, beta=-0.3), 1.0), (sc.Gaussian(1.2), 0.7),
             (sc.Matern(1.1, nu=1.5), 2.0)] * (d // 3)
    ref = D.pair_pass(U, V, kind, F, comps, True, backend="cpu")
    args = (cp.asarray(U), cp.asarray(V), kind, cp.asarray(F), comps, True)
    for backend in ("auto", "cuda", "xp"):
        val, gv, gf = D.pair_pass(*args, backend=backend)
        assert isinstance(gv, cp.ndarray) and gf.shape == F.shape
        assert val == pytest.approx(ref[0], rel=1e-12)
        np.testing.assert_allclose(cp.asnumpy(gv), ref[1], rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(cp.asnumpy(gf), ref[2], rtol=1e-10, atol=1e-13)


def test_every_entry_point_with_a_backend_speaks_the_engines_vocabulary():
    """KernelMatrix, stein_thinning, amd and the estimators' losses read a backend name
    through one check (engine.check_backend): the same names, the same error."""
    from stein_coreset import estimators as est
    from stein_coreset.algorithms import amd, stein_thinning
    from stein_coreset.algorithms.amd import LowRankPlusDiagonal
    from stein_coreset.engine import check_backend

    assert [check_backend(b) for b in ("auto", "cpu", "cuda", "xp")] == [
        "auto", "cpu", "cuda", "xp"]
    X, S = _chain(60, 2, seed=1)
    K = sc.SteinKernel(sc.IMQ(sigma=2.0)).bind(X, S)
    F = np.random.default_rng(0).standard_normal((60, 3))
    op = LowRankPlusDiagonal(F, np.sum(F * F, axis=1) + 1.0)
    th = np.array([0.0, 0.0, 1.0])
    calls = [lambda b: KernelMatrix(sc.IMQ(), X, backend=b),
             lambda b: stein_thinning(K, 5, backend=b),
             lambda b: amd(op, 5, backend=b),
             lambda b: est.loss(est.Gaussian(d=2), th, X, discrepancy="dksd", backend=b)]
    msg = "backend must be 'auto' or one of 'cpu', 'cuda', 'xp', got 'gpu'"
    for call in calls:
        with pytest.raises(ValueError, match=msg):
            call("gpu")
    # "cuda" on host arrays is refused everywhere (AMD ran the array-API loop instead, silently)
    for call in calls:
        with pytest.raises(ValueError, match="'cuda' needs CuPy arrays"):
            call("cuda")
    with pytest.raises(ValueError, match="'cuda' needs CuPy arrays"):
        LowRankPlusDiagonal(F, np.ones(60), backend="cuda")
    ref = stein_thinning(K, 5, backend="xp")
    np.testing.assert_array_equal(stein_thinning(K, 5, backend="cpu"), ref)
    np.testing.assert_allclose(amd(op, 5, backend="xp"), amd(op, 5, backend="cpu"),
                               rtol=1e-12)


def test_nvrtc_loaded_by_path_finds_its_builtins_without_an_rpath(tmp_path):
    """A pip NVRTC whose library has no RPATH (13.0.88) could not open its builtins library at
    the first compile unless LD_LIBRARY_PATH named its folder; load_nvrtc loads the builtins
    first. Checked on a copy of this NVRTC with its RPATH removed, in fresh processes."""
    import glob
    import os

    from stein_coreset.engine.cuda import nvrtc

    path = nvrtc.find_nvrtc()
    if path is None:
        pytest.skip("no libnvrtc (pip install nvidia-cuda-nvrtc-cu12)")
    if shutil.which("patchelf") is None:
        pytest.skip("needs patchelf to remove the RPATH")
    folder = os.path.dirname(path)
    builtins = [b for b in glob.glob(os.path.join(folder, "libnvrtc-builtins.so*"))
                if ".alt." not in b]
    copy = tmp_path / os.path.basename(path)
    shutil.copy(path, copy)
    for b in builtins:
        shutil.copy(b, tmp_path / os.path.basename(b))
    subprocess.run(["patchelf", "--remove-rpath", str(copy)], check=True)
    probe = (
        "import ctypes, sys\n"
        "from stein_coreset.engine.cuda import nvrtc\n"
        "path = sys.argv[1]\n"
        "lib = nvrtc.load_nvrtc(path) if sys.argv[2] == 'load' else ctypes.CDLL(path)\n"
        "p = ctypes.c_void_p()\n"
        "assert lib.nvrtcCreateProgram(ctypes.byref(p), b'__global__ void k() {}', b'k.cu', 0,"
        " None, None) == 0\n"
        "opt = (ctypes.c_char_p * 1)(b'--gpu-architecture=compute_90')\n"
        "sys.exit(lib.nvrtcCompileProgram(p, 1, opt))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    plain = subprocess.run([sys.executable, "-c", probe, str(copy), "plain"], env=env,
                           capture_output=True, text=True, cwd=tmp_path)
    loaded = subprocess.run([sys.executable, "-c", probe, str(copy), "load"], env=env,
                            capture_output=True, text=True, cwd=tmp_path)
    assert loaded.returncode == 0, loaded.stderr
    assert plain.returncode != 0  # what the fix is for: the bare library cannot compile
