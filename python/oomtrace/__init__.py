"""Python helpers for oomtrace, the GPU out-of-memory tracer.

    import oomtrace
    oomtrace.mark(f"step {step} seq_len={seq_len}")   # a marker in the event stream
    oomtrace.dump("after warm-up")                     # write a snapshot now

Both calls reach liboomtrace.so through ctypes when it is preloaded (LD_PRELOAD) and do nothing otherwise.
They return True when the tracer took the call. ctypes releases the GIL around the foreign call, and the
tracer never takes it, so these are safe from any thread.

The package also carries the tracer itself (installed from the wheel that `make wheel` builds): the `oomtrace`
command and `python -m oomtrace run -- CMD` run the launcher, with liboomtrace.so and oomtrace-read beside it
(see __main__.py).
"""
import ctypes
import sys

__version__ = "0.1.0"
__all__ = ["active", "mark", "dump"]

_mark = _dump = None
try:
    _self = ctypes.CDLL(None)
    _mark = _self.oomtrace_mark
    _dump = _self.oomtrace_dump
    for _f in (_mark, _dump):
        _f.argtypes = [ctypes.c_char_p]
        _f.restype = ctypes.c_int
except (OSError, AttributeError):
    _mark = _dump = None


def active():
    """True when liboomtrace.so is loaded in this process."""
    return _mark is not None


def _bytes(s):
    """The label as the C call takes it: str as UTF-8, bytes as they are, anything else (a step number, a
    list) as str() gives it; bytes(n) of an int would be n NUL bytes. Never raises: a label whose str() fails
    reads as its type's name."""
    if s is None:
        return None
    if isinstance(s, (bytes, bytearray)):
        return bytes(s)
    if not isinstance(s, str):
        try:
            s = str(s)
        except Exception:
            s = "<%s>" % type(s).__name__
    return s.encode("utf-8", "replace")


def mark(label):
    """Adds a marker (at most 255 bytes are kept, cut at a character's boundary), e.g. "step 12 seq_len=2048";
    a label that is not str or bytes is written as str(label) (mark(step) marks "12", mark(None) "None"). A
    label ends at its first NUL character."""
    return _mark is not None and _mark(_bytes("None" if label is None else label)) == 0


def dump(reason=None):
    """Writes a snapshot into OOMTRACE_DIR now; True when the file was written. A reason that is not str or
    bytes is written as str(reason). When the tracer's
    framework companion runs in this process, the snapshot carries the frameworks' fresh state."""
    if _dump is None:
        return False
    companion = sys.modules.get("_oomtrace_companion")
    if companion is not None:
        companion.refresh("api")  # never raises
    return _dump(_bytes(reason)) == 0
