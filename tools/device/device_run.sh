#!/usr/bin/env bash
# The prepared run on a GPU machine (one CUDA GPU with CuPy, JAX, compute-sanitizer, 16 host
# cores, no network), in two stages, each one device call:
#
#   bash tools/device/device_run.sh check   # does the default path work? (~3 minutes)
#   bash tools/device/device_run.sh time    # the figures docs/gpu.md quotes (~6 minutes)
#
# check: every CUDA test under pytest --timeout (a hang names its test), compute-sanitizer's
#   racecheck and synccheck on every kernel at small n (tools/device/kernel_tour.py), the tour
#   again on grids of one block per multiprocessor, and gpu_check on every method at n = 2^14
#   against the 16 CPU cores. Files: check.log, tests.xml, racecheck.log, synccheck.log,
#   tour_full.json, gpu_check_16384.json.
# time: gpu_check at 2^16 with goodpoints.jax beside it, lskt at 2^20 and 2^24, the 16-core
#   thread table; first a small persistent-loop and fused-AMD check each, which switch the rest
#   of the stage to the graph loops / the array-API AMD if they fail. Files: time.log,
#   gpu_check_65536.json, lskt_1048576.json, lskt_16777216.json, threads_table.json.
#
# Each stage writes at most 8 files to $OUT (what comes back from the machine) and ends within
# DEADLINE_S seconds (check 240, time 420) of its start, inside a call's 600 s. With about
# 2 minutes of machine start, both fit 15 minutes of device time with room to rerun check:
#   run(command="bash tools/device/device_run.sh check", carry=[".whl"], timeout_s=300)
#   run(command="bash tools/device/device_run.sh time", carry=[".whl"], timeout_s=480)
# Fill .whl/ first, on any x86-64 machine with Python 3.12 and PyPI:
#   bash tools/device/device_wheels.sh --check
#
# DRY_RUN=1 runs both stages' commands on this machine's CPU at tiny sizes (the CI step): the
# CUDA tests as the CPU sees them, the kernel tour on the tests' simulator (tests/support/
# cudasim) under a stand-in compute-sanitizer, gpu_check and the timings on array_api_strict
# instead of CuPy, a stand-in nvidia-smi; then it checks that each stage wrote at most 8 files.
# Run it from the repository root. Each script's own folder, not the root, heads sys.path, so on
# the device Python imports the installed wheel, not the source tree.
set -u
stage=${1:-check}
case "$stage" in check|time) ;; *) echo "usage: $0 check|time" >&2; exit 2 ;; esac
DRY=${DRY_RUN:-0}
OUT=${OUT:-/tmp/device_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
REPO=$(pwd)
PY=python3
SCALE=1  # of every timeout and the deadline
if [ "$DRY" = 1 ]; then
    PY=${PYTHON:-python}
    SCALE=3  # a shared CI machine, the simulator's threads
    # stand-ins for the GPU machine's tools; the library from this environment
    stubs=$(mktemp -d)
    printf '#!/bin/sh\necho "NVIDIA stand-in (dry run), 143771, 1980, 1980"\n' > "$stubs/nvidia-smi"
    # compute-sanitizer --tool T --error-exitcode N --log-file F command...: runs the command,
    # its log file saying so
    cat > "$stubs/compute-sanitizer" <<'STUB'
#!/bin/sh
log=/dev/null
while [ $# -gt 0 ]; do
    case "$1" in
        --log-file) log=$2; shift 2 ;;
        --tool|--error-exitcode) shift 2 ;;
        -*) shift ;;
        *) break ;;
    esac
done
echo "compute-sanitizer stand-in (dry run): $*" > "$log"
exec "$@"
STUB
    chmod +x "$stubs/nvidia-smi" "$stubs/compute-sanitizer"
    export PATH="$stubs:$PATH"
    XP=strict; SIM=--simulate
    N14=256; N16=256; N20=512; N24=1024; TT="--n 8 --threads 1,2 --methods st,skt --budget-s 20"
