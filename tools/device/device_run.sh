#!/usr/bin/env bash
# The prepared run on a GPU machine (one CUDA GPU with CuPy, JAX, compute-sanitizer, 16 host
# cores, no network): one call, the questions in order of importance, each step bounded, each
# writing what it found as it goes, so a step cut at its limit still answers the ones before.
#
#   run(command="COMMIT=<sha> bash tools/device/device_run.sh", carry=[".whl"], timeout_s=560)
#   (fill .whl/ first, on any x86-64 machine with Python 3.12 and PyPI:
#    bash tools/device/device_wheels.sh --check; COMMIT: git rev-parse HEAD, since .git does
#    not travel)
#
# The plan, the questions in order of importance (each step's limit is in PLAN below; the whole
# run ends PLAN_DEADLINE_S after its start):
#   (1) does every method run and agree with NumPy on CuPy?
#       env      the wheels installed; commit, GPU, versions
#       tests    every CUDA test, names logged as they pass, each under a 60 s thread timeout
#                (a hang is reported with its stack, naming the test)
#       loops    the persistent loops and the fused AMD kernel on whole grids against the C++
#                (one failing switches the rest to its other device implementation)
#       check14  gpu_check at n = 2^14: every method on CuPy against NumPy
#   (2) how fast? time16: gpu_check at 2^16, every method's time, goodpoints.jax beside skt,
#       st and lskt, both sides warm
#   (3) lskt at 2^20? lskt20: time, peak device memory, KSD (tau 0.4)
#   (4) the 16-core thread table? threads
#   (5) only if time is left: sanitize (every kernel on whole grids, then under
#       compute-sanitizer's racecheck and synccheck at small n), lskt22 (n = 2^22, tau 0.4,
#       rank 446: 22 GB)
# Machine start (~3 min) + the deadline (9 min) = 12 minutes of the 15, leaving 3 to rerun a
# step on the warm machine (STEPS="tests check14" bash tools/device/device_run.sh).
#
# Files (at most 8 come back): plan.log, tests.xml, gpu_check_16384.json,
# gpu_check_65536.json, lskt_1048576.json, threads_table.json, sanitize.log, lskt_4194304.json.
#
# DRY_RUN=1 runs every step on this machine's CPU at tiny sizes (the CI step): the CUDA tests
# as the CPU sees them, the kernel tour on the tests' simulator under a stand-in
# compute-sanitizer, gpu_check and the timings on array_api_strict instead of CuPy, a stand-in
# nvidia-smi; it also prints the register report (tools/device/registers.py, failing when a
# kernel leaves no headroom) and the projected device time of the plan from the step limits,
# failing when it exceeds PLAN_BUDGET_S (12 minutes). Run from the repository root. Each
# script's own folder, not the root, heads sys.path, so on the device Python imports the
# installed wheel, not the source tree.
set -u
# the commands this script runs besides bash's builtins (.ci/run's compiler-free PATH links
# each: tests/test_device_run.py checks the two lists agree)
NEEDS="awk cat chmod date find head ldd ls mkdir mktemp nproc tail tee timeout tr uptime wc"
missing=""
for tool in $NEEDS; do command -v "$tool" > /dev/null 2>&1 || missing="$missing $tool"; done
if [ -n "$missing" ]; then
    echo "tools/device/device_run.sh needs these commands on PATH:$missing" >&2
    exit 2
fi
DRY=${DRY_RUN:-0}
OUT=${OUT:-/tmp/device_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
REPO=$(pwd)
PY=python3
START_S=180                          # the machine's start, counted as device time
PLAN_DEADLINE_S=540                  # the steps' wall time at most
PLAN_BUDGET_S=${PLAN_BUDGET_S:-720}  # start + deadline: 12 min, 3 of the 15 left to rerun
# step name, limit (s), in order of importance
PLAN="env:45 tests:110 loops:40 check14:60 time16:130 lskt20:60 threads:90 sanitize:60 lskt22:90"
STEPS=${STEPS:-all}  # a rerun: STEPS="tests check14"; STEPS=none: the projection only
SCALE=1  # of every limit and the deadline
if [ "$DRY" = 1 ]; then
    PY=${PYTHON:-python}
    SCALE=3  # a shared CI machine, the simulator's threads
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
echo "compute-sanitizer stand-in (dry run): $*" >> "$log"
exec "$@"
STUB
    chmod +x "$stubs/nvidia-smi" "$stubs/compute-sanitizer"
    export PATH="$stubs:$PATH"
    XP=strict; SIM=--simulate
    N14=256; N16=256; N20=512; N22=1024; TT="--n 8 --threads 1,2 --methods st,skt --budget-s 20"
else
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "$REPO"/.whl/*.whl > /tmp/install.log 2>&1 || {
        tail -20 /tmp/install.log; exit 1; }
    # proxsuite (goodpoints.jax's QP solver) installs under cmeel.prefix/, whose .pth
    # PYTHONPATH does not read
    PYTHONPATH=/tmp/site:$(ls -d /tmp/site/cmeel.prefix/lib/python3*/site-packages 2>/dev/null)
    export PYTHONPATH
    XP=cupy; SIM=
    N14=16384; N16=65536; N20=1048576; N22=4194304
    TT="--n 16 --threads 1,2,4,8,16 --st-frac 0.25 --budget-s 80"
