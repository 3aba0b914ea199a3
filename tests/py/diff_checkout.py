"""One program read from two checkouts (walk 6, #22 and #23): copied into two directories and run in each,
its --diff must pair each call site with its own (the directory of the file differs, not the site), and
two sites whose headlines read alike ("grab, called from layer") are told apart by their caller once.
DIFF_MIB sets the first layer's size (MiB); the snapshot is the exit one (OOMTRACE_DUMP=exit)."""
import ctypes
import os
import sys

sys.path.insert(0, os.environ["OOMTRACE_TESTS_PY"])
from alloc_ctypes import MiB, alloc, cuda  # noqa: E402

kept = []


def grab(n):
    p = ctypes.c_uint64()
    assert alloc(ctypes.byref(p), n * MiB) == 0  # LINE:grab
    kept.append(p.value)


def layer(n):
    grab(n)  # LINE:layer


def main():
    assert cuda.cuInit(0) == 0
    layer(int(os.environ.get("DIFF_MIB", "64")))  # LINE:first
    layer(32)  # LINE:second


main()
