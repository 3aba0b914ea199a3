"""oomtrace's Python companion: what the frameworks' allocators hold, for every snapshot.

liboomtrace.so embeds this file and runs it as the module `_oomtrace_companion` at a pending call of the
main thread (lib/runtime/companion.c), in any CPython 3.9-3.13, with no launcher and no PYTHONPATH. It
looks only at frameworks the program has already imported (torch, jax, cupy), never imports them, and never
raises into the program: every entry point catches everything, says one line on stderr, and steps aside.

It hands the library an OT_SEC_FRAMEWORK payload (docs/FORMAT.md, FRAMEWORK) through ctypes:
- oomtrace_framework_state(payload) at exit, on oomtrace.dump(), and after each optimizer step's record;
- oomtrace_framework_oom(framework, request, device, payload) when a framework refuses an allocation
  (PyTorch's OOM observer, JAX/XLA RESOURCE_EXHAUSTED, CuPy OutOfMemoryError): the fatal snapshot.
Nothing runs per allocation. OOMTRACE_TORCH_STACKS=python turns on PyTorch's own recorder (state only).
"""
import os
import sys
import time
from array import array

LAYOUT_VERSION = 1
INFO, STATS, SETTINGS, SEGMENTS, BLOCKS, ARRAYS, ERROR, BLOCK_FRAMES, ROLES, STEPS = range(1, 11)
ALL_DEVICES = (1 << 32) - 1
ERROR_TEXT_MAX = 4096
STEPS_KEPT = 64
U64 = (1 << 64) - 1
BLOCK_STATES = {"inactive": 0, "active_allocated": 1, "active_pending_free": 2}

_TEST_FAIL = os.environ.get("OOMTRACE_TEST_COMPANION_FAIL", "")  # tests only: inject a failure


def _say(msg):
    """One line on stderr, never raising (stderr may be closed or replaced by the program)."""
    try:
        sys.stderr.write("oomtrace: %s\n" % msg)
        sys.stderr.flush()
    except BaseException:
        pass


# ---- the payload's encoding (docs/FORMAT.md, FRAMEWORK) ----

def put_uv(out, v):
    v = int(v)
    if v < 0:
        v = 0
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def put_sv(out, v):
    v = int(v)
    put_uv(out, (v << 1) if v >= 0 else ((-v) << 1) - 1)


def put_str(out, s, limit=None):
    b = s if isinstance(s, (bytes, bytearray)) else str(s).encode("utf-8", "replace")
    if limit is not None and len(b) > limit:
        b = b[:limit]
    put_uv(out, len(b))
    out += b


def put_u64(out, values):
    """A u64 column: n little-endian uint64, packed."""
    col = array("Q", values)
    if sys.byteorder != "little":
        col.byteswap()
    out += col.tobytes()


def payload(records):
    out = bytearray()
    put_uv(out, LAYOUT_VERSION)
    put_uv(out, len(records))
    for kind, body in records:
        put_uv(out, kind)
        put_uv(out, len(body))
        out += body
    return bytes(out)


def _body(framework, n):
    """A record's body so far: the framework's name and a count."""
    b = bytearray()
    put_str(b, framework)
    put_uv(b, n)
    return b


def rec_info(framework, version, reason, taken_ns, collect_ns):
    b = bytearray()
    put_str(b, framework)
    put_str(b, version)
    put_str(b, reason)
    put_uv(b, taken_ns)
    put_uv(b, collect_ns)
    return (INFO, b)


def rec_stats(framework, device, items):
    b = bytearray()
    put_str(b, framework)
    put_uv(b, ALL_DEVICES if device is None else device)
    put_uv(b, len(items))
    for k, v in items:
        put_str(b, k)
        put_sv(b, v)
    return (STATS, b)


def rec_settings(framework, items):
    b = _body(framework, len(items))
    for k, v in items:
        put_str(b, k)
        put_str(b, v)
    return (SETTINGS, b)


def rec_error(framework, text, device, request):
    b = bytearray()
    put_str(b, framework)
    put_str(b, text, ERROR_TEXT_MAX)
    put_uv(b, device if device is not None and device >= 0 else 0)
    put_uv(b, request or 0)
    return (ERROR, b)