else
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "$REPO"/.whl/*.whl > /tmp/install.log 2>&1 || {
        tail -20 /tmp/install.log; exit 1; }
    # proxsuite (goodpoints.jax's QP solver) installs under cmeel.prefix/, whose .pth
    # PYTHONPATH does not read
    PYTHONPATH=/tmp/site:$(ls -d /tmp/site/cmeel.prefix/lib/python3*/site-packages 2>/dev/null)
    export PYTHONPATH
    XP=cupy; SIM=
    N14=16384; N16=65536; N20=1048576; N24=16777216
    TT="--n 16 --threads 1,2,4,8,16 --st-frac 0.25 --budget-s 100"
fi
LOG="$OUT/$stage.log"
FAILED=""
if [ "$stage" = check ]; then DEADLINE=$((SECONDS + SCALE * ${DEADLINE_S:-240}))
else DEADLINE=$((SECONDS + SCALE * ${DEADLINE_S:-420})); fi

stage_run() {  # name timeout command...: the whole output into the stage's log (only 8 files
    local name=$1 t=$2  # come back from the machine), its tail to stdout; clipped to the
    shift 2            # deadline, skipped with under 15 s left
    local left=$((DEADLINE - SECONDS))
    t=$((t * SCALE))
    if [ "$left" -lt 15 ]; then
        echo "=== $name SKIPPED: ${left}s left before the deadline" | tee -a "$LOG"
        return
    fi
    [ "$t" -gt "$left" ] && t=$left
    echo "=== $name (timeout ${t}s) start $(date +%T)" | tee -a "$LOG"
    timeout "$t" "$@" > "/tmp/$name.log" 2>&1
    local rc=$?
    [ "$rc" -ne 0 ] && FAILED="$FAILED $name"
    cat "/tmp/$name.log" >> "$LOG"
    echo "=== $name rc=$rc end $(date +%T)" | tee -a "$LOG"
    tail -n 12 "/tmp/$name.log"
}

{
    date
    git -C "$REPO" log -1 --format="commit %H %cd" 2>/dev/null || echo "commit: unknown"
    nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv
    echo "cores: $(nproc)"; uptime
    $PY -c "import sys, numpy; print(sys.version); print('numpy', numpy.__version__)"
    [ "$DRY" = 1 ] || $PY -c "import cupy; print('cupy', cupy.__version__)"
} >> "$LOG" 2>&1

if [ "$stage" = check ]; then
    # every CUDA test, each under a 60 s timeout (a hang is reported by name, the rest go on)
    stage_run tests 120 $PY -m pytest -q -p no:cacheprovider --timeout 60 \
        --junitxml "$OUT/tests.xml" tests/test_cuda_backend.py tests/test_gpu_path.py \
        tests/test_engine.py tests/test_stein_thinning.py tests/test_kernels.py \
        tests/test_kernel_thinning.py tests/test_amd.py tests/test_debias.py \
        tests/test_rpcholesky.py tests/test_recombination_backends.py \
        tests/test_compress_weighted.py tests/test_estimators_losses.py -k "cupy or cuda"
    # shared-memory races and barrier misuse, every kernel at small n (both loop modes)
    for tool in racecheck synccheck; do
        stage_run "$tool" 50 compute-sanitizer --tool "$tool" --error-exitcode 1 \
            --log-file "$OUT/$tool.log" $PY tools/device/kernel_tour.py $SIM
    done
    # the tour on whole grids: one block per multiprocessor, every persistent kernel
    stage_run tour_full 40 $PY tools/device/kernel_tour.py $SIM --full \
        --json "$OUT/tour_full.json"
    stage_run gpu_check 90 $PY tools/device/gpu_check.py --xp "$XP" --n "$N14" \
        --json "$OUT/gpu_check_$N14.json"
