#!/bin/sh
# Malformed snapshots: every damage mode snapgen can make exits 2 with one line on stderr and nothing on
# stdout, and every valid variant reads in text and JSON (tests/snapgen/check.sh).
set -u
cd "$(dirname "$0")/../.."
[ -x build/snapgen ] || { echo "malformed: build/snapgen is missing (make test-build)"; exit 1; }
mkdir -p build/tests
READER=build/oomtrace-read SNAPGEN=build/snapgen sh tests/snapgen/check.sh >build/tests/malformed.log 2>&1
rc=$?
tail -n 3 build/tests/malformed.log
exit $rc
