#!/usr/bin/env bash
# The one prepared run on a GPU machine (one CUDA GPU with CuPy, JAX, 16 host cores, no
# network): installs the wheels carried in .whl/ (this package built for the machine's Python,
# and the pure-Python packages it lacks), then runs each stage under `timeout`, logs in $OUT.
#
#   bash tools/device/device_run.sh quick    # the CUDA tests and a first timing (~2 minutes)
#   bash tools/device/device_run.sh full     # the CUDA tests; gpu_check at 2^14 / 2^16 against
#       the 16 CPU cores and goodpoints.jax; the 16-core thread table and its profiles; lskt at
#       2^20; Dask with CuPy blocks; goodpoints.jax's sr / sc / lsr / lsc; the barrier A/B; AMD
#       array-API vs fused (STEIN_CORESET_CUDA_AMD's default); the loop modes; the DKSD pass
#   bash tools/device/device_run.sh second   # on the same warm machine after full: lskt at
#       2^24, then the loop modes on whole methods (DEADLINE_S=200 fits what a 15-minute lease
#       leaves after full)
#
# Run it from the repository root: .whl/ and the paths below are relative to it. Each script's
# own folder, not the root, heads sys.path, so Python imports the installed wheel, not the
# source tree.
#
# Every stage ends within DEADLINE_S seconds (default 560) of the start, inside the device
# call's 600 s:
#   run(command="bash tools/device/device_run.sh full", carry=[".whl"], timeout_s=600)
# Fill .whl/ first, on any x86-64 machine with Python 3.12 and PyPI:
#   bash tools/device/device_wheels.sh --check
set -u
stage=${1:-quick}
OUT=${OUT:-/tmp/device_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
REPO=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$REPO"/.whl/*.whl > /tmp/install.log 2>&1 || {
    tail -20 /tmp/install.log; exit 1; }
# proxsuite (goodpoints.jax's QP solver) installs under cmeel.prefix/, whose .pth PYTHONPATH
# does not read
PYTHONPATH=/tmp/site:$(ls -d /tmp/site/cmeel.prefix/lib/python3*/site-packages 2>/dev/null)
export PYTHONPATH
LOG="$OUT/summary.log"

# every stage ends by the deadline (seconds from here; the device call's own limit is 600 s):
# its timeout is clipped to the time left, and a stage with under 20 s left is skipped
DEADLINE=$((SECONDS + ${DEADLINE_S:-560}))

stage_run() {  # name timeout command...: the whole output into the summary (only 8 files
    local name=$1 t=$2  # come back from the machine), its tail to stdout
    shift 2
    local left=$((DEADLINE - SECONDS))
    if [ "$left" -lt 20 ]; then
        echo "=== $name SKIPPED: ${left}s left before the deadline" | tee -a "$LOG"
        return
    fi
    [ "$t" -gt "$left" ] && t=$left
    echo "=== $name (timeout ${t}s) start $(date +%T)" | tee -a "$LOG"
    timeout "$t" "$@" > "/tmp/$name.log" 2>&1
    local rc=$?
    cat "/tmp/$name.log" >> "$LOG"
    echo "=== $name rc=$rc end $(date +%T)" | tee -a "$LOG"
    tail -n 15 "/tmp/$name.log"
}

