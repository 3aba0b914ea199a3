"""The companion's logic without a GPU or the preload (tests/sh/companion_logic.sh runs it): the payload it
builds is read back by tests/py/fwdecode.py; stand-in torch modules with APIs missing or raising; Debian's
python3-torch (CPU) where it is installed; JAX's readiness rule; the OOM exception rule and its dedupe.
Exits 1 with one line per failed check."""
import os
import sys
import time
import types
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib", "companion"))
import _oomtrace_companion as C  # noqa: E402
import _oomtrace_frameworks as F  # noqa: E402
import _oomtrace_payload as P  # noqa: E402
import fakefw  # noqa: E402
import fwdecode  # noqa: E402
import _oomtrace_steps as S  # noqa: E402

from companion_harness import Lib, clear_modules, companion, expect, failures, records, run_with  # noqa: E402


# 1. Encoding: a recorded snapshot's shape goes in, the same figures come out.
snap = fakefw.torch_snapshot(n_segments=3, blocks_per_segment=4, frames=True)
recs = P.torch_segment_records(snap["segments"], with_frames=True)
body = P.payload(recs)
r = records(body)
expect([x["kind"] for x in r] == ["SEGMENTS", "BLOCKS", "BLOCK_FRAMES"], "segment records' kinds")
segs, blks = r[0]["segments"], r[1]["blocks"]
expect(segs["n_blocks"] == [4, 4, 4] and segs["first_block"] == [0, 4, 8], "segments index their blocks")
expect(segs["flags"] == [2, 4, 4], "flags: large pool, private pools")
expect(segs["pool_id"][1] == (1 << 32) ^ 2, "graph pool id folded")
expect(blks["segment"] == [0] * 4 + [1] * 4 + [2] * 4, "blocks point at their segment")
expect(blks["size"][:4] == [b["size"] for b in snap["segments"][0]["blocks"]], "block sizes")
expect(blks["state"][:4] == [1, 0, 1, 0], "block states")
expect(len(r[2]["frames"]) == 12 and r[2]["frames"][5]["frames"][0] == ("train.py", 11, "forward"), "block frames")
expect(blks["requested_size"][:4] == [snap["segments"][0]["blocks"][0]["requested_size"], 0,
                                      snap["segments"][0]["blocks"][2]["requested_size"], 0],
       "a free block's stale requested size is written as 0")
# A state torch may add later is not a crash: it reads as inactive.
odd = fakefw.torch_snapshot(1, 1)
odd["segments"][0]["blocks"][0]["state"] = "something_new"
expect(records(P.payload(P.torch_segment_records(odd["segments"])))[1]["blocks"]["state"] == [0], "unknown state")
# Big numbers and negative stats survive the varints.
st = records(P.payload([P.rec_stats("torch", None, [("a", -5), ("b", 1 << 62)])]))[0]
expect(st["device"] == P.ALL_DEVICES and st["stats"] == {"a": -5, "b": 1 << 62}, "stats varints")
err = records(P.payload([P.rec_error("jax", "x" * 10000, 0, 5)]))[0]
expect(len(err["text"]) == P.ERROR_TEXT_MAX, "error text bounded to 4 KiB")
expect(F._request_from_text("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes.")
       == 17179869184, "JAX request parsed")
expect(F._request_from_text("Out of memory allocating 1,073,741,824 bytes (allocated so far: 0 bytes).")
       == 1 << 30, "CuPy request parsed")
expect(F._request_from_text("no number here") == 0, "no request: 0")
expect(F._request_from_text("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.00GiB with allocator "
                            "GPU_0_bfc on device 0.") == 1 << 30, "JAX request with a unit")
expect(F._device_from_text("allocator GPU_1_bfc on device 1.") == 1, "device from the text")
# PyTorch 2.11's cudaMallocAsync backend (run 39 on the H200): its size is on the "Requested" line only.
expect(F._request_from_text("Allocation on device 0 would exceed allowed memory. (out of memory)\nCurrently "
                            "allocated     : 136.00 GiB\nRequested               : 8.00 GiB\nDevice limit     "
                            "       : 139.80 GiB") == 8 << 30, "cudaMallocAsync's request parsed")