def _mask(v):
    return int(v) & U64


def _pool_id(pid):
    """torch's segment_pool_id (a, b) folded as (a << 32) ^ b; (0, 0) is the default pools."""
    if isinstance(pid, (tuple, list)) and len(pid) == 2:
        return ((int(pid[0]) << 32) ^ int(pid[1])) & U64
    try:
        return _mask(pid or 0)
    except (TypeError, ValueError):
        return 0


def torch_segment_records(segments, with_frames=False):
    """SEGMENTS, BLOCKS (and BLOCK_FRAMES) from torch.cuda.memory._snapshot()'s segments. Columns are
    built one comprehension each and packed with array('Q'): 100k blocks stay well under the 200 ms
    budget (bench/companion_collect.py)."""
    seg_cols = [[] for _ in range(10)]
    per_seg = [s.get("blocks") or () for s in segments]
    first = 0
    for s, blocks in zip(segments, per_seg):
        pool = _pool_id(s.get("segment_pool_id"))
        flags = (1 if s.get("is_expandable") else 0) | (2 if s.get("segment_type") == "large" else 0) | \
            (4 if pool else 0)
        vals = (s.get("device", 0), s.get("address", 0), s.get("total_size", 0), s.get("allocated_size", 0),
                s.get("requested_size", 0), s.get("stream", 0), pool, flags, first, len(blocks))
        for c, v in zip(seg_cols, vals):
            c.append(_mask(v or 0))
        first += len(blocks)
    blocks = [b for bl in per_seg for b in bl]
    b_seg = []
    for i, bl in enumerate(per_seg):
        b_seg.extend([i] * len(bl))
    states = BLOCK_STATES
    state = [states.get(b.get("state"), 0) for b in blocks]
    # A free block keeps the requested size of the tensor that last held it (seen on torch 2.11: 1 GiB
    # requested in a free 424 MiB block): it means nothing there, so it is written as 0.
    requested = [b.get("requested_size", 0) if st else 0 for b, st in zip(blocks, state)]
    cols = ([b["address"] for b in blocks], [b["size"] for b in blocks], requested, state, b_seg)
    seg = _body("torch", len(segments))
    for c in seg_cols:
        put_u64(seg, c)
    blk = _body("torch", len(blocks))
    for c in cols:
        put_u64(blk, c)
    out = [(SEGMENTS, seg), (BLOCKS, blk)]
    if with_frames:
        frames = [(i, b["frames"]) for i, b in enumerate(blocks) if b.get("frames")]
        fb = _body("torch", len(frames))
        for index, fr in frames:
            put_uv(fb, index)
            put_uv(fb, len(fr))
            for f in fr:
                put_str(fb, f.get("filename", ""))
                put_uv(fb, f.get("line", 0) or 0)
                put_str(fb, f.get("name", ""))
        out.append((BLOCK_FRAMES, fb))
    return out


def rec_roles(framework, roles):
    """ROLES from _oomtrace_roles.collect(): (category, label, data_ptr, nbytes), one row per storage."""
    labels, index = [], {}
    addr, size, lab = [], [], []
    seen = set()
    for category, label, ptr, nbytes in roles:
        if ptr in seen:
            continue
        seen.add(ptr)
        key = (int(category), str(label))
        if key not in index:
            index[key] = len(labels)
            labels.append(key)
        addr.append(_mask(ptr))
        size.append(_mask(nbytes))
        lab.append(index[key])
    b = _body(framework, len(labels))
    for category, label in labels:
        put_uv(b, category)
        put_str(b, label)
    put_uv(b, len(addr))
    for c in (addr, size, lab):
        put_u64(b, c)
    return (ROLES, b)


def rec_steps(framework, steps):
    b = _body(framework, len(steps))
    for step, t_ns, allocated, reserved, shapes in steps:
        put_uv(b, step)
        put_uv(b, t_ns)
        put_uv(b, allocated)
        put_uv(b, reserved)
        put_str(b, shapes, 1024)
    return (STEPS, b)


