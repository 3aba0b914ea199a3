#!/usr/bin/env bash
# bench/run.sh: oomtrace's CPU benchmarks against the stand-in driver (build/fake/libcuda.so.1).
#
#   bench/run.sh [--built] [--quick]
#
# Builds (make bench-build, unless --built), runs every benchmark, prints each section's figures next
# to their targets and floors as it goes, then the whole table; writes it as markdown to
# build/bench/results.md. Raw outputs stay in build/bench/raw/. About 1.5-2 minutes on 2 cores (3.5
# when other work loads the machine); --quick
# runs fewer rounds (for trying the script, not for quoting).
#
# Every figure comes from ONE run of this script, measured interleaved with its baseline:
#   - traced and untraced processes alternate, round by round (the order flips every round), and a
#     round's figure is traced minus untraced of that round;
#   - floors are measured in the same rounds (in the same process where they can be).
# Medians are quoted with min-max over the rounds. Nothing here asserts a timing: the "met?" column is
# information, and the exit status only reflects whether the benchmarks ran.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
B=$ROOT/build
OUT=$B/bench
RAW=$OUT/raw
SNAPS=$OUT/snaps

BUILT=0
QUICK=0
for a in "$@"; do
    case $a in
    --built) BUILT=1 ;;
    --quick) QUICK=1 ;;
    *) echo "usage: bench/run.sh [--built] [--quick]" >&2; exit 2 ;;
    esac
done

ALLOC_ROUNDS=7; ALLOC_CALLS=65536
PY_ROUNDS=6; PY_CALLS=32768
OBJ_ROUNDS=5; OBJ_CALLS=8192
STEADY_ROUNDS=5; STEADY_STEPS=10000
DUMP_ROUNDS=5
READER_ROUNDS=5; READER_JSON_FULL_ROUNDS=2
READER_EVENTS=10000000
if [ "$QUICK" = 1 ]; then
    ALLOC_ROUNDS=3; ALLOC_CALLS=16384; OBJ_ROUNDS=2; OBJ_CALLS=2048; PY_ROUNDS=3; PY_CALLS=8192; STEADY_ROUNDS=2; STEADY_STEPS=2000
    DUMP_ROUNDS=2; READER_ROUNDS=2; READER_JSON_FULL_ROUNDS=1; READER_EVENTS=2000000
fi

if [ "$BUILT" = 0 ]; then
    ${MAKE:-make} -s bench-build
fi
for f in "$B/liboomtrace.so" "$B/oomtrace-read" "$B/fake/libcuda.so.1" "$OUT/alloc_cost" "$OUT/alloc_objects" "$OUT/steady" \
    "$OUT/bigsnap" "$OUT/snapinfo" "$OUT/lock_cost"; do
    [ -x "$f" ] || [ -f "$f" ] || { echo "bench: $f is missing (make bench-build)" >&2; exit 2; }
done

rm -rf "$RAW" "$SNAPS" "$OUT/bin"
mkdir -p "$RAW"/{alloc,py,steady,dump,reader} "$SNAPS" "$OUT/bin/fake"
# The run uses copies of the tracer, the reader and the stand-in driver, so that a rebuild of build/
# while it runs (make in another shell) cannot change or remove them half-way.
cp "$B/liboomtrace.so" "$B/oomtrace-read" "$OUT/bin/"
cp "$B/fake/libcuda.so.1" "$OUT/bin/fake/"
ln -sf libcuda.so.1 "$OUT/bin/fake/libcuda.so"

export LD_LIBRARY_PATH=$OUT/bin/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FAKECUDA_CAPACITY=1T
export OOMTRACE_QUIET=1
unset OOMTRACE_DISABLE OOMTRACE_DEPTH OOMTRACE_PYTHON OOMTRACE_RING OOMTRACE_DUMP LD_PRELOAD || true
TRACER=$OUT/bin/liboomtrace.so
PY=${PYTHON:-python3}
SUM="$PY bench/summarize.py $OUT"