fi
# one compile of each CUDA module per run, shared by every step's processes: CuPy's kernel
# cache and the NVRTC compile checks' cache in one place for the run
export CUPY_CACHE_DIR=/tmp/device_cache/cupy STEIN_CORESET_NVRTC_CACHE=/tmp/device_cache/nvrtc
mkdir -p "$CUPY_CACHE_DIR" "$STEIN_CORESET_NVRTC_CACHE"
LOG="$OUT/plan.log"
export PY DRY REPO OUT SIM
FAILED=""
T0=$SECONDS
DEADLINE=$((SECONDS + SCALE * PLAN_DEADLINE_S))

limit_of() { for s in $PLAN; do [ "${s%%:*}" = "$1" ] && echo "${s##*:}"; done; }

wanted() { [ "$STEPS" = all ] || case " $STEPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

step() {  # name command...: bounded by its limit (clipped to the deadline, SIGKILL 10 s after
    local name=$1  # SIGTERM), the whole output into plan.log, its tail to stdout; skipped when
    shift          # too little time is left for it
    LAST_RC=skipped
    wanted "$name" || return 0
    local t=$(( $(limit_of "$name") * SCALE )) left=$((DEADLINE - SECONDS))
    if [ "$left" -lt $((t / 3)) ] || [ "$left" -lt 15 ]; then
        echo "=== $name SKIPPED: ${left}s left before the deadline (its limit ${t}s)" | tee -a "$LOG"
        return 0
    fi
    [ "$t" -gt "$left" ] && t=$left
    echo "=== $name (limit ${t}s) start $(date +%T), $((SECONDS - T0))s into the plan" | tee -a "$LOG"
    if [ "$(type -t "$1")" = function ]; then  # a function of this script: in a bash of its own
        timeout -k 10 "$t" bash -c "$(declare -f "$1"); $*" > "/tmp/step_$name.log" 2>&1
    else
        timeout -k 10 "$t" "$@" > "/tmp/step_$name.log" 2>&1
    fi
    local rc=$?
    LAST_RC=$rc
    [ "$rc" -ne 0 ] && FAILED="$FAILED $name"
    cat "/tmp/step_$name.log" >> "$LOG"
    case $rc in 124|137) echo "=== $name CUT at its limit (rc=$rc)" | tee -a "$LOG" ;; esac
    echo "=== $name rc=$rc end $(date +%T)" | tee -a "$LOG"
    tail -n 12 "/tmp/step_$name.log"
}