UNITS = {"": 1, "b": 1, "bytes": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
         "kb": 1000, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12}


def _request_from_text(text):
    """The bytes a framework's OOM message says it tried to allocate: CuPy "allocating 1,024 bytes", JAX
    "trying to allocate 1.00GiB" (rounded by JAX to two decimals), PyTorch "Tried to allocate 2.00 GiB";
    0 when the text does not say."""
    import re
    m = re.search(r"allocat\w*\s+([\d][\d,]*(?:\.\d+)?)\s*(bytes|[KMGT]i?B|B)?\b", text, re.I)
    if not m:
        return 0
    try:
        return int(float(m.group(1).replace(",", "")) * UNITS[(m.group(2) or "").lower()])
    except (ValueError, KeyError):
        return 0


def _device_from_text(text):
    import re
    m = re.search(r"\bdevice (\d+)", text)
    return int(m.group(1)) if m else 0


# ---- the frameworks ----

def _initializing(mod):
    """True while the module's own import is still running (sys.modules holds it half-built)."""
    spec = getattr(mod, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


class Torch:
    name = "torch"

    def __init__(self, comp, torch):
        self.comp = comp
        self.torch = torch
        self.observer = False
        self.step_hook = False
        self.stacks = os.environ.get("OOMTRACE_TORCH_STACKS", "") == "python"
        self.steps = []
        self.pending = None  # (request, device, records, text) of the last observer call not yet raised
        self.cuda = getattr(torch, "cuda", None)
        if self.cuda is None or not hasattr(self.cuda, "is_initialized"):
            raise AttributeError("torch.cuda.is_initialized")

    def ready(self):
        """torch has set up CUDA: never initialize it for the program."""
        return bool(self.cuda.is_initialized())

    def attach(self):
        roles = sys.modules.get("_oomtrace_roles")
        if roles is not None and not self.step_hook:
            self.step_hook = True
            roles.install_step_hook(self.torch, self.comp.guard("optimizer step hook", self.on_step))
        # The observer list exists once torch set up CUDA; attaching earlier would be lost.
        if self.observer or not self.ready():
            return
        attach = getattr(self.torch._C, "_cuda_attach_out_of_memory_observer", None)
        if attach is None:
            self.observer = True
            _say("torch %s has no OOM observer; its own OOMs write no snapshot" % self.version())
        else:
            attach(self.comp.guard("torch OOM observer", self.on_oom))
            self.observer = True
            self.comp.watch_exceptions(fallback=False)  # before 3.12 the observer writes by itself
        if self.stacks:
            try:
                self.cuda.memory._record_memory_history(enabled="state", stacks="python")
            except Exception as e:
                _say("OOMTRACE_TORCH_STACKS=python: torch's recorder did not start (%s: %s)" %
                     (type(e).__name__, e))

    def version(self):
        return str(getattr(self.torch, "__version__", ""))

    def on_oom(self, device, alloc, device_allocated, device_free):
        """The observer runs at every refusal, also those PyTorch swallows itself (cuDNN's workspace
        probes). Where the program's exceptions are visible (sys.monitoring, 3.12+) the allocator's state
        is kept here and written when torch's OutOfMemoryError reaches Python code; before 3.12 it is
        written now."""
        text = ("PyTorch's caching allocator refused %d bytes on device %d (device_allocated %d, "
                "device_free %d)" % (alloc, device, device_allocated, device_free))
        if self.comp.sees_raises:
            self.pending = (int(alloc), int(device), self.comp.collect_records("oom"), text)
        else:
            self.comp.framework_oom("torch", int(alloc), int(device), text)

    def is_oom(self, exc):
        t = type(exc)
        return t.__name__ == "OutOfMemoryError" and str(t.__module__).split(".")[0] == "torch"

    def device_of(self, exc):
        return _device_from_text(str(exc))

    def on_step(self, step, input_shapes):
        allocated = reserved = 0
        if self.ready():
            # One C call for both figures: the flattened memory_stats() costs tens of microseconds.
            raw = self.torch._C._cuda_memoryStats(self.cuda.current_device())
            allocated = raw["allocated_bytes"]["all"]["current"]
            reserved = raw["reserved_bytes"]["all"]["current"]
        self.steps.append((int(step), time.monotonic_ns(), allocated, reserved, str(input_shapes)))
        if len(self.steps) > STEPS_KEPT:
            del self.steps[0]
        self.comp.mark(("step %d %s" % (int(step), input_shapes)) if input_shapes else "step %d" % int(step))

    def moment(self):
        """At an OOM, on the thread that raised it: whether autograd was recording (an evaluation run with
        grad on reads as training without it), and the optimizer step under way with the model's inputs,
        where the step hook sees them (the latest STEPS entry is the step before)."""
        stats, settings = [], []
        grad = getattr(self.torch, "is_grad_enabled", None)
        if grad is not None:
            stats.append(("grad_enabled", 1 if grad() else 0))
        roles = sys.modules.get("_oomtrace_roles")
        now = roles.step_in_progress() if roles is not None else None
        if now is not None:
            stats.append(("step_in_progress", int(now[0])))
            if now[1]:
                settings.append(("step_in_progress_input_shapes", str(now[1])))
        return stats, settings

    def collect(self, records, reason=None):
        if reason in ("oom", "driver-oom"):
            stats, settings = self.moment()
            if stats:
                records.append(rec_stats("torch", ALL_DEVICES, stats))
            if settings:
                records.append(rec_settings("torch", settings))
        if self.steps:
            records.append(rec_steps("torch", self.steps))
        roles = sys.modules.get("_oomtrace_roles")
        if roles is not None:
            got = roles.collect(self.torch)
            if got:
                records.append(rec_roles("torch", got))
        if not self.ready():
            return
        cuda = self.cuda
        snap = cuda.memory._snapshot()
        segments = snap.get("segments", []) if isinstance(snap, dict) else list(snap)
        records.extend(torch_segment_records(segments, self.stacks))
        devices = sorted({int(s.get("device", 0)) for s in segments} | {int(cuda.current_device())})
        for d in devices:
            records.append(rec_stats("torch", d, self.stats(d)))
        conf = snap.get("allocator_settings", {}) if isinstance(snap, dict) else {}
        records.append(rec_settings("torch", self.settings(conf, devices)))

    def stats(self, d):
        cuda = self.cuda
        st = cuda.memory_stats(d)
        keys = (("allocated_bytes", "allocated_bytes.all.current"),
                ("allocated_peak_bytes", "allocated_bytes.all.peak"),
                ("reserved_bytes", "reserved_bytes.all.current"),
                ("reserved_peak_bytes", "reserved_bytes.all.peak"),
                ("active_bytes", "active_bytes.all.current"),
                ("inactive_split_bytes", "inactive_split_bytes.all.current"),
                ("num_alloc_retries", "num_alloc_retries"), ("num_ooms", "num_ooms"),
                ("num_device_alloc", "num_device_alloc"), ("num_device_free", "num_device_free"))
        items = [(k, int(st[src])) for k, src in keys if src in st]
        frac = self.fraction(d)
        if frac is not None and frac < 1.0:
            total = cuda.get_device_properties(d).total_memory
            items.append(("memory_fraction_limit_bytes", int(frac * total)))
            items.append(("memory_fraction_ppm", int(round(frac * 1e6))))
        return items

    def fraction(self, d):
        get = getattr(self.cuda, "get_per_process_memory_fraction", None)
        if get is None:
            return None  # older torch: the fraction is not readable back
        return float(get(d))

    def settings(self, conf, devices):
        items = []
        backend = getattr(self.cuda, "get_allocator_backend", None)
        if backend is not None:
            items.append(("backend", str(backend())))
        env = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", os.environ.get("PYTORCH_ALLOC_CONF", ""))
        parsed = {}
        for part in env.split(","):
            if ":" in part:
                k, v = part.split(":", 1)
                parsed[k.strip()] = v.strip()
        for key in ("expandable_segments", "max_split_size", "garbage_collection_threshold"):
            if key in conf:
                items.append((key, str(conf[key])))
            elif key in parsed or key + "_mb" in parsed:
                items.append((key, parsed.get(key, parsed.get(key + "_mb"))))
        items.append(("PYTORCH_CUDA_ALLOC_CONF", str(conf.get("PYTORCH_CUDA_ALLOC_CONF", env))))
        frac = self.fraction(devices[0]) if devices else None
        if frac is not None:
            items.append(("per_process_memory_fraction", repr(frac)))
        return items


class Jax:
    name = "jax"
    error_types = ("XlaRuntimeError", "JaxRuntimeError")

    def __init__(self, comp, jax):
        self.comp = comp
        self.jax = jax

    def ready(self):
        """Only once jax started its backends itself: asking for devices earlier would start them, and
        preallocate most of the GPU for the program."""
        xb = sys.modules.get("jax._src.xla_bridge")
        if xb is None or not hasattr(xb, "_backends"):
            return False
        return bool(xb._backends)

    def attach(self):
        self.comp.watch_exceptions()

    def version(self):
        return str(getattr(self.jax, "__version__", ""))

    def is_oom(self, exc):
        return type(exc).__name__ in self.error_types and "RESOURCE_EXHAUSTED" in str(exc)

    def device_of(self, exc):
        return _device_from_text(str(exc))

    def collect(self, records, reason=None):
        env = os.environ
        pre = env.get("XLA_PYTHON_CLIENT_PREALLOCATE", "")
        alloc = env.get("XLA_PYTHON_CLIENT_ALLOCATOR", "")
        effective = pre.lower() not in ("false", "0") and alloc.lower() != "platform"
        records.append(rec_settings("jax", [
            ("XLA_PYTHON_CLIENT_PREALLOCATE", pre),
            ("XLA_PYTHON_CLIENT_MEM_FRACTION", env.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "")),
            ("XLA_PYTHON_CLIENT_ALLOCATOR", alloc),
            ("preallocate_effective", "true" if effective else "false")]))
        if not self.ready():
            return
        keys = ("bytes_in_use", "peak_bytes_in_use", "bytes_limit", "bytes_reserved",
                "largest_free_block_bytes", "pool_bytes", "num_allocs")
        for d in self.jax.local_devices():
            if getattr(d, "platform", "") not in ("gpu", "cuda", "rocm"):
                continue
            st = d.memory_stats() or {}
            records.append(rec_stats("jax", int(d.id), [(k, int(st[k])) for k in keys if k in st]))
        groups = {}
        for a in self.jax.live_arrays():
            try:
                dev = int(next(iter(a.devices())).id)
            except Exception:
                dev = 0
            key = (str(a.dtype), str(tuple(a.shape)), dev)
            g = groups.get(key)
            if g is None:
                groups[key] = g = [0, 0]
            g[0] += 1
            g[1] += int(a.nbytes)
        b = _body("jax", len(groups))
        for (dtype, shape, dev), (count, nbytes) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
            put_str(b, dtype)
            put_str(b, shape)
            put_uv(b, dev)
            put_uv(b, count)
            put_uv(b, nbytes)
        records.append((ARRAYS, b))


