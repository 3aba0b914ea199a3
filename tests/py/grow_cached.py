"""A request that grows every step under a caching allocator (tests/py/site-packages/tinynn's CachingPool, a
small PyTorch-like one), against the stand-in driver, for tests/sh/grow_cached.sh. Step n asks for (n + 1) x
4 MiB at the user's line `batch` beside 96 MiB of weights held throughout, gives it back to the pool, and marks the step ("step N", as the companion's
optimizer hook would). The pool cannot reuse a smaller cached block, so each step takes a new one from the
driver; at the driver's refusal it gives its cache back and tries again; in the end it refuses the request
itself and writes the framework's OOM snapshot (runs 43-44 on the H200: torch under its default allocator)."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))
import tinynn  # noqa: E402

MiB = 1 << 20
mark = getattr(ctypes.CDLL(None), "oomtrace_mark", None)


def train(pool):
    weights = pool.empty(96 * MiB)  # LINE:weights (held: the request fails before it outgrows the device)
    for step in range(100000):
        if mark is not None:
            mark(b"step %d" % step)
        x = pool.empty((step + 1) * 4 * MiB)  # LINE:batch
        pool.release(x)
    return weights


def main():
    assert tinynn.cuda.cuInit(0) == 0
    try:
        train(tinynn.CachingPool())
    except tinynn.OutOfMemoryError as e:
        print("caught:", e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
