#!/bin/sh
# The reports' wording where a new user read something wrong (the fourth new-user walk): each check runs a
# program under the tracer against the stand-in driver (or makes a snapshot with snapgen), reads it, and
# looks for the words that misled and the words that say it right.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
READER=${READER:-$ROOT/build/oomtrace-read}
SNAPGEN=${SNAPGEN:-$ROOT/build/snapgen}
LIB=$ROOT/build/liboomtrace.so
WORK=$ROOT/build/tests/golden_workload
for f in "$READER" "$SNAPGEN" "$LIB" "$WORK" "$ROOT/build/fake/libcuda.so.1"; do
    [ -e "$f" ] || { echo "report_wording: $f is missing (make test-build)"; exit 1; }
done
fail() { echo "report_wording: FAIL: $*"; exit 1; }
T=$(mktemp -d /tmp/oomtrace-wording.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
# traced DIR [VAR=VALUE...] PROGRAM ARGS: one run under the tracer on a 1 GiB simulated device.
traced() {
    dir=$1
    shift
    mkdir -p "$dir"
    env LD_LIBRARY_PATH="$ROOT/build/fake" FAKECUDA_CAPACITY=1G OOMTRACE_DIR="$dir" OOMTRACE_QUIET=1 \
        LD_PRELOAD="$LIB" "$@" >>"$T/programs.log" 2>&1
}
has() { grep -qF -- "$2" "$1" || fail "$3: missing \"$2\" in $(basename "$1"): $(head -c 400 "$1")"; }
hasnt() { ! grep -qF -- "$2" "$1" || fail "$3: \"$2\" in $(basename "$1"): $(grep -F -- "$2" "$1" | head -2)"; }
n=0

# Symbols: a C program read where it ran has every module here; the kernel's vDSO, which has no file,
# is not a module "not found", and "C++ names demangled" is said only when there were C++ names.
traced "$T/c" FAKECUDA_OTHER_USED=128M "$WORK" oom
C=$(ls "$T"/c/*-oom.oomt)
"$READER" "$C" >"$T/c.txt" || fail "read the C workload"
has "$T/c.txt" "Symbols: " "symbols line"
hasnt "$T/c.txt" "not found" "a C program read where it ran"
hasnt "$T/c.txt" "C++ names" "a C program"
"$SNAPGEN" --trigger oom --events 100 -o "$T/gen.oomt" || fail snapgen
"$READER" "$T/gen.oomt" >"$T/gen.txt" || fail "read snapgen's snapshot"
has "$T/gen.txt" "5 not found here: /usr/local/cuda/lib64/libcudart.so.12, " "missing modules are named"
has "$T/gen.txt" "and 2 more; dump-time names" "missing modules past three are counted"
has "$T/gen.txt" "C++ names demangled" "snapgen's stacks have C++ names"
"$READER" --format json "$T/gen.oomt" | grep -q '"missing_modules": \[' || fail "JSON names the missing modules"
n=$((n + 1))

# A C program has no tensors: its breakdown's note does not speak of their roles (#19).
hasnt "$T/c.txt" "tensors' roles" "a C program's breakdown"
has "$T/c.txt" "no framework was on those stacks" "a C program's breakdown"
"$READER" --format html "$C" >"$T/c.html" || fail "html of the C workload"
hasnt "$T/c.html" "tensors' roles" "a C program's HTML breakdown"
"$READER" --format markdown "$C" >"$T/c.md" || fail "markdown of the C workload"
has "$T/c.md" "no framework was on those stacks" "a C program's markdown breakdown"
hasnt "$T/c.md" "tensors' roles" "a C program's markdown breakdown"
"$READER" --format json "$C" | grep -q '"framework_on_stacks": false' || fail "JSON framework_on_stacks"
n=$((n + 1))

# A crash's flush says what it is in the user's words, not by the file header's flag (#15).
traced "$T/k" OOMTRACE_DUMP=crash "$WORK" crash
K=$(ls "$T"/k/*-flush.oomt)
for fmt in text markdown html; do
    "$READER" --format $fmt "$K" >"$T/k.$fmt" || fail "$fmt of the crash flush"
    hasnt "$T/k.$fmt" "COMPLETE" "the crash flush's $fmt report"
    hasnt "$T/k.$fmt" "periodic flush" "the crash flush's $fmt report"
    has "$T/k.$fmt" "the process did not finish, so this is its last flush" "the crash flush's $fmt report"
done
has "$T/k.text" "oomtrace: state at the crash of pid " "the crash flush's title"
head -1 "$T/k.text" | grep -q "(Segmentation fault; the process did not finish" || fail "the crash flush's title names the signal: $(head -1 "$T/k.text")"
# A process stopped by SIGTERM (a launcher ending the other ranks) did not crash: its title says how it ended.
traced "$T/term" OOMTRACE_DUMP=crash "$WORK" term
TM=$(ls "$T"/term/*-flush.oomt) || fail "a flush of the process stopped by SIGTERM"
for fmt in text markdown html; do
    "$READER" --format $fmt "$TM" >"$T/term.$fmt" || fail "$fmt of the SIGTERM flush"
    hasnt "$T/term.$fmt" "crash" "the SIGTERM flush's $fmt report"
    has "$T/term.$fmt" "state at the end" "the SIGTERM flush's $fmt title"
    has "$T/term.$fmt" ", stopped by SIGTERM" "the SIGTERM flush's $fmt title"
done
head -1 "$T/term.text" | grep -q "^oomtrace: state at the end of pid [0-9]* on .*, stopped by SIGTERM (Terminated; the process did not finish" ||
    fail "the SIGTERM flush's title: $(head -1 "$T/term.text")"
"$SNAPGEN" --trigger flush --incomplete --events 100 -o "$T/flush.oomt" || fail snapgen
"$READER" "$T/flush.oomt" >"$T/flush.txt" || fail "read a periodic flush"
hasnt "$T/flush.txt" "COMPLETE" "a periodic flush"
has "$T/flush.txt" "the process did not finish and wrote no last flush" "a periodic flush"
n=$((n + 1))

# Markdown cites only what markdown shows (#7): every stack id its Why and What to try name is one its
# tables list beside a site (or the failed request's "Allocated at").
md_cites() { # md_cites FILE
    python3 - "$1" <<'PY' || fail "$1: markdown cites a stack it does not show"
import re, sys
t = open(sys.argv[1], encoding="utf-8").read()
cited = set()
shown = set()
for line in t.split("\n"):
    if line.startswith("- "):
        cited |= set(re.findall(r"\(stack (\d+)\)", line))
    elif line.startswith("|") or line.startswith("Allocated at"):
        for m in re.finditer(r"stacks? ([\d, ]+(?: and \d+)?)", line):
            shown |= set(re.findall(r"\d+", m.group(1)))
missing = cited - shown
if not cited:
    print("no stack cited in", sys.argv[1]); sys.exit(1)
if missing:
    print("cited but not shown:", sorted(missing)); sys.exit(1)
PY
}
"$READER" --format markdown "$C" >"$T/c.md" || fail "markdown of the C workload"
md_cites "$T/c.md"
if [ -f tests/h200/ut_eval_grad.oomt ]; then
    "$READER" --format markdown tests/h200/ut_eval_grad.oomt >"$T/eval.md" || fail "markdown of ut_eval_grad"
    md_cites "$T/eval.md"
fi
n=$((n + 1))

# The merged view's line for a process with nothing live still says something, and its peak (#17).
traced "$T/run" RANK=0 WORLD_SIZE=2 OOMTRACE_DUMP=exit "$WORK" exit
traced "$T/run" RANK=1 WORLD_SIZE=2 FAKECUDA_OTHER_USED=128M "$WORK" oom
"$READER" "$T/run" >"$T/run.txt" || fail "read the run directory"
line=$(grep "^  rank 0 (pid [0-9]*), device 0 at the snapshot:" "$T/run.txt")
[ -n "$line" ] || fail "no breakdown line for rank 0: $(head -20 "$T/run.txt")"
case "$line" in
*": nothing live (0 B); its peak was 640 MiB" | *"; none of its allocations live; its peak was 640 MiB") ;;
*) fail "rank 0's breakdown line: $line" ;;
esac
n=$((n + 1))

# No heading with nothing under it (#23): in the H200 snapshot fw_async_backend PyTorch reported no pool of its own
# (H200 snapshot), and the section then says so in its one line.
if [ -f tests/h200/fw_async_backend.oomt ]; then
    "$READER" tests/h200/fw_async_backend.oomt >"$T/async.txt" || fail "read fw_async_backend"
    python3 - "$T/async.txt" <<'PY' || fail "a heading with nothing under it in fw_async_backend's report"
import sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
for i, l in enumerate(lines[:-1]):
    if l.endswith(":") and not l.startswith(" ") and lines[i + 1].strip() == "":
        print("empty:", l); sys.exit(1)
PY
    has "$T/async.txt" "it reported no device memory of its own" "fw_async_backend's allocator view"
fi
n=$((n + 1))

# One Python call site, one spelling (#20): a helper called from list comprehensions (their own frames on
# the line of the function that runs them, Python 3.11 and before) is named "file:line in function" with
# that function as its caller in the text site table, the Why and the markdown labels alike.
# cudrv.py: the driver through ctypes, with a current context (this program's and the next one's).
cat >"$T/cudrv.py" <<'PY'
import ctypes
cuda = ctypes.CDLL("libcuda.so.1")
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
cuda.cuCtxSetCurrent(ctx)
PY
cat >"$T/comp.py" <<'PY'
from cudrv import cuda, ctypes
def alloc(nbytes):
    p = ctypes.c_uint64()
    return cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(nbytes))
def forward():
    a = [alloc(64 << 20) for _ in range(2)]
    b = [alloc(32 << 20) for _ in range(2)]
    c = [alloc(900 << 20) for _ in range(1)]
forward()
PY
traced "$T/comp" /usr/bin/python3 "$T/comp.py"
CP=$(ls "$T"/comp/*-oom.oomt) || fail "the comprehension program wrote no oom snapshot"
"$READER" --top 5 "$CP" >"$T/comp.txt" || fail "text of the comprehension program"
"$READER" --format markdown --top 5 "$CP" >"$T/comp.md" || fail "markdown of the comprehension program"
for f in "$T/comp.txt" "$T/comp.md"; do
    grep -v '^ *#[0-9]' "$f" >"$f.labels" # a full stack lists every frame, the comprehension's too
    hasnt "$f.labels" "listcomp>" "a comprehension's caller"
    has "$f" "comp.py:4 in alloc" "the helper's site"
    has "$f" "comp.py:6 in forward" "the first comprehension's caller"
done
has "$T/comp.txt" "comp.py:4 in alloc, called from comp.py:6 in forward" "the caller in the Why"
n=$((n + 1))

# PyTorch's advice only for memory PyTorch allocated (#24): a program that imports torch but leaks through
# raw driver calls (ctypes) is told to free what its site keeps, not to accumulate loss.item(). Needs a
# PyTorch (Debian's python3-torch is enough: the companion sees it imported, CUDA or not).
if /usr/bin/python3 -c "import torch" >/dev/null 2>&1; then
    cat >"$T/leak_t.py" <<'PY'
import torch  # imported, never used for device memory
import oomtrace
from cudrv import cuda, ctypes
def alloc(nbytes):
    p = ctypes.c_uint64()
    return p.value if cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(nbytes)) == 0 else None
kept = [alloc(64 << 20)]
oomtrace.dump("warm")  # the companion's view of the frameworks goes into this and later snapshots
for step in range(100):
    scratch = alloc(16 << 20)
    if scratch is None or alloc(32 << 20) is None:  # the second one is kept: the leak
        raise SystemExit(1)
    cuda.cuMemFree_v2(ctypes.c_uint64(scratch))
PY
    traced "$T/pt" PYTHONPATH="$ROOT/python" /usr/bin/python3 "$T/leak_t.py"
    P=$(ls "$T"/pt/*-oom.oomt 2>/dev/null | head -1)
    [ -f "$P" ] || fail "the ctypes leak under torch wrote no oom snapshot: $(tail -5 "$T/programs.log")"
    "$READER" "$P" >"$T/pt.txt" || fail "read the ctypes leak"
    has "$T/pt.txt" "PyTorch" "the frameworks' view of a program that imported torch"
    has "$T/pt.txt" "free what the growing site allocates each iteration" "the ctypes leak's remedy"
    hasnt "$T/pt.txt" "loss.item()" "the ctypes leak's remedy"
    n=$((n + 1))
fi

# A share names its whole (#29): the two columns' wholes differ (the device's used memory at the failure,
# what was counted at the peak), and the heading gives each with its bytes.
grep -q "^What held the memory on device 0 (shares at the failure of the device's 832 MiB used; at the peak of the 640 MiB counted then, as the device's other memory was not measured at the peak):" "$T/c.txt" ||
    fail "the breakdown's heading names both wholes: $(grep "What held" "$T/c.txt")"
grep -q "shares at the failure of the device's 832 MiB used" "$T/c.md" || fail "markdown's breakdown names its wholes"
n=$((n + 1))

# Memory in use before the program started is stated in Why when it matters (#30): without NVML (only the
# stand-in's libcuda.so.1 on the path), 128 MiB already in use made a request 48 MiB short.
mkdir -p "$T/cudaonly" && ln -s "$ROOT/build/fake/libcuda.so.1" "$T/cudaonly/libcuda.so.1"
mkdir -p "$T/b"
env LD_LIBRARY_PATH="$T/cudaonly" FAKECUDA_CAPACITY=1G FAKECUDA_OTHER_USED=128M OOMTRACE_DIR="$T/b" OOMTRACE_QUIET=1 \
    LD_PRELOAD="$LIB" "$WORK" oom >>"$T/programs.log" 2>&1
"$READER" "$T"/b/*-oom.oomt >"$T/b.txt" || fail "read the run without NVML"
has "$T/b.txt" "128 MiB of device 0 (12%) was already in use before this process's first allocation" "the baseline in Why"
has "$T/b.txt" "without it the request of 240 MiB would have fit (it was 48.0 MiB short)" "the baseline in Why"
has "$T/b.txt" "was in use before this process allocated: \`nvidia-smi\`" "the baseline's remedy"
# With NVML's line for this process and no other, the baseline is its own context: nothing is said.
hasnt "$T/c.txt" "already in use before" "a process NVML lists alone"
n=$((n + 1))

# Walk 6, #4 and #1: one allocation is "1 allocation"; the failed request's stack gives its id, which the
# statements naming its site cite ("(stack 3)"), in text, markdown and HTML.
"$SNAPGEN" --trigger exit --live 1 --events 100 -o "$T/one.oomt" || fail "snapgen --live 1"
"$READER" "$T/one.oomt" >"$T/one.txt" 2>&1 || fail "reading the one-allocation snapshot"
grep -qxF "Top call sites live at the snapshot (device memory, all devices): 8.00 KiB in 1 allocation" "$T/one.txt" ||
    fail "one live allocation: $(grep 'Top call sites live' "$T/one.txt")"
hasnt "$T/one.txt" "in 1 allocations" "one live allocation"
"$SNAPGEN" --trigger oom --events 100 -o "$T/fid.oomt" || fail "snapgen oom"
id=$("$READER" --format json "$T/fid.oomt" | python3 -c 'import json,sys; print(json.load(sys.stdin)["failure"]["stack_id"])')
"$READER" "$T/fid.oomt" >"$T/fid.txt" 2>&1
"$READER" --format markdown "$T/fid.oomt" >"$T/fid.md" 2>&1
"$READER" --format html "$T/fid.oomt" >"$T/fid.html" 2>&1
has "$T/fid.txt" "  stack $id (innermost first):" "the failed request's stack id (text)"
grep -qE "^Allocated at \`.*(\` \(stack $id\)|\(stack $id\)\`)$" "$T/fid.md" || fail "the failed request's stack id (markdown): $(grep '^Allocated at' "$T/fid.md")"
grep -qE "Allocated at <code>.*(</code> \(stack $id\)|\(stack $id\)</code>)</summary>" "$T/fid.html" || fail "the failed request's stack id (html)"
n=$((n + 1))

# Walk 6, #22 and #23: one program from two checkouts (its file in two directories) pairs site by site in
# --diff, and a row told apart by its caller names that caller once ("← …"), not also as "called from".
for v in v1 v2; do
    mkdir -p "$T/$v"
    cp tests/py/diff_checkout.py "$T/$v/train.py"
done
traced "$T/d1" OOMTRACE_DUMP=exit OOMTRACE_TESTS_PY="$ROOT/tests/py" DIFF_MIB=64 python3 "$T/v1/train.py"
traced "$T/d2" OOMTRACE_DUMP=exit OOMTRACE_TESTS_PY="$ROOT/tests/py" DIFF_MIB=96 python3 "$T/v2/train.py"
"$READER" --diff "$T"/d1/*.oomt "$T"/d2/*.oomt >"$T/diff.txt" 2>&1 || fail "--diff across checkouts: exit $?"
has "$T/diff.txt" "+32.0 MiB: 64.0 MiB in 1 -> 96.0 MiB in 1: train.py:17 in grab ← … ← train.py:27 in main (new stack" \
    "the first layer's site paired across the two checkouts"
hasnt "$T/diff.txt" "absent" "a site found on one side only across two checkouts"
hasnt "$T/diff.txt" "called from" "a caller named twice"
n=$((n + 1))

# Walk 6, #24: processes without ranks (a plain program that forks, not a job of ranks) are named by pid,
# not "process (rank unknown) (pid N)".
for m in oom exit; do
    traced "$T/norank" FAKECUDA_OTHER_USED=128M OOMTRACE_DUMP=oom,exit "$WORK" "$m"
done
"$READER" "$T/norank" >"$T/norank.txt" 2>&1
oompid=$(ls "$T"/norank/*-oom.oomt | sed 's/.*-\([0-9][0-9]*\)-1-oom\.oomt$/\1/')
has "$T/norank.txt" "First failure: pid $oompid on " "the first failure of a process without a rank"
has "$T/norank.txt" "Report of the first process to fail, pid $oompid (" "the report's process without a rank"
# Walk 8, #15: two command lines (the program's two modes) are no job of ranks: no imbalance between them.
hasnt "$T/norank.txt" "Imbalance" "the imbalance of processes without ranks, of two command lines"
hasnt "$T/norank.txt" "rank unknown" "processes without ranks"
n=$((n + 1))

# Walk 6, #26 (b): one free of an allocation made before the ring's first kept event is "1 free is", not
# "1 frees are": the markers push its allocation out of a 4 KiB ring; a later, larger allocation makes the
# peak, so the live set at the peak does not hold it either (2,400 markers drop several of the ring's chunks
# of 256 events; 1,000 dropped none). One dropped chunk is "(1 chunk)" (snapgen drops exactly one).
cp tests/py/drv.py "$T/"
cat >"$T/onefree.py" <<'PY'
from drv import MiB, dump, free, mark, try_alloc
rc, a = try_alloc(64 * MiB)
assert rc == 0
for i in range(2400):
    mark(b"filler %d" % i)
free(a)
assert try_alloc(128 * MiB)[0] == 0
dump(b"after the free")
PY
traced "$T/onefree" OOMTRACE_RING=4K python3 "$T/onefree.py"
"$READER" --format html -o "$T/onefree.html" "$(ls "$T"/onefree/*-dump.oomt)" || fail "html of onefree.py"
has "$T/onefree.html" "1 free is of an allocation made before the ring's first event; it is counted" "one early free"
"$SNAPGEN" --events 3000 --chunk 1000 --drop-chunks 1 -o "$T/drop1.oomt" || fail "snapgen --drop-chunks 1"
"$READER" --format html -o "$T/drop1.html" "$T/drop1.oomt" || fail "html of one dropped chunk"
has "$T/drop1.html" "The ring dropped the oldest 1,000 events (1 chunk) to stay" "one dropped chunk"
n=$((n + 1))

# Walk 6, #38: a device that was not current at the snapshot has no cuMemGetInfo figure: the line says so
# (and what NVML did), not that "cuMemGetInfo was not available". 600 MiB on device 0, then device 1 fails.
cat >"$T/md.py" <<'PY'
from drv import cuda, ctypes, MiB, try_alloc
assert cuda.cuInit(0) == 0
def use(n):
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    assert cuda.cuDeviceGet(ctypes.byref(dev), n) == 0 and cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cuda.cuCtxSetCurrent(ctx) == 0
use(0)
assert try_alloc(600 * MiB)[0] == 0
use(1)
assert try_alloc(700 * MiB)[0] == 0 and try_alloc(700 * MiB)[0] == 2
PY
traced "$T/md" FAKECUDA_DEVICES=2 python3 "$T/md.py"
"$READER" "$(ls "$T"/md/*-oom.oomt)" >"$T/md.txt" || fail "read md.py's snapshot"
hasnt "$T/md.txt" "cuMemGetInfo was not available" "a device not current at the snapshot"
has "$T/md.txt" "total and free unknown: cuMemGetInfo reads only the device current at the snapshot, which this one was not, and NVML gave no figure for it" "device 0, NVML loaded"
traced "$T/md2" FAKECUDA_DEVICES=2 FAKENVML_FAIL=9 python3 "$T/md.py"
"$READER" "$(ls "$T"/md2/*-oom.oomt)" >"$T/md2.txt" || fail "read md.py's snapshot without NVML"
has "$T/md2.txt" "total and free unknown: cuMemGetInfo reads only the device current at the snapshot (device 1), and NVML could not be used: nvmlInit failed (NVML error 9)" "device 0, NVML failed"
n=$((n + 1))

# The failed request's label that already ends with its stack id (labels that read alike add it) does not get
# it twice in markdown and HTML ("... forward (stack 62)` (stack 62)"): the H200 GPT-2 snapshot.
"$READER" --format markdown "$ROOT/tests/h200/ut_gpt2_batch.oomt" >"$T/g2.md" || fail "markdown of ut_gpt2_batch"
"$READER" --format html "$ROOT/tests/h200/ut_gpt2_batch.oomt" >"$T/g2.html" || fail "html of ut_gpt2_batch"
has "$T/g2.md" 'NewGELUActivation.forward (stack 62)`' "the failed request's label in markdown"
hasnt "$T/g2.md" '(stack 62)` (stack 62)' "the stack id twice in markdown"
hasnt "$T/g2.html" '(stack 62)</code> (stack 62)' "the stack id twice in HTML"
# A markdown table starts after a blank line, else it renders as text of the paragraph before it (the
# allocator's view's last sentence ran into the devices' table).
python3 - "$T/g2.md" <<'PY' || fail "a markdown table glued to the line before it"
import sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
for k in range(1, len(lines)):
    if lines[k].startswith("|") and lines[k - 1].strip() and not lines[k - 1].startswith("|"):
        sys.exit(f"line {k + 1}: {lines[k][:60]!r} follows {lines[k - 1][:80]!r}")
PY
n=$((n + 1))

# Walk 7, #3: a marker right after another with nothing allocated or freed between them (another thread's, a
# logger's) does not cut a leak's run short: 100 steps keep 6 MiB each, "loader 19" right after "step 74".
cat >"$T/loader.py" <<'PY'
from drv import MiB, mark, try_alloc
held = []
for step in range(100):
    mark(b"step %d" % step)
    if step == 74:
        mark(b"loader 19")
    rc, a = try_alloc(6 * MiB)
    assert rc == 0
    held.append(a)
assert try_alloc(500 * MiB)[0] == 2
PY
traced "$T/loader" python3 "$T/loader.py"
"$READER" "$(ls "$T"/loader/*-oom.oomt)" >"$T/loader.txt" || fail "read loader.py's snapshot"
has "$T/loader.txt" 'rose in 99 of 99 intervals and never fell, from 0 allocations (0 B) at marker "step 0" (seq 1) to 99 allocations (594 MiB) at marker "step 99"' "a leak with an empty interval in it"
n=$((n + 1))

# Walk 7, #13: a process whose first allocation fails held nothing: one line says so in every format, not a
# heading over an empty table ("What held the memory on device 0 ():"), and its 0 B peak is not "at ? (seq 0)".
cat >"$T/first.py" <<'PY'
from drv import MiB, try_alloc
assert try_alloc(2048 * MiB)[0] == 2
PY
traced "$T/first" python3 "$T/first.py"
FI=$(ls "$T"/first/*-oom.oomt)
nothing="nothing: no allocation of this process was live on device 0 when the request failed, nor before (its first allocation on the device failed)."
for fmt in text markdown html; do
    "$READER" --format $fmt "$FI" >"$T/first.$fmt" || fail "read first.py's snapshot as $fmt"
    has "$T/first.$fmt" "$nothing" "a first allocation that failed, $fmt"
    hasnt "$T/first.$fmt" "at the failure  " "$fmt: an empty breakdown table"
    hasnt "$T/first.$fmt" "| Category |" "$fmt: an empty breakdown table"
    hasnt "$T/first.$fmt" "at ? (seq 0)" "$fmt: a 0 B peak with no time"
    hasnt "$T/first.$fmt" "does not record the live set at the peak" "$fmt: a 0 B peak misses no live set"
done
has "$T/first.text" "What held the memory on device 0: nothing" "text: the breakdown's one line"
"$READER" --format json "$FI" | grep -q '"nothing_held": "nothing: no allocation' || fail "JSON breakdown.nothing_held"
n=$((n + 1))

# Walk 7, #17: a failed pinned host request has a Why and a remedy of its own, the devices' peak, and never
# "device -1" (the host) nor "Peak: unknown".
cat >"$T/pinned.py" <<'PY'
from drv import cuda, ctypes, MiB, try_alloc
assert try_alloc(200 * MiB)[0] == 0
p = ctypes.c_void_p()
cuda.cuMemAllocHost_v2.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
assert cuda.cuMemAllocHost_v2(ctypes.byref(p), 64 << 40) == 2
PY
traced "$T/pinned" python3 "$T/pinned.py"
PN=$(ls "$T"/pinned/*-oom.oomt)
"$READER" "$PN" >"$T/pinned.txt" || fail "read pinned.py's snapshot"
has "$T/pinned.txt" "The failed request was for page-locked (pinned) host memory, not device memory: the host's RAM or the process's locked-memory limit (ulimit -l, a container's memlock) refused 64.0 TiB; device 0 had 824 MiB free" "a pinned request's Why"
has "$T/pinned.txt" "Pin less host memory at once: make the 64.0 TiB page-locked buffer at" "a pinned request's remedy"
has "$T/pinned.txt" "Top call sites at the peak of device 0: 200 MiB" "the devices' peak for a host failure"
hasnt "$T/pinned.txt" "device -1" "the host is not device -1"
hasnt "$T/pinned.txt" "Peak: unknown" "a host failure with a device peak"
"$READER" --format json "$PN" | grep -q '"kind": "host_request"' || fail "JSON why kind host_request"
n=$((n + 1))

# Walk 7, #1: many call sites that never free, none standing out: a program-wide statement from the ring's
# numbers and a remedy that names no one site of 16; "N more call sites" last in What held the memory, and
# tied sites in the order of the top call sites' table.
{
    echo "from drv import MiB, try_alloc"
    for i in $(seq 0 15); do printf 'def site%d():\n    return try_alloc(MiB)\n' "$i"; done
    echo "sites = [$(seq -s, 0 15 | sed 's/\([0-9][0-9]*\)/site\1/g')]"
    echo "i = 0"
    echo "while sites[i % 16]()[0] == 0:"
    echo "    i += 1"
} >"$T/manysites.py"
traced "$T/ms" python3 "$T/manysites.py"
MS=$(ls "$T"/ms/*-oom.oomt)
"$READER" "$MS" >"$T/ms.txt" || fail "read manysites.py's snapshot"
has "$T/ms.txt" "Nothing was freed on device 0: the event ring holds 1,024 allocations and 0 frees over " "nothing freed, the Why"
has "$T/ms.txt" ", from 16 call sites, none holding more than 6.2% of the 1.00 GiB live at the failure: the program kept everything it allocated." "nothing freed, the Why"
has "$T/ms.txt" "The program freed none of its 1,024 allocations on device 0 (1.00 GiB live, from 16 call sites, none over 6.2%), so no one site is the cause" "nothing freed, the remedy"
hasnt "$T/ms.txt" "free what it holds (or move it to the host) before the request" "one site of 16 named as the one to free"
sed -n '/^What held the memory/,/^  (inferred/p' "$T/ms.txt" | grep '^      ' >"$T/ms.parts"
tail -n 1 "$T/ms.parts" | grep -q "^      12 more call sites " || fail "the 'more call sites' row is not last: $(cat "$T/ms.parts")"
grep -o 'manysites.py:[0-9]*' "$T/ms.parts" | head -n 4 | tr '\n' ' ' >"$T/ms.bd"
sed -n '/^Top call sites at the failure/,/^$/p' "$T/ms.txt" | grep '^ *[0-9]*\. ' | head -n 4 | grep -o 'manysites.py:[0-9]*' | tr '\n' ' ' >"$T/ms.top"
[ "$(cat "$T/ms.bd")" = "$(cat "$T/ms.top")" ] || fail "tied sites in two orders: breakdown $(cat "$T/ms.bd"), top sites $(cat "$T/ms.top")"
n=$((n + 1))

# Walk 10, #8: an imported allocation whose size is not known (an IPC mapping cuMemGetAddressRange would not
# size, a VMM import not mapped yet) is recorded as a one-byte stand-in; no report shows it as "1 B". The
# IPC mapping the driver sizes shows the exporter's 8 MiB.
FAM=$ROOT/build/tests/families
for v in import-unsized import; do
    traced "$T/$v" "$FAM" "$v"
    IM=$(ls "$T/$v"/*-1-dump.oomt 2>/dev/null | head -1)
    [ -f "$IM" ] || fail "families $v wrote no snapshot: $(tail -5 "$T/programs.log")"
    "$READER" "$IM" >"$T/$v.txt" || fail "read families $v"
    "$READER" --format html "$IM" >"$T/$v.html" || fail "read families $v as HTML"
    "$READER" --format json "$IM" >"$T/$v.json" || fail "read families $v as JSON"
    for f in "$T/$v.txt" "$T/$v.html"; do
        hasnt "$f" "imported 2 B" "a stand-in shown as a size"
        hasnt "$f" "imported 1 B" "a stand-in shown as a size"
        hasnt "$f" ": 2 B in 2 allocations" "a stand-in shown as a size"
    done
done
has "$T/import-unsized.txt" "tracked live 12.0 MiB: device 8.00 MiB, vmm 4.00 MiB; imported, not in it: 2 allocations (size not known)" "the devices line"
has "$T/import-unsized.txt" "not counted): 2 allocations whose size is not known (neither the driver nor a mapping gave it)" "imported memory"
has "$T/import-unsized.html" "not counted): 2 allocations whose size is not known" "HTML's imported memory"
has "$T/import.txt" "vmm 4.00 MiB; imported, not in it: 8.00 MiB + 1 allocation (size not known)" "the devices line, a sized IPC mapping"
has "$T/import.txt" "not counted): 8.00 MiB in 1 allocation, and 1 more whose size is not known" "imported memory, a sized IPC mapping"
python3 - "$T/import-unsized.json" "$T/import.json" <<'PY' || fail "JSON's imported memory"
import json, sys
for path, want in zip(sys.argv[1:], ((0, 2, 2), (8 << 20, 2, 1))):
    d = json.load(open(path))
    got = (d["imported"]["bytes"], d["imported"]["count"], d["imported"]["size_unknown"])
    dev = d["devices"][0]
    assert got == want, (path, got, want)
    assert (dev["by_category"]["imported"], dev["imported_size_unknown"]) == (want[0], want[2]), (path, dev)
PY
n=$((n + 1))

echo "report_wording: ok ($n checks)"
