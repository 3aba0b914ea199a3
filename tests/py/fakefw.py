"""Stand-in framework modules for the companion's tests (no GPU here): objects shaped like the parts of
torch and cupy that lib/companion/_oomtrace_frameworks.py reads, with the figures a test then looks for in
the snapshot. Built from the shapes recorded on the GPU machine (docs: shared notes, framework layer)."""
import threading
import types

MiB = 1 << 20


def torch_snapshot(n_segments=2, blocks_per_segment=3, frames=False):
    """A torch.cuda.memory._snapshot()-shaped dict: segments of 2 MiB-aligned blocks, half of them free."""
    segs = []
    addr = 0x7F0000000000
    for s in range(n_segments):
        blocks = []
        total = 0
        for b in range(blocks_per_segment):
            size = (b + 1) * 2 * MiB
            # torch leaves a freed block the requested size of its last tensor, larger than the block
            # itself once the block was split (seen on torch 2.11).
            blk = {"address": addr + total, "size": size,
                   "requested_size": size - 512 if b % 2 == 0 else size * 4,
                   "state": "active_allocated" if b % 2 == 0 else "inactive",
                   "frames": [{"filename": "train.py", "line": 10 + b, "name": "forward"}] if frames else []}
            blocks.append(blk)
            total += size
        allocated = sum(x["size"] for x in blocks if x["state"] == "active_allocated")
        segs.append({"device": 0, "address": addr, "total_size": total, "allocated_size": allocated,
                     "active_size": allocated, "requested_size": allocated - 512, "stream": 0,
                     "segment_type": "large" if s == 0 else "small",
                     "segment_pool_id": (0, 0) if s == 0 else (1, 2), "is_expandable": False,
                     "blocks": blocks, "frames": []})
        addr += 1 << 32
    return {"segments": segs, "allocator_settings": {
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False", "max_split_size": -1,
        "expandable_segments": False, "garbage_collection_threshold": 0}}


