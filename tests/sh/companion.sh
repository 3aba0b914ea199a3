#!/bin/sh
# The Python framework companion's injection path on the stand-in driver, under every CPython 3.9-3.13 the
# machine has (/usr/bin/python3.N, pyenv's versions): it starts under plain LD_PRELOAD, a dump carries a
# FRAMEWORK section, a framework imported later is found, a framework OOM writes the fatal snapshot with its
# probes, a refusal inside torch's pool before any allocation is seen, OOMTRACE_FRAMEWORKS=0 stops it, and the
# program's output and exit status never change (also when the companion fails: OOMTRACE_TEST_COMPANION_FAIL).
# Versions the machine lacks are said, not failed.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "companion: FAIL: $*"; exit 1; }
export LD_LIBRARY_PATH="$PWD/build/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" FAKECUDA_CAPACITY=1G
LIB=$PWD/build/liboomtrace.so
W=tests/py/companion_workload.py
T=$(mktemp -d /tmp/oomtrace-companion.XXXXXX)
trap 'rm -rf "$T"' EXIT

# What the snapshot says, through the test's own decoder (tests/py/fwdecode.py).
check() { # py file python-expression-over-d
    python3 - "$1" "$2" <<'EOF' || return 1
import json, subprocess, sys
sys.path.insert(0, "tests/py")
import fwdecode
d = fwdecode.decode(sys.argv[1])
if not eval("(" + sys.argv[2] + ")"):
    print("  not true: %s\n  in %s" % (sys.argv[2], json.dumps(d)[:1500]))
    sys.exit(1)
EOF
}

# Runs the workload untraced and traced; output (stdout, and stderr less the tracer's own lines) and
# exit status must be the same.
same() { # py mode dir [env...]
    py=$1 mode=$2 dir=$3
    shift 3
    mkdir -p "$dir"
    "$py" $W "$mode" >"$dir/plain.out" 2>"$dir/plain.err"
    prc=$?
    env "$@" OOMTRACE_DIR="$dir" LD_PRELOAD="$LIB" "$py" $W "$mode" >"$dir/traced.out" 2>"$dir/traced.err"
    trc=$?
    [ "$prc" -eq "$trc" ] || fail "$py $mode: exit status $trc traced, $prc untraced"
    cmp -s "$dir/plain.out" "$dir/traced.out" || fail "$py $mode: stdout differs when traced"
    grep -v '^oomtrace: ' "$dir/traced.err" >"$dir/traced.err2"
    cmp -s "$dir/plain.err" "$dir/traced.err2" || fail "$py $mode: stderr differs when traced: $(cat "$dir/traced.err")"
}

