#!/bin/sh
# A snapshot read away from the program's binary (copied from a cluster to a laptop, the program rebuilt or
# removed): the culprit is the program's own frame as module+offset, never the C runtime's start frame that
# every stack ends in; and --debug-dir supplies the missing binary, by name or by build-id, only when its
# build-id is the recorded one.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "away_from_binary: FAIL: $*"; exit 1; }
R=$PWD/build/oomtrace-read
for f in "$R" build/liboomtrace.so build/tests/golden_cache build/tests/golden_workload build/fake/libcuda.so.1; do
    [ -e "$f" ] || fail "$f is missing (make test-build)"
done
command -v objcopy >/dev/null 2>&1 || { echo "away_from_binary: skipped, no objcopy"; exit 0; }
work=$(mktemp -d /tmp/oomtrace-away.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp build/tests/golden_cache "$work/prog"
mkdir "$work/out"
# tests/golden/cache.c leak: weights at cache.c:34 (200 MiB), a cache that grows at cache_put (cache.c:16).
LD_LIBRARY_PATH=$PWD/build/fake FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1 OOMTRACE_DIR=$work/out \
    LD_PRELOAD=$PWD/build/liboomtrace.so "$work/prog" leak >/dev/null 2>&1
snap=$(ls "$work"/out/*-oom.oomt 2>/dev/null | head -1)
[ -f "$snap" ] || fail "no out-of-memory snapshot"
id=$(readelf -n "$work/prog" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
[ -n "$id" ] || fail "the test program has no build-id"
"$R" --top 3 "$snap" >"$work/here.txt" 2>&1
grep -q "at cache_put (cache.c:16)" "$work/here.txt" || fail "read where it ran: $(grep -m1 'Most of the peak' "$work/here.txt")"
mv "$work/prog" "$work/prog.moved"

# Away from the binary: the program's frames by module+offset, in the Why, the site tables and the breakdown.
"$R" --top 3 "$snap" >"$work/away.txt" 2>&1
grep -q "^  - Most of the peak came from one call site: .* at prog+0x[0-9a-f]* (stack [0-9]*)\.\$" "$work/away.txt" ||
    fail "away: the peak's site is not the program's frame: $(grep -m1 'Most of the peak' "$work/away.txt")"
grep -q "__libc_start_call_main (libc_start_call_main.h:58) (stack" "$work/away.txt" &&
    fail "away: a site is named by the C runtime's start frame: $(grep -m1 '__libc_start_call_main (libc' "$work/away.txt")"
grep -q "(unknown stack)" "$work/away.txt" && fail "away: the breakdown has an (unknown stack) row"
grep -q "^      prog+0x[0-9a-f]*  *[0-9.]* MiB" "$work/away.txt" || fail "away: no breakdown row by module+offset"
grep -q "(1 not found here: $work/prog; dump-time names for those)" "$work/away.txt" || fail "away: the Symbols line"

# --debug-dir: the same binary by name, its debug file by name, and its debug file by build-id (what --help
# names); each gives back the function names.
for how in name debugname buildid buildidbin; do
    rm -rf "$work/dbg"
    mkdir -p "$work/dbg/.build-id/$(echo "$id" | cut -c1-2)"
    bid=$work/dbg/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-)
    case $how in
    name) cp "$work/prog.moved" "$work/dbg/prog" ;;
    debugname) objcopy --only-keep-debug "$work/prog.moved" "$work/dbg/prog.debug" ;;
    buildid) objcopy --only-keep-debug "$work/prog.moved" "$bid.debug" ;;
    buildidbin) cp "$work/prog.moved" "$bid" ;;
    esac
    "$R" --debug-dir "$work/dbg" --top 3 "$snap" >"$work/$how.txt" 2>&1
    grep -q "at cache_put (cache.c:16)" "$work/$how.txt" ||
        fail "--debug-dir ($how): no names: $(grep -m1 'Most of the peak' "$work/$how.txt")"
    grep -q "^Symbols: 8 of 8 modules verified by build-id and read here, 1 of them found in a debug directory, not at the path it ran from" "$work/$how.txt" ||
        fail "--debug-dir ($how): $(grep '^Symbols' "$work/$how.txt")"
    "$R" --format json --debug-dir "$work/dbg" "$snap" | python3 -c '
import json, sys
y = json.load(sys.stdin)["symbolization"]
assert y["found_in_debug_dirs"] == 1 and y["missing"] == 0, y' || fail "--debug-dir ($how): JSON symbolization"
done
# Another program under the same name is not used: its build-id differs.
rm -rf "$work/dbg"
mkdir "$work/dbg"
cp build/tests/golden_workload "$work/dbg/prog"
"$R" --debug-dir "$work/dbg" --top 3 "$snap" >"$work/other.txt" 2>&1
grep -q "at prog+0x[0-9a-f]* (stack" "$work/other.txt" && grep -q "(1 not found here: $work/prog;" "$work/other.txt" ||
    fail "--debug-dir with another binary named prog: $(grep -m1 'Most of the peak' "$work/other.txt")"
# A --debug-dir that is not there is a usage error, one line, not a silent no-op (walk 7, #24e).
"$R" --debug-dir "$work/no-such-dir" "$snap" >"$work/nodir.out" 2>&1
[ $? -eq 2 ] && [ "$(wc -l <"$work/nodir.out")" -eq 1 ] &&
    grep -q "^oomtrace-read: --debug-dir $work/no-such-dir: No such file or directory\$" "$work/nodir.out" ||
    fail "--debug-dir that does not exist: $(cat "$work/nodir.out")"
echo "away_from_binary: ok"
