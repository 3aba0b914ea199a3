#!/bin/sh
# The launcher (tools/oomtrace, from the build tree) against what a command does to its own run: a program built
# with a sanitizer, a sanitizer already preloaded (walk 8, #14).
set -u
cd "$(dirname "$0")/../.."
fail() { echo "launcher_cmd: FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/oomtrace-lcmd.XXXXXX)
trap 'rm -rf "$work"' EXIT
export LD_LIBRARY_PATH="$PWD/build/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" FAKECUDA_CAPACITY=1G OOMTRACE_QUIET=1
unset OOMTRACE_DIR OOMTRACE_DUMP ASAN_OPTIONS
run() { tools/oomtrace run "$@"; }
door=$PWD/build/tests/door_linked
CC=${CC:-cc}

# Walk 8, #14: AddressSanitizer's runtime exits 1 at start unless it comes first in the initial library list. A
# program linked with it runs under the launcher as untraced (status 0, traced: its out-of-memory reported); one
# preloaded by the user stays first, for a plain program and for a sanitized one; the user's own
# verify_asan_link_order is kept, and the closing line then names it. The launcher's own tools do not run under
# the user's preload (LeakSanitizer would report sed's leaks).
if $CC -g -fsanitize=address -Iinclude -I/usr/local/cuda/include -o "$work/door_asan" tests/doors/door_linked.c \
    -Lbuild/fake -lcuda 2>"$work/cc.err" && asan=$($CC -print-file-name=libasan.so) && [ -f "$asan" ]; then
    "$work/door_asan" >/dev/null 2>&1 || fail "door_asan fails untraced"
    run --dir "$work/as" -- "$work/door_asan" >"$work/as.out" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] && grep -q "Failed request: 700 MiB" "$work/as.out" ||
        fail "a program built with ASan: status $rc: $(grep -v '^ ' "$work/as.out" | head -3)"
    for prog in "$door" "$work/door_asan"; do
        LD_PRELOAD=$asan run --dir "$work/asp" -- "$prog" >"$work/asp.out" 2>&1
        rc=$?
        [ "$rc" -eq 0 ] && grep -q "Failed request: 700 MiB" "$work/asp.out" ||
            fail "LD_PRELOAD=libasan.so, ${prog##*/}: status $rc: $(grep -v '^ ' "$work/asp.out" | head -3)"
        grep -q "LeakSanitizer" "$work/asp.out" && fail "the launcher's tools ran under the user's preload: $(grep -m3 'Sanitizer\|#1' "$work/asp.out")"
    done
    got=$(LD_PRELOAD="$asan libz.so.1" ASAN_OPTIONS=detect_leaks=0 run --dir "$work/asp" -- sh -c 'echo "$LD_PRELOAD|$ASAN_OPTIONS"' 2>/dev/null)
    [ "$got" = "$asan:$(cd build && pwd -P)/liboomtrace.so:libz.so.1|detect_leaks=0:verify_asan_link_order=0" ] ||
        fail "the preload's order, or ASAN_OPTIONS: $got"
    ASAN_OPTIONS=verify_asan_link_order=1 run --dir "$work/as1" -- "$work/door_asan" >"$work/as1.out" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] && grep -q "^oomtrace: no snapshot was written: $work/door_asan exited with status 1: ASAN_OPTIONS sets verify_asan_link_order, with which a program built with AddressSanitizer refuses to start under a preload (its line above); leave that option out, and the launcher turns the check off\$" "$work/as1.out" ||
        fail "the user's verify_asan_link_order=1: status $rc: $(tail -1 "$work/as1.out")"
else
    echo "launcher_cmd: no AddressSanitizer here ($(tail -1 "$work/cc.err")): its cases skipped"
fi

echo "launcher_cmd: ok"
