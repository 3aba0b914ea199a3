#!/bin/sh
# The framework companion's logic without the preload (tests/py/test_companion.py and test_companion_steps.py):
# payloads read back by the test's own decoder, stand-in torch/JAX/CuPy modules with APIs missing or raising,
# and Debian's python3-torch where /usr/bin/python3 has it; under every CPython 3.9-3.13 the machine has.
set -u
cd "$(dirname "$0")/../.."
rc=0 n=0
for py in /usr/bin/python3 "$HOME"/.pyenv/versions/3.9.*/bin/python3 "$HOME"/.pyenv/versions/3.1[0-3].*/bin/python3; do
    [ -x "$py" ] || continue
    n=$((n + 1))
    for t in tests/py/test_companion.py tests/py/test_companion_steps.py; do
        out=$("$py" "$t" 2>/dev/null) || rc=1
        printf '%s\n' "$out"
    done
done
[ "$n" -gt 0 ] || { echo "companion_logic: no CPython here"; exit 1; }
exit $rc
