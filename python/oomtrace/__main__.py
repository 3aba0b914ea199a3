"""`oomtrace ...` and `python -m oomtrace ...`: the launcher (a shell script), with its arguments unchanged;
`oomtrace-read ...`: the reader.

    python -m oomtrace run -- python train.py
    oomtrace run --max-peak 40G -- torchrun --nproc_per_node=8 train.py
    oomtrace-read SNAPSHOT_OR_DIRECTORY      # or: oomtrace read ..., python -m oomtrace read ...

The launcher, liboomtrace.so and oomtrace-read sit in this package's bin/ directory (the wheel), or are
symbolic links there to a `make install` tree. The launcher finds the other two beside itself, so it is run
by its real path. The process is replaced (exec), so the exit status is the launcher's own.
"""
import os
import signal
import sys

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def _packaged(name):
    """The real path of a program in the package's bin/, or None."""
    path = os.path.join(_BIN, name)
    return os.path.realpath(path) if os.path.isfile(path) else None


def _say(line):
    """One line on standard error, when there is one."""
    if sys.stderr is not None:
        try:
            sys.stderr.write(line + "\n")
        except (OSError, ValueError):
            pass


def _exec(path, argv):
    """Replaces this process with PATH. Python set SIGPIPE and SIGXFSZ to ignored at its start, and an ignored
    signal stays ignored across exec: they are set back to the default first, so that the traced command
    and the reader see what they would see run from the shell (a pipe into head ends them quietly, a write
    past RLIMIT_FSIZE kills). The signals Python handles (SIGINT) go back to the default by exec itself."""
    # A closed standard stream (a cron job's 2>&-) is None in Python: the command must still run as it would
    # untraced, so only the streams that exist are flushed, and a flush that fails stops nothing.
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    os.execv(path, argv)


def launcher():
    """The real path of the packaged launcher, or None."""
    return _packaged("oomtrace")


def main(argv=None):
    """`oomtrace ARGS` and `python -m oomtrace ARGS`: the launcher (which also takes `read ARGS`)."""
    args = sys.argv[1:] if argv is None else list(argv)
    path = launcher()
    if path is None:
        _say(f"oomtrace: the launcher is not in {_BIN}; install the wheel that `make wheel` builds")
        return 2
    _exec("/bin/sh", ["/bin/sh", path] + args)
    return 2  # not reached: execv replaces the process or raises


def read_main(argv=None):
    """`oomtrace-read ARGS`: the reader, as `make` builds it (its messages name oomtrace-read)."""
    args = sys.argv[1:] if argv is None else list(argv)
    path = _packaged("oomtrace-read")
    if path is None:
        _say(f"oomtrace-read: the reader is not in {_BIN}; install the wheel that `make wheel` builds")
        return 2
    _exec(path, ["oomtrace-read"] + args)
    return 2  # not reached


if __name__ == "__main__":
    sys.exit(main())
