#!/bin/sh
# Golden-file tests of oomtrace-read's reports (tests/golden/run.sh): text, JSON, --diff, a merged run
# directory and the CI gates' exit codes, on snapshots made now against the stand-in driver.
set -u
cd "$(dirname "$0")/../.."
exec sh tests/golden/run.sh