now_ns() { date +%s%N; }
traced() { env LD_PRELOAD="$TRACER" "$@"; }

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "host: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
    echo "cc: $(${CC:-cc} --version | head -1)"
    echo "python: $($PY --version 2>&1)"
    echo "libunwind: $(dpkg-query -W -f='${Version}' libunwind8 2>/dev/null || echo '?')"
    echo "zstd: $(dpkg-query -W -f='${Version}' libzstd1 2>/dev/null || echo '?')"
    dirty=$(git status --porcelain -- lib include tools tests/fakecuda tests/snapgen 2>/dev/null | awk '{print $2}' | cut -d/ -f1-2 | sort -u | tr '\n' ' ')
    echo "tree: $(git rev-parse --short HEAD 2>/dev/null || echo '?')${dirty:+ + uncommitted changes in: $dirty}"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "rounds: alloc $ALLOC_ROUNDS x $ALLOC_CALLS calls, python $PY_ROUNDS x $PY_CALLS, steady $STEADY_ROUNDS x $STEADY_STEPS steps, dump $DUMP_ROUNDS, reader $READER_ROUNDS (full JSON $READER_JSON_FULL_ROUNDS)"
} > "$OUT/env.txt"
cat "$OUT/env.txt"
echo

# ---- 1. cost of an allocation event and of a free -------------------------------------------------
echo "== 1. event cost: build/bench/alloc_cost, traced vs untraced, $ALLOC_ROUNDS rounds =="
for r in $(seq 1 "$ALLOC_ROUNDS"); do
    order="u t"; [ $((r % 2)) = 0 ] && order="t u"
    for v in $order; do
        if [ "$v" = t ]; then
            traced "$OUT/alloc_cost" --calls "$ALLOC_CALLS" > "$RAW/alloc/$r-t.txt"
        else
            "$OUT/alloc_cost" --calls "$ALLOC_CALLS" > "$RAW/alloc/$r-u.txt"
        fi
    done
