"""Allocations from many places in turn, as a training step makes them, which the thread's merged stacks
by place (lib/capture/pyframes.c, struct mcache) must each give back as their own: 12 places in a fixed
rotation, 4 rounds, every allocation live, each place its own size (MiB):
  10-15  six lines of one function (the innermost Python frame's line differs);
  16-19  one inner function called from four lines of its caller (an outer frame's line differs);
  20-21  one line reaching the driver through via_left or via_right (only the native frames differ).
Then 5 rounds where a place found by place is followed by the same chain (the thread's last chain is then
that entry's, lib/capture/pywalk.c: last_ref), after one of 10-14 MiB:
  6-7    one line, twice from one caller line (the same native frames too);
  8-9    one line, through via_left then via_right (the same chain, the native frames differ; the first
         round only via_left, so that via_right's first merge takes the chain from via_left's entry).
Ends with a snapshot (oomtrace_dump)."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stack_cache import MiB, alloc, cuda, lib  # noqa: E402  (the same driver, library and argument types)


def lines(k):
    p = ctypes.c_uint64()
    if k == 0:
        assert alloc(ctypes.byref(p), 10 * MiB) == 0  # LINE:l10
    elif k == 1:
        assert alloc(ctypes.byref(p), 11 * MiB) == 0  # LINE:l11
    elif k == 2:
        assert alloc(ctypes.byref(p), 12 * MiB) == 0  # LINE:l12
    elif k == 3:
        assert alloc(ctypes.byref(p), 13 * MiB) == 0  # LINE:l13
    elif k == 4:
        assert alloc(ctypes.byref(p), 14 * MiB) == 0  # LINE:l14
    else:
        assert alloc(ctypes.byref(p), 15 * MiB) == 0  # LINE:l15


def inner(size):
    p = ctypes.c_uint64()
    assert alloc(ctypes.byref(p), size) == 0  # LINE:inner


def callers(k):
    if k == 0:
        inner(16 * MiB)  # LINE:c16
    elif k == 1:
        inner(17 * MiB)  # LINE:c17
    elif k == 2:
        inner(18 * MiB)  # LINE:c18
    else:
        inner(19 * MiB)  # LINE:c19


def natives(right):
    assert lib.ot_native_alloc_via(right, (20 + right) * MiB) == 0  # LINE:via


def twice(size):
    p = ctypes.c_uint64()
    assert alloc(ctypes.byref(p), size) == 0  # LINE:twice


def again(k, ways):
    lines(k)  # a place found by place: the thread's last chain is its entry's
    for size in (6, 7):
        twice(size * MiB)  # LINE:t_call
    for right in ways:
        assert lib.ot_native_alloc_via(right, (8 + right) * MiB) == 0  # LINE:twoways


def main():
    assert cuda.cuInit(0) == 0
    for _ in range(4):
        for k in range(12):
            if k < 6:
                lines(k)
            elif k < 10:
                callers(k - 6)
            else:
                natives(k - 10)
    for r in range(5):  # via_right's first: after via_left's found by place
        again(r, (0,) if r == 0 else (0, 1))
    dump = getattr(ctypes.CDLL(None), "oomtrace_dump", None)
    assert dump is not None and dump(b"places") == 0


if __name__ == "__main__":
    main()
