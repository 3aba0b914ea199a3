#!/bin/sh
# A request that grows every step under a caching allocator, and fails inside it (tests/py/grow_cached.py: a
# PyTorch-like pool in a site-packages folder, against the stand-in driver). The framework's OOM has no driver
# allocation of its own: the request's growth is read from the allocations under the same line of the user's
# code, step by step, and What to try bounds the input (runs 43-44 on the H200 under torch's default allocator:
# before, only "41x the step before" and its remedy, from the driver's view of the cache).
# The "torch" case allocates under a frame where PyTorch's would be, so that activations fill the peak (inferred
# from the stacks) as on the H200: the remedy for the growth the Why states still comes first, then checkpointing
# (runs 45-46: checkpointing came first, by its bytes).
set -u
cd "$(dirname "$0")/../.."
READER=${READER:-build/oomtrace-read}
command -v python3 >/dev/null 2>&1 || { echo "grow_cached: skipped, no python3"; exit 0; }
T=$(mktemp -d /tmp/oomtrace-growcached-XXXXXX)
trap 'rm -rf "$T"' EXIT INT TERM
failed=0
# traced NAME [ARG]: the workload traced into $T/NAME; its framework OOM snapshot read into $T/NAME.{txt,json,md}.
traced() {
    mkdir -p "$T/$1"
    LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=256M FAKECUDA_OTHER_USED=0 OOMTRACE_DIR="$T/$1" OOMTRACE_QUIET=1 \
        LD_PRELOAD="$PWD/build/liboomtrace.so" python3 tests/py/grow_cached.py ${2:-} >"$T/$1.out" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] || { echo "grow_cached: FAIL: $1: the program's status $rc, want 1 (its own OOM): $(cat "$T/$1.out")"; exit 1; }
    set -- "$1" "$T/$1"/*-framework-oom.oomt
    [ -f "$2" ] || { echo "grow_cached: FAIL: $1: no framework OOM snapshot: $(ls "$T/$1")"; exit 1; }
    for fmt in text json markdown; do
        "$READER" --format $fmt "$2" >"$T/$1.$fmt" 2>&1 || { echo "grow_cached: FAIL: $1: exit $? reading $2 as $fmt"; exit 1; }
    done
}
has() {
    grep -Eq -- "$3" "$T/$1.text" || { echo "grow_cached: FAIL: $1: $2 (no line matching: $3)"; failed=1; }
}
hasnt() {
    ! grep -Eq -- "$3" "$T/$1.text" || { echo "grow_cached: FAIL: $1: $2 (a line matches: $3)"; failed=1; }
}
traced plain
has plain "the growth" 'The request grew from step to step: the largest allocation on device 0 at grow_cached\.py:[0-9]+ in train .*rose in 40 of 40 steps and never fell, from 4\.00 MiB after marker "step 0" .* to 160 MiB after marker "step 39" .*164 MiB, the failed request, after marker "step 40" .*\+4\.00 MiB a step'
has plain "the remedy" 'grew by 4\.00 MiB a step, to 164 MiB at the failure: bound what one step gets'
hasnt plain "the remedy for a one-step jump" 'that step was given more \(a longer input'
# The step before the failure was served from the pool's cache: the driver saw it ask for little, but the request
# grew by 1.03x, not the "41.0x the one before it" of the driver's view.
hasnt plain "a one-step jump from the driver's view of the cache" 'asked for [0-9.]+x the one before it'
python3 - "$T/plain.json" <<'PY' || { echo "grow_cached: FAIL: plain: growing_request's numbers in JSON"; failed=1; }
import json, sys
d = json.load(open(sys.argv[1]))
g = [w for w in d["why"] if w["kind"] == "growing_request"]
assert g and g[0]["numbers"]["rises"] == 40 and g[0]["numbers"]["bytes_per_step"] == 4 << 20, g
assert [r["kind"] for r in d["what_to_try"]][:1] == ["bound_input"], d["what_to_try"]
PY

traced torch torch
has torch "activations fill the peak, inferred from the stacks" '^  activations and temporaries \(inferred\) +96\.0 MiB +100\.0% +256 MiB +100\.0%'
has torch "the growth" 'The request grew from step to step: .*rose in 40 of 40 steps and never fell.*\+4\.00 MiB a step'
# The order in each format: the remedies' list, one remedy a line, from the line after What to try's heading.
python3 - "$T/torch" <<'PY' || failed=1
import json, re, sys
base = sys.argv[1]
bound, ckpt = "grew by 4.00 MiB a step, to 164 MiB at the failure: bound what one step gets", "gradient checkpointing"
want = [bound, ckpt]
def order(path, head, item):
    lines = open(path, encoding="utf-8").read().split("\n")
    i = next(k for k, l in enumerate(lines) if l.startswith(head))
    got = []
    for l in lines[i + 1:]:
        if not l.strip() and not got:
            continue
        if not l.startswith(item):
            break
        got.append(l)
    return [w for g in got for w in want if w in g.replace("\\", "")]
ok = True
for fmt, head, item in (("text", "What to try", "  - "), ("markdown", "**What to try:**", "- ")):
    got = order(base + "." + fmt, head, item)
    if got != want:
        print("grow_cached: FAIL: torch: What to try in %s, in this order: %s; want the growth's remedy, then checkpointing"
              % (fmt, got))
        ok = False
d = json.load(open(base + ".json"))
kinds = [r["kind"] for r in d["what_to_try"]]
if kinds != ["bound_input", "activations"]:
    print("grow_cached: FAIL: torch: what_to_try in JSON: %s; want bound_input, then activations" % kinds)
    ok = False
sys.exit(0 if ok else 1)
PY
[ "$failed" -eq 0 ] && echo "grow_cached: ok"
exit "$failed"
