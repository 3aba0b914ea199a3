"""`oomtrace ...` and `python -m oomtrace ...`: the launcher (a shell script), with its arguments unchanged.

    python -m oomtrace run -- python train.py
    oomtrace run --max-peak 40G -- torchrun --nproc_per_node=8 train.py

The launcher, liboomtrace.so and oomtrace-read sit in this package's bin/ directory (the wheel), or are
symbolic links there to a `make install` tree. The launcher finds the other two beside itself, so it is run
by its real path. The process is replaced (exec), so the exit status is the launcher's own.
"""
import os
import sys

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def launcher():
    """The real path of the packaged launcher, or None."""
    path = os.path.join(_BIN, "oomtrace")
    return os.path.realpath(path) if os.path.isfile(path) else None


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    path = launcher()
    if path is None:
        sys.stderr.write(f"oomtrace: the launcher is not in {_BIN}; install the wheel that `make wheel` builds\n")
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv("/bin/sh", ["/bin/sh", path] + args)
    return 2  # not reached: execv replaces the process or raises


if __name__ == "__main__":
    sys.exit(main())