# 2. The stand-in torch: attach, observer, collection.
clear_modules()
c, lib = companion()
t = fakefw.fake_torch()
run_with({"torch": t, "torch.optim": t.optim, "torch.optim.optimizer": t.optim.optimizer}, c.scan)
expect("torch" in c.attached and len(t.observers) == 1, "observer attached")
t.observers[0](0, 1 << 30, 5, 6)
expect(len(lib.ooms) == 1 and lib.ooms[0][:3] == (b"torch", 1 << 30, 0), "observer writes the fatal snapshot")
kinds = [x["kind"] for x in records(lib.ooms[0][3])]
expect(kinds[0] == "INFO" and "SEGMENTS" in kinds and kinds[-1] == "ERROR", "fatal payload: %s" % kinds)
# Where raises are seen (3.12+), a refusal PyTorch swallows (cuDNN's probes) writes nothing; the one that
# reaches Python as OutOfMemoryError does, with the state kept at its observer call and torch's message.
c.sees_raises = True
t.observers[0](0, 1 << 20, 5, 6)
t.observers[0](0, 1 << 29, 5, 6)
expect(len(lib.ooms) == 1, "swallowed refusals write nothing")
oom = t.OutOfMemoryError("CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has ...")
for _ in range(3):  # each frame it unwinds
    c.on_raise(None, 0, oom)