{
    date
    nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv
    echo "cores: $(nproc)"; uptime
    # a 12x speed-up on 16 threads needs 16 physical cores: SMT siblings, L3 domains
    (cd tools/device && python3 -c "import threads_table as t
print('topology:', t.describe_topology(t.topology()))")
    lscpu 2>/dev/null | grep -E "^(Model name|Thread|Core|Socket|NUMA node|L3|CPU\(s\))" || true
    python3 -c "import sys, numpy, cupy; print(sys.version); print('numpy', numpy.__version__, 'cupy', cupy.__version__)"
    (cd tools/device && python3 -c "import goodpoints_jax as g
print('goodpoints.jax:', g.missing() or 'importable')")
} >> "$LOG" 2>&1

smoke_or_fallback() {  # name VAR value code: run code (45 s at most); if it fails or does not
    # finish, the rest of this script runs with VAR=value
    local name=$1 var=$2 value=$3 code=$4
    if (cd /tmp && timeout 45 python3 -c "$code") >> "$LOG" 2>&1; then
        echo "$name smoke test: ok" >> "$LOG"
    else
        echo "$name smoke test FAILED: using $var=$value" | tee -a "$LOG"
        export "$var=$value"
    fi
}

# the persistent loops rely on every block being resident at once: if a small run does not
# finish, the rest of this script uses the graph loops
smoke_or_fallback "persistent loop" STEIN_CORESET_CUDA_LOOP graph "
import cupy as cp, numpy as np, stein_coreset as sc
from stein_coreset.engine import native
X = cp.asarray(np.random.default_rng(0).standard_normal((5000, 4)))
K = sc.SteinKernel(sc.IMQ(sigma=2.0)).bind(X, -X)
a = K.backend.stein_thinning(K, 3000)
b = native.stein_thinning(sc.SteinKernel(sc.IMQ(sigma=2.0)).bind(cp.asnumpy(X), -cp.asnumpy(X)), 3000)
assert (a == b).all(), 'persistent picks differ'
from stein_coreset.algorithms import weighted_rpcholesky
Kh = sc.SteinKernel(sc.IMQ(sigma=2.0)).bind(cp.asnumpy(X), -cp.asnumpy(X))
p1, _ = weighted_rpcholesky(K, rank=50, rng=1)
p2, _ = weighted_rpcholesky(Kh, rank=50, rng=1)
assert (p1 == p2).all(), 'persistent RPCholesky pivots differ'"

# the fused AMD kernel (the default on CuPy) against the C++ loop: if it does not finish or
# differs, the rest of this script uses the array-API loop
smoke_or_fallback "fused AMD" STEIN_CORESET_CUDA_AMD xp "
import cupy as cp, numpy as np
from stein_coreset.algorithms.amd import LowRankPlusDiagonal, amd
rng = np.random.default_rng(0)
F = 0.3 * rng.standard_normal((20000, 60))
dg = np.sum(F * F, axis=1) + rng.random(20000)
ref = amd(LowRankPlusDiagonal(F, dg), 300)
got = cp.asnumpy(amd(LowRankPlusDiagonal(cp.asarray(F), cp.asarray(dg)), 300))
assert np.allclose(got, ref, rtol=1e-10, atol=1e-300), 'fused AMD weights differ'"

if [ "$stage" = second ]; then  # after the full run (its tests passed): lskt at 2^24 first,
    # then the loop modes on whole methods
    # lskt at n = 2^24: LD's (n, r) factor and its AMD copy (12 n r bytes with the fused AMD,
    # 16 n r with the array-API loop) must fit the device; tau 0.4 (r = 777) needs 156 GB,
    # tau 0.35 (r = 338) 68 GB (91 GB), tau 0.3 (r = 148) 30 GB (40 GB)
    gib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
    tau=0.3; [ "${gib:-0}" -gt 120000 ] && tau=0.35
    stage_run huge 300 python3 tools/device/gpu_large.py --n 16777216 --tau "$tau" \
        --json "$OUT/huge.json"
    for mode in persistent graph; do
        STEIN_CORESET_CUDA_LOOP=$mode stage_run "gpu_$mode" 60 python3 tools/device/gpu_check.py \
            --n 65536 --gpu-only --repeat 2 --methods st skt kt sr sc lskt \
            --json "$OUT/gpu_$mode.json"
    done
    exit 0
fi

stage_run tests 150 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_backend.py \
    tests/test_gpu_path.py tests/test_engine.py tests/test_stein_thinning.py \
    tests/test_kernels.py tests/test_kernel_thinning.py tests/test_amd.py tests/test_debias.py \
    tests/test_rpcholesky.py tests/test_recombination_backends.py \
    tests/test_compress_weighted.py tests/test_estimators_losses.py -k "cupy or cuda" -x

if [ "$stage" = quick ]; then
    stage_run gpu_check 150 python3 tools/device/gpu_check.py --n 16384 65536 \
        --methods st skt kt sr lskt --json "$OUT/gpu_check_quick.json"
    exit 0
fi

# full: the stages in the order of the figures docs/gpu.md reports (the deadline cuts the last
# ones): agreement and speed of every method against the 16 cores and goodpoints.jax, the
# 16-core thread table, lskt at 2^20, Dask, goodpoints' weighted methods; then what picks
# defaults and explains times
stage_run gpu_check 200 python3 tools/device/gpu_check.py --n 16384 65536 --goodpoints --gp-n 65536 \
    --gp-methods st skt lskt --json "$OUT/gpu_check.json"
stage_run threads 180 python3 tools/device/threads_table.py --n 12,14,16 --threads 1,2,4,8,16 \
    --st-frac 0.25 --budget-s 150 --profile skt,sr,lskt,lsr --profile-threads 16 \
    --json "$OUT/threads_table.json"
stage_run large 60 python3 tools/device/gpu_large.py --n 1048576 --json "$OUT/large.json"
stage_run dask_gpu 50 python3 tools/device/gpu_large.py --dask --n 65536
# goodpoints.jax's weighted pipelines beside ours at 2^16 (theirs: Stein thinning for n steps
# or low-rank debiasing, then Recombination / Cholesky thinning and a QP on the host)
stage_run gp_weighted 90 python3 tools/device/gpu_check.py --n 65536 --gpu-only --methods sr sc lsr \
    lsc --goodpoints --gp-methods sr sc lsr lsc --json "$OUT/gp_weighted.json"
# the barrier A/B: the team's probes and the 8- and 16-thread cells of st and skt at 2^16 with a
# step's end counted in a tree (compare with the same cells of the threads stage)
STEIN_CORESET_TEAM_BARRIER=tree stage_run threads_tree 50 python3 tools/device/threads_table.py \
    --n 16 --threads 8,16 --methods st,skt --st-frac 0.25 --budget-s 40 \
    --json "$OUT/threads_tree.json"
stage_run amd 75 python3 tools/device/gpu_large.py --amd --n 16384 65536 1048576 --json "$OUT/amd.json"
stage_run loops 45 python3 tools/device/gpu_large.py --loops --n 16384 65536 --json "$OUT/loops.json"
stage_run diagnose 60 python3 tools/device/gpu_large.py --diagnose-lskt --n 65536
# where the time goes in the methods furthest from 5x the 16 cores on 2026-12-04 (st's 256
# steps took 4 ms; at the loops stage's 5.6 us a step, the steps were about 1.4 ms of it)
stage_run profile 60 python3 tools/device/gpu_large.py --profile --method lskt,st,sr,compresspp \
    --n 65536
stage_run dksd 40 python3 tools/device/gpu_large.py --dksd --n 4096 16384 --json "$OUT/dksd.json"
echo "done $(date +%T)" >> "$LOG"
