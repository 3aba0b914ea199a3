#!/usr/bin/env bash
# Where a traced allocation's time goes when the tracer's own code is small (issue 16, sixth pass), in one
# command of under 3 minutes on one H200:
#
#   make && make bench-stages && bash tests/gpu/bench_pair_parts.sh        # OUT=dir keeps the raw lines
#
# 1. The C pair (tests/gpu/alloc_pair.c with rdtsc around each call) bare, traced, and under the stage build
#    timing the driver calls inside the wrappers, with the ring's compressor on and off: whether the ~150 ns
#    a traced pair adds beyond the wrappers' own code is the driver running slower inside them, the
#    compressor thread, the wrappers' entry and exit, or the loop around the calls.
# 2. The CPU-bound step under the stage build: each stage of the record split by thread (main or autograd's)
#    and by whether the previous event was another thread's, and the tracer's time a step with the outer
#    probes only.
# Runs the runner tests/gpu/bench_pair_parts.py (its header lists the variants and settings: C_BUDGET,
# ROUNDS, STEP, PIN). Needs build/liboomtrace.so, build/bench/liboomtrace-stages.so (made here if missing),
# .carry/lib as for tests/gpu/run.sh, PyTorch with CUDA for the step, a C compiler and the CUDA headers.
# Without a GPU, BENCH_DEVICE=cpu CUDA_LIBDIR=build/fake LD_LIBRARY_PATH=build/fake FAKECUDA_CAPACITY=1T
# runs the same mechanics on the stand-in driver (STEP=0 without torch): a check of the runner only.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
export OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT/snap"
PY=$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')
# LIB= and STAGES_LIB= name other builds (make bench-pylink: build/bench/liboomtrace-pylink.so and
# build/bench/liboomtrace-stages-pylink.so, the Python link of issue 16's seventh pass)
export LIB=${LIB:-$ROOT/build/liboomtrace.so} STAGES_LIB=${STAGES_LIB:-$ROOT/build/bench/liboomtrace-stages.so}
export CARRY_LD=$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -f "$LIB" ] || { echo "bench_pair_parts: $LIB missing (make)" >&2; exit 2; }
[ -f "$STAGES_LIB" ] || make -s -j4 bench-stages >&2 || { echo "bench_pair_parts: cannot build $STAGES_LIB" >&2; exit 2; }
CUDA_HOME=${CUDA_HOME:-$(ls -d /usr/local/cuda /usr/local/cuda-* 2>/dev/null | head -1)}
export CBIN=$OUT/alloc_pair
cc -O2 -I"$CUDA_HOME/include" -o "$CBIN" tests/gpu/alloc_pair.c -L"${CUDA_LIBDIR:-$CUDA_HOME/lib64/stubs}" -lcuda \
    || { echo "bench_pair_parts: cannot build tests/gpu/alloc_pair.c (CUDA_HOME=$CUDA_HOME)" >&2; exit 2; }
export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync OOMTRACE_DIR=$OUT/snap OOMTRACE_DUMP=none
"$PY" tests/gpu/bench_pair_parts.py
echo "raw: $OUT/parts.jsonl" >&2
