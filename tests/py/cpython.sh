# Sourced by the shell tests that run every CPython this machine has (tests/sh/companion.sh,
# tests/sh/python_depth.sh): `cpython V` prints the interpreter of CPython 3.V (/usr/bin/python3.V, else
# pyenv's, the real binary: pyenv's shims are scripts that may pick another version), or nothing.
cpython() {
    for c in /usr/bin/python3.$1 "$HOME"/.pyenv/versions/3.$1.*/bin/python3.$1; do
        [ -x "$c" ] && { echo "$c"; return 0; }
    done
    return 0
}
