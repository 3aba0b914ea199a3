#!/bin/sh
# Golden-file tests of oomtrace-read. Snapshots are made now, by running build/tests/golden_workload
# (tests/golden/workload.c: exact sizes, markers, a leak, a pool, an OOM) and tests/demo/train_sim.py under
# the tracer against the stand-in driver; each rendering is normalised (tests/golden/normalize.py) and
# compared with tests/golden/expected/. Exit codes of the CI gates and the numbers of --diff and of a
# merged directory are also checked exactly, with the numbers written out below.
#   tests/golden/run.sh            compare (what tests/sh/golden.sh runs)
#   tests/golden/run.sh --update   rewrite the expected files (tests/golden/update.sh, make golden-update)
# READER=path overrides build/oomtrace-read.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
UPDATE=0
[ "${1:-}" = "--update" ] && UPDATE=1
READER=${READER:-$ROOT/build/oomtrace-read}
LIB=$ROOT/build/liboomtrace.so
WORK=$ROOT/build/tests/golden_workload
HELPER=$ROOT/build/tests/golden_helper
CACHE=$ROOT/build/tests/golden_cache
EXP=$ROOT/tests/golden/expected
for f in "$READER" "$LIB" "$WORK" "$HELPER" "$CACHE" "$ROOT/build/fake/libcuda.so.1" "$ROOT/build/fake/libnvidia-ml.so.1"; do
    [ -e "$f" ] || { echo "golden: $f is missing (make test-build)"; exit 1; }
done
command -v python3 >/dev/null 2>&1 || { echo "golden: skipped, no python3"; exit 0; }