def fake_torch(snapshot=None, observer=True, stats_raise=False, initialized=True, fraction=0.4, backend="native"):
    """A torch-shaped module; install(torch) puts it and its torch.optim.optimizer into sys.modules.
    backend="cudaMallocAsync": torch 2.11's with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, whose
    _snapshot() raises (pass observer="refuses" too: it has no OOM observer either)."""
    torch = types.ModuleType("torch")
    torch.__version__ = "0.0-fake"
    torch.__path__ = []  # a package, so that "import torch.optim.optimizer" resolves in sys.modules
    torch.observers = []
    torch.step_hooks = []
    torch.OutOfMemoryError = type("OutOfMemoryError", (RuntimeError,), {"__module__": "torch"})

    class Tensor:
        def __init__(self, *shape):
            self.shape = shape

    global_pre = {}

    class Handle:
        def __init__(self, d, fn):
            self.d, self.k = d, len(torch.step_hooks) + len(d) + id(fn)
            d[self.k] = fn

        def remove(self):
            self.d.pop(self.k, None)

    class Module:  # torch's call path: _call_impl(self, *args, **kwargs) runs the global pre hooks
        def children(self):
            return []

        def parameters(self, recurse=True):
            return []

        def buffers(self, recurse=True):
            return []

        def forward(self, *args, **kwargs):
            return None

        def _call_impl(self, *input, **kwargs):
            for h in list(global_pre.values()):
                h(self, input)
            return self.forward(*input, **kwargs)
        __call__ = _call_impl

    class Optimizer:
        param_groups = []
        state = {}  # (read by the roles scan: an optimizer without it could not be read, and says nothing)

    def backward(tensors, run=None):  # torch.autograd.backward: run() stands for the engine's work
        if run is not None:
            run()

    torch.Tensor = Tensor
    torch.autograd = types.SimpleNamespace(backward=backward)
    module = types.SimpleNamespace(register_module_forward_pre_hook=lambda fn: Handle(global_pre, fn),
                                   _global_forward_pre_hooks=global_pre)
    torch.nn = types.SimpleNamespace(Module=Module, modules=types.SimpleNamespace(module=module))
    torch.grad_on = True  # what torch.is_grad_enabled() says on this (the raising) thread
    torch.is_grad_enabled = lambda: torch.grad_on
    optimizer = types.ModuleType("torch.optim.optimizer")
    optimizer.register_optimizer_step_post_hook = torch.step_hooks.append
    torch.optim = types.ModuleType("torch.optim")
    torch.optim.Optimizer = Optimizer
    torch.optim.optimizer = optimizer
    c = types.SimpleNamespace()
    if observer == "refuses":  # the cudaMallocAsync backend
        def refuse(fn):
            raise RuntimeError("cudaMallocAsync does not yet support attachOutOfMemoryObserver")
        c._cuda_attach_out_of_memory_observer = refuse
    elif observer:
        c._cuda_attach_out_of_memory_observer = torch.observers.append
    c._cuda_memoryStats = lambda d: {"allocated_bytes": {"all": {"current": 3 * MiB}},
                                     "reserved_bytes": {"all": {"current": 8 * MiB}}}
    torch._C = c
    snap = snapshot if snapshot is not None else torch_snapshot()

    def memory_stats(d=None):
        if stats_raise:
            raise RuntimeError("memory_stats is broken in this fake")
        return {"allocated_bytes.all.current": 3 * MiB, "allocated_bytes.all.peak": 5 * MiB,
                "reserved_bytes.all.current": 8 * MiB, "reserved_bytes.all.peak": 8 * MiB,
                "active_bytes.all.current": 3 * MiB, "inactive_split_bytes.all.current": 5 * MiB,
                "num_alloc_retries": 1, "num_ooms": 1, "num_device_alloc": 2, "num_device_free": 0}

    def snapshot_fn():
        if backend == "cudaMallocAsync":  # torch 2.11's words
            raise RuntimeError("Calling snapshot with backend:cudaMallocAsync is not meaningful. (For "
                               "backend:native, snapshot returns a detailed summary of all blocks tracked by the "
                               "allocator, but the cudaMallocAsync backend does not track individual blocks.)")
        return snap

    memory = types.SimpleNamespace(_snapshot=snapshot_fn, _record_memory_history=lambda **kw: None)
    props = types.SimpleNamespace(total_memory=1 << 30)
    torch.queued = []  # torch.cuda._queued_calls, run by torch.lazy_init() (torch.cuda._lazy_init)
    init_lock, tls = threading.Lock(), threading.local()

    def lazy_call(fn, **kwargs):
        # torch 2.x takes its initialization lock here, which _lazy_init holds while it sets CUDA up: called
        # from inside, it would wait forever (a second's wait stands for that here).
        if not init_lock.acquire(timeout=1):
            raise RuntimeError("fake torch: _lazy_call deadlocked inside _lazy_init")
        try:
            if torch.cuda.is_initialized():
                fn()
            else:
                torch.queued.append((fn, []))
        finally:
            init_lock.release()

    def lazy_init(cuda_init=None):
        """torch's order: under its lock, CUDA set up (cuda_init() stands for torch._C._cuda_init(), whose
        driver lookups may start the companion, and Python code right after, where its pending call runs),
        then the queued calls (torch still says it is not initialized), then the flag."""
        with init_lock:
            if cuda_init is not None:
                cuda_init()
            tls.is_initializing = True
            try:
                for fn, _stack in torch.queued:
                    fn()
            finally:
                del tls.is_initializing
            torch.queued.clear()
            torch.cuda.is_initialized = lambda: True

    torch.lazy_init = lazy_init
    torch.cuda = types.SimpleNamespace(
        is_initialized=lambda: initialized, memory=memory, memory_stats=memory_stats,
        current_device=lambda: 0, get_device_properties=lambda d: props,
        get_per_process_memory_fraction=lambda d=None: fraction,
        get_allocator_backend=lambda: backend, _lazy_call=lazy_call, _queued_calls=torch.queued, _tls=tls)
    return torch


def fake_cupy(used=3 * MiB, total=8 * MiB):
    cupy = types.ModuleType("cupy")
    cupy.__version__ = "0.0-fake"
    pool = types.SimpleNamespace(used_bytes=lambda: used, total_bytes=lambda: total,
                                 free_bytes=lambda: total - used)
    pinned = types.SimpleNamespace(n_free_blocks=lambda: 2)
    cupy.get_default_memory_pool = lambda: pool
    cupy.get_default_pinned_memory_pool = lambda: pinned
    err = type("OutOfMemoryError", (MemoryError,), {"__module__": "cupy.cuda.memory"})
    cupy.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0),
                                      memory=types.SimpleNamespace(OutOfMemoryError=err))
    return cupy


def install(torch):
    import sys
    sys.modules["torch"] = torch
    sys.modules["torch.optim"] = torch.optim
    sys.modules["torch.optim.optimizer"] = torch.optim.optimizer