tested=0
. tests/py/cpython.sh
for v in 9 10 11 12 13; do
    py=$(cpython $v)
    [ -n "$py" ] || { echo "companion: no CPython 3.$v here; not tested"; continue; }
    d=$T/3.$v
    tested=$((tested + 1))

    same "$py" dump "$d/dump"
    f=$(ls "$d/dump"/*-dump.oomt 2>/dev/null) || fail "3.$v: no dump"
    check "$f" 'd["version"] == [1, 4] and d["framework"]["records"][0]["kind"] == "INFO" and
        d["framework"]["records"][0]["framework"] == "cupy" and d["framework"]["records"][0]["reason"] == "api" and
        d["framework"]["records"][1]["stats"]["pool_used_bytes"] == 3 << 20' || fail "3.$v: dump's FRAMEWORK"

    # A refusal torch swallows, then one it raises (caught by the program): one fatal snapshot, for the one
    # that reached Python, seen from 3.12 at its raise (sys.monitoring), before at its creation.
    same "$py" torch "$d/torch"
    fatal=$(ls -v "$d/torch"/*-framework-oom.oomt 2>/dev/null)
    nfatal=$(printf '%s\n' "$fatal" | grep -c .)
    [ "$nfatal" -eq 1 ] || fail "3.$v: $nfatal fatal snapshots for one torch OOM"
    f=$(printf '%s\n' "$fatal" | tail -1)
    probe=$(basename "$(ls "$d/torch"/*-oom.oomt | grep -v framework)")
    check "$f" '[p["file"] for p in d["probes"]] == ["'"$probe"'"] and d["probes"][0]["requested"] == 4 << 30 and
        [r for r in d["framework"]["records"] if r["kind"] == "ERROR"][0]["text"].startswith("CUDA out of memory")' ||
        fail "3.$v: the fatal snapshot does not list the driver OOM or lacks torch's message"
    # (ROLES empty: the fake torch holds no model, and its roles scan says so.)
    check "$f" 'd["trigger"] == 6 and d["reason"] == "torch" and d["failure"]["api"] == 32 and
        d["failure"]["requested"] == 2 << 30 and d["failure"]["result"] == 2 and
        [r["kind"] for r in d["framework"]["records"]] == ["INFO", "STATS", "STEPS", "ROLES", "SEGMENTS", "BLOCKS", "STATS", "SETTINGS", "ERROR"] and
        d["framework"]["records"][1]["device"] == (1 << 32) - 1 and d["framework"]["records"][1]["stats"] == {"grad_enabled": 1, "optimizers": 0} and
        [s["step"] for s in d["framework"]["records"][2]["steps"]] == [1, 2, 3] and
        d["framework"]["records"][2]["steps"][0]["reserved"] == 8 << 20 and
        all(s["reserved"] in (0, 8 << 20) for s in d["framework"]["records"][2]["steps"]) and
        d["framework"]["records"][3]["labels"] == [] and d["framework"]["records"][3]["roles"]["address"] == [] and
        d["framework"]["records"][5]["blocks"]["state"] == [1, 0, 1, 1, 0, 1] and
        d["framework"]["records"][4]["segments"]["pool_id"] == [0, (1 << 32) ^ 2] and
        d["framework"]["records"][6]["stats"]["memory_fraction_limit_bytes"] == int(0.4 * (1 << 30)) and
        d["framework"]["records"][7]["settings"]["backend"] == "native"' || fail "3.$v: torch's fatal snapshot"

    # A driver-level OOM after a torch OOM the program caught: the snapshot carries the caught OOM's view, which
    # the reader shows as earlier, with the allocations between, and reads for nothing else.
    same "$py" torch-again "$d/again"
    f=$(ls -v "$d/again"/*-oom.oomt 2>/dev/null | grep -v framework-oom | tail -1)
    [ -n "$f" ] || fail "3.$v: torch-again: no driver-level snapshot ($(ls "$d/again"))"
    build/oomtrace-read --format json "$f" | python3 -c '
import json, sys
r = json.load(sys.stdin)
f = r["frameworks"]
assert f["reason"] == "oom" and f["earlier"] and f["between"]["allocations"] >= 2, f.get("between")
assert not f["fatal"] and not f["creators"], f
' || fail "3.$v: torch-again: the caught OOM's view is read as the driver OOM's"
    build/oomtrace-read "$f" | grep -q "^Allocator's view, earlier (.*at PyTorch's own out-of-memory error; [0-9]* device allocations" ||
        fail "3.$v: torch-again: the report does not say the view is earlier"

    # A refusal inside torch's pool before any allocation (a memory fraction): the companion started at the
    # runtime's driver lookups, and attached its observer in torch's own queue of calls at CUDA's setup.
    same "$py" pool-first "$d/pool"
    f=$(ls "$d/pool"/*-framework-oom.oomt 2>/dev/null) || fail "3.$v: pool-first: no fatal snapshot ($(ls "$d/pool"))"
    check "$f" 'd["reason"] == "torch" and d["failure"]["requested"] == 4 << 30 and
        "SETTINGS" in [r["kind"] for r in d["framework"]["records"]]' || fail "3.$v: pool-first's fatal snapshot"

    # The allocator's counters are read only every 10000 x a read's cost (the first read here takes 50 ms):
    # steps 2-70 carry none, and the statement about the inputs that changed says which step's they are. The
    # inputs are sampled (step 2's: the first step's end arms the sampler, the next is due 1 s later);
    # the failing step's are read from its frames, in the model's forward. Steps 1 and 2 are older than the
    # last 64 kept, and kept: the statement names them.
    same "$py" steps "$d/steps"
    f=$(ls "$d/steps"/*-framework-oom.oomt 2>/dev/null) || fail "3.$v: steps: no fatal snapshot"
    check "$f" '[(s["step"], s["allocated"], s["shapes"]) for s in [r for r in d["framework"]["records"] if r["kind"] == "STEPS"][0]["steps"]]
        == [(1, 3 << 20, ""), (2, 0, "(2, 8)")] + [(n, 0, "") for n in range(7, 71)]' || fail "3.$v: the sampled STEPS"
    build/oomtrace-read "$f" >"$d/steps/report.txt" 2>&1
    grep -q "optimizer step 71 was under way with (64, 8), where step 2 had (2, 8) (step 1 ended with 3.00 MiB allocated by PyTorch)\.$" \
        "$d/steps/report.txt" || fail "3.$v: the inputs' statement with sampled counters: $(grep -i 'inputs changed' "$d/steps/report.txt")"
    build/oomtrace-read --format json "$f" | python3 -c 'import json, sys
w = [x for x in json.load(sys.stdin)["why"] if x["kind"] == "step_inputs"][0]["numbers"]
sys.exit(w != {"step": 71, "previous_step": 2, "previous_allocated_bytes": 3 << 20, "allocated_step": 1})' ||
        fail "3.$v: the inputs' statement's numbers"

    # Each optimizer step is marked through the library's builtin (lib/runtime/companion.c), not ctypes.
    build/oomtrace-read --format json "$f" | python3 -c 'import json, sys
sys.exit([m["label"] for m in json.load(sys.stdin)["markers"]] != ["step 1", "step 2 (2, 8)"] + ["step %d" % n for n in range(3, 71)])' ||
        fail "3.$v: the steps' markers"
    mkdir -p "$d/mark"
    got=$(OOMTRACE_DIR="$d/mark" OOMTRACE_QUIET=1 LD_PRELOAD="$LIB" "$py" -c 'import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1"); cuda.cuInit(0); p = ctypes.c_uint64()
cuda.cuMemAlloc_v2(ctypes.byref(p), 1 << 20)
for _ in range(1000): pass
m = sys.modules["_oomtrace_companion"]._companion.mark_fn
print(type(m).__name__, m(b"step 1"))' 2>&1)
    [ "$got" = "builtin_function_or_method True" ] || fail "3.$v: the step marker is not the library's builtin: $got"

    # After a step, the STEPS entry and the marker in one C call (lib/runtime/companion_step.c): the Python
    # path's entry and label (cut at 255 bytes, at a character's boundary); False, having done nothing, when one of the objects it checks
    # (the allocator's counters, the step hook) is due (its `due` reached), a shape text does not encode, or the
    # arguments are not (int, str); 1 to 4 such objects.
    mkdir -p "$d/fast"
    got=$(OOMTRACE_DIR="$d/fast" OOMTRACE_QUIET=1 OOMTRACE_DUMP=none LD_PRELOAD="$LIB" "$py" -c 'import collections, ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1"); cuda.cuInit(0); p = ctypes.c_uint64()
cuda.cuMemAlloc_v2(ctypes.byref(p), 1 << 20)
for _ in range(1000): pass
make = sys.modules["_oomtrace_companion"]._companion.step_fast
class Counters: due = float("inf")
steps, c = collections.deque(maxlen=64), Counters()
fast = make(steps.append, c)
got = [fast(5, "(2, 8)"), fast(6, ""), fast(7, "x" * 300), fast(13, "x" * 246 + "\u00e9")]
c.due = 0
got += [fast(8, "(2, 8)"), fast(9, "\ud800")]
c.due = 1 << 80
got += [fast(10, "(2, 8)"), fast(11, 12), fast("12", "")]
class Later: due = 0
got += [make(steps.append, c, Later)(14, ""), make(steps.append, c, c)(15, "")]
try:
    make(steps.append)
except TypeError:
    got.append("TypeError")
ctypes.CDLL(None).oomtrace_dump(b"test")
print(type(make).__name__, got, [(s, z1, z2, len(sh)) for s, t, z1, z2, sh in steps], all(e[1] > 0 for e in steps))' 2>&1)
    [ "$got" = "builtin_function_or_method [True, True, True, True, False, False, True, False, False, False, True, '"'TypeError'"'] [(5, 0, 0, 6), (6, 0, 0, 0), (7, 0, 0, 300), (13, 0, 0, 247), (10, 0, 0, 6), (15, 0, 0, 0)] True" ] ||
        fail "3.$v: the step's C path: $got"
    f=$(ls "$d/fast"/*.oomt 2>/dev/null | head -1)
    build/oomtrace-read --format json "$f" | python3 -c 'import json, sys
sys.exit([m["label"] for m in json.load(sys.stdin)["markers"]] != ["step 5 (2, 8)", "step 6", "step 7 " + "x" * 248, "step 13 " + "x" * 246, "step 10 (2, 8)", "step 15"])' ||
        fail "3.$v: the step's C path's markers"

    # The step hook itself in C (lib/runtime/companion_step.c, _step_hook): its state, ring and hand-offs to
    # Python (tests/py/step_hook_c.py); its markers "step N" from the snapshot the script dumps.
    mkdir -p "$d/hookc"
    got=$(OOMTRACE_DIR="$d/hookc" OOMTRACE_QUIET=1 OOMTRACE_DUMP=none LD_PRELOAD="$LIB" "$py" tests/py/step_hook_c.py 2>&1)
    [ "$got" = ok ] || fail "3.$v: the step hook in C: $got"
    f=$(ls "$d/hookc"/*.oomt 2>/dev/null | head -1)
    build/oomtrace-read --format json "$f" | python3 -c 'import json, sys
sys.exit([m["label"] for m in json.load(sys.stdin)["markers"]] != ["step %d" % n for n in list(range(11, 81)) + [82, 83, 84]])' ||
        fail "3.$v: the step hook in C's markers"

    # CuPy imported after the companion started: its OutOfMemoryError, left uncaught, is seen (at its creation).
    same "$py" late-cupy "$d/late"
    f=$(ls "$d/late"/*-framework-oom.oomt 2>/dev/null) || fail "3.$v: cupy imported later: no fatal snapshot"
    check "$f" 'd["failure"]["requested"] == 1 << 30 and d["probes"] == [] and
        [r["kind"] for r in d["framework"]["records"]] == ["INFO", "STATS", "ERROR"]' || fail "3.$v: cupy's OOM"
    [ "$(ls "$d/late" | grep -c framework-oom)" -eq 1 ] || fail "3.$v: one cupy OOM wrote more than one snapshot"

    # Off: no companion, no FRAMEWORK section.
    same "$py" dump "$d/off" OOMTRACE_FRAMEWORKS=0
    check "$(ls "$d/off"/*-dump.oomt)" '"framework" not in d' || fail "3.$v: OOMTRACE_FRAMEWORKS=0 did not stop it"

    # A companion that fails to load, to start, or to collect: one line, the program unchanged.
    for how in load start collect; do
        same "$py" torch "$d/fail-$how" OOMTRACE_TEST_COMPANION_FAIL=$how
        n=$(grep -c '^oomtrace: ' "$d/fail-$how/traced.err")
        grep -v 'snapshot written' "$d/fail-$how/traced.err" | grep -q '^oomtrace: ' ||
            fail "3.$v: a companion failing at $how said nothing"
        [ "$how" != collect ] || [ "$(grep -v 'snapshot written' "$d/fail-$how/traced.err" | wc -l)" -eq 1 ] ||
            fail "3.$v: a companion failing at $how said more than one line: $(cat "$d/fail-$how/traced.err")"
        : "$n"
    done
    echo "companion: CPython 3.$v ($py): ok"
done
[ "$tested" -gt 0 ] || fail "no CPython 3.9-3.13 on this machine"
echo "companion: ok ($tested interpreters)"