expect(len(lib.ooms) == 2 and lib.ooms[1][:3] == (b"torch", 1 << 29, 0), "the raised OOM writes one snapshot")
err = [x for x in records(lib.ooms[1][3]) if x["kind"] == "ERROR"][0]
expect(err["text"].startswith("CUDA out of memory. Tried"), "torch's own message in ERROR")
c.on_raise(None, 0, t.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
expect(len(lib.ooms) == 3 and lib.ooms[2][1] == 2 << 30, "an OOM with no observer call: request from the text")
c.sees_raises = False

# OOMTRACE_TORCH_STACKS=python: PyTorch's recorder in state-only mode, and each block's Python stack.
clear_modules()
c, lib = companion()
t = fakefw.fake_torch(snapshot=fakefw.torch_snapshot(2, 2, frames=True))
calls = []
t.cuda.memory._record_memory_history = lambda **kw: calls.append(kw)
os.environ["OOMTRACE_TORCH_STACKS"] = "python"
try:
    run_with({"torch": t}, c.scan)
finally:
    del os.environ["OOMTRACE_TORCH_STACKS"]
c.refresh("api")
expect(calls == [{"enabled": "state", "stacks": "python"}], "recorder started in state-only mode: %s" % calls)
fr = [x for x in records(lib.states[-1]) if x["kind"] == "BLOCK_FRAMES"]
expect(fr and [f["block"] for f in fr[0]["frames"]] == [0, 1, 2, 3], "BLOCK_FRAMES for every block with frames")

# torch not yet initialized: nothing touched, the observer waits for a later scan.
clear_modules()
c, lib = companion()
t = fakefw.fake_torch(initialized=False)
run_with({"torch": t}, c.scan)
expect("torch" in c.attached and not t.observers, "no observer before torch set up CUDA")
c.refresh("api")
expect([x["kind"] for x in records(lib.states[-1])] == ["INFO"], "uninitialized torch: INFO only")
# ... but queued in torch's own calls at CUDA's setup (torch.cuda._lazy_call), once however often scanned, where
# it attaches though torch does not yet say it is initialized.
run_with({"torch": t}, c.scan)
expect(len(t.queued) == 1 and not t.observers, "one call queued for CUDA's setup, nothing attached yet")
t.lazy_init()
expect(len(t.observers) == 1 and c.attached["torch"].observer_attached, "attached at CUDA's setup")
run_with({"torch": t}, c.scan)
expect(len(t.observers) == 1 and not t.queued, "attached once")
# The companion's first scan inside torch's _lazy_init, under its lock (its pending call right after
# torch._C._cuda_init()): queued without taking the lock, and run by the same _lazy_init.
clear_modules()
c, lib = companion()
t = fakefw.fake_torch(initialized=False)
t0 = time.monotonic()
t.lazy_init(lambda: run_with({"torch": t}, c.scan))
expect(time.monotonic() - t0 < 0.5 and len(t.observers) == 1, "scanned inside torch's CUDA setup: attached there, "
       "without waiting on its lock (%.1f s, %d observers)" % (time.monotonic() - t0, len(t.observers)))
# A queued call that fails inside torch's setup never raises into it.
clear_modules()
c, lib = companion()
t = fakefw.fake_torch(initialized=False)
run_with({"torch": t}, c.scan)


def broken(fn):
    raise ValueError("oomtrace test: the observer cannot attach")


t._C._cuda_attach_out_of_memory_observer = broken
c.watch_exceptions = lambda fallback=True, classes=(): 1 / 0
t.lazy_init()
expect(c.attached["torch"].observer and not t.observers, "a failing queued call: said, not raised")

# No observer API: one line, the rest still works.
clear_modules()
c, lib = companion()
t = fakefw.fake_torch(observer=False)
run_with({"torch": t}, c.scan)
c.refresh("api")
expect("SEGMENTS" in [x["kind"] for x in records(lib.states[-1])], "no observer: state still collected")

# cudaMallocAsync's answer when no fraction was set (~1.2e8 on torch 2.11) is no fraction; a set one is kept.
for frac, want in ((122888273.8, None), (0.01, "0.01")):
    clear_modules()
    c, lib = companion()
    t = fakefw.fake_torch(fraction=frac, backend="cudaMallocAsync", observer="refuses")
    run_with({"torch": t}, c.scan)
    c.refresh("api")
    st = [x for x in records(lib.states[-1]) if x["kind"] == "SETTINGS"][0]["settings"]
    expect(st.get("per_process_memory_fraction") == want, "fraction %r in the settings: %r" % (frac, st))

# An observer that refuses to attach (PyTorch's cudaMallocAsync backend): torch is still recorded, and its
# OutOfMemoryError, where it is seen, writes the fatal snapshot with the state collected then.
clear_modules()
c, lib = companion()
c.watch_exceptions = lambda fallback=True, classes=(): all([c.watch_created(k) for k in classes]) and bool(classes)
t = fakefw.fake_torch(observer="refuses")
run_with({"torch": t}, c.scan)
expect("torch" in c.attached and "torch" not in c.given_up, "a refused observer: torch still attached")
c.refresh("api")
expect("SEGMENTS" in [x["kind"] for x in records(lib.states[-1])], "a refused observer: state still collected")
try:
    raise t.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has ...")
except RuntimeError:
    pass
expect(len(lib.ooms) == 1 and lib.ooms[0][:3] == (b"torch", 1 << 30, 0) and
       "SEGMENTS" in [x["kind"] for x in records(lib.ooms[0][3])], "a refused observer: the OOM still written")

# memory_stats raises: the collection fails with one line, the program sees nothing, INFO remains with what
# was collected before the failure (the blocks, read first).
clear_modules()
c, lib = companion()
t = fakefw.fake_torch(stats_raise=True)
run_with({"torch": t}, c.scan)
c.refresh("exit")
# (ROLES empty: the roles scan ran and found no model on the GPU, which a set-up torch says.)
expect([x["kind"] for x in records(lib.states[-1])] == ["INFO", "ROLES", "SEGMENTS", "BLOCKS"] and c.collect_failed == {"torch"},
       "raising API: INFO and what came before the failure: %s" % [x["kind"] for x in records(lib.states[-1])])

# A torch without torch.cuda: the framework is given up with one line, never retried.
clear_modules()
c, lib = companion()
bare = types.ModuleType("torch")
run_with({"torch": bare}, c.scan)
expect("torch" in c.given_up and "torch" not in c.attached, "torch without cuda given up")

# A module still being imported is left for later.
clear_modules()
c, lib = companion()
half = fakefw.fake_torch()
half.__spec__ = types.SimpleNamespace(_initializing=True)
run_with({"torch": half}, c.scan)
expect(not c.attached and not c.given_up, "half-imported module left for a later scan")

# 3. JAX: its devices are never asked for before jax started its backends.
clear_modules()
c, lib = companion()
jax = types.ModuleType("jax")
jax.__version__ = "0.0-fake"


def no_devices():
    raise AssertionError("jax.local_devices() called before jax started its backends")


jax.local_devices = no_devices
jax.live_arrays = no_devices
xb = types.ModuleType("jax._src.xla_bridge")
xb._backends = {}
run_with({"jax": jax, "jax._src.xla_bridge": xb}, lambda: (c.scan(), c.refresh("api")))
expect([x["kind"] for x in records(lib.states[-1])] == ["INFO", "SETTINGS"], "jax before its backends: settings only")


class Arr:
    def __init__(self, shape, nbytes):
        self.shape, self.nbytes, self.dtype = shape, nbytes, "float32"

    def devices(self):
        return {types.SimpleNamespace(id=0)}


dev = types.SimpleNamespace(platform="gpu", id=0, memory_stats=lambda: {"bytes_in_use": 7, "bytes_limit": 9,
                                                                         "largest_free_block_bytes": 2})
jax.local_devices = lambda: [dev]
jax.live_arrays = lambda: [Arr((2, 3), 24), Arr((2, 3), 24), Arr((5,), 20)]
xb._backends = {"cuda": object()}
c.attached.clear()
run_with({"jax": jax, "jax._src.xla_bridge": xb}, lambda: (c.scan(), c.refresh("api")))
r = records(lib.states[-1])
arrays = next(x for x in r if x["kind"] == "ARRAYS")["arrays"]
expect(arrays[0] == {"dtype": "float32", "shape": "(2, 3)", "device": 0, "count": 2, "bytes": 48}, "arrays grouped")
expect(next(x for x in r if x["kind"] == "STATS")["stats"]["bytes_limit"] == 9, "jax stats")

# 4. OOM exceptions: only the framework's own type; one snapshot per exception, however often it is seen.
XlaRuntimeError = type("XlaRuntimeError", (Exception,), {})
e = XlaRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1024 bytes.")
run_with({"jax": jax, "jax._src.xla_bridge": xb}, lambda: [c.on_raise(None, 0, e) for _ in range(5)])
expect(len(lib.ooms) == 1 and lib.ooms[0][1] == 1024, "one fatal snapshot per JAX OOM")
c.on_raise(None, 0, XlaRuntimeError("INTERNAL: something else"))
c.on_raise(None, 0, KeyError("RESOURCE_EXHAUSTED"))
torch_oom = type("OutOfMemoryError", (RuntimeError,), {"__module__": "torch"})("CUDA out of memory")
c.on_raise(None, 0, torch_oom)
expect(len(lib.ooms) == 1, "other errors, and torch's OOM (its observer's job), write nothing")
cupy = fakefw.fake_cupy()
c.attached.clear()
run_with({"cupy": cupy}, lambda: (c.scan(), c.on_raise(None, 0, cupy.cuda.memory.OutOfMemoryError(
    "Out of memory allocating 2,048 bytes (allocated so far: 0 bytes)."))))
expect(len(lib.ooms) == 2 and lib.ooms[1][:2] == (b"cupy", 2048), "CuPy OOM")

# 7. Where no event says that an exception was raised (before 3.12), its creation does
# (Companion.watch_created): a refusal PyTorch swallows in C++ never becomes an exception object and writes
# nothing; one that reaches Python writes one fatal snapshot with the state kept at its observer call, also
# when the program catches it; CuPy's caught OOM is seen the same way. The real method, on every version.
clear_modules()
c, lib = companion()
c.watch_exceptions = lambda fallback=True, classes=(): all([c.watch_created(k) for k in classes]) and bool(classes)
t = fakefw.fake_torch()
run_with({"torch": t, "torch.optim": t.optim, "torch.optim.optimizer": t.optim.optimizer}, c.scan)
expect(c.attached["torch"].raises_seen, "torch's OutOfMemoryError is watched")
t.observers[0](0, 1 << 20, 5, 6)
t.observers[0](0, 1 << 29, 5, 6)
expect(lib.ooms == [], "refusals torch swallows write nothing")
try:
    raise t.OutOfMemoryError("CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has ...")
except RuntimeError as e:
    caught = e
expect(str(caught).startswith("CUDA out of memory") and caught.args == ("CUDA out of memory. Tried to allocate "
                                                                        "512.00 MiB. GPU 0 has ...",),
       "the program's exception is unchanged")
expect(len(lib.ooms) == 1 and lib.ooms[0][:3] == (b"torch", 1 << 29, 0), "the caught OOM writes one snapshot")
err = [x for x in records(lib.ooms[0][3]) if x["kind"] == "ERROR"][0]
expect(err["text"].startswith("CUDA out of memory. Tried"), "torch's own message in ERROR, state from the observer")
# As PyTorch raises it: from C, a type and a string (the object is made where Python code handles it).
import ctypes  # noqa: E402
api = ctypes.pythonapi
api.PyErr_NewException.restype = ctypes.py_object
api.PyErr_NewException.argtypes = [ctypes.c_char_p, ctypes.py_object, ctypes.c_void_p]
api.PyErr_SetString.argtypes = [ctypes.py_object, ctypes.c_char_p]
from_c = api.PyErr_NewException(b"torch.OutOfMemoryError", RuntimeError, None)
c.watch_created(from_c)
t.observers[0](0, 1 << 28, 5, 6)
try:
    api.PyErr_SetString(from_c, b"CUDA out of memory. Tried to allocate 256.00 MiB")
except RuntimeError:
    pass
expect(len(lib.ooms) == 2 and lib.ooms[1][:3] == (b"torch", 1 << 28, 0), "an OOM raised from C and caught")
lib.ooms.pop()
cupy = fakefw.fake_cupy()
run_with({"cupy": cupy}, c.scan)
try:
    raise cupy.cuda.memory.OutOfMemoryError("Out of memory allocating 2,048 bytes (allocated so far: 0 bytes).")
except MemoryError:
    pass
expect(len(lib.ooms) == 2 and lib.ooms[1][:2] == (b"cupy", 2048), "CuPy's caught OOM")
before = ValueError.__init__
expect(not c.watch_created(ValueError) and ValueError.__init__ is before, "a type that refuses the attribute is left as it is")
broken = type("OutOfMemoryError", (RuntimeError,), {"__module__": "torch"})
c.attached["torch"].pending = None
c.on_exception = lambda exc: 1 / 0  # the companion's own failure never reaches the program
c.watch_created(broken)
try:
    raise broken("CUDA out of memory")
except ZeroDivisionError:
    failures.append("the companion's failure reached the program")
except RuntimeError:
    pass

# 7b. Creation first, on every Python (issue 12, "Cost"): where each OOM class takes the wrapper, no
# sys.monitoring tool is taken and no hook chained, so the program's other raises (about 3 in a PyTorch 2
# step) call nothing of the companion; a class that refuses the wrapper falls back to RAISE events (3.12+),
# before 3.12 to the uncaught hooks.
import threading  # noqa: E402
c, lib = companion()
t = fakefw.fake_torch()
mon = getattr(sys, "monitoring", None)
saved_hooks = (sys.excepthook, threading.excepthook)
try:
    run_with({"torch": t}, c.scan)
    seen = C.Companion.watch_exceptions(c, classes=c.attached["torch"].oom_classes())
    expect(seen and not c.sees_raises, "a class that takes the wrapper is watched by its creation alone")
    c.attached["torch"].raises_seen = seen
    expect(mon is None or all(mon.get_tool(i) != "oomtrace" for i in range(6)), "no sys.monitoring tool taken")
    expect((sys.excepthook, threading.excepthook) == saved_hooks, "no excepthook chained")
    try:
        raise t.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
    except RuntimeError:
        pass
    expect(len(lib.ooms) == 1 and lib.ooms[0][1] == 1 << 30, "its raise is seen")
    got = C.Companion.watch_exceptions(c, classes=[ValueError])
    if mon is not None:
        expect(got and c.sees_raises and any(mon.get_tool(i) == "oomtrace" for i in range(6)),
               "a class that refuses the wrapper: RAISE events")
    else:
        expect(not got and sys.excepthook is not saved_hooks[0], "a class that refuses the wrapper: the uncaught hook")
finally:
    sys.excepthook, threading.excepthook = saved_hooks
    for i in range(6):
        if mon is not None and mon.get_tool(i) == "oomtrace":
            mon.set_events(i, 0)
            mon.register_callback(i, mon.events.RAISE, None)
            mon.free_tool_id(i)

# 7b'. helper-91 #9: RAISE events on tool id 4 or 3 only. With both taken (by another tool), none of the ids
# Python names (0 debugger, 1 coverage, 2 profiler, 5 optimizer) is taken: a coverage run or a debugger started
# later takes its own and would get ValueError.
if mon is not None:
    c2, _ = companion()
    for i in (3, 4):
        mon.use_tool_id(i, "another tool")
    try:
        expect(not C.Companion.watch_raises(c2) and all(mon.get_tool(i) is None for i in (0, 1, 2, 5)),
               "tool ids 3 and 4 taken: no other id taken (%s)" % [mon.get_tool(i) for i in range(6)])
    finally:
        for i in range(6):
            if mon.get_tool(i) is not None:
                mon.free_tool_id(i)

# 7c. The step marker, called at every optimizer step, keeps the GIL (a CDLL call gives it up and may wait a
# switch interval to take it back from another Python thread); the snapshots' calls give it up. Companion()
# binds the library's entry points: here, libc's strlen stands in for each.
import ctypes  # noqa: E402
bound = []
real_bind = C._bind
C._bind = lambda name, argtypes, keep_gil=False: bound.append((name, keep_gil)) or real_bind("strlen", argtypes, keep_gil)
try:
    comp = C.Companion()
finally:
    C._bind = real_bind
expect(sorted(bound) == [("oomtrace_framework_oom", False), ("oomtrace_framework_state", False), ("oomtrace_mark", True)],
       "entry points bound: %s" % bound)
expect(comp.mark_fn._flags_ & ctypes._FUNCFLAG_PYTHONAPI and not comp.state_fn._flags_ & ctypes._FUNCFLAG_PYTHONAPI,
       "the marker through PyDLL, the snapshots through CDLL")
# The library puts its builtin marker into the module before _start (tests/sh/companion.sh): then it is the one.
C._mark = len
C._bind = lambda name, argtypes, keep_gil=False: real_bind("strlen", argtypes, keep_gil)
try:
    expect(C.Companion().mark_fn is len, "the library's builtin marker is used where it is given")
finally:
    del C._mark
    C._bind = real_bind

# 8. The step hook's per-step work stays cheap (issue 12, "Cost"): the allocator's counters are read only
# once READ_SPACING times a read's cost has passed since the last read (a fake clock: each read costs 20 us,
# a step 3 ms, as on the H200), the other steps' STEPS entries carry 0 and 0; every step still has its
# marker; the model's inputs are sampled at most every SAMPLE_SPACING_NS (here 100 ms: the companion's is 1 s),
# their text built only then; `off` and unregister() switch it all off.
clear_modules()
c, lib = companion()
t = fakefw.fake_torch()
clock = [10 ** 9]
reads = []
read_steps = []


def counters(d):
    reads.append(clock[0])
    read_steps.append(S._hook.step if S._hook is not None else 0)
    clock[0] += 20000
    return {"allocated_bytes": {"all": {"current": 3 * fakefw.MiB}}, "reserved_bytes": {"all": {"current": 8 * fakefw.MiB}}}


t._C._cuda_memoryStats = counters
sys.modules["_oomtrace_steps"] = S
built = []
shape_text, real_time = S._shape_text, S.time
S._shape_text = lambda args, kwargs, torch: built.append(1) or shape_text(args, kwargs, torch)
S.time = types.SimpleNamespace(monotonic_ns=lambda: clock[0])
spacing, S.SAMPLE_SPACING_NS = S.SAMPLE_SPACING_NS, 100 * 10 ** 6
try:
    run_with({"torch": t, "torch.optim": t.optim, "torch.optim.optimizer": t.optim.optimizer}, c.scan)
    tt = c.attached["torch"]
    tt.counters.clock = lambda: clock[0]
    opt = t.optim.Optimizer()
    model = t.nn.Module()
    S._hook.watched, S._hook.roots = True, [weakref.ref(model)]  # the fake's modules own no parameters

    def run(n, step_ns, shape=(32, 256)):
        for _ in range(n):
            model(t.Tensor(*shape))
            clock[0] += step_ns
            t.step_hooks[0](opt, (), {})

    run(210, 3 * 10 ** 6)
    expect(S._hook.step == 210 and len(lib.marks) == 210, "every step is counted and marked (%d, %d)" % (S._hook.step, len(lib.marks)))
    # 20 us x 10000 = 200 ms between reads: steps 1, 68, 135, 202 of 3 ms each (STEPS keeps the last 64).
    expect(read_steps == [1, 68, 135, 202], "3 ms steps read the counters every 67th step: %s" % read_steps)
    steps = list(tt.steps)
    got = [s[0] for s in steps if s[2]]
    expect(got == [202], "of the 64 steps kept, the one read carries the figures: %s" % got)
    expect(all(s[2:4] == (3 * fakefw.MiB, 8 * fakefw.MiB) for s in steps if s[2]) and
           all(s[2:4] == (0, 0) for s in steps if s[0] not in got), "read steps carry the figures, others 0 and 0")
    gaps = [b - a for a, b in zip(reads, reads[1:])]
    expect(all(g >= 20000 * 10001 for g in gaps) and all(g < 20000 * 10001 + 3 * 10 ** 6 for g in gaps),
           "a read starts 10000 x its cost after the last one ended, at the first step after: %s" % gaps)
    # Armed at a step's end once 100 ms passed since the last arming, fired at the next step's forward:
    # steps 2, 36, 70, ... (34 steps of 3 ms each apart); only those carry shapes, in STEPS and markers.
    sampled = [int(m.split()[1]) for m in lib.marks if m.endswith(b" (32, 256)")]
    expect(sampled == list(range(2, 211, 34)), "sampled steps: %s" % sampled)
    expect(all(m == b"step %d" % (i + 1) for i, m in enumerate(lib.marks) if i + 1 not in sampled),
           "the other steps' markers carry no shapes")
    expect(len(built) == len(sampled) == S._hook.samples, "the shapes' text is built at samples only (%d)" % len(built))
    expect(len(t.nn.modules.module._global_forward_pre_hooks) == 0 or S._hook.sampling is not None,
           "the global table holds the sampled hook only while it is armed")
    run(40, 3 * 10 ** 6, shape=(64, 256))
    expect(any(m.endswith(b" (64, 256)") for m in lib.marks[-40:]), "new shapes are seen: %r" % lib.marks[-1])
    # Long steps read at every step; one read stalled by the scheduler does not silence the next ones.
    del reads[:]
    run(5, 250 * 10 ** 6)
    expect(len(reads) == 5, "250 ms steps read the counters every step (%d)" % len(reads))
    expect(all(m.endswith(b" (32, 256)") for m in lib.marks[-4:]), "250 ms steps are each sampled: %s" % lib.marks[-5:])
    t._C._cuda_memoryStats = lambda d: (clock.__setitem__(0, clock[0] + 5 * 10 ** 9), counters(d))[1]
    run(1, 250 * 10 ** 6)
    t._C._cuda_memoryStats = counters
    del reads[:]
    run(2, 250 * 10 ** 6)
    expect(len(reads) == 2, "after a read that stalled 5 s, the next steps still read (%d)" % len(reads))
    # Switched off: the callbacks return at once, nothing is counted or marked.
    n_marks, n_step = len(lib.marks), S._hook.step
    S._hook.off = True
    run(3, 3 * 10 ** 6)
    expect(S._hook.step == n_step and len(lib.marks) == n_marks, "off: no step counted")
    S._hook.off = False
    S._hook.unregister()
    expect(S._hook.handles == [] and S._hook.sampling is None and
           not t.nn.modules.module._global_forward_pre_hooks, "unregister drops the handles, the sampled hook too")
    # A failing read: one line on stderr, the program's step goes on, later steps are still marked.
    t._C._cuda_memoryStats = lambda d: 1 / 0
    tt.counters.due = 0
    try:
        run(2, 50 * 10 ** 6)
    except ZeroDivisionError:
        failures.append("the counters' failure reached the program")
    expect(S._hook.step == n_step + 2, "steps go on after a failing read")
finally:
    S._shape_text, S.time, S.SAMPLE_SPACING_NS = shape_text, real_time, spacing
    sys.modules.pop("_oomtrace_steps", None)
    S._hook = None

# 8c. Before torch sets CUDA up there is nothing to read: on_step asks torch again only once a second
# (UNREADY_RECHECK_NS), so that the steps in between take the C path (lib/runtime/companion_step.c, which
# leaves the step to on_step whenever counters.due is reached); once CUDA is set up, the next due step reads.
clear_modules()
c, lib = companion()
t = fakefw.fake_torch()
asked = {"n": 0, "init": False}
t.cuda.is_initialized = lambda: (asked.__setitem__("n", asked["n"] + 1), asked["init"])[1]
try:
    run_with({"torch": t, "torch.optim": t.optim, "torch.optim.optimizer": t.optim.optimizer}, c.scan)
    tt = c.attached["torch"]
    clock = [10 ** 9]
    tt.counters.clock = lambda: clock[0]
    n0 = asked["n"]
    for i in range(100):  # 3 ms steps: 0.3 s
        tt.on_step(i + 1, "")
        clock[0] += 3 * 10 ** 6
    expect(asked["n"] - n0 == 1 and tt.counters.due == 10 ** 9 + F.UNREADY_RECHECK_NS,
           "before CUDA is set up, torch is asked once a second, not at every step (%d)" % (asked["n"] - n0))
    expect(len(lib.marks) == 100 and tt.counters.reads == 0, "the steps are marked, nothing is read")
    asked["init"] = True
    clock[0] = tt.counters.due
    tt.on_step(101, "")
    expect(tt.counters.reads == 1 and tt.steps[-1][2] > 0, "once CUDA is set up, the next due step reads")
finally:
    clear_modules()

# 8d. The entries the statements name outlive the last 64 kept: at one sample a second (steps 2 and 202 of
# 5 ms) and a read every 400 ms (40 us a read: steps 1, 81, 161, 241), 310 steps keep 247-310; STEPS then
# carries, before them, the latest sampled step and the latest read step, in step order.
clear_modules()
c, lib = companion()
t = fakefw.fake_torch()
clock = [10 ** 9]
read_steps = []


def counters_5ms(d):
    read_steps.append(S._hook.step)
    clock[0] += 40000
    return {"allocated_bytes": {"all": {"current": 3 * fakefw.MiB}}, "reserved_bytes": {"all": {"current": 8 * fakefw.MiB}}}


t._C._cuda_memoryStats = counters_5ms
sys.modules["_oomtrace_steps"] = S
real_time = S.time
S.time = types.SimpleNamespace(monotonic_ns=lambda: clock[0])
try:
    run_with({"torch": t, "torch.optim": t.optim, "torch.optim.optimizer": t.optim.optimizer}, c.scan)
    tt = c.attached["torch"]
    tt.counters.clock = lambda: clock[0]
    opt, model = t.optim.Optimizer(), t.nn.Module()
    S._hook.watched, S._hook.roots = True, [weakref.ref(model)]
    for i in range(310):
        model(t.Tensor(2 if i < 100 else 3, 8))
        clock[0] += 5 * 10 ** 6
        t.step_hooks[0](opt, (), {})
    sampled = [int(m.split()[1]) for m in lib.marks if b"(" in m]
    got = [s[0] for s in tt.step_record()]
    want = [202, 241] + list(range(247, 311))
    expect(sampled == [2, 202] and read_steps == [1, 81, 161, 241] and got == want,
           "the latest sampled step (%s) and the latest read (%s) before the last 64: %s" % (sampled, read_steps[-2:], got[:4]))
    entries = {s[0]: s for s in tt.step_record()}
    expect(entries[202][4] == "(3, 8)" and entries[241][2] == 3 * fakefw.MiB,
           "their entries carry the shapes and the counters")
    c.refresh("api")
    st = [x for x in records(lib.states[-1]) if x["kind"] == "STEPS"]
    expect(st and [e["step"] for e in st[0]["steps"]] == want, "the snapshot's STEPS: %s" % (st[0]["steps"][:3] if st else None))
finally:
    S.time = real_time
    sys.modules.pop("_oomtrace_steps", None)
    S._hook = None
    clear_modules()

# 8b. Nothing of the companion is in the model, and the sampled hook never stays: armed, it is removed at
# the next module call, whatever module that is (another model's call first: no sample this time), and a
# module that is not the model gives no shapes.
t = fakefw.fake_torch()
marked = []
h = S._StepHook(t, lambda n, shapes: marked.append((n, shapes)))
optmod = types.SimpleNamespace(register_optimizer_step_post_hook=lambda fn: types.SimpleNamespace(remove=lambda: None))
expect(h.register(optmod) and len(h.handles) == 1, "one global hook registered: the optimizer's step post hook")
opt, model, other = t.optim.Optimizer(), t.nn.Module(), t.nn.Module()
h.watched, h.roots = True, [weakref.ref(model)]
table = t.nn.modules.module._global_forward_pre_hooks
h.post_step(opt)
expect(len(table) == 1 and h.sampling is not None, "armed after the first step")
other(t.Tensor(3))
expect(len(table) == 0 and h.seen == "" and h.samples == 0, "another module's call first: removed, no sample")
h.due = 0
h.post_step(opt)
model(t.Tensor(2, 8))
model(t.Tensor(4, 8))
expect(len(table) == 0 and h.seen == "(2, 8)" and h.samples == 1, "the model's next call sampled once: %r" % h.seen)
h.post_step(opt)
expect(marked == [(1, ""), (2, ""), (3, "(2, 8)")], "the sampled step's entry carries the shapes: %s" % marked)
expect(model.__dict__ == {} and other.__dict__ == {}, "nothing added to the modules")

# 5. Debian's torch (CPU), where installed: real objects, CUDA never initialized by us.
try:
    import torch as real_torch
except Exception:
    real_torch = None
    print("test_companion: no torch for %s; the real-torch checks are skipped" % sys.executable)
if real_torch is not None:
    c, lib = companion()
    c.scan()
    expect("torch" in c.attached, "real torch attached")
    c.refresh("api")
    expect(not real_torch.cuda.is_initialized(), "the companion never initializes CUDA")
    queued = [q for q in getattr(real_torch.cuda, "_queued_calls", [])
              if getattr(q[0], "__qualname__", "").startswith("Companion.guard.")]
    expect(all(isinstance(q, tuple) and len(q) == 2 for q in real_torch.cuda._queued_calls),
           "real torch's queue entries are (callable, stack lines)")
    expect(len(queued) == 1, "the observer queued for real torch's CUDA setup: %r" % queued)
    r = records(lib.states[-1])
    expect(r[0]["kind"] == "INFO" and r[0]["version"] == real_torch.__version__, "real torch INFO")
    steps = []
    c.attached["torch"].on_step(7, "[(32, 256)]")
    expect(lib.marks == [b"step 7 [(32, 256)]"], "a step marks the event stream")
    c.refresh("api")
    st = next(x for x in records(lib.states[-1]) if x["kind"] == "STEPS")["steps"]
    expect(st[0]["step"] == 7 and st[0]["shapes"] == "[(32, 256)]", "STEPS carries the step")

if failures:
    print("test_companion: %d failed" % len(failures))
    sys.exit(1)
print("test_companion: ok (%s)" % sys.version.split()[0])
