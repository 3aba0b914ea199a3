"""The companion's injection path, on the stand-in driver (tests/sh/companion.sh runs it under each
CPython the machine has, traced and untraced, and compares output and exit status).

    companion_workload.py dump        allocate, then oomtrace.dump(): the dump carries a FRAMEWORK section
                                      (a stand-in cupy imported before the first allocation)
    companion_workload.py late-cupy   a stand-in cupy imported after the companion started, then its
                                      OutOfMemoryError raised and left uncaught (exit status 1)
    companion_workload.py torch       a stand-in torch: a driver OOM first (a probe), then torch's OOM
                                      observer fires: the fatal framework-oom snapshot lists the probe
    companion_workload.py torch-again torch's OOM caught, two more allocations, then a driver OOM torch
                                      swallows: its snapshot carries the caught OOM's view, an earlier one
    companion_workload.py steps       a stand-in torch model and optimizer: 70 steps with inputs (2, 8), then
                                      a 71st with (64, 8) runs out in the model's forward; the allocator's
                                      counters are read at step 1 only (the first read takes 50 ms, so the
                                      next is due in 500 s); step 2's inputs are sampled (the next sample
                                      is due 1 s later): both older than the last 64 steps
Prints the same lines whether traced or not; never looks at whether it is traced except through the
public helper (oomtrace.active), whose answer it does not print."""
import ctypes
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import fakefw  # noqa: E402
import oomtrace  # noqa: E402

MiB = 1 << 20
cuda = ctypes.CDLL("libcuda.so.1")
alloc = cuda.cuMemAlloc_v2
alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]


def allocate(n):
    p = ctypes.c_uint64()
    rc = alloc(ctypes.byref(p), n)
    return rc


def settle():
    """Gives the interpreter safe points, where a pending call runs."""
    for _ in range(1000):
        pass


def main():
    mode = sys.argv[1]
    assert cuda.cuInit(0) == 0
    if mode == "dump":
        sys.modules["cupy"] = fakefw.fake_cupy()
        print("alloc", allocate(16 * MiB))
        settle()
        oomtrace.dump("companion test")
        print("done")
        return 0
    if mode == "late-cupy":
        print("alloc", allocate(16 * MiB))
        settle()
        cupy = fakefw.fake_cupy()
        sys.modules["cupy"] = cupy
        time.sleep(1.1)  # allocations ask for a new look at sys.modules at most once a second
        print("alloc", allocate(16 * MiB))
        settle()
        raise cupy.cuda.memory.OutOfMemoryError("Out of memory allocating 1,073,741,824 bytes "
                                                "(allocated so far: 32 MiB)")
    if mode == "torch":
        torch = fakefw.fake_torch()
        fakefw.install(torch)
        print("alloc", allocate(16 * MiB))
        settle()
        opt = torch.optim.Optimizer()
        for step in range(3):  # what torch.optim does after each optimizer.step()
            for hook in torch.step_hooks:
                hook(opt, (), {})
        print("too big", allocate(4 << 30))
        settle()
        for fn in torch.observers:  # a refusal torch swallows itself (a cuDNN workspace probe)
            fn(0, 1 << 30, 3 * MiB, 100 * MiB)
        for fn in torch.observers:  # what torch's caching allocator does before raising its OOM
            fn(0, 2 << 30, 3 * MiB, 100 * MiB)
        try:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB.")
        except torch.OutOfMemoryError as e:
            print("caught", type(e).__name__)
        print("observers", "called")
        return 0
    if mode == "torch-again":
        # A batch-size search: torch's OOM caught, the program goes on smaller, then a driver-level OOM that
        # torch swallows (the companion collects nothing there: the snapshot keeps the caught OOM's view).
        torch = fakefw.fake_torch()
        fakefw.install(torch)
        print("alloc", allocate(16 * MiB))
        settle()
        for fn in torch.observers:
            fn(0, 2 << 30, 3 * MiB, 100 * MiB)
        try:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB.")
        except torch.OutOfMemoryError as e:
            print("caught", type(e).__name__)
        print("smaller", allocate(8 * MiB), allocate(8 * MiB))
        settle()
        print("too big", allocate(4 << 30))
        return 0
    if mode == "steps":
        return steps()
    if mode == "pool-first":
        return pool_first()
    return 2


def pool_first():
    """torch refuses its first allocation inside its pool (a memory fraction): no driver allocation is ever
    made. The runtime's lookups at its start (cuGetProcAddress) are the only driver calls before it."""
    torch = fakefw.fake_torch(initialized=False)
    fakefw.install(torch)
    lookup = cuda.cuGetProcAddress_v2
    lookup.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64,
                       ctypes.c_void_p]
    fn = ctypes.c_void_p()

    def cuda_init():  # torch._C._cuda_init(): the runtime starts and looks its driver functions up
        print("lookup", lookup(b"cuMemAlloc", ctypes.byref(fn), 12000, 0, None))
        settle()  # Python code inside torch's _lazy_init, under its lock: the companion's pending call runs here

    torch.lazy_init(cuda_init)  # what the first tensor on the device does before its allocation
    for fn in torch.observers:  # the pool's refusal: the observer, then the OutOfMemoryError raised
        fn(0, 4 << 30, 0, 900 * MiB)
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB. 40.00 MiB allowed")


def steps():
    torch = fakefw.fake_torch()
    fakefw.install(torch)
    counters = torch._C._cuda_memoryStats

    def slow_first(d, first=[True]):
        if first:
            first.pop()
            time.sleep(0.05)
        return counters(d)
    torch._C._cuda_memoryStats = slow_first

    Tensor = torch.Tensor

    class Model(torch.nn.Module):
        def __init__(self):
            self.weight = Tensor(8, 8)

        def parameters(self, recurse=True):
            return [self.weight]

        def forward(self, x):
            if x.shape[0] == 64:  # what torch's caching allocator does before raising its OOM, in the forward
                for fn in torch.observers:  # less than the 1 GiB device: a request larger is its own statement
                    fn(0, 512 * MiB, 3 * MiB, 100 * MiB)

    model = Model()
    opt = torch.optim.Optimizer()
    opt.param_groups = [{"params": [model.weight]}]
    opt.state = {}
    print("alloc", allocate(16 * MiB))
    settle()
    for batch in (2,) * 70 + (64,):
        model(Tensor(batch, 8))
        if batch == 64:
            break
        for hook in torch.step_hooks:  # what torch.optim does after each optimizer.step()
            hook(opt, (), {})
    try:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 512.00 MiB.")
    except torch.OutOfMemoryError as e:
        print("caught", type(e).__name__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