class Cupy:
    name = "cupy"
    error_types = ("OutOfMemoryError",)

    def __init__(self, comp, cupy):
        self.comp = comp
        self.cupy = cupy

    def ready(self):
        return hasattr(self.cupy, "get_default_memory_pool")

    def attach(self):
        self.comp.watch_exceptions()

    def version(self):
        return str(getattr(self.cupy, "__version__", ""))

    def is_oom(self, exc):
        t = type(exc)
        return t.__name__ in self.error_types and t.__module__.startswith("cupy")

    def device_of(self, exc):
        return int(self.cupy.cuda.runtime.getDevice())

    def collect(self, records, reason=None):
        pool = self.cupy.get_default_memory_pool()
        dev = int(self.cupy.cuda.runtime.getDevice())
        items = [("pool_used_bytes", int(pool.used_bytes())), ("pool_total_bytes", int(pool.total_bytes())),
                 ("pool_free_bytes", int(pool.free_bytes()))]
        pinned = self.cupy.get_default_pinned_memory_pool()
        items.append(("pinned_pool_free_blocks", int(pinned.n_free_blocks())))
        records.append(rec_stats("cupy", dev, items))


FRAMEWORKS = (("torch", Torch), ("jax", Jax), ("cupy", Cupy))


class Companion:
    def __init__(self):
        import ctypes
        lib = ctypes.CDLL(None)
        self.state_fn = lib.oomtrace_framework_state
        self.state_fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        self.state_fn.restype = ctypes.c_int
        self.oom_fn = lib.oomtrace_framework_oom
        self.oom_fn.argtypes = [ctypes.c_char_p, ctypes.c_ulonglong, ctypes.c_int, ctypes.c_char_p,
                                ctypes.c_size_t]
        self.oom_fn.restype = ctypes.c_int
        self.mark_fn = lib.oomtrace_mark
        self.mark_fn.argtypes = [ctypes.c_char_p]
        self.mark_fn.restype = ctypes.c_int
        self.attached = {}  # name -> adapter
        self.given_up = set()
        self.collect_failed = set()
        self.watching = False
        self.sees_raises = False  # sys.monitoring RAISE events: exceptions the program catches are seen too
        self.recent = []  # (id, text, t) of framework OOM exceptions already written
        self.in_oom = False

    # -- safety --
    def guard(self, what, fn):
        """fn as a callback that never raises: the first failure says one line, later ones are silent."""
        said = []

        def guarded(*args):
            try:
                return fn(*args)
            except BaseException as e:
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                if not said:
                    said.append(1)
                    _say("%s failed (%s: %s); the program continues" % (what, type(e).__name__, e))
                return None
        return guarded

    # -- frameworks imported so far --
    def scan(self):
        for name, cls in FRAMEWORKS:
            if name in self.attached or name in self.given_up:
                continue
            mod = sys.modules.get(name)
            if mod is None or _initializing(mod):
                continue
            try:
                adapter = self.attached.get(name) or cls(self, mod)
                adapter.attach()
                self.attached[name] = adapter
            except Exception as e:
                self.given_up.add(name)
                _say("%s %s: API not as expected (%s: %s); its allocator is not recorded" %
                     (name, getattr(mod, "__version__", "?"), type(e).__name__, e))
        torch = self.attached.get("torch")
        if torch is not None and not torch.observer:
            try:
                torch.attach()
            except Exception as e:
                self.given_up.add("torch")
                del self.attached["torch"]
                _say("torch: OOM observer not attached (%s: %s)" % (type(e).__name__, e))

    # -- collection --
    def collect(self, reason, extra=()):
        return payload(self.collect_records(reason) + list(extra))

    def collect_records(self, reason):
        records = []
        for name, adapter in list(self.attached.items()):
            t0 = time.monotonic_ns()
            recs = []
            try:
                if _TEST_FAIL == "collect":
                    raise RuntimeError("oomtrace test: collection fails")
                adapter.collect(recs, reason)
            except Exception as e:
                if name not in self.collect_failed:  # said once; later snapshots lack it the same way
                    self.collect_failed.add(name)
                    _say("%s: collecting the allocator's state failed (%s: %s); snapshots lack it" %
                         (name, type(e).__name__, e))
                recs = []
            t1 = time.monotonic_ns()
            records.append(rec_info(name, adapter.version(), reason, t0, t1 - t0))
            records.extend(recs)
        return records

    def refresh(self, reason):
        self.scan()
        if self.attached:
            self.state_fn(*self._buf(self.collect(reason)))

    @staticmethod
    def _buf(p):
        return p, len(p)

    def framework_oom(self, framework, request, device, text, records=None):
        if self.in_oom:
            return
        self.in_oom = True
        try:
            self.scan()
            if records is None:
                records = self.collect_records("oom")
            p = payload(records + [rec_error(framework, text, device, request)])
            self.oom_fn(framework.encode(), request, device, p, len(p))
        finally:
            self.in_oom = False

    def mark(self, label):
        self.mark_fn(label.encode("utf-8", "replace")[:255])

    # -- JAX's and CuPy's OOMs are exceptions --
    def watch_exceptions(self, fallback=True):
        """RAISE events where sys.monitoring exists (3.12+); else, when fallback, the uncaught ones through
        sys.excepthook and threading.excepthook, chained to the program's own."""
        mon = getattr(sys, "monitoring", None)
        if self.watching or (mon is None and not fallback):
            return
        self.watching = True
        if mon is not None:
            for tool in (4, 3, 5, 2, 1, 0):
                if mon.get_tool(tool) is None:
                    mon.use_tool_id(tool, "oomtrace")
                    mon.register_callback(tool, mon.events.RAISE, self.on_raise)
                    mon.set_events(tool, mon.get_events(tool) | mon.events.RAISE)
                    self.sees_raises = True
                    return
            _say("sys.monitoring has no free tool id; JAX/CuPy OOMs are seen only when uncaught")
        import threading
        prev_hook = sys.excepthook
        prev_thread_hook = threading.excepthook

        def excepthook(t, v, tb):
            self.on_exception(v)
            prev_hook(t, v, tb)

        def thread_hook(args):
            self.on_exception(args.exc_value)
            prev_thread_hook(args)
        sys.excepthook = excepthook
        threading.excepthook = thread_hook

    def on_raise(self, code, offset, exc):
        # Every raise in the program comes here: the type's name first, the rest only for an OOM.
        n = type(exc).__name__
        if n != "XlaRuntimeError" and n != "JaxRuntimeError" and n != "OutOfMemoryError":
            return
        self.on_exception(exc)

    def on_exception(self, exc):
        try:
            for name in ("torch", "jax", "cupy"):
                a = self.attached.get(name)
                if a is None or not a.is_oom(exc):
                    continue
                if name == "torch" and not self.sees_raises:
                    return  # its observer wrote the snapshot already
                text = str(exc)
                now = time.monotonic()
                # The same exception passes each frame it unwinds; JAX's wrapper re-raises its text.
                self.recent = [r for r in self.recent if now - r[2] < 2.0]
                if any(r[0] == id(exc) or (name == "jax" and r[1] == text) for r in self.recent):
                    return
                self.recent.append((id(exc), text, now))
                if name == "torch":
                    pending, a.pending = a.pending, None
                    if pending is not None:
                        request, device, records, _ = pending
                        self.framework_oom("torch", request, device, text, records)
                    else:
                        self.framework_oom("torch", _request_from_text(text), a.device_of(exc), text)
                    return
                self.framework_oom(name, _request_from_text(text), a.device_of(exc), text)
                return
        except Exception as e:
            _say("framework OOM not recorded (%s: %s)" % (type(e).__name__, e))


