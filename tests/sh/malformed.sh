#!/bin/sh
# Malformed snapshots: every damage mode snapgen can make exits 2 with one line on stderr and nothing on
# stdout, and every valid variant reads in text and JSON (tests/snapgen/check.sh).
set -u
cd "$(dirname "$0")/../.."
mkdir -p build/tests
cc -O2 -Iinclude tests/snapgen/snapgen.c -lzstd -o build/tests/snapgen || { echo "malformed: cannot build snapgen"; exit 1; }
READER=build/oomtrace-read SNAPGEN=build/tests/snapgen sh tests/snapgen/check.sh >build/tests/malformed.log 2>&1
rc=$?
tail -n 3 build/tests/malformed.log
exit $rc
