#!/usr/bin/env bash
# Issue 16's table on the GPU machine, in one command (under 5.5 minutes on one H200; QUICK=1 under 3.5):
#
#   bash tests/gpu/bench_alloc_pair.sh            # OUT=dir keeps the raw lines; QUICK=1 for the short form
#
# Bare and traced processes alternate, round by round (the order flips every round). Each process prints
# the minimum over its timed loops (tests/gpu/bench_alloc_pair.py, tests/gpu/alloc_pair.c); the table leads
# with the least of those minima for each variant, traced minus bare, and keeps the median of the per-round
# differences and their spread beside it, then the tracer's own time a pair as the stage build counts it.
# Why the least: on the H200 host each process runs at one of two speeds, whole, whatever its pinning or
# address layout (docs/validation.md, run 14: bare C pairs of 634-659 ns or 1000-1220 ns per process); the
# least of each variant compares the fast speed with the fast speed, and needs many processes a variant.
# So the Python cases run in forked children of a fork server per variant (bench_alloc_pair.py serve): a new
# process, a new CUDA context, no interpreter start or torch import; loops of PAIRS (10,000) pairs, LOOPS (5)
# of them after a warm one. The runner is tests/gpu/bench_alloc_rounds.py.
# Needs build/liboomtrace.so (make), build/bench/liboomtrace-stages.so (made here if missing: the counted
# row), .carry/lib as for tests/gpu/run.sh; PyTorch with CUDA; a C compiler and the CUDA headers.
# Every process runs pinned to a few CPUs (PIN, default 4-7; PIN= turns it off): unpinned, the bare processes'
# own minima spread by over 1 µs per pair between rounds on the H200 host (run 10). Not to one CPU: there the
# tracer's compressor thread and PyTorch's autograd thread share the program's core, which a real run does
# not do (run 12).
# Settings: ROUNDS (default 40) and BUDGET (seconds of rounds, default 180, QUICK 115; no round starts
# after it, so the budget decides), CASES (default "pair pair20 step c_async", QUICK "pair pair20 c_async"),
# C_REPS (C processes a variant and round, default 2), STEP_EVERY (the step case in every Nth round, default
# 2), STAGE_PROCS (stage-build processes a case, after the rounds: default 2, QUICK 1). QUICK=1 also leaves
# out the diagnostic variants (OOMTRACE_PYTHON=0, OOMTRACE_DEPTH=4). LIB_B=path/liboomtrace.so (another build,
# e.g. the one before a change) adds a variant traced with it to the pair, pair20 and C rows, in the same
# rounds: between runs the least moves by up to ~100 ns, so two builds are compared within one run.
# Then the Python rows again within one process (INPROC, below: ~90 s, QUICK ~60 s; on a GPU only, as the stage
# build's switch needs a wrapper reached). Without a GPU, BENCH_DEVICE=cpu CUDA_LIBDIR=build/fake runs the table's
# mechanics on the CPU and the stand-in
# driver (LD_LIBRARY_PATH=build/fake FAKECUDA_CAPACITY=1T): a check of the runner, not a measurement.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
export ROUNDS=${ROUNDS:-40}
export PIN=${PIN-4-7}
if [ -n "${QUICK:-}" ]; then
    export BUDGET=${BUDGET:-115} CASES=${CASES:-pair pair20 c_async}
else
    export BUDGET=${BUDGET:-180} CASES=${CASES:-pair pair20 step c_async}
fi
export C_REPS=${C_REPS:-2}
export OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
PY=$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')
export LIB=$ROOT/build/liboomtrace.so
export STAGES_LIB=$ROOT/build/bench/liboomtrace-stages.so
PASS_LIB=$ROOT/build/bench/liboomtrace-pass.so
export CARRY_LD=$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
CUDA_HOME=${CUDA_HOME:-$(ls -d /usr/local/cuda /usr/local/cuda-* 2>/dev/null | head -1)}
[ -f "$LIB" ] || { echo "bench_alloc_pair: $LIB missing (make)" >&2; exit 2; }
[ -f "$STAGES_LIB" ] || make -s -j4 bench-stages >&2 || echo "bench_alloc_pair: no stage build: no counted row" >&2
export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync OOMTRACE_QUIET=1 OOMTRACE_DIR=$OUT/snap
mkdir -p "$OUT/snap"
export CBIN=$OUT/alloc_pair
cc -O2 -I"$CUDA_HOME/include" -o "$CBIN" tests/gpu/alloc_pair.c -L"${CUDA_LIBDIR:-$CUDA_HOME/lib64/stubs}" -lcuda -ldl \
    || { echo "bench_alloc_pair: cannot build tests/gpu/alloc_pair.c (CUDA_HOME=$CUDA_HOME)" >&2; CBIN=; }
"$PY" tests/gpu/bench_alloc_rounds.py
rc=$?
# The same rows within one process (tests/gpu/bench_inproc.py: blocks traced and passed through by the stage
# build, ABBA): what the host's two speeds between processes leave the rows above unable to settle, the step's
# 2% above all (with QUICK too). The pass-through build's processes (make bench-stages) alternate with the stage
# build's: its ratio is read, without the probes. INPROC=0 leaves it out; INPROC_CASES (default step,pair,pair20,
# and c_async where tests/gpu/alloc_pair.c built); INPROC_PROCS (default 3, QUICK 2) processes a case.
if [ "${INPROC:-1}" = 1 ] && [ -f "$STAGES_LIB" ] && [ "${BENCH_DEVICE:-cuda}" = cuda ]; then
    procs=${INPROC_PROCS:-$([ -n "${QUICK:-}" ] && echo 2 || echo 3)}
    echo "== within one process: traced blocks over passed-through ones (tests/gpu/bench_inproc.py)"
    pass_args=()
    [ -f "$PASS_LIB" ] && pass_args=(--pass-lib "$PASS_LIB")
    LD_LIBRARY_PATH=$CARRY_LD "$PY" tests/gpu/bench_inproc.py "$STAGES_LIB" "${pass_args[@]}" \
        --cases "${INPROC_CASES:-step,pair,pair20${CBIN:+,c_async}}" --procs "$procs" --rounds 16 --steps 50 \
        --pairs 10000 ${CBIN:+--cbin "$CBIN"} ${PIN:+--cpus "$PIN"} --raw "$OUT/inproc.jsonl" || rc=1
fi
exit $rc
