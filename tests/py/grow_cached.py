"""A request that grows every step under a caching allocator (tests/py/site-packages/tinynn's CachingPool, a
small PyTorch-like one), against the stand-in driver, for tests/sh/grow_cached.sh. Step n asks for (n + 1) x
4 MiB at the user's line `batch` beside 96 MiB of weights held throughout, gives it back to the pool, and marks the step ("step N", as the companion's
optimizer hook would). The pool cannot reuse a smaller cached block, so each step takes a new one from the
driver; at the driver's refusal it gives its cache back and tries again; in the end it refuses the request
itself and writes the framework's OOM snapshot (runs 43-44 on the H200: torch under its default allocator).

With the argument "torch" both requests go through a file where an installed PyTorch's would be
(tests/py/torchlike): the reader then infers activations and temporaries from the stacks, as on the H200 (runs
45-46), and What to try has a remedy for them beside the one for the growth."""
import ctypes
import importlib.util
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))
import tinynn  # noqa: E402

MiB = 1 << 20
mark = getattr(ctypes.CDLL(None), "oomtrace_mark", None)


def torchlike():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchlike", "site-packages", "torch", "nn",
                        "functional.py")
    spec = importlib.util.spec_from_file_location("grow_cached_functional", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.empty


def train(pool, empty):
    weights = empty(pool, 96 * MiB)  # LINE:weights (held: the request fails before it outgrows the device)
    for step in range(100000):
        if mark is not None:
            mark(b"step %d" % step)
        x = empty(pool, (step + 1) * 4 * MiB)  # LINE:batch
        pool.release(x)
    return weights


def main():
    assert tinynn.cuda.cuInit(0) == 0
    try:
        train(tinynn.CachingPool(), torchlike() if sys.argv[1:] == ["torch"] else tinynn.CachingPool.empty)
    except tinynn.OutOfMemoryError as e:
        print("caught:", e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
