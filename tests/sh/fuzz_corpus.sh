#!/bin/sh
# CI step: the snapshot reader's fuzz target over its seed corpus and regression inputs, then a short
# deterministic mutation run (make fuzz-corpus, tests/fuzz/fuzz.mk). Fails on any crash, sanitizer
# report or broken report invariant. Skipped (passes) without clang, which libFuzzer needs.
set -u
cd "$(dirname "$0")/../.."
# Inside a sanitizer run of the suite (tests/fuzz/sanitize.sh) this step has already been done.
[ -n "${OOMTRACE_TEST_LIB:-}" ] && { echo "fuzz_corpus: skipped inside a sanitizer run"; exit 0; }
if ! command -v clang >/dev/null 2>&1 && ! command -v clang-14 >/dev/null 2>&1; then
    echo "fuzz_corpus: skipped, no clang"
    exit 0
fi
MAKE=${MAKE:-make}
# Two test runs at once in one tree (two people, two terminals) would build into the same directories.
mkdir -p build
if command -v flock >/dev/null 2>&1; then
    MAKE="flock build/.fuzz_corpus.lock $MAKE"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
if ! $MAKE --no-print-directory fuzz-corpus >"$log" 2>&1; then
    # libFuzzer's report (and the input it saved) is at the end of its output.
    tail -n 60 "$log"
    echo "fuzz_corpus: FAILED; the input is in build/fuzz/artifacts/"
    exit 1
fi
grep -E '^(Done|stat::number_of_executed_units)' "$log" | sed 's/^/  /'
echo "fuzz_corpus: passed in $(($(date +%s) - start))s"
