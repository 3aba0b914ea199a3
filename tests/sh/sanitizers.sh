#!/bin/sh
# CI step: the test suite against ASan+UBSan builds of the library, reader and tests (make sanitize),
# then the threaded tests against a TSan build of the library (make tsan); tests/fuzz/fuzz.mk.
# About 100 s on 2 cores from a clean tree (half of it compiling), 50 s once built.
# OOMTRACE_SKIP_SANITIZERS=1 skips it.
set -u
cd "$(dirname "$0")/../.."
[ -n "${OOMTRACE_TEST_LIB:-}" ] && { echo "sanitizers: skipped inside a sanitizer run"; exit 0; }
[ "${OOMTRACE_SKIP_SANITIZERS:-0}" = 1 ] && { echo "sanitizers: skipped (OOMTRACE_SKIP_SANITIZERS=1)"; exit 0; }
MAKE=${MAKE:-make}
# Two test runs at once in one tree (two people, two terminals) would build into the same directories.
mkdir -p build
if command -v flock >/dev/null 2>&1; then
    MAKE="flock build/.sanitizers.lock $MAKE"
fi
status=0
for target in sanitize tsan; do
    start=$(date +%s)
    log=$(mktemp)
    if $MAKE --no-print-directory "$target" >"$log" 2>&1; then
        # The per-program lines and the summary of tests/fuzz/sanitize.sh.
        # The inner summary is prefixed, so that the suite's own last line stays the only bare "N passed, N failed".
        grep -E '^(== |   [^ ]+: [0-9]+s$|[0-9]+ passed, [0-9]+ failed)' "$log" |
            sed -E "s/^([0-9]+ passed, [0-9]+ failed)\$/sanitizers (make $target): \1/"
        echo "sanitizers: make $target passed in $(($(date +%s) - start))s"
    else
        tail -n 150 "$log"
        echo "sanitizers: make $target FAILED after $(($(date +%s) - start))s"
        status=1
    fi
    rm -f "$log"
done
exit $status
