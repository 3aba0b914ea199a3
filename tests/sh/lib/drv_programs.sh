# Sourced by a test script that runs small Python programs on the stand-in driver, with NAME set and the
# repository root as the working directory: READER, LIB, ROOT, a scratch directory T holding tests/py/drv.py
# for the programs to import (removed at exit unless KEEP is set), and failed=0. Exits 0 with one line when
# python3 is missing, 1 when the build is.
ROOT=$PWD
READER=${READER:-$ROOT/build/oomtrace-read}
LIB=$ROOT/build/liboomtrace.so
for f in "$READER" "$LIB" "$ROOT/build/fake/libcuda.so.1"; do
    [ -e "$f" ] || { echo "$NAME: $f is missing (make test-build)"; exit 1; }
done
command -v python3 >/dev/null 2>&1 || { echo "$NAME: skipped, no python3"; exit 0; }
T=$(mktemp -d "/tmp/oomtrace-$NAME.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT INT TERM
cp tests/py/drv.py "$T/"
failed=0
