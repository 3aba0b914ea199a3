"""bench/borrow_steps.py under an arena allocator the program set (PyObject_SetArenaAllocator, through ctypes:
mmap and munmap, as CPython's own, from tests/doors/native_thread.c). Such an allocator may free the threads' frame stacks by any route, so
the borrowing thread must read the lender's frames through the kernel at every check, never with plain loads
(lib/capture/pyborrow.c: arena_counted).

    python3 arena_custom.py LIBNATIVE STEPS PAUSE"""
import ctypes
import runpy
import sys


class Arena(ctypes.Structure):
    _fields_ = [("ctx", ctypes.c_void_p), ("alloc", ctypes.c_void_p), ("free", ctypes.c_void_p)]


api = ctypes.pythonapi
api.PyObject_SetArenaAllocator.argtypes = [ctypes.POINTER(Arena)]
native = ctypes.CDLL(sys.argv[1])
mine = Arena(None, ctypes.cast(native.ot_arena_alloc, ctypes.c_void_p), ctypes.cast(native.ot_arena_free, ctypes.c_void_p))
api.PyObject_SetArenaAllocator(ctypes.byref(mine))
sys.argv = ["bench/borrow_steps.py"] + sys.argv[1:]
runpy.run_path("bench/borrow_steps.py", run_name="__main__")
