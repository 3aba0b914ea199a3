# Sourced after drv_programs.sh by the leak tests (leak_span.sh, leak_shapes.sh), which run small Python programs
# with a marker per step under the tracer against the stand-in driver (1 GiB) and check their reports' words.
# Writes $T/steps.py (a step's pieces: scratch, allocated and freed again; keep, held in a list) and defines:
#   traced NAME [VAR=VALUE...]  runs $T/NAME.py (its arguments in $ARGS, its stdout in $T/NAME.out); each snapshot's
#                               report in $T/NAME-KIND.txt and .json (KIND: oom, dump, ...), the last one's also in
#                               $T/NAME.txt and .json
#   has REPORT WHAT REGEX, hasnt REPORT WHAT REGEX   a line of $T/REPORT.txt matches REGEX, or none does
cat >"$T/steps.py" <<'PY'
from drv import MiB, dump, free, mark, try_alloc  # noqa: F401
def scratch(mib):
    rc, a = try_alloc(mib * MiB)
    if rc:
        return False
    free(a)
    return True
def keep(held, mib):
    rc, a = try_alloc(mib * MiB)
    if rc:
        return False
    held.append(a)
    return True
PY
traced() {
    name=$1
    shift
    mkdir -p "$T/$name"
    # shellcheck disable=SC2086 # ARGS are words
    env LD_LIBRARY_PATH="$ROOT/build/fake" FAKECUDA_CAPACITY=1G FAKECUDA_OTHER_USED=0 OOMTRACE_DIR="$T/$name" \
        OOMTRACE_QUIET=1 LD_PRELOAD="$LIB" "$@" python3 "$T/$name.py" ${ARGS:-} >"$T/$name.out" 2>>"$T/programs.log"
    for f in "$T/$name"/*.oomt; do
        [ -f "$f" ] || { echo "$NAME: FAIL: $name wrote no snapshot"; cat "$T/programs.log"; exit 1; }
        kind=${f##*-}
        kind=${kind%.oomt}
        "$READER" "$f" >"$T/$name-$kind.txt" 2>&1 || { echo "$NAME: FAIL: exit $? reading $f"; failed=1; }
        "$READER" --format json "$f" >"$T/$name-$kind.json" 2>&1 || { echo "$NAME: FAIL: exit $? reading $f (JSON)"; failed=1; }
        cp "$T/$name-$kind.txt" "$T/$name.txt"
        cp "$T/$name-$kind.json" "$T/$name.json"
    done
}
has() {
    grep -Eq -- "$3" "$T/$1.txt" || { echo "$NAME: FAIL: $1: $2 (no line matching: $3)"; failed=1; }
}
hasnt() {
    ! grep -Eq -- "$3" "$T/$1.txt" || { echo "$NAME: FAIL: $1: $2 ($(grep -Eo -- ".{0,80}$3.{0,80}" "$T/$1.txt" | head -1))"; failed=1; }
}
