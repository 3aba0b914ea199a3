#!/bin/sh
# Rewrites tests/golden/expected/ from the current reader (make golden-update). Review the diff before
# committing: every change in it is a change in what people read.
set -u
cd "$(dirname "$0")/../.."
exec sh tests/golden/run.sh --update
