"""A training-like loop with no markers at all (no oomtrace.mark, no optimizer step hook): each iteration
allocates a temporary and frees it, and keeps one 1 MiB buffer alive in a list (the leak). Against the
stand-in driver, for tests/sh/growth_windows.sh.
  leak_nomarkers.py oom      until the device is full; exit 1 after the out-of-memory
  leak_nomarkers.py stop N   N iterations, then exit 0 (run with OOMTRACE_DUMP=exit for a snapshot)
  leak_nomarkers.py build    40 buffers kept with no free in between (as a model or an optimizer's state is
                             built), then a request too big: a buildup, not a leak
  leak_nomarkers.py cupy     as oom, the kept buffers made through a stand-in CuPy (tests/py/fakecupy)
LEAK_ITER_S=SECONDS: each iteration's sleep (0.002 by default)."""
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from alloc_ctypes import MiB, alloc, cuda, free  # noqa: E402

if sys.argv[1:2] == ["cupy"]:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fakecupy", "site-packages"))
    import cupy  # noqa: E402


def device_alloc(nbytes):
    p = ctypes.c_uint64()
    rc = alloc(ctypes.byref(p), nbytes)
    return p.value if rc == 0 else None


def temporary():
    return device_alloc(4 * MiB)  # LINE:temporary


def kept():
    if sys.argv[1] == "cupy":
        return cupy.empty(1 * MiB)
    return device_alloc(1 * MiB)  # LINE:kept


def step(history):
    t = temporary()
    if t is None:
        return False
    free(t)
    k = kept()
    if k is None:
        return False
    history.append(k)
    # The iteration's work: the windows are cut by events; LEAK_ITER_S makes the run last a second or more,
    # over which the report states a rate per second.
    time.sleep(float(os.environ.get("LEAK_ITER_S", "0.002")))
    return True


def main():
    assert cuda.cuInit(0) == 0
    history = []
    if sys.argv[1] == "build":
        for _ in range(40):
            history.append(kept())
        return 1 if device_alloc(1 << 40) is None else 2
    n = int(sys.argv[2]) if sys.argv[1] == "stop" else 1 << 30
    for _ in range(n):
        if not step(history):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