_companion = None


def _start(arg=0):
    """Called once by liboomtrace.so at a pending call in the main thread."""
    global _companion
    if _TEST_FAIL == "start":
        raise RuntimeError("oomtrace test: the companion fails to start")
    try:
        _companion = Companion()
        import atexit
        atexit.register(_at_exit)
        _companion.scan()
    except Exception as e:
        _companion = None
        _say("the framework companion did not start (%s: %s)" % (type(e).__name__, e))


def _poke(why=0):
    """Called by liboomtrace.so at later device allocations (at most once a second) and driver OOMs:
    attaches to frameworks imported since."""
    if _companion is None:
        return
    try:
        _companion.scan()
    except Exception as e:
        _say("framework scan failed (%s: %s)" % (type(e).__name__, e))


def _at_exit():
    # Python's exit handlers run before the C ones, so the library's exit snapshot gets this state.
    if "exit" in os.environ.get("OOMTRACE_DUMP", ""):
        refresh("exit")


def refresh(reason="api"):
    """Hands the library fresh framework state now (oomtrace.dump() calls this first)."""
    if _companion is None:
        return False
    try:
        _companion.refresh(reason)
        return True
    except Exception as e:
        _say("framework state not recorded (%s: %s)" % (type(e).__name__, e))
        return False
