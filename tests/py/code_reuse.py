"""Code objects that die and whose memory the next function's code takes: six functions, one at a time, with
the same source but their names (fa .. ff), each made, called once to allocate (30 + i MiB) and dropped.
Their code objects alternate between two addresses, with the same bytecode, so each allocation's Python
frames match an earlier one's in code address and instruction, and its native frames are the same: only
the code's qualified name tells them apart, which the thread's merged stacks by place
(lib/capture/pyframes.c) must compare. Prints "code_addresses N" (how many addresses the six codes had).
Then the same with the allocation called with the GIL held (ctypes.PyDLL), six more functions (40 + i MiB),
"code_addresses_gil N". Ends with a snapshot (oomtrace_dump)."""
import ctypes
import gc
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stack_cache import MiB, alloc, cuda  # noqa: E402  (the same driver and argument types)

NAMES = ["fa", "fb", "fc", "fd", "fe", "ff"]


gil_alloc = ctypes.PyDLL("libcuda.so.1").cuMemAlloc_v2  # (a PyDLL call keeps the GIL)
gil_alloc.argtypes = alloc.argtypes


def make(name, fn=alloc):
    src = f"def {name}(size):\n    p = ctypes.c_uint64()\n    assert alloc(ctypes.byref(p), size) == 0\n"
    ns = {"ctypes": ctypes, "alloc": fn}
    exec(compile(src, "code_reuse_gen.py", "exec"), ns)
    return ns[name]


def call(f, size):
    f(size)  # LINE:call


def main():
    assert cuda.cuInit(0) == 0
    codes = []
    for i, name in enumerate(NAMES):
        f = make(name)
        codes.append(id(f.__code__))
        call(f, (30 + i) * MiB)
        del f
        gc.collect()  # (the function and its globals hold each other)
    # the point of the test: code objects at addresses earlier ones had (the check wants fewer than 6)
    print("code_addresses", len(set(codes)), flush=True)
    codes = []
    for i, name in enumerate(NAMES):
        f = make(name, gil_alloc)
        codes.append(id(f.__code__))
        call(f, (40 + i) * MiB)
        del f
        gc.collect()
    print("code_addresses_gil", len(set(codes)), flush=True)
    dump = getattr(ctypes.CDLL(None), "oomtrace_dump", None)
    assert dump is not None and dump(b"code_reuse") == 0


if __name__ == "__main__":
    main()
