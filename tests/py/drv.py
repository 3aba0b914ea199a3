"""The stand-in driver (build/fake/libcuda.so.1, or a real one) through ctypes, for the small programs the
shell tests write. A test copies this file next to its program, which imports it (a script's own directory
comes first on sys.path): `from drv import cuda, ctypes`. The library's entry points (oomtrace_dump,
oomtrace_mark) are looked up in the process, where LD_PRELOAD put them."""
import ctypes

MiB = 1 << 20
OUT_OF_MEMORY = 2  # CUDA_ERROR_OUT_OF_MEMORY
cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
cuda.cuMemFree_v2.argtypes = [ctypes.c_uint64]


def try_alloc(nbytes):
    """cuMemAlloc_v2: (status, address)."""
    p = ctypes.c_uint64()
    return cuda.cuMemAlloc_v2(ctypes.byref(p), nbytes), p.value


def free(addr):
    assert cuda.cuMemFree_v2(addr) == 0


def _entry(name):
    f = getattr(ctypes.CDLL(None), name)
    f.argtypes = [ctypes.c_char_p]
    return f


def dump(reason):
    """oomtrace_dump(reason) of the preloaded library; reason is bytes."""
    return _entry("oomtrace_dump")(reason)


def mark(label):
    """oomtrace_mark(label) of the preloaded library; label is bytes."""
    return _entry("oomtrace_mark")(label)
