#!/bin/sh
# The companion's roles module (lib/companion/_oomtrace_roles.py) against real nn.Module and optimizer
# objects: Debian's python3-torch (CPU) under /usr/bin/python3. Skipped, with a line, where torch is absent.
set -u
cd "$(dirname "$0")/../.."
PY=${ROLES_PYTHON:-/usr/bin/python3}
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
    echo "roles: skipped, no torch for $PY (apt-get install python3-torch)"
    exit 0
fi
TMP=$(mktemp -d /tmp/oomtrace-roles-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
"$PY" tests/py/roles_check.py >"$TMP/out" 2>"$TMP/err"
rc=$?
cat "$TMP/out"
if [ $rc -ne 0 ]; then
    echo "roles: tests/py/roles_check.py failed (exit $rc)"
    cat "$TMP/err"
    exit 1
fi
# The broken optimizer in the check is reported in exactly one line, the scan of a torch without nn in
# another, and nothing else reaches stderr.
want="oomtrace: reading an optimizer's parameters failed (RuntimeError: boom); the report will lack it
oomtrace: finding parameters, gradients and optimizer state failed (AttributeError: 'object' object has no attribute 'nn'); the report will lack it"
if [ "$(cat "$TMP/err")" != "$want" ]; then
    echo "roles: unexpected stderr:"
    cat "$TMP/err"
    exit 1
fi
grep -qx "roles: ok" "$TMP/out"