TMP=$(mktemp -d /tmp/oomtrace-golden-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
OUT=$TMP/out
mkdir -p "$OUT" "$TMP/a" "$TMP/b" "$TMP/py" "$TMP/run" "$TMP/bad" "$TMP/user" "$TMP/h1" "$TMP/h2" "$TMP/cache" \
    "$TMP/cleak" "$TMP/big" "$TMP/marked" "$TMP/pool" "$TMP/short" "$TMP/crashrun"
HOST=$(hostname 2>/dev/null || uname -n)
# Without ASLR the runs are as alike as they can be (addresses are normalised anyway).
NOASLR=""
setarch "$(uname -m)" -R true >/dev/null 2>&1 && NOASLR="setarch $(uname -m) -R"

# traced DIR [VAR=VALUE...] -- PROGRAM ARGS: one traced run, its stdout and stderr kept aside.
traced() {
    dir=$1
    shift
    env LD_LIBRARY_PATH="$ROOT/build/fake" FAKECUDA_CAPACITY=1G FAKECUDA_OTHER_USED=128M \
        FAKENVML_PROCS="4194342:134217728" OOMTRACE_DIR="$dir" OOMTRACE_QUIET=1 LD_PRELOAD="$LIB" "$@" \
        >>"$TMP/programs.log" 2>&1
}

traced "$TMP/a" $NOASLR "$WORK" oom || { echo "golden: workload (a) failed"; cat "$TMP/programs.log"; exit 1; }
traced "$TMP/b" GOLDEN_WEIGHTS_MIB=320 $NOASLR "$WORK" oom || { echo "golden: workload (b) failed"; exit 1; }
traced "$TMP/py" FAKECUDA_CAPACITY=8G $NOASLR python3 tests/demo/train_sim.py
# The user's lines first: an eval loop and a restore through a library in a site-packages folder. It
# catches its own OOM and exits 1.
traced "$TMP/user" FAKECUDA_CAPACITY=256M $NOASLR python3 tests/py/eval_grad.py
# A job of three ranks: rank 0 finishes (exit snapshot), rank 1 runs out of memory (oom and exit
# snapshots), rank 2 dies of SIGSEGV (only its crash-surviving flush remains); plus a file that is not a
# snapshot.
traced "$TMP/run" RANK=0 LOCAL_RANK=0 WORLD_SIZE=3 OOMTRACE_DUMP=oom,exit $NOASLR "$WORK" exit
traced "$TMP/run" RANK=1 LOCAL_RANK=1 WORLD_SIZE=3 GOLDEN_WEIGHTS_MIB=320 OOMTRACE_DUMP=oom,exit $NOASLR "$WORK" oom
traced "$TMP/run" RANK=2 LOCAL_RANK=2 WORLD_SIZE=3 GOLDEN_WEIGHTS_MIB=288 OOMTRACE_DUMP=crash $NOASLR "$WORK" crash
printf 'not a snapshot\n' >"$TMP/run/oomtrace-garbage.oomt"
# A job of two ranks where none runs out of memory: rank 0 finishes, rank 1 dies of SIGSEGV. The rank that
# died is the story: the view says so and reports it, never "No process failed".
traced "$TMP/crashrun" RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 OOMTRACE_DUMP=oom,exit $NOASLR "$WORK" exit
traced "$TMP/crashrun" RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 GOLDEN_WEIGHTS_MIB=288 OOMTRACE_DUMP=crash $NOASLR "$WORK" crash
# Three call sites through one helper, twice: the second run's weights are 64 MiB larger.
traced "$TMP/h1" $NOASLR "$HELPER"
traced "$TMP/h2" HELPER_EXTRA_MIB=64 $NOASLR "$HELPER"
printf 'OOMTRACE' >"$TMP/bad/oomtrace-short.oomt"
# tests/golden/cache.c on the 1 GiB device alone (no other process): a cache that only grows, the same
# beside freed scratch, one request larger than the device.
traced "$TMP/cache" FAKECUDA_OTHER_USED=0 FAKENVML_PROCS= $NOASLR "$CACHE" cache
traced "$TMP/cleak" FAKECUDA_OTHER_USED=0 FAKENVML_PROCS= $NOASLR "$CACHE" leak
traced "$TMP/big" FAKECUDA_OTHER_USED=0 FAKENVML_PROCS= $NOASLR "$CACHE" big
traced "$TMP/marked" FAKECUDA_OTHER_USED=0 FAKENVML_PROCS= $NOASLR "$CACHE" marked
traced "$TMP/pool" FAKECUDA_OTHER_USED=0 FAKENVML_PROCS= $NOASLR "$CACHE" pool
traced "$TMP/short" FAKECUDA_OTHER_USED=0 FAKENVML_PROCS= $NOASLR "$CACHE" short

A=$(ls "$TMP"/a/*.oomt)
B=$(ls "$TMP"/b/*.oomt)
PY=$(ls "$TMP"/py/*.oomt)
USER_SNAP=$(ls "$TMP"/user/*.oomt)
[ -f "$USER_SNAP" ] || { echo "golden: the eval_grad snapshot is missing"; cat "$TMP/programs.log"; exit 1; }
[ -f "$A" ] && [ -f "$B" ] && [ -f "$PY" ] || { echo "golden: a snapshot is missing"; cat "$TMP/programs.log"; exit 1; }
[ "$(ls "$TMP"/run/*.oomt | wc -l)" -eq 5 ] || { echo "golden: expected 5 files in the run directory"; ls "$TMP/run"; exit 1; }

PIDS=""
for f in "$TMP"/*/oomtrace-*.oomt; do
    p=$(basename "$f" | sed -n 's/^oomtrace-.*-\([0-9][0-9]*\)\(-rank[0-9]*\)\{0,1\}-\([0-9]*-[a-z]*\|r[0-9a-f]*-flush\)\.oomt$/\1/p')
    [ -n "$p" ] && PIDS="$PIDS --pid $p"
done
norm() { python3 "$ROOT/tests/golden/normalize.py" "$1" --root "$ROOT" --tmp "$TMP" --host "$HOST" $PIDS; }

fail=0
checked=0
# check NAME KIND COMMAND...: runs the command, normalises its stdout and compares it with expected/NAME.
check() {
    name=$1
    kind=$2
    shift 2
    "$@" >"$OUT/$name.raw" 2>"$OUT/$name.err"
    rc=$?
    norm "$kind" <"$OUT/$name.raw" >"$OUT/$name"
    if [ -s "$OUT/$name.err" ]; then
        { printf -- '--- stderr (exit %s)\n' "$rc"; norm text <"$OUT/$name.err"; } >>"$OUT/$name"
    fi
    compare "$name"
}
compare() {
    name=$1
    checked=$((checked + 1))
    if [ $UPDATE -eq 1 ]; then
        mkdir -p "$EXP"
        cp "$OUT/$name" "$EXP/$name"
    elif [ ! -f "$EXP/$name" ]; then
        echo "golden: $name: no expected file (tests/golden/update.sh)"
        fail=1
    elif ! diff -u "$EXP/$name" "$OUT/$name" >"$OUT/$name.diff"; then
        echo "golden: $name differs from tests/golden/expected/$name:"
        head -n 60 "$OUT/$name.diff"
        fail=1
    fi
}

check workload.txt text "$READER" "$A"
check workload.json json "$READER" --format json "$A"
check workload-native.txt text "$READER" --at failure --native --top 2 "$A"
check python.txt text "$READER" "$PY"
check userterms.txt text "$READER" "$USER_SNAP"
check userterms.md text "$READER" --format markdown "$USER_SNAP"
# One spelling of a library's file in every format: from its package root ("tinynn/__init__.py", not the
# bare "__init__.py" that says nothing of whose it is), the program's own files by base name.
"$READER" --format html -o "$OUT/userterms.html" "$USER_SNAP" 2>/dev/null
"$READER" --format json "$USER_SNAP" >"$OUT/userterms.json" 2>/dev/null
for f in userterms.txt userterms.md userterms.html userterms.json; do
    sed 's/\\_/_/g' "$OUT/$f" | grep -q 'eval_grad.py:27 in restore → tinynn/__init__.py:17 in _empty' &&
        ! sed 's/\\_/_/g' "$OUT/$f" | grep -q '[ >`"]__init__.py:' ||
        { echo "golden: $f spells the library's file otherwise: $(sed 's/\\_/_/g' "$OUT/$f" | grep -o '[^ ]*__init__.py:[0-9]*' | sort -u | tr '\n' ' ')"; fail=1; }
done
# The breakdown from the tensors' identity: snapgen's PyTorch view (roles over the allocator's blocks).
"$ROOT/build/snapgen" --framework torch -o "$TMP/framework.oomt" || { echo "golden: snapgen failed"; exit 1; }
# Its numbers are synthetic: this run's pids are not masked in it (a pid like 371 would mask its bytes).
SAVED_PIDS=$PIDS
PIDS=""
check framework.txt text "$READER" --top 2 "$TMP/framework.oomt"
# The allocator's view in four framework cases: PyTorch's own out-of-memory from fragmentation (a request
# beyond the largest free block, with the probes before it), PyTorch's per-process fraction, JAX's
# preallocated pool, and memory CuPy's pool keeps after the program freed it.
fwcase() { # fwcase NAME KIND SNAPGEN-OPTIONS...: a snapgen snapshot's --top 2 report against expected/NAME
    name=$1 kind=$2
    shift 2
    "$ROOT/build/snapgen" "$@" -o "$TMP/$name.oomt" || { echo "golden: snapgen $*"; exit 1; }
    if [ "$kind" = json ]; then
        check "$name" json "$READER" --format json --top 2 "$TMP/$name.oomt"
    else
        check "$name" text "$READER" --top 2 "$TMP/$name.oomt"
    fi
}
fwcase fw-fragmentation.txt text --trigger framework-oom --framework torch --probes 3
fwcase fw-fragmentation.json json --trigger framework-oom --framework torch --probes 3
check fw-fragmentation.md text "$READER" --format markdown --top 2 "$TMP/fw-fragmentation.txt.oomt"
fwcase fw-fraction.txt text --trigger framework-oom --framework torch --fraction 40
# A PyTorch program with no model on the GPU (the companion's roles record empty): its tensors live at the
# scan are the program's own by call site, never a model's activations (the peak's tensors freed before it
# keep the stacks' guess), and no remedy speaks of checkpointing them.
fwcase fw-nomodel.txt text --trigger framework-oom --framework torch --no-model --fraction 40
! grep -q "torch.utils.checkpoint\|loss.item()" "$OUT/fw-nomodel.txt" || { echo "golden: fw-nomodel speaks of a model's training"; fail=1; }
"$READER" --format json "$TMP/fw-nomodel.txt.oomt" | python3 -c '
import json, sys
b = json.load(sys.stdin)["breakdown"]
rows = {r["category"]: r["bytes"] for r in b["now"]["rows"]}
assert b["no_model"] and rows["activations"] == 0 and rows["program_allocations"] > 0, (b["no_model"], rows)
' || { echo "golden: fw-nomodel's breakdown at the failure is not the program's own"; fail=1; }
# A driver-level out-of-memory whose frameworks' view is the one of an earlier framework OOM the program survived
# (a batch-size search): shown as earlier, with what came between, and read by nothing else (no segments joined,
# no share or remedy from it).
fwcase fw-earlier.txt text --framework torch --fw-earlier
check fw-earlier.md text "$READER" --format markdown --top 2 "$TMP/fw-earlier.txt.oomt"
"$READER" --format json "$TMP/fw-earlier.txt.oomt" | python3 -c '
import json, sys
r = json.load(sys.stdin)
f, b = r["frameworks"], r["breakdown"]
assert f["earlier"] and f["between"]["allocations"] > 0 and f["between"]["frees"] > 0, f.get("between")
assert not f["creators"] and not f["fatal"], (f["creators"], f["fatal"])
rows = {x["category"]: x["bytes"] for x in b["now"]["rows"]}
assert not rows.get("parameters") and not rows.get("optimizer_state"), rows
kinds = [w["kind"] for w in r["why"] + r["what_to_try"]]
assert not [k for k in kinds if k.startswith(("framework", "graph")) or k == "fragmentation"], kinds
' || { echo "golden: fw-earlier's view is read as the failure's"; fail=1; }
# The same view left in place at a framework's own OOM (the tracer refused the new one, or the companion failed to
# collect it): earlier too, the snapshot still the fatal one; and at a signal whose ring no longer holds the span.
"$ROOT/build/snapgen" --trigger framework-oom --fw-earlier -o "$TMP/fw-earlier-fatal.oomt" &&
    "$ROOT/build/snapgen" --trigger signal --fw-earlier --drop-chunks 10 --chunk 1000 -o "$TMP/fw-earlier-short.oomt" ||
    { echo "golden: snapgen --fw-earlier"; exit 1; }
"$READER" --format json "$TMP/fw-earlier-fatal.oomt" | python3 -c '
import json, sys
f = json.load(sys.stdin)["frameworks"]
assert f["earlier"] and f["between"]["allocations"] > 0 and f["fatal"] and f["fatal_framework"] == "torch", f
' || { echo "golden: a framework OOM that kept an earlier view"; fail=1; }
"$READER" "$TMP/fw-earlier-fatal.oomt" | grep -q "^Allocator's view, earlier (.*before the failure" ||
    { echo "golden: a framework OOM's earlier view is not said to be before the failure"; fail=1; }
"$READER" --format json "$TMP/fw-earlier-short.oomt" | python3 -c '
import json, sys
f = json.load(sys.stdin)["frameworks"]
assert f["earlier"] and f["between"]["partial"], f
' || { echo "golden: an earlier view over a span the ring dropped is read as the snapshot's"; fail=1; }
# JAX's preallocation and pool limit are fixed at its start: an earlier view still says them (and nothing else)
"$ROOT/build/snapgen" --fw-earlier --framework jax -o "$TMP/fw-earlier-jax.oomt" || { echo "golden: snapgen --fw-earlier --framework jax"; exit 1; }
"$READER" --format json "$TMP/fw-earlier-jax.oomt" | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["frameworks"]["earlier"], r["frameworks"]
w = [x for x in r["why"] if x["kind"] == "jax_preallocation"]
assert len(w) == 1 and "bytes_limit" in w[0]["numbers"], r["why"]
assert "bytes_in_use" not in w[0]["numbers"] and "largest_free_block_bytes" not in w[0]["numbers"], w
assert "jax_preallocation" in [x["kind"] for x in r["what_to_try"]], r["what_to_try"]
' || { echo "golden: an earlier JAX view lost the preallocation, or gave its stale use"; fail=1; }
"$READER" "$TMP/fw-earlier-jax.oomt" | grep -q "^Allocator's view, earlier (.*but for JAX's preallocation and pool limit" ||
    { echo "golden: an earlier JAX view's note does not say what is read from it"; fail=1; }
# JAX's counters of another device than the failing one say nothing of the failing device, earlier or not
for e in "" --fw-earlier; do
    "$ROOT/build/snapgen" --framework jax --devices 2 --jax-device 1 $e -o "$TMP/jax-dev1.oomt" ||
        { echo "golden: snapgen --jax-device 1 $e"; exit 1; }
    "$READER" --format json "$TMP/jax-dev1.oomt" | python3 -c '
import json, sys
r = json.load(sys.stdin)
kinds = [x["kind"] for x in r["why"] + r["what_to_try"]]
assert "jax_preallocation" not in kinds, kinds
' || { echo "golden: JAX's device 1 counters made a statement of device 0 ($e)"; fail=1; }
    ! "$READER" "$TMP/jax-dev1.oomt" | grep -q "but for JAX" ||
        { echo "golden: the earlier note claims a use of JAX's limit that no statement made ($e)"; fail=1; }
done
fwcase fw-jax.txt text --trigger framework-oom --framework jax
fwcase fw-cupy.txt text --framework cupy
# The view of a framework with no per-device table (JAX's devices, CuPy's pool) in markdown and HTML too
check fw-jax.md text "$READER" --format markdown --top 2 "$TMP/fw-jax.txt.oomt"
check fw-cupy.md text "$READER" --format markdown --top 2 "$TMP/fw-cupy.txt.oomt"
for c in "fw-jax JAX, device 0:" "fw-cupy CuPy memory pool:"; do
    set -- $c
    name=$1
    shift
    "$READER" --format html --top 2 "$TMP/$name.txt.oomt" | sed -n '/id="allocator"/,/<\/section>/p' | grep -q "<li>$*" ||
        { echo "golden: $name's HTML report has no allocator section with its own line"; fail=1; }
done
# Each case states its cause (the statement kinds in the JSON report), whatever the wording.
for c in "fw-fragmentation fragmentation" "fw-fraction framework_limit" "fw-jax jax_preallocation" \
    "fw-cupy framework_pool_cached"; do
    set -- $c
    "$READER" --format json "$TMP/$1.txt.oomt" | python3 -c '
import json, sys
r = json.load(sys.stdin)
kinds = [w["kind"] for w in r["why"]]
assert sys.argv[1] in kinds, kinds
' "$2" || { echo "golden: $1 does not state $2"; fail=1; }
done
PIDS=$SAVED_PIDS
check diff.txt text "$READER" --diff "$A" "$B"
check diff.json json "$READER" --format json --diff "$A" "$B"
check run.txt text "$READER" --top 3 "$TMP/run"
check run.json json "$READER" --format json --top 2 "$TMP/run"
check crashrun.txt text "$READER" --top 2 "$TMP/crashrun"
# An exit snapshot whose allocations were all freed before the exit: what held the memory at its peak is
# split by call site too (the peak column's sub-rows), not only what was live at the exit.
EXIT_SNAP=$(ls "$TMP"/crashrun/*-exit.oomt)
check exit.txt text "$READER" --top 2 "$EXIT_SNAP"
check exit.md text "$READER" --format markdown --top 2 "$EXIT_SNAP"
# A rank whose only file cannot be read keeps its row, from the file's name (a host name with a '-' in it), with
# why; its out-of-memory file may be the job's first failure, which the summary says.
mkdir -p "$TMP/lostrun"
cp "$TMP"/crashrun/*.oomt "$TMP/lostrun/"
printf 'OOMTRACE' >"$TMP/lostrun/oomtrace-gpu-node-7-999-rank2-1-oom.oomt"
check lostrun.txt text "$READER" --top 1 "$TMP/lostrun"
check lostrun.md text "$READER" --format markdown --top 1 "$TMP/lostrun"
"$READER" --format json --top 1 "$TMP/lostrun" 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert [(l["rank"], l["host"], l["pid"], l["trigger"]) for l in r["unreadable_processes"]] == [(2, "gpu-node-7", 999, "oom")], r["unreadable_processes"]
assert r["unreadable_processes"][0]["error"]
' || { echo "golden: lostrun: the JSON run view does not keep the unreadable rank"; fail=1; }
check crashrun.md text "$READER" --format markdown --top 2 "$TMP/crashrun"
"$READER" --format json --top 1 "$TMP/crashrun" | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["first_failure"] is None and r["crashed_processes"] == 1, r["crashed_processes"]
e = r["ranks"][1]["ended_by"]
assert r["ranks"][1]["rank"] == 1 and e["crashed"] and e["signal"] == "SIGSEGV" and e["description"], e
assert r["ranks"][0]["ended_by"] is None
assert r["crashed_rank_report"]["trigger"] == "flush" and r["largest_peak_report"] is None
' || { echo "golden: crashrun: the JSON run view does not give the crashed rank"; fail=1; }
# A job's CI summary (issue 13 item 13): the directory and --diff in markdown.
check run.md text "$READER" --format markdown --top 3 "$TMP/run"
check diff.md text "$READER" --format markdown --diff "$A" "$B"
# --diff of two directories (two runs of `oomtrace run`, two jobs): each side is its directory's snapshot with
# the largest peak, the one a gate on the directory measures, and the report says which it picked and from what.
check diff-dirs.txt text "$READER" --top 2 --diff "$TMP/a" "$TMP/run"
check diff-dirs.json json "$READER" --format json --top 1 --diff "$TMP/a" "$TMP/run"
# Python 3.11 and before run a comprehension in a frame of its own, on its function's line: the caller that
# tells the demo's three device_alloc rows apart is named by the function (forward), not the comprehension.
for py311 in /usr/bin/python3.11 "$HOME"/.pyenv/versions/3.11.*/bin/python3.11; do
    [ -x "$py311" ] || continue
    mkdir -p "$TMP/py311"
    traced "$TMP/py311" FAKECUDA_CAPACITY=8G "$py311" tests/demo/train_sim.py
    "$READER" --top 3 "$TMP"/py311/*-oom.oomt >"$OUT/py311.txt" 2>&1
    for want in "device_alloc \342\206\220 train_sim.py:43 in forward (stack" "device_alloc \342\206\220 train_sim.py:39 in init_optimizer (stack"; do
        grep -q "$(printf "$want")" "$OUT/py311.txt" ||
            { echo "golden: $py311: no row '$(printf "$want")': $(grep -m1 'in device_alloc' "$OUT/py311.txt")"; fail=1; }
    done
    break
done
# Sites that reach the allocation through one helper read apart: "grab (helper.c:N) ← main (helper.c:M)", and
# --diff matches each site with its own (by the native frames' file:line where names alone read the same).
H1=$(ls "$TMP"/h1/*.oomt)
H2=$(ls "$TMP"/h2/*.oomt)
check helper.txt text "$READER" --top 3 "$H1"
check helper.md text "$READER" --format markdown --top 3 "$H1"
"$READER" --format html -o "$OUT/helper.html" "$H1" && grep -q "Allocated at <code>grab (helper.c:14) $(printf '\342\206\220') main (helper.c:36)</code>" "$OUT/helper.html" ||
    { echo "golden: html: the failed request's label does not name its caller: $(grep -o 'Allocated at <code>[^<]*' "$OUT/helper.html")"; fail=1; }
check helper-diff.txt text "$READER" --diff "$H1" "$H2"
check helper-diff.md text "$READER" --format markdown --diff "$H1" "$H2"
# Sites found on one side only matched nothing: no "matched with native file:line" on them, though their keys
# carry it (the helper's sites read alike by names).
check diff-onesided.txt text "$READER" --top 4 --frames 2 --diff "$A" "$H2"
# A run directory of one process without a rank (a plain `oomtrace run -- ./prog`) reads as that process (pid,
# command, the snapshot reported), not as a rank table with one row of "?".
check run-one.md text "$READER" --format markdown --top 2 "$TMP/a"
check run-one.txt text "$READER" --top 2 "$TMP/a"
# A C program whose device memory only grows (a cache that never frees) is told the site, that it frees
# nothing, and how many of its allocations the device has room for; a request larger than the device is told
# that nothing freed helps, without the peak's sites.
check cache.txt text "$READER" --top 2 --frames 3 "$TMP"/cache/*.oomt
check cache-big.txt text "$READER" --top 2 --frames 3 "$TMP"/big/*.oomt
check cache.md text "$READER" --format markdown --top 2 "$TMP"/cache/*.oomt
# Beside freed scratch the cache is the windows' growing site; the leak remedy counts the site's growth, not
# the weights loaded before it (its growth is the site's, as in the Why). The run lasts milliseconds: its
# growth is bytes over the span and per allocation kept, never a rate per second ("+142 GiB per second").
"$READER" "$TMP"/cleak/*.oomt >"$OUT/cleak.txt" 2>&1
grep -q "^  - Live memory grew by 768 MiB in [0-9.]* ms (32.0 MiB per allocation kept, at the growing site above): free what the growing site" "$OUT/cleak.txt" ||
    { echo "golden: the leak remedy beside freed scratch: $(grep -A1 '^What to try' "$OUT/cleak.txt")"; fail=1; }
! grep -q "B per second" "$OUT/cleak.txt" ||
    { echo "golden: a rate per second over milliseconds: $(grep -o '[^;]*per second[^;]*' "$OUT/cleak.txt")"; fail=1; }
# The same cache with a marker per step: growth with no free at all is a leak when no caching allocator is on the
# site's stack (the program calls the driver itself), not "a caching allocator's cache", and gets the leak remedy
# (walk 6, #17).
"$READER" "$TMP"/marked/*.oomt >"$OUT/marked.txt" 2>&1
grep -q "^  - One call site grew across steps (a suspected leak): .* cache_put (cache.c:16) .*no caching allocator is on the site's stack" "$OUT/marked.txt" &&
    ! grep -q "caching allocator keeps what it takes" "$OUT/marked.txt" &&
    grep -q "^  - Live memory grew by 64.0 MiB per step over .*: free what the growing site allocates each iteration" "$OUT/marked.txt" ||
    { echo "golden: a C leak between markers: $(sed -n '/^Why/,/^Devices/p' "$OUT/marked.txt")"; fail=1; }
"$READER" --format json "$TMP"/marked/*.oomt | python3 -c '
import json, sys
r = json.load(sys.stdin)
g = [w for w in r["why"] if w["kind"] == "growing_site"][0]["numbers"]
assert g["frees_in_ring"] == 0 and g["allocator_on_stack"] == 0, g
assert [x["kind"] for x in r["what_to_try"]][:1] == ["leak"], r["what_to_try"]
' || { echo "golden: the C leak between markers in JSON"; fail=1; }
# Memory freed into a stream-ordered pool and kept there (a C program, no framework): its row is named for the
# pools, not "framework cache", and it is not counted again as unaccounted (walk 6, #2).
check cache-pool.txt text "$READER" --top 2 --frames 3 "$TMP"/pool/*.oomt
"$READER" --format json "$TMP"/pool/*.oomt | python3 -c '
import json, sys
MiB = 2**20
r = json.load(sys.stdin)
now = {x["category"]: x for x in r["breakdown"]["now"]["rows"]}
assert now["framework_cache"]["bytes"] == 384 * MiB, now["framework_cache"]
assert now["framework_cache"]["name"] == "stream-ordered pools (reserved, not allocated)", now["framework_cache"]
assert now["context_untracked"]["bytes"] == 0, now["context_untracked"]
' || { echo "golden: the pool case in JSON"; fail=1; }
for fmt in markdown html; do
    "$READER" --format $fmt "$TMP"/pool/*.oomt >"$OUT/pool.$fmt" 2>&1
    grep -q "stream-ordered pools (reserved, not allocated)" "$OUT/pool.$fmt" && ! grep -q "framework cache" "$OUT/pool.$fmt" ||
        { echo "golden: the pool case's $fmt breakdown names a framework cache"; fail=1; }
done
# A plain request short of the free memory while one site holds more than the shortfall: What to try names the
# site, the shortfall and the free memory; the pool's case gets the pools' remedy (walk 6, #3, #39). Neither
# repeats the peak's site as "the largest single allocation" (#5).
check cache-short.txt text "$READER" --top 2 --frames 3 "$TMP"/short/*.oomt
for c in "pool pool_trim" "short make_room"; do
    set -- $c
    "$READER" --format json "$TMP"/$1/*.oomt | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert [x["kind"] for x in r["what_to_try"]] == [sys.argv[1]], r["what_to_try"]
assert "largest_allocation" not in [x["kind"] for x in r["why"]], r["why"]
' "$2" || { echo "golden: $1: What to try is not $2"; fail=1; }
    for fmt in markdown html; do
        "$READER" --format $fmt "$TMP"/$1/*.oomt | grep -q "What to try" || { echo "golden: $1: no What to try in $fmt"; fail=1; }
    done
done

# The other output formats, when this reader has them: folded and markdown against golden files, html
# and memviz by their structure.
has_format() { "$READER" --format "$1" "$A" >/dev/null 2>&1; }
if has_format folded; then
    check workload.folded folded "$READER" --format folded "$A"
fi
if has_format markdown; then
    check workload.md text "$READER" --format markdown "$A"
fi
if has_format html; then
    "$READER" --format html -o "$OUT/workload.html" "$A" || { echo "golden: html failed"; fail=1; }
    python3 - "$OUT/workload.html" <<'EOF' || { echo "golden: html is not a whole page"; fail=1; }
import sys
s = open(sys.argv[1], encoding="utf-8").read()
assert s.lstrip().lower().startswith("<!doctype html"), "no doctype"
assert s.rstrip().lower().endswith("</html>"), "no </html>"
assert "http://" not in s.replace("http://www.w3.org", "") and "https://" not in s.replace("https://pytorch.org", ""), "network reference"
for w in ("load_weights", "forward", "accumulate_loss"):
    assert w in s, w
# A C call site is named with its file:line, as in the text report.
for w in ("forward (workload.c:53)", "load_weights (workload.c:38)"):
    assert w in s, f"html: no {w!r}"
EOF
    # The directory and --diff as HTML: the run's card above the first failing rank's report; the diff's table.
    "$READER" --format html -o "$OUT/run.html" "$TMP/run" 2>/dev/null
    "$READER" --format html -o "$OUT/diff.html" --diff "$A" "$B" || { echo "golden: html --diff failed"; fail=1; }
    python3 - "$OUT/run.html" "$OUT/diff.html" <<'EOF' || { echo "golden: html of the directory or --diff"; fail=1; }
import re, sys
run, diff = (open(p, encoding="utf-8").read() for p in sys.argv[1:3])
for s in (run, diff):
    assert s.lstrip().lower().startswith("<!doctype html") and s.rstrip().lower().endswith("</html>")
card = run[run.index('<section class="card" id="run">'):]
card = card[:card.index("</section>")]
assert len(re.findall(r'<tr><td class="num">[0-2]</td>', card)) == 3, "three ranks"
assert "<b>First failure:</b> rank 1" in card, card
assert run.index('id="run"') < run.index("Failed request"), "the run's card leads"
assert "<b>Peak change:</b> +64.0 MiB (+10.0%)" in diff, diff
assert re.search(r'<td class="num">\+64\.0 MiB</td><td class="num">256 MiB in 1</td><td class="num">320 MiB in 1</td><td><code>load_weights \(workload\.c:38\)</code>', diff), diff
EOF
    "$READER" --format html -o "$OUT/run-one.html" "$TMP/a" || { echo "golden: html of a one-process directory failed"; fail=1; }
    python3 - "$OUT/run-one.html" <<'EOF' || { echo "golden: html of a one-process directory"; fail=1; }
import sys
s = open(sys.argv[1], encoding="utf-8").read()
card = s[s.index('<section class="card" id="run">'):]
card = card[:card.index("</section>")]
assert "<h2>The run: one process</h2>" in card and "all from one process: pid" in card, card
assert "<table" not in card and "rank" not in card.lower(), card
EOF
fi
if has_format memviz; then
    "$READER" --format memviz -o "$OUT/workload.pickle" "$A" || { echo "golden: memviz failed"; fail=1; }
    python3 - "$OUT/workload.pickle" <<'EOF' || { echo "golden: memviz pickle is not torch's snapshot format"; fail=1; }
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
assert isinstance(d, dict) and "segments" in d and "device_traces" in d, sorted(d)
blocks = [b for s in d["segments"] for b in s["blocks"]]
assert sum(b["size"] for b in blocks) == 256 * 2**20 + 2 * 192 * 2**20 + 5 * 4096, sum(b["size"] for b in blocks)
EOF
fi

# What held the memory, in exact bytes: workload.c's 640 MiB + 20 KiB live at the failure (no framework on
# the stacks, so the program's own allocations, never activations), split by the C call site that made each
# (forward's two 192 MiB, load_weights' 256 MiB, accumulate_loss's five 4 KiB), the pool's 64 MiB reserved
# and unused, the stand-in NVML's other process.
python3 - "$OUT/workload.json.raw" <<'EOF' || { echo "golden: breakdown numbers differ"; fail=1; }
import json, sys
MiB = 2**20
r = json.load(open(sys.argv[1]))
b = r["breakdown"]
assert b["device"] == 0 and b["first_moment"] == "failure" and b["identity"] is False, b
now = {r["category"]: r for r in b["now"]["rows"]}
own = now["program_allocations"]
assert own["bytes"] == 640 * MiB + 5 * 4096 == own["inferred_bytes"], own
assert now["activations"]["bytes"] == 0, now["activations"]
parts = {p["label"]: p["bytes"] for p in own["parts"]}
assert parts == {"forward (workload.c:53)": 384 * MiB, "load_weights (workload.c:38)": 256 * MiB,
                 "accumulate_loss (workload.c:60)": 5 * 4096}, parts
assert now["framework_cache"]["bytes"] == 64 * MiB and now["other_processes"]["bytes"] == 128 * MiB
assert now["context_untracked"]["bytes"] == 0
assert b["now"]["whole_bytes"] == 832 * MiB + 5 * 4096 == sum(r["bytes"] for r in now.values()), b["now"]["whole_bytes"]
peak = {r["category"]: r for r in b["peak"]["rows"]}
assert peak["program_allocations"]["bytes"] == 640 * MiB + 5 * 4096 and peak["other_processes"]["bytes"] is None
assert peak["activations"]["bytes"] == 0
# A C program is never told to checkpoint its activations.
assert not [w for w in r["what_to_try"] if w["kind"] in ("activations", "no_grad")], r["what_to_try"]
EOF

# CI gates: exit status and the one line on stderr, exactly.
G=$OUT/gates
: >"$G"
gate() {
    "$READER" -o /dev/null "$@" 2>"$OUT/gate.err"
    rc=$?
    printf '%s => exit %s\n' "$*" "$rc" >>"$G"
    sed 's/^/  /' "$OUT/gate.err" >>"$G"
}
gate --max-peak 641M "$A"
gate --max-peak 640M "$A"
gate --max-peak 671109120 "$A"
gate --max-peak 671109119 "$A"
gate --baseline "$A" --max-growth 10 "$B"
gate --baseline "$A" --max-growth 9.99 "$B"
gate --baseline "$B" --max-growth 0 "$A"
gate --diff "$A" "$B" --max-growth 5
gate --diff "$TMP/a" "$TMP/run" --max-growth 5
gate --max-peak 700M "$TMP/run"
gate --max-peak 1G "$TMP/run"
gate --max-peak 12X "$A"
gate --max-growth 5 "$A"
gate --max-peak 1G "$TMP/nonexistent.oomt"
gate --baseline "$TMP/nonexistent.oomt" --max-growth 5 "$A"
gate "$TMP/bad"
norm text <"$G" >"$OUT/gates.txt"
compare gates.txt

# The numbers of --diff and of the merged directory, checked one by one.
"$READER" --format json --diff "$A" "$B" >"$OUT/diff.raw.json" &&
# (exit 2: the directory holds a damaged file on purpose; the report of the others is still written)
{ "$READER" --format json "$TMP/run" >"$OUT/run.raw.json" 2>/dev/null; [ $? -eq 2 ]; } &&
python3 - "$OUT/diff.raw.json" "$OUT/run.raw.json" <<'EOF' || { echo "golden: exact numbers differ"; fail=1; }
import json, sys
MiB = 2**20
d = json.load(open(sys.argv[1]))
assert d["schema"] == "oomtrace-diff/1"
assert d["base"]["peak_bytes"] == 640 * MiB + 5 * 4096, d["base"]
assert d["new"]["peak_bytes"] == 704 * MiB + 5 * 4096, d["new"]
assert d["peak_change_bytes"] == 64 * MiB
top = d["sites"][0]
assert top["change_bytes"] == 64 * MiB and top["base_bytes"] == 256 * MiB and top["new_bytes"] == 320 * MiB, top
assert top["headline"].startswith("load_weights"), top["headline"]
assert d["sites_changed"] == 1 and d["sites_total"] == 3, (d["sites_changed"], d["sites_total"])
r = json.load(open(sys.argv[2]))
assert r["schema"] == "oomtrace-run/1"
assert r["files"] == 5 and r["readable"] == 4 and r["processes"] == 3, (r["files"], r["readable"], r["processes"])
ranks = {x["rank"]: x for x in r["ranks"]}
assert [x["rank"] for x in r["ranks"]] == [0, 1, 2]
assert ranks[0]["peak_bytes"] == 640 * MiB + 5 * 4096 and ranks[0]["finished"] is True and not ranks[0]["failed"]
assert ranks[1]["peak_bytes"] == 704 * MiB + 5 * 4096 and ranks[1]["failed"] and ranks[1]["trigger"] == "oom"
assert ranks[1]["at_failure_bytes"] == 704 * MiB + 5 * 4096 and ranks[1]["snapshots"] == 2 and ranks[1]["finished"] is True
assert ranks[2]["peak_bytes"] == 672 * MiB + 5 * 4096 and ranks[2]["finished"] is False and ranks[2]["trigger"] == "flush"
assert r["first_failure"]["rank"] == 1 and r["first_failure"]["requested_bytes"] == 240 * MiB
im = r["imbalance"]
assert im["max_rank"] == 1 and im["min_rank"] == 0 and im["difference_bytes"] == 64 * MiB, im
assert r["failing_rank_report"]["schema"] == "oomtrace-report/1" and r["failing_rank_report"]["process"]["rank"] == 1
# A rank's breakdown is its own report's object, key for key and number for number (one emitter,
# render/json_breakdown.c); only a call site's label may read otherwise: the ranks are read without debug
# information ("forward (golden_workload)"), the report of the failing rank with it ("forward (workload.c:53)").
def unlabelled(b):
    b = json.loads(json.dumps(b))
    for m in (b["now"], b["peak"]):
        for row in m["rows"]:
            for p in row["parts"]:
                p["label"] = p["label"].split(" (")[0]
    return b
assert unlabelled(ranks[1]["breakdown"]) == unlabelled(r["failing_rank_report"]["breakdown"]), ranks[1]["breakdown"]
assert ranks[1]["breakdown"]["first_moment"] == "failure" and ranks[0]["breakdown"]["first_moment"] == "snapshot"
kinds = [w["kind"] for w in r["failing_rank_report"]["why"]]
# The interval under way at the failure is one statement (step_demand): the phase after its marker and the
# largest rise from it, which say the same, are not listed again.
assert kinds == ["request_exceeds_free", "other_processes", "pool_cached", "peak_site", "growing_site", "step_demand"], kinds
# step 5 asked for its two 192 MiB activations and the failed 240 MiB; step 4 rose by its 160 MiB activation and
# the 4 KiB loss it kept, and freed the activation
sd = [w for w in r["failing_rank_report"]["why"] if w["kind"] == "step_demand"][0]["numbers"]
assert sd["step_demand_bytes"] == 2 * 192 * MiB + 240 * MiB and sd["previous_demand_bytes"] == 160 * MiB + 4096, sd
assert sd["held_bytes"] == 2 * 192 * MiB, sd
rem = [x["kind"] for x in r["failing_rank_report"]["what_to_try"]]
assert "step_input" in rem, rem
EOF

if [ $UPDATE -eq 1 ]; then
    echo "golden: wrote $checked expected files to tests/golden/expected/"
    exit 0
fi
if [ $fail -ne 0 ]; then
    echo "golden: FAILED (outputs kept in build/tests/golden-out/; tests/golden/update.sh rewrites the expected files)"
    rm -rf "$ROOT/build/tests/golden-out"
    cp -r "$OUT" "$ROOT/build/tests/golden-out"
    exit 1
fi
echo "golden: $checked outputs match"