done
# The depths the tracer really kept (one traced run with a snapshot at the end).
OOMTRACE_DIR=$SNAPS traced "$OUT/alloc_cost" --calls 1024 --depths 8,32,64 --threads 1,8 --check-dump > /dev/null
"$OUT/snapinfo" --stacks "$(ls -t "$SNAPS"/*.oomt | head -1)" > "$RAW/alloc/stacks.txt"
rm -f "$SNAPS"/*.oomt

echo "== 1c. loaded objects and frame shapes: build/bench/alloc_objects, traced vs untraced, $OBJ_ROUNDS rounds =="
# cuMemAllocAsync+cuMemFreeAsync pairs 46 frames deep through 4 of N loaded objects (docs/PERFORMANCE.md,
# issue 16); the floor is unw_backtrace from the same leaf, in the untraced process. Printed as medians.
for r in $(seq 1 "$OBJ_ROUNDS"); do
    for k in "std 0" "std 500" "drap 4" "expr 4"; do
        set -- $k
        calls=$OBJ_CALLS; [ "$1" = expr ] && calls=256 # its floor is libunwind's slow path: ~0.5 ms a call here
        order="u t"; [ $((r % 2)) = 0 ] && order="t u"
        for v in $order; do
            if [ "$v" = t ]; then
                traced "$OUT/alloc_objects" --objects "$2" --kind "$1" --calls "$calls" --reps 3
            else
                "$OUT/alloc_objects" --objects "$2" --kind "$1" --calls "$calls" --reps 3
            fi | sed "s/^result /result v=$v /" >> "$RAW/alloc/objects.txt"
        done
    done
done
$PY - "$RAW/alloc/objects.txt" <<'MEDIANS'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)
    if f["kind"] == "pair" or (f["kind"] == "unw" and f["v"] == "u"):
        what = "unw_backtrace floor" if f["kind"] == "unw" else ("traced pair" if f["v"] == "t" else "untraced pair")
        runs.setdefault((f["hopkind"], int(f["objects"]), what), []).append(float(f["ns"]))
for (kind, objects, what), v in sorted(runs.items()):
    print(f"   {kind:5s} {objects:3d} objects  {what:20s} median {statistics.median(v):10.1f} ns  ({min(v):.0f}-{max(v):.0f}, n={len(v)})")
MEDIANS
echo "== 1b. Python frames: bench/py_alloc.py, untraced / OOMTRACE_PYTHON=0 / =1, $PY_ROUNDS rounds =="
for r in $(seq 1 "$PY_ROUNDS"); do
    case $((r % 3)) in
    1) order="u p0 p1" ;;
    2) order="p1 u p0" ;;
    *) order="p0 p1 u" ;;
    esac
    for v in $order; do
        case $v in
        u) $PY bench/py_alloc.py "$PY_CALLS" > "$RAW/py/$r-u.txt" ;;
        p0) OOMTRACE_PYTHON=0 traced $PY bench/py_alloc.py "$PY_CALLS" > "$RAW/py/$r-p0.txt" ;;
        p1) OOMTRACE_PYTHON=1 traced $PY bench/py_alloc.py "$PY_CALLS" > "$RAW/py/$r-p1.txt" ;;
        esac
    done
done
# Borrowing: a native thread allocates while the main thread waits (its stack is borrowed) or holds the GIL.
for r in $(seq 1 "$PY_ROUNDS"); do
    OOMTRACE_PYTHON=1 traced $PY bench/py_borrow.py "$OUT/libnative_thread.so" "$PY_CALLS" > "$RAW/py/$r-b1.txt"
    OOMTRACE_PYTHON=0 traced $PY bench/py_borrow.py "$OUT/libnative_thread.so" "$PY_CALLS" > "$RAW/py/$r-b0.txt"
done
OOMTRACE_DIR=$SNAPS OOMTRACE_PYTHON=1 traced $PY bench/py_alloc.py 1024 --check-dump > /dev/null
"$OUT/snapinfo" --stacks "$(ls -t "$SNAPS"/*.oomt | head -1)" > "$RAW/py/stacks.txt"
rm -f "$SNAPS"/*.oomt
$SUM section alloc

# ---- 2. trace size and memory footprint ----------------------------------------------------------
echo "== 2. trace size and footprint: build/bench/steady $STEADY_STEPS steps, traced vs untraced, $STEADY_ROUNDS rounds =="
for r in $(seq 1 "$STEADY_ROUNDS"); do
    order="u t"; [ $((r % 2)) = 0 ] && order="t u"
    for v in $order; do
        if [ "$v" = t ]; then
            d=$SNAPS/steady-$r; mkdir -p "$d"
            OOMTRACE_DIR=$d traced "$OUT/steady" "$STEADY_STEPS" > "$RAW/steady/$r-t.txt"
            "$OUT/snapinfo" "$(ls "$d"/*.oomt | head -1)" >> "$RAW/steady/$r-t.txt"
            rm -rf "$d"
        else
            "$OUT/steady" "$STEADY_STEPS" > "$RAW/steady/$r-u.txt"
        fi
    done
done
$SUM section steady

# ---- 3. dump: 1M live allocations, 100k stacks ---------------------------------------------------
echo "== 3. dump: build/bench/bigsnap, 1M live / 100k stacks, $DUMP_ROUNDS timed dumps (each after its floor) =="
"$OUT/bigsnap" live "$SNAPS" 0 > "$RAW/dump/rss-u1.txt"
OOMTRACE_DIR=$SNAPS OOMTRACE_RING=2G traced "$OUT/bigsnap" live "$SNAPS" "$DUMP_ROUNDS" "$READER_EVENTS" > "$RAW/dump/t.txt"
"$OUT/bigsnap" live "$SNAPS" 0 > "$RAW/dump/rss-u2.txt"
$SUM section dump

# ---- 4. reader ------------------------------------------------------------------------------------
# Inputs: synthetic snapshots from tests/snapgen (when built: build/bench/snapgen), and snapshots the
# tracer itself wrote (bench/bigsnap): "ev" = READER_EVENTS events and almost nothing live; "live" =
# READER_EVENTS events + 1M live allocations over 100k stacks.
echo "== 4. reader: build/oomtrace-read on $READER_EVENTS-event snapshots, $READER_ROUNDS rounds =="
INPUTS=""
if [ -x "$OUT/snapgen" ]; then
    "$OUT/snapgen" --seed 1 --trigger api --events "$READER_EVENTS" --live 100 --stacks 50 -o "$SNAPS/sg-ev.oomt"
    "$OUT/snapgen" --seed 1 --trigger api --events "$READER_EVENTS" --live 1000000 --stacks 100000 \
        -o "$SNAPS/sg-live.oomt"
    INPUTS="sgev:$SNAPS/sg-ev.oomt sglive:$SNAPS/sg-live.oomt"
else
    echo "   (no build/bench/snapgen: tests/snapgen/snapgen.c is absent; tracer-made inputs only)"
fi
OOMTRACE_DIR=$SNAPS OOMTRACE_RING=2G traced "$OUT/bigsnap" events "$SNAPS" "$READER_EVENTS" > "$RAW/reader/gen-events.txt"
INPUTS="$INPUTS trev:$(sed -n 's/^snapfile role=events path=//p' "$RAW/reader/gen-events.txt")"
INPUTS="$INPUTS trlive:$(sed -n 's/^snapfile role=live path=//p' "$RAW/dump/t.txt")"
for in in $INPUTS; do
    "$OUT/snapinfo" "${in#*:}" > "$RAW/reader/info-${in%%:*}.txt"
done
READ=$OUT/bin/oomtrace-read
time_cmd() { # time_cmd KIND FILE CMD...: one "result kind=KIND ns=..." line into FILE
    local kind=$1 file=$2; shift 2
    local t0 t1
    t0=$(now_ns)
    "$@" > /dev/null
    t1=$(now_ns)
    echo "result kind=$kind ns=$((t1 - t0))" >> "$file"
}
for r in $(seq 1 "$READER_ROUNDS"); do
    f=$RAW/reader/$r.txt
    : > "$f"
    for in in $INPUTS; do
        name=${in%%:*} snap=${in#*:}
        "$OUT/snapinfo" --decode "$snap" | sed "s/kind=/kind=${name}_/" >> "$f"
        case $name in
        *ev) time_cmd "${name}_json" "$f" "$READ" --format json "$snap" ;;
        *live)
            time_cmd "${name}_text" "$f" "$READ" "$snap"
            time_cmd "${name}_json_top10" "$f" "$READ" --format json --top 10 "$snap"
            if [ "$name" = sglive ] || [ "$r" -le "$READER_JSON_FULL_ROUNDS" ]; then
                time_cmd "${name}_json" "$f" "$READ" --format json "$snap"
            fi
            ;;
        esac
    done
done
$SUM section reader

# ---- 5. framework companion -------------------------------------------------------------------------
# Its own lines, not in the table: collecting PyTorch's allocator state at 100k blocks (budget 200 ms), and
# a small CPU-bound PyTorch step with the companion on against OOMTRACE_FRAMEWORKS=0 (Debian python3-torch).
echo "== 5. framework companion: bench/companion_collect.py =="
$PY bench/companion_collect.py collect 100000 | tee "$OUT/companion.txt"
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
    /usr/bin/python3 bench/companion_collect.py step 5 300 | tee -a "$OUT/companion.txt"
else
    echo "   (no torch for /usr/bin/python3: step overhead not measured)" | tee -a "$OUT/companion.txt"
fi

# ---- 6. the recorder's lock ---------------------------------------------------------------------------
# Its own line, not in the table: one take and give, shared (the exchange) against owned (lib/record/lock.h).
echo "== 6. the recorder's lock: bench/lock_cost.c =="
"$OUT/lock_cost" 2000000 9 | tee "$OUT/lock_cost.txt"

# ---- the table --------------------------------------------------------------------------------------
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg) (other work on this machine adds noise to every figure)" >> "$OUT/env.txt"
echo
$SUM table
rm -rf "$SNAPS" "$OUT/bin"
echo
echo "written: $OUT/results.md (raw outputs in $RAW)"
