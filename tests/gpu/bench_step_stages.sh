#!/usr/bin/env bash
# What the tracer itself costs a small CPU-bound training step (issue 16's step case), counted, not inferred
# from a difference of two noisy processes: the step of tests/gpu/bench_alloc_pair.py under
# backend:cudaMallocAsync with the stage build (build/bench/liboomtrace-stages.so, make bench-stages), which
# counts rdtsc cycles per stage of every event and prints one line of JSON at exit (lib/common/stage.h).
# The tracer's cycles per step, against the bare step's time in processes of the same run, is the tracer's
# share of the step; the host's +-10% between processes moves the bare figure, not the counted one.
#
#   bash tests/gpu/bench_step_stages.sh        # about 1.5 minutes on one H200; ROUNDS=2, OUT=dir to keep
#
# Runs, pinned to PIN (4-7) as bench_alloc_pair.sh: ROUNDS x (bare step, stage-build step), then one
# stage-build process each of the shallow pair loop and the 20-frame pair loop (per-event cost with every
# cache hitting). Needs build/bench/liboomtrace-stages.so (built here with make if missing) and .carry/lib.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
ROUNDS=${ROUNDS:-2}
PIN=${PIN-4-7}
LOOPS=${LOOPS:-6}
STEPS=${STEPS:-100}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT/snap"
PY=$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')
LIB=$ROOT/build/bench/liboomtrace-stages.so
CARRY_LD=$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -f "$LIB" ] || make -s -j4 bench-stages >&2 || { echo "bench_step_stages: cannot build $LIB" >&2; exit 2; }
export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync OOMTRACE_QUIET=1 OOMTRACE_DIR=$OUT/snap OOMTRACE_DUMP=none
pin=()
[ -n "$PIN" ] && pin=(taskset -c "$PIN")
RAW=$OUT/step_stages.jsonl
: >"$RAW"
one() { # variant case
    local v=$1 c=$2 pre=() args=(--loops "$LOOPS" --steps "$STEPS")
    [ "$v" = stages ] && pre=(LD_PRELOAD="$LIB" LD_LIBRARY_PATH="$CARRY_LD" OOMTRACE_FRAMEWORKS=0)
    [ "$c" != step ] && args=(--loops 8)
    local line err=$OUT/$v-$c-$r.err
    line=$(env "${pre[@]}" timeout -k 5 120 "${pin[@]}" "$PY" tests/gpu/bench_alloc_pair.py "$c" "${args[@]}" 2>"$err")
    local st
    st=$(grep -a '^OOMTRACE_STAGES ' "$err" | tail -1 | cut -d' ' -f2-)
    [ -n "$line" ] && echo "{\"round\": $r, \"variant\": \"$v\", \"case\": \"$c\", \"result\": $line, \"stages\": ${st:-null}}" >>"$RAW"
}
for r in $(seq 1 "$ROUNDS"); do
    echo "step stages: round $r/$ROUNDS" >&2
    if [ $((r % 2)) = 1 ]; then one bare step; one stages step; else one stages step; one bare step; fi
done
r=0
one stages pair
one stages pair20
for f in "$OUT"/stages-*.err; do
    [ -f "$f" ] && echo "== $(basename "$f" .err)" && "$PY" bench/stage_summary.py "$f" | grep -v '^{'
done
"$PY" - "$RAW" "$LOOPS" "$STEPS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
loops, steps = int(sys.argv[2]), int(sys.argv[3])
ran = 20 + loops * steps  # bench_alloc_pair.py step: 20 warm-up steps, then the loops
bare = [r["result"]["min"] / 1e3 for r in rows if r["variant"] == "bare"]
print("| process | us/step (least loop) | tracer us/step (counted) | events/step | tracer ns/event | tracer share of bare's least step |")
print("|---|---:|---:|---:|---:|---:|")
for r in rows:
    st = r["stages"]
    if r["case"] != "step":
        if st:
            ev = st["allocs"] + st["frees"]
            print(f"| {r['case']} (stages) | {r['result']['min']:.0f} ns/pair | | | {st['tracer_ns_per_event']:.0f} | |")
        continue
    us = r["result"]["min"] / 1e3
    if not st:
        print(f"| {r['variant']} r{r['round']} | {us:.1f} | | | | |")
        continue
    t = st["tracer_ns"] / ran / 1e3
    ev = (st["allocs"] + st["frees"]) / ran
    share = t / min(bare) if bare else float("nan")
    print(f"| stages r{r['round']} | {us:.1f} | {t:.1f} | {ev:.0f} | {st['tracer_ns_per_event']:.0f} | {share:.4f} -> ratio {1 + share:.4f} |")
PY
echo "raw: $RAW; stderr per process: $OUT/*.err" >&2
