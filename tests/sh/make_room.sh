#!/bin/sh
# What to try when one call site holds what the failed request was short (make_room): a smaller request is
# proposed only when the free memory holds a useful piece of it, never "no larger than 0 B" (walk 8, #1).
# full.py NOTHING_MIB REQUEST_MIB: one allocation of NOTHING_MIB on the 1 GiB stand-in device, then a request
# of REQUEST_MIB that fails.
set -u
cd "$(dirname "$0")/../.."
NAME=make_room
. tests/sh/lib/drv_programs.sh
cat >"$T/full.py" <<'PY'
import sys
from drv import MiB, try_alloc
held, request = int(sys.argv[1]), int(sys.argv[2])
assert try_alloc(held * MiB)[0] == 0
assert try_alloc(request * MiB)[0] == 2
PY
case_() { # case_ NAME HELD_MIB REQUEST_MIB: the report's What to try in $T/NAME.txt
    mkdir -p "$T/$1"
    env LD_LIBRARY_PATH="$ROOT/build/fake" FAKECUDA_CAPACITY=1G FAKECUDA_OTHER_USED=0 OOMTRACE_DIR="$T/$1" OOMTRACE_QUIET=1 \
        LD_PRELOAD="$LIB" python3 "$T/full.py" "$2" "$3" >>"$T/programs.log" 2>&1
    "$READER" "$T/$1"/*.oomt >"$T/$1.txt" 2>&1 || { echo "make_room: FAIL: $1: exit $? reading its snapshot"; cat "$T/programs.log"; exit 1; }
}
has() { grep -Fq -- "$3" "$T/$1.txt" || { echo "make_room: FAIL: $1: $2 (missing: $3)"; failed=1; }; }
hasnt() { ! grep -Fq -- "$3" "$T/$1.txt" || { echo "make_room: FAIL: $1: $2 ($3)"; failed=1; }; }

case_ full 1024 8
has full "free what it holds" "held 1.00 GiB live at the failure (1 allocation): free what it holds (or move it to the host) before the request: the device had nothing free, so no request of any size fits until memory is freed."
hasnt full "a request no larger than nothing" "no larger than 0 B"

case_ nearly 1020 64
has nearly "too little free for a piece" "before the request: with 4.00 MiB free, less than 1/8 of the request, a smaller request is no way out; the memory must be freed first."
hasnt nearly "a request no larger than a sliver" "no larger than 4.00 MiB"

case_ room 900 200
has room "a smaller request where it fits" "or make the request at drv.py:17 in try_alloc, called from full.py:5 in <module> (stack 2) no larger than 124 MiB (in pieces, or a smaller batch)."

[ "$failed" -eq 0 ] && echo "make_room: ok (3 programs)"
exit "$failed"
