#!/bin/sh
# Header dependencies (Makefile: -MMD -MP for objects, DEPS for programs compiled from several sources): every
# tree's compiled outputs have a .d file listing the headers they read, and make, told that one of those
# headers changed (make -n -W HEADER), rebuilds the output. Checked on one object or program of each tree: the
# library, the reader, the tests (one source, and several), snapgen and bombs, the stand-in driver.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "make_deps: FAIL: $*"; exit 1; }
n=0
for pair in "build/lib/record/ring.o lib/record/ring.h" "build/tools/read/model/parse.o tools/read/model/section.h" \
    "build/tests/test_doors tests/e2e/harness.h" "build/tests/families tests/doors/drv.h" \
    "build/snapgen tests/snapgen/snapgen.h" "build/fake/libcuda.so.1 tests/fakecuda/fakecuda.h" \
    "build/bombs include/oomtrace_format.h"; do
    set -- $pair
    [ -e "$1" ] || fail "$1 is missing (make test-build)"
    d=${1%.o}.d
    [ "$d" = "$1" ] && d=$1.d
    # A build/ made before the dependency files were: this output is made again, and must then have one.
    [ -f "$d" ] || { rm -f "$1" && make -s "$1" >/dev/null 2>&1; } || fail "make $1"
    [ -f "$d" ] || fail "$1 has no dependency file $d"
    grep -q "$2" "$d" || fail "$d does not list $2"
    # The header's users, by the .d files: each must be rebuilt when it changes.
    # Not the sanitizer trees (make sanitize, make tsan): those are built by make B=build/asan or B=build/tsan,
    # and a plain make knows no rule for their outputs (a second make test failed here once they existed).
    for user in $(grep -l "$2" $(find build \( -path build/asan -o -path build/tsan \) -prune -o -name '*.d' -print) |
        head -n 3); do
        t=$(sed -n '1s/:.*//p' "$user")
        make -n -W "$2" "$t" 2>/dev/null | grep -q -- "-o $t\\b" || fail "make does not rebuild $t when $2 changes"
        n=$((n + 1))
    done
done
echo "make_deps: ok ($n outputs rebuilt for a changed header)"