# ---- the plan's projected device time, from the limits -------------------------------------
total=0
for s in $PLAN; do total=$((total + ${s##*:})); done
steps=$(( total < PLAN_DEADLINE_S ? total : PLAN_DEADLINE_S ))
projected=$((START_S + steps))
{
    echo "plan (step: limit s, cumulative min with the ${START_S} s start):"
    cum=$START_S
    for s in $PLAN; do
        cum=$((cum + ${s##*:}))
        awk -v n="${s%%:*}" -v l="${s##*:}" -v c="$cum" \
            'BEGIN { printf "  %-9s %4d s  %5.1f min\n", n, l, c / 60 }'
    done
    echo "  deadline ${PLAN_DEADLINE_S} s: projected device time $projected s" \
         "($(awk -v p=$projected 'BEGIN { printf "%.1f", p / 60 }') min) of the 15-minute lease;" \
         "budget $PLAN_BUDGET_S s"
} | tee -a "$LOG"
if [ "$projected" -gt "$PLAN_BUDGET_S" ]; then
    echo "the plan's projected device time $projected s exceeds $PLAN_BUDGET_S s" | tee -a "$LOG" >&2
    exit 1
fi

# ---- (1) does every method run and agree with NumPy on CuPy ---------------------------------
env_info() {
    date
    echo "commit ${COMMIT:-$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)}"
    nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv
    echo "cores: $(nproc)"; uptime; ldd --version 2>&1 | head -1  # the wheel is manylinux_2_35
    $PY -c "import sys, numpy; print(sys.version); print('numpy', numpy.__version__)"
    [ "$DRY" = 1 ] || $PY -c "import cupy; print('cupy', cupy.__version__)"
    if [ "$DRY" = 1 ]; then  # the register and occupancy report of every kernel (NVRTC, sm_90)
        (cd tools/device && $PY registers.py)
    fi
}
step env env_info
# every CUDA test; -v logs each name as it passes; a hang is a stack dump naming its test
step tests $PY -m pytest -v -p no:cacheprovider --timeout 60 --timeout-method thread \
    --junitxml "$OUT/tests.xml" tests/test_cuda_backend.py tests/test_gpu_path.py \
    tests/test_engine.py tests/test_stein_thinning.py tests/test_kernels.py \
    tests/test_kernel_thinning.py tests/test_amd.py tests/test_debias.py \
    tests/test_rpcholesky.py tests/test_recombination_backends.py \
    tests/test_compress_weighted.py tests/test_estimators_losses.py -k "cupy or cuda"
# the persistent loops and the fused AMD kernel on whole grids (n = 2^16: 256 blocks of work for
# 132 multiprocessors) against the C++; where one fails, the rest of the plan runs with its
# other device implementation (the graph loops, the array-API AMD) and the log says so
loops() {
    (cd /tmp && $PY -c "
import numpy as np, stein_coreset as sc
from stein_coreset.algorithms import weighted_rpcholesky
import cupy as cp
X = np.random.default_rng(0).standard_normal((65536, 4))
K = sc.SteinKernel(sc.IMQ(sigma=2.0)).bind(cp.asarray(X), -cp.asarray(X))
Kh = sc.SteinKernel(sc.IMQ(sigma=2.0)).bind(X, -X)
assert (K.stein_thinning(2000) == Kh.stein_thinning(2000)).all(), 'persistent Stein thinning'
p1, _ = weighted_rpcholesky(K, rank=50, rng=1)
p2, _ = weighted_rpcholesky(Kh, rank=50, rng=1)
assert (p1 == p2).all(), 'persistent RPCholesky pivots differ'
print('persistent loops: ok')") || { echo "persistent loops FAILED"; return 3; }
    (cd /tmp && $PY -c "
import numpy as np
import cupy as cp
from stein_coreset.engine.cuda import amd as cuda_amd
from stein_coreset.algorithms.amd import LowRankPlusDiagonal, amd
rng = np.random.default_rng(0)
F = 0.3 * rng.standard_normal((65536, 60))
dg = np.sum(F * F, axis=1) + rng.random(65536)
ref = amd(LowRankPlusDiagonal(F, dg), 300)
got = cp.asnumpy(amd(LowRankPlusDiagonal(cp.asarray(F), cp.asarray(dg)), 300))
tol = cuda_amd.amd_rounding_tolerance(F, dg - np.sum(F * F, axis=1), 300)
assert np.allclose(got, ref, rtol=tol, atol=1e-300), 'fused AMD weights differ'
print('fused AMD: ok')") || { echo "fused AMD FAILED"; return 4; }
}
if [ "$DRY" != 1 ]; then
    step loops loops
    case $LAST_RC in
        3) export STEIN_CORESET_CUDA_LOOP=graph STEIN_CORESET_CUDA_AMD=xp  # AMD's is persistent too
           echo "the rest of the plan runs with STEIN_CORESET_CUDA_LOOP=graph, _AMD=xp" | tee -a "$LOG" ;;
        4) export STEIN_CORESET_CUDA_AMD=xp
           echo "the rest of the plan runs with STEIN_CORESET_CUDA_AMD=xp" | tee -a "$LOG" ;;
    esac
fi
step check14 $PY tools/device/gpu_check.py --xp "$XP" --n "$N14" --json "$OUT/gpu_check_$N14.json"
# ---- (2) skt at 2^16 against goodpoints.jax, both warm; every method's time -----------------
GP=--goodpoints
[ "$DRY" = 1 ] && GP=  # goodpoints.jax is not in the test environment
step time16 $PY tools/device/gpu_check.py --xp "$XP" --n "$N16" $GP --gp-n "$N16" \
    --gp-methods skt st lskt --json "$OUT/gpu_check_$N16.json"
# ---- (3) lskt at 2^20 ------------------------------------------------------------------------
step lskt20 $PY tools/device/gpu_large.py --xp "$XP" --n "$N20" --json "$OUT/lskt_$N20.json"
# ---- (4) the 16-core thread table ------------------------------------------------------------
step threads $PY asv_benchmarks/scripts/threads_table.py $TT --json "$OUT/threads_table.json"
# ---- (5) if time is left: sanitizers on every kernel, then a larger n ------------------------
sanitize() {  # every kernel on whole grids (one block per multiprocessor), then under each
    local rc=0   # sanitizer at small n; their logs appended to one file
    $PY tools/device/kernel_tour.py $SIM --full || rc=1
    for tool in racecheck synccheck; do
        compute-sanitizer --tool "$tool" --error-exitcode 1 --log-file "/tmp/$tool.log" \
            $PY tools/device/kernel_tour.py $SIM || rc=1
        { echo "---- $tool"; cat "/tmp/$tool.log"; } >> "$OUT/sanitize.log"
    done
    return $rc
}
step sanitize sanitize
step lskt22 $PY tools/device/gpu_large.py --xp "$XP" --n "$N22" --json "$OUT/lskt_$N22.json"

echo "done $(date +%T), $((SECONDS - T0))s" >> "$LOG"
files=$(find "$OUT" -type f | wc -l)
echo "wrote $files files to $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
if [ "$files" -gt 8 ]; then
    echo "wrote $files files; only 8 come back from the machine" >&2
    exit 1
fi
if [ -n "$FAILED" ]; then
    echo "failed:$FAILED" | tee -a "$LOG" >&2
    exit 1
fi
