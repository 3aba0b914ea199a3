#!/bin/sh
# The training run of the profile-guided build (Makefile: PGO). The library built with -fprofile-generate runs
# what its hot paths are, against the stand-in driver: a training step's allocation mix from Python
# (bench/step_mix.py: the forward's chains, the backward thread's borrowed stacks, the optimizer's; then one
# place in a loop, the pair benchmarks' path) under each Python in PGO_PYTHON (default python3: the frame
# layouts differ by version, and each version's branches are trained only by its own runs), and from C
# (bench/cold_capture: no interpreter in the process).
#
#   tools/pgo-train.sh GEN_LIB PROFILE_DIR BUILD
#
# GEN_LIB: the instrumented library; PROFILE_DIR: where it writes its counts (its -fprofile-generate=); BUILD: the
# build directory of the stand-in driver and the bench programs. PGO_LOG=file keeps the runs' output. A training
# run that fails leaves its counts out or partial: the final build compiles what was not run as without a profile,
# and this says so on stderr.
set -u
[ $# -eq 3 ] || { echo "usage: tools/pgo-train.sh GEN_LIB PROFILE_DIR BUILD" >&2; exit 2; }
lib=$1 prof=$2 b=$3
here=$(cd "$(dirname "$0")/.." && pwd)
snaps=$(mktemp -d) || exit 1
trap 'rm -rf "$snaps"' EXIT
log=${PGO_LOG:-/dev/null}

# train FRAMEWORKS CMD...: FRAMEWORKS 1 runs with the framework companion, as the library runs by default (each
# allocation then looks whether the companion is due); the benchmarks of the tracer alone run without it (0).
train() {
    fw=$1
    shift
    LD_LIBRARY_PATH="$b/fake" FAKECUDA_CAPACITY=1T OOMTRACE_QUIET=1 OOMTRACE_DUMP=none OOMTRACE_DIR="$snaps" \
        OOMTRACE_FRAMEWORKS=$fw STEPMIX_LIB="$b/bench/libstepmix.so" LD_PRELOAD="$lib" timeout 120 "$@" >>"$log" 2>&1
}

ran=0
for py in ${PGO_PYTHON:-python3}; do
    command -v "$py" >/dev/null 2>&1 || { echo "oomtrace: profile-guided build: $py not found: not trained with it" >&2; continue; }
    if train 1 "$py" "$here/bench/step_mix.py" 60 --loops 1 --evict 64 && train 0 "$py" "$here/bench/step_mix.py" 20 --loops 1 --pair; then
        ran=$((ran + 1))
    else
        echo "oomtrace: profile-guided build: the Python training with $py failed: its paths may be built without a profile" >&2
    fi
done
train 0 "$b/bench/cold_capture" --places 16 --evict 64 --calls 4000 && train 0 "$b/bench/cold_capture" --pair --calls 4000 ||
    echo "oomtrace: profile-guided build: the C training failed: its paths may be built without a profile" >&2
[ "$ran" -gt 0 ] || echo "oomtrace: profile-guided build: no Python training ran: the Python paths are built without a profile" >&2

n=$(find "$prof" -name '*.gcda' | wc -l)
[ "$n" -gt 0 ] || echo "oomtrace: profile-guided build: no counts were written: built without a profile" >&2
exit 0
