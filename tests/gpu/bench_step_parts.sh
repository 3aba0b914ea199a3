#!/usr/bin/env bash
# Where the tracer's cost on a small CPU-bound training step goes (issue 16's step case): the step of
# tests/gpu/bench_alloc_pair.py under backend:cudaMallocAsync, in alternating processes, with parts of the
# tracer switched off by its own options, plus the events each step records and what the Python companion's
# per-step work and each of its pieces cost (tests/gpu/bench_step_hooks.py, in one traced process).
#
#   bash tests/gpu/bench_step_parts.sh         # ROUNDS=3 by default; about 4 minutes on one H200
#
# Variants: bare; traced (OOMTRACE_FRAMEWORKS=0); disabled (preloaded, OOMTRACE_DISABLE=1: the interposed
# calls pass straight through); nopython (OOMTRACE_PYTHON=0); depth16 (OOMTRACE_DEPTH=16, Python frames on);
# depth4 (OOMTRACE_DEPTH=4 OOMTRACE_PYTHON=0); companion (OOMTRACE_FRAMEWORKS=1); and bare and traced again
# unpinned (PIN is 4-7 otherwise, as in bench_alloc_pair.sh). Each process prints the least of its loops;
# the table gives the least of each variant over the rounds and its ratio to bare's least.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
ROUNDS=${ROUNDS:-3}
PIN=${PIN-4-7}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT/snap"
PY=$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')
LIB=$ROOT/build/liboomtrace.so
CARRY_LD=$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -f "$LIB" ] || { echo "bench_step_parts: $LIB missing (make)" >&2; exit 2; }
export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync OOMTRACE_QUIET=1 OOMTRACE_DIR=$OUT/snap
RAW=$OUT/step_parts.jsonl
: >"$RAW"
env_of() {
    case $1 in
    bare | bare_unpinned) echo "" ;;
    traced | traced_unpinned) echo "OOMTRACE_FRAMEWORKS=0" ;;
    disabled) echo "OOMTRACE_DISABLE=1" ;;
    nopython) echo "OOMTRACE_FRAMEWORKS=0 OOMTRACE_PYTHON=0" ;;
    depth16) echo "OOMTRACE_FRAMEWORKS=0 OOMTRACE_DEPTH=16" ;;
    depth4) echo "OOMTRACE_FRAMEWORKS=0 OOMTRACE_PYTHON=0 OOMTRACE_DEPTH=4" ;;
    companion) echo "OOMTRACE_FRAMEWORKS=1" ;;
    esac
}
one() {
    local v=$1 pin=() pre=()
    [ -n "$PIN" ] && [[ $v != *_unpinned ]] && pin=(taskset -c "$PIN")
    [[ $v != bare* ]] && pre=(LD_PRELOAD="$LIB" LD_LIBRARY_PATH="$CARRY_LD")
    local line
    line=$(env "${pre[@]}" $(env_of "$v") timeout -k 5 120 "${pin[@]}" "$PY" tests/gpu/bench_alloc_pair.py step \
        --loops 6 --steps 100 2>>"$OUT/err.txt")
    [ -n "$line" ] && echo "{\"round\": $r, \"variant\": \"$v\", \"result\": $line}" >>"$RAW"
}
VARIANTS=(bare traced disabled nopython depth16 depth4 companion bare_unpinned traced_unpinned)
for r in $(seq 1 "$ROUNDS"); do
    echo "step parts: round $r/$ROUNDS" >&2
    vs=("${VARIANTS[@]}")
    if [ $((r % 2)) = 0 ]; then rev=(); for ((i = ${#vs[@]} - 1; i >= 0; i--)); do rev+=("${vs[$i]}"); done; vs=("${rev[@]}"); fi
    for v in "${vs[@]}"; do one "$v"; done
done
# Events a step records: one traced process, 20 warm steps + 1 loop of 100, a snapshot at exit.
mkdir -p "$OUT/count"
OOMTRACE_DIR=$OUT/count OOMTRACE_DUMP=exit OOMTRACE_FRAMEWORKS=0 LD_PRELOAD="$LIB" LD_LIBRARY_PATH="$CARRY_LD" \
    "$PY" tests/gpu/bench_alloc_pair.py step --loops 1 --steps 100 >/dev/null 2>>"$OUT/err.txt"
snap=$(ls "$OUT"/count/*.oomt 2>/dev/null | head -1)
events=
[ -n "$snap" ] && [ -x build/oomtrace-read ] &&
    events=$(LD_LIBRARY_PATH="$CARRY_LD" build/oomtrace-read --format json "$snap" 2>>"$OUT/err.txt" |
        "$PY" -c 'import json,sys; e=json.load(sys.stdin)["events"]; print(e["recorded"], json.dumps(e.get("by_kind")))')
echo "events recorded over 120 steps (+ start-up): ${events:-unknown}"
# The companion's per-step cost and its pieces, switched on and off inside one traced process (~3.5 min)
OOMTRACE_FRAMEWORKS=1 LD_PRELOAD="$LIB" LD_LIBRARY_PATH="$CARRY_LD" ${PIN:+taskset -c "$PIN"} "$PY" \
    tests/gpu/bench_step_hooks.py >>"$OUT/hooks.jsonl" 2>"$OUT/hooks.txt"
cat "$OUT/hooks.txt"
"$PY" - "$RAW" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
least = {}
for r in rows:
    least.setdefault(r["variant"], []).append(r["result"]["min"] / 1e3)
print("| variant | least µs/step | ratio to bare (least of each) | processes |")
print("|---|---:|---:|---:|")
for v, xs in least.items():
    base = min(least.get("bare_unpinned" if v.endswith("_unpinned") else "bare", [float("nan")]))
    print(f"| {v} | {min(xs):.1f} | {min(xs) / base:.3f} | {len(xs)} |")
PY
echo "raw: $RAW; stderr: $OUT/err.txt" >&2
