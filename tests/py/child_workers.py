"""Two child processes that stand for DataLoader workers which opened CUDA contexts (the stand-in NVML
reports each child of this process as holding memory: FAKENVML_PROCS=children:BYTES), then allocations
through the stand-in driver until the device runs out. The report must name the children as children of
this process, and give the remedy for workers that touched CUDA."""
import ctypes
import subprocess
import sys

MiB = 1 << 20
cuda = ctypes.CDLL("libcuda.so.1")
alloc = cuda.cuMemAlloc_v2
alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]


def main():
    workers = [subprocess.Popen(["sleep", "30"]) for _ in range(2)]
    try:
        assert cuda.cuInit(0) == 0
        held = []
        while True:
            p = ctypes.c_uint64()
            if alloc(ctypes.byref(p), 64 * MiB) != 0:
                return 1
            held.append(p.value)
    finally:
        for w in workers:
            w.kill()
            w.wait()


if __name__ == "__main__":
    sys.exit(main())
