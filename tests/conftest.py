"""Shared fixtures: the array namespaces every array-API code path is tested on.

``python -m pytest`` puts the repository root first on sys.path, where ``stein_coreset/`` is the
source tree without the compiled ``_core``; the tests must import the installed package.
"""

import os
import sys

_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _root]

import numpy as np  # noqa: E402
import pytest  # noqa: E402


def _namespaces():
    """(name, xp, device) triples: NumPy, array_api_strict (on a non-default device), CuPy."""
    import array_api_compat.numpy as np_xp

    out = [pytest.param((np_xp, None), id="numpy")]
    try:
        import array_api_strict as strict

        out.append(pytest.param((strict, strict.Device("device1")), id="array_api_strict"))
    except ImportError:
        out.append(
            pytest.param(
                None,
                id="array_api_strict",
                marks=pytest.mark.skip("array_api_strict not installed"),
            )
        )
    try:
        import array_api_compat.cupy as cp_xp
        import cupy  # noqa: F401

        cupy.cuda.runtime.getDeviceCount()
        out.append(pytest.param((cp_xp, None), id="cupy"))
    except Exception as e:  # ImportError, or no CUDA device
        reason = f"CuPy not usable here ({type(e).__name__}: {e})"
        out.append(pytest.param(None, id="cupy", marks=pytest.mark.skip(reason=reason[:200])))
    return out


class Namespace:
    """An array namespace under test, with helpers to move test data in and out of it."""

    def __init__(self, xp, device):
        self.xp, self.device = xp, device

    def asarray(self, a, dtype=None):
        a = np.asarray(a)
        kw = {} if self.device is None else {"device": self.device}
        return self.xp.asarray(a, dtype=dtype, **kw)

    def to_numpy(self, a):
        from stein_coreset._array_api import to_host

        if isinstance(a, (float, int)):
            return np.asarray(a)
        return to_host(
            a, dtype=np.asarray(0, dtype=np.float64).dtype if a.dtype != self.xp.int64 else np.int64
        )

    def same_place(self, a, ref):
        import array_api_compat

        assert array_api_compat.array_namespace(a) is array_api_compat.array_namespace(ref)
        assert array_api_compat.device(a) == array_api_compat.device(ref)


def pytest_addoption(parser):
    parser.addoption(
        "--runxslow",
        action="store_true",
        default=False,
        help="also run the tests marked xslow (minutes each; also STEIN_CORESET_XSLOW=1)",
    )


def pytest_collection_modifyitems(config, items):
    """``slow`` tests (seconds) run by default and ``-m "not slow"`` leaves them out; ``xslow``
    tests (minutes, SciPy's marker of the same name) are skipped unless ``--runxslow`` or
    ``STEIN_CORESET_XSLOW=1``, so the default run stays short."""
    if config.getoption("--runxslow") or os.environ.get("STEIN_CORESET_XSLOW", "") not in ("", "0"):
        return
    skip = pytest.mark.skip(reason="xslow: minutes; run with --runxslow or STEIN_CORESET_XSLOW=1")
    for item in items:
        if "xslow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=_namespaces())
def xp(request):
    """The array namespace under test (``xp.xp`` the module, ``xp.asarray`` to move data in)."""
    xp_mod, device = request.param
    return Namespace(xp_mod, device)


@pytest.fixture
def biased_gaussian():
    """The biased-chain case: target N(0, I_2), input from N(0.7, 1.5^2 I_2)."""

    def make(n=4096, d=2, seed=0):
        rng = np.random.default_rng(seed)
        X = 0.7 + 1.5 * rng.standard_normal((n, d))
        return X, -X

    return make


# hypothesis profiles: a short search by default, `--hypothesis-profile=long` for CI's long one
try:
    from hypothesis import HealthCheck, settings

    _quiet = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
    # the default run is the same search every time (CI must not turn red by chance); the long
    # one explores afresh and keeps its counterexamples in .hypothesis/
    settings.register_profile(
        "short", max_examples=40, deadline=None, suppress_health_check=_quiet,
        derandomize=True, database=None,
    )
    settings.register_profile(
        "long", max_examples=1500, deadline=None, suppress_health_check=_quiet
    )
    settings.load_profile("short")
except ImportError:
    pass


@pytest.fixture(autouse=True)
def _environment_restored():
    """Every test leaves os.environ as it found it. Dask's Nanny writes OMP_NUM_THREADS=1 (and
    the MKL / OpenBLAS limits) into the parent's environment when it starts a worker process
    and never removes them: every test after a LocalCluster then started its subprocesses with
    one usable core, and the thread-table test saw no second thread."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)