else
    smoke_or_fallback() {  # name VAR value code: run code (40 s at most); if it fails or does
        local name=$1 var=$2 value=$3 code=$4  # not finish, the rest of this stage runs with
        if (cd /tmp && timeout 40 $PY -c "$code") >> "$LOG" 2>&1; then   # VAR=value
            echo "$name check: ok" >> "$LOG"
        else
            echo "$name check FAILED: using $var=$value" | tee -a "$LOG"
            export "$var=$value"
        fi
    }
    if [ "$DRY" != 1 ]; then
        # whole grids (n = 2^16: 256 blocks of work for 132 multiprocessors), against the C++
        smoke_or_fallback "persistent loop" STEIN_CORESET_CUDA_LOOP graph "
import cupy as cp, numpy as np, stein_coreset as sc
from stein_coreset.algorithms import weighted_rpcholesky
X = np.random.default_rng(0).standard_normal((65536, 4))
K = sc.SteinKernel(sc.IMQ(sigma=2.0)).bind(cp.asarray(X), -cp.asarray(X))
Kh = sc.SteinKernel(sc.IMQ(sigma=2.0)).bind(X, -X)
assert (K.backend.stein_thinning(K, 2000) == Kh.backend.stein_thinning(Kh, 2000)).all()
p1, _ = weighted_rpcholesky(K, rank=50, rng=1)
p2, _ = weighted_rpcholesky(Kh, rank=50, rng=1)
assert (p1 == p2).all(), 'persistent RPCholesky pivots differ'"
        # the fused AMD kernel against the C++ loop, within how far F's float32 rounding moves
        # the weights (engine.cuda.amd.amd_rounding_tolerance), not to the last bits
        smoke_or_fallback "fused AMD" STEIN_CORESET_CUDA_AMD xp "
import cupy as cp, numpy as np
from stein_coreset.engine.cuda import amd as cuda_amd
from stein_coreset.algorithms.amd import LowRankPlusDiagonal, amd
rng = np.random.default_rng(0)
F = 0.3 * rng.standard_normal((65536, 60))
dg = np.sum(F * F, axis=1) + rng.random(65536)
ref = amd(LowRankPlusDiagonal(F, dg), 300)
got = cp.asnumpy(amd(LowRankPlusDiagonal(cp.asarray(F), cp.asarray(dg)), 300))
tol = cuda_amd.amd_rounding_tolerance(F, dg - np.sum(F * F, axis=1), 300)
assert np.allclose(got, ref, rtol=tol, atol=1e-300), 'fused AMD weights differ'"
    fi
    GP=--goodpoints
    [ "$DRY" = 1 ] && GP=  # goodpoints.jax is not in the test environment
    stage_run gpu_check 150 $PY tools/device/gpu_check.py --xp "$XP" --n "$N16" $GP \
        --gp-n "$N16" --gp-methods st skt lskt --json "$OUT/gpu_check_$N16.json"
    stage_run lskt_2e20 45 $PY tools/device/gpu_large.py --xp "$XP" --n "$N20" \
        --json "$OUT/lskt_$N20.json"
    # the 16-core thread table (the CPU column of the figures)
    stage_run threads 110 $PY asv_benchmarks/scripts/threads_table.py $TT \
        --json "$OUT/threads_table.json"
    # lskt at n = 2^24 last (it takes what is left): LD's (n, r) factor and its float32 copy
    # (12 n r bytes) must fit; tau 0.3 (r = 148) needs 30 GB
    stage_run lskt_2e24 150 $PY tools/device/gpu_large.py --xp "$XP" --n "$N24" --tau 0.3 \
        --json "$OUT/lskt_$N24.json"
fi
echo "done $(date +%T)" >> "$LOG"
files=$(find "$OUT" -type f | wc -l)
echo "$stage wrote $files files to $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
if [ "$files" -gt 8 ]; then
    echo "$stage wrote $files files; only 8 come back from the machine" >&2
    exit 1
fi
if [ -n "$FAILED" ]; then
    echo "$stage: failed:$FAILED" | tee -a "$LOG" >&2
    exit 1
fi
