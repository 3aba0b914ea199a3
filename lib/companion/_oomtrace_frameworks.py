"""oomtrace's Python companion: what PyTorch, JAX and CuPy hold, read through their public APIs.

Part of the companion embedded in liboomtrace.so (registered as the module `_oomtrace_frameworks`, after
_oomtrace_payload): one adapter per framework, which the companion (_oomtrace_companion) attaches to once
the program has imported the framework. An adapter never imports its framework, never initializes CUDA for
the program, and collects the allocator's state as FRAMEWORK records (_oomtrace_payload) when the
companion asks; its OOM hooks hand the companion a framework's refusal.
"""
import collections
import os
import sys
import time

from _oomtrace_payload import (ALL_DEVICES, STEPS_KEPT, _say, rec_arrays, rec_roles, rec_settings, rec_stats,
                               rec_steps, torch_segment_records)

UNITS = {"": 1, "b": 1, "bytes": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
         "kb": 1000, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12}


def _request_from_text(text):
    """The bytes a framework's OOM message says it tried to allocate: CuPy "allocating 1,024 bytes", JAX
    "trying to allocate 1.00GiB" (rounded by JAX to two decimals), PyTorch "Tried to allocate 2.00 GiB", and
    PyTorch's cudaMallocAsync backend "Requested               : 8.00 GiB" (its only way to say it: that
    backend has no OOM observer); 0 when the text does not say."""
    import re
    m = re.search(r"(?:allocat\w*\s+|\brequested\s*:\s*)([\d][\d,]*(?:\.\d+)?)\s*(bytes|[KMGT]i?B|B)?\b", text,
                  re.I)
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


# A read of PyTorch's allocator counters (torch._C._cuda_memoryStats builds a dict of every counter) costs
# ~20 us on the H200 when timed alone, ~50 us inside a training step (docs/validation.md, runs 17 and 20).
# on_step reads them only once the time since the last read is at least READ_SPACING times what a read
# costs (the least seen), so that they take about 1/READ_SPACING of the program's time whatever the step's
# length (2-3 times that counted in-step): a step of 0.2 s or more reads at every step, a 4 ms step about
# every 70th. The other steps' STEPS entries carry 0 and 0 (docs/FORMAT.md, STEPS); the only statement
# that uses the figures names the step they come from. At 1000 (before), the reads of a 4 ms step took
# ~0.15% of it: half of what "no measurable cost" allows (tests/gpu/bench_step_hooks.py, runs 22-24).
READ_SPACING = 10000
# Before torch sets CUDA up there is nothing to read: on_step asks again after this long (and the step's
# common path, in C, runs meanwhile).
UNREADY_RECHECK_NS = 1000000000


def _step_number(entry):
    return entry[0]


class Sampled:
    """When a costly read may run again: `due` is the clock (ns) from which it may; read(fn) runs fn
    and moves `due` READ_SPACING times the least cost seen so far past its end (the least: one read
    stalled by the scheduler must not silence the next ones for seconds)."""

    def __init__(self, spacing=READ_SPACING, clock=time.monotonic_ns):
        self.spacing = spacing
        self.clock = clock
        self.due = 0
        self.cost = None
        self.reads = 0

    def read(self, fn):
        start = self.clock()
        try:
            return fn()
        finally:
            end = self.clock()
            cost = max(end - start, 1)
            if self.cost is None or cost < self.cost:
                self.cost = cost
            self.due = end + self.cost * self.spacing
            self.reads += 1


class WatchedSampled(Sampled):
    """Sampled whose `due` calls watch() when set: the step hook in C keeps a copy of it
    (lib/runtime/companion_step.c, load)."""
    watch = None

    @property
    def due(self):
        return self._due

    @due.setter
    def due(self, value):
        self._due = value
        if self.watch is not None:
            self.watch()


class Torch:
    name = "torch"

    def __init__(self, comp, torch):
        self.comp = comp
        self.torch = torch
        self.observer = False
        self.step_hook = False
        self.stacks = os.environ.get("OOMTRACE_TORCH_STACKS", "") == "python"
        self.steps = collections.deque(maxlen=STEPS_KEPT)
        self.c_entries = None  # the step hook in C: entries() -> its ring's STEPS entries (common steps)
        # The latest entry with sampled inputs and the latest with counters: the statements name them, and a
        # sample once a second is ~250 steps of 4 ms, past what `steps` keeps (on_step keeps them: the C
        # path leaves both kinds of step to it).
        self.last_sampled = self.last_read = None
        self.pending = None  # (request, device, records, text) of the last observer call not yet raised
        self.raises_seen = False  # its OutOfMemoryError is seen where it reaches Python, caught or not
        self.observer_attached = False
        self.queued = False  # attach_observer is queued for torch's CUDA setup
        self.cuda_ready = False
        # when on_step next reads the allocator's counters
        self.counters = WatchedSampled() if getattr(comp, "step_hook", None) is not None else Sampled()
        self.labels = {}  # input shapes -> the marker label's tail, encoded
        self.step_failed = False  # on_step said its failure once
        self.backend_name = None  # the allocator's backend, once asked (backend())
        self.mark = comp.mark_fn
        self.cuda = getattr(torch, "cuda", None)
        if self.cuda is None or not hasattr(self.cuda, "is_initialized"):
            raise AttributeError("torch.cuda.is_initialized")

    def ready(self):
        """torch has set up CUDA: never initialize it for the program. Once set up it stays so: asked at
        every step, the answer is kept."""
        if not self.cuda_ready:
            self.cuda_ready = bool(self.cuda.is_initialized())
        return self.cuda_ready

    def attach(self):
        steps = sys.modules.get("_oomtrace_steps")
        if steps is not None and not self.step_hook:
            self.step_hook = True
            steps.install_step_hook(self.torch, self.on_step, self.step_fast(), self.step_hook_c())
        if self.observer:
            return
        # The observer list exists once torch set up CUDA; attaching earlier would be lost. Before that,
        # torch's own queue of calls made when CUDA is set up (torch.cuda._queued_calls, what its manual_seed
        # uses) attaches it: after torch's CUDA init and before the allocation that set CUDA up runs, so
        # that a program whose first allocation fails, or is refused inside the pool (a memory fraction), is
        # seen. Waiting for the next scan instead missed those: they come at most once a second.
        if not self.ready():
            self.attach_at_init()
            return
        self.attach_observer()

    def attach_at_init(self):
        """Appends to the queue itself, never through torch.cuda._lazy_call: that takes torch's CUDA
        initialization lock (torch 2.x), which torch holds when this runs from the companion's pending call
        right after torch._C._cuda_init() (the runtime's driver lookups start the companion there), and the
        program hung (run 38 on the H200). A list append takes no lock. The queue's entries are (callable,
        the caller's stack lines), which torch prints only when the callable raises; this one never does:
        an exception there would fail the program's CUDA setup."""
        if self.queued:
            return
        self.queued = True
        queue = getattr(self.cuda, "_queued_calls", None)
        if isinstance(queue, list) and all(isinstance(q, tuple) and len(q) == 2 for q in queue):
            queue.append((self.comp.guard("torch OOM observer at CUDA setup", self.at_cuda_init),
                          ["oomtrace: torch's OOM observer, attached when CUDA is set up\n"]))

    def at_cuda_init(self):
        # torch.cuda.is_initialized() is still False in its queued calls, though its allocator is set up.
        if not self.observer and self.comp.attached.get("torch") is self:
            self.attach_observer()

    def attach_observer(self):
        attach = getattr(self.torch._C, "_cuda_attach_out_of_memory_observer", None)
        self.observer = True  # tried once
        why = "torch %s has no OOM observer" % self.version()
        if attach is not None:
            try:
                attach(self.comp.guard("torch OOM observer", self.on_oom))
                self.observer_attached = True
            except Exception as e:  # cudaMallocAsync: "does not yet support attachOutOfMemoryObserver"
                why = "torch's OOM observer is not available (%s: %s)" % (type(e).__name__, e)
        # Where the OutOfMemoryError cannot be seen, the observer writes by itself; without an observer,
        # the uncaught ones at least are seen.
        self.raises_seen = bool(self.comp.watch_exceptions(fallback=not self.observer_attached,
                                                           classes=self.oom_classes()))
        if not self.observer_attached:
            _say("%s; %s" % (why, "its OOMs are recorded where they reach Python, with the allocator's state then"
                             if self.raises_seen else "only its uncaught OOMs are recorded"))
        if self.stacks:
            try:
                self.cuda.memory._record_memory_history(enabled="state", stacks="python")
            except Exception as e:
                _say("OOMTRACE_TORCH_STACKS=python: torch's recorder did not start (%s: %s)" %
                     (type(e).__name__, e))

    def version(self):
        return str(getattr(self.torch, "__version__", ""))

    def step_fast(self):
        """make(hook) -> on_step's common path as one C call, fast(step, shapes) -> bool
        (lib/runtime/companion_step.c): the same STEPS entry and marker, False (having done nothing) when
        the counters are due or the step hook is (its `due`: the next sample). None without the library's
        builtin (the companion run from its source)."""
        make = getattr(self.comp, "step_fast", None)
        if make is None:
            return None

        def fast(hook):
            try:
                return make(self.steps.append, self.counters, hook)
            except Exception:
                return None
        return fast

    def step_hook_c(self):
        """make(hook) -> the step hook's post hook itself in C (lib/runtime/companion_step.c, _step_hook),
        None without the library's builtin."""
        make = getattr(self.comp, "step_hook", None)
        if make is None:
            return None

        def c_hook(hook):
            try:
                made = make(hook, self.counters)
                if isinstance(made, tuple) and len(made) == 4:
                    self.c_entries = made[3]
                    self.counters.watch = made[1]
                return made
            except Exception:
                return None
        return c_hook

    def oom_classes(self):
        return [c for c in (getattr(self.torch, "OutOfMemoryError", None),
                            getattr(self.cuda, "OutOfMemoryError", None)) if c is not None]

    def on_oom(self, device, alloc, device_allocated, device_free):
        """The observer runs at every refusal, also those PyTorch swallows itself (cuDNN's workspace
        probes). Where torch's OutOfMemoryError is seen reaching Python code (sys.monitoring from 3.12,
        its creation before: Companion.watch_exceptions) the allocator's state is kept here and written
        then; where it cannot be seen, it is written now."""
        text = ("PyTorch's caching allocator refused %d bytes on device %d (device_allocated %d, "
                "device_free %d)" % (alloc, device, device_allocated, device_free))
        if self.comp.sees_raises or self.raises_seen:
            self.pending = (int(alloc), int(device), self.comp.collect_records("oom"), text)
        else:
            self.comp.framework_oom("torch", int(alloc), int(device), text)

    def is_oom(self, exc):
        t = type(exc)
        return t.__name__ == "OutOfMemoryError" and str(t.__module__).split(".")[0] == "torch"

    def device_of(self, exc):
        return _device_from_text(str(exc))

    def on_step(self, step, input_shapes):
        """After each optimizer step (the step hook's post_step: step an int, input_shapes a str), where the
        C path (step_fast) did not do it: the counters are due, or there is no C path. It never raises: the
        first failure says one line, later steps still try."""
        try:
            counters = self.counters
            now = counters.clock()
            allocated = reserved = 0
            read = False
            if now >= counters.due:
                if self.ready():
                    raw = counters.read(self.memory_stats)
                    allocated = raw["allocated_bytes"]["all"]["current"]
                    reserved = raw["reserved_bytes"]["all"]["current"]
                    read = True
                else:
                    counters.due = now + UNREADY_RECHECK_NS
            entry = (step, now, allocated, reserved, input_shapes)
            self.steps.append(entry)
            if input_shapes:
                self.last_sampled = entry
            if read:
                self.last_read = entry
            label = self.labels.get(input_shapes)
            if label is None:
                if len(self.labels) > 64:  # shapes that change every step: keep the cache small
                    self.labels.clear()
                label = self.labels[input_shapes] = (" " + input_shapes if input_shapes else "").encode("utf-8", "replace")
            self.mark(b"step %d" % step + label)  # oomtrace_mark cuts it at a character's boundary
        except Exception as e:
            if not self.step_failed:
                self.step_failed = True
                _say("optimizer step hook failed (%s: %s); the program continues" % (type(e).__name__, e))

    def step_record(self):
        """The STEPS entries: the last STEPS_KEPT steps (the C hook's ring of common steps and on_step's deque
        of the others, merged by step), and before them the latest step with sampled inputs and the latest
        with counters, where those are older."""
        kept = list(self.steps)
        entries = self.c_entries
        if entries is not None:
            kept = sorted(entries() + kept, key=_step_number)[-STEPS_KEPT:]
        first = kept[0][0] if kept else None
        older = {e[0]: e for e in (self.last_read, self.last_sampled) if e is not None and (first is None or e[0] < first)}
        return [older[k] for k in sorted(older)] + kept

    def memory_stats(self):
        # One C call for both figures: the flattened memory_stats() costs tens of microseconds more.
        return self.torch._C._cuda_memoryStats(self.cuda.current_device())

    def moment(self):
        """At an OOM, on the thread that raised it: whether autograd was recording (an evaluation run with
        grad on reads as training without it), and the optimizer step under way with the model's inputs,
        where the step hook sees them (the latest STEPS entry is the step before)."""
        stats, settings = [], []
        grad = getattr(self.torch, "is_grad_enabled", None)
        if grad is not None:
            stats.append(("grad_enabled", 1 if grad() else 0))
        steps = sys.modules.get("_oomtrace_steps")
        now = steps.step_in_progress() if steps is not None else None
        if now is not None:
            stats.append(("step_in_progress", int(now[0])))
            if now[1]:
                settings.append(("step_in_progress_input_shapes", str(now[1])))
        return stats, settings

    def collect(self, records, reason=None):
        roles = sys.modules.get("_oomtrace_roles")
        got = roles.collect(self.torch) if roles is not None else None
        if reason in ("oom", "driver-oom"):
            stats, settings = self.moment()
            training = getattr(roles, "training_optimizers", None)
            if training is not None:
                stats.append(("optimizers", int(training)))
            if stats:
                records.append(rec_stats("torch", ALL_DEVICES, stats))
            if settings:
                records.append(rec_settings("torch", settings))
        kept = self.step_record()
        if kept:
            records.append(rec_steps("torch", kept))
        # Empty, the roles say the scan found no model's tensor on the GPU (the reader then counts PyTorch's
        # tensors as the program's own): said only once torch has set up CUDA, before which it could hold none.
        if got or (got is not None and self.ready()):
            records.append(rec_roles("torch", got))
        if not self.ready():
            return
        cuda = self.cuda
        segments, conf = [], {}
        # The cudaMallocAsync backend keeps no blocks: its _snapshot() raises ("not meaningful"), its counters
        # and settings still read.
        if self.backend() != "cudaMallocAsync":
            snap = cuda.memory._snapshot()
            segments = snap.get("segments", []) if isinstance(snap, dict) else list(snap)
            records.extend(torch_segment_records(segments, self.stacks))
            conf = snap.get("allocator_settings", {}) if isinstance(snap, dict) else {}
        devices = sorted({int(s.get("device", 0)) for s in segments} | {int(cuda.current_device())})
        for d in devices:
            records.append(rec_stats("torch", d, self.stats(d)))
        records.append(rec_settings("torch", self.settings(conf, devices)))

    def backend(self):
        """The allocator's backend ("native", "cudaMallocAsync"; "" where torch does not say): set once,
        before the first allocation, so it is asked once."""
        if self.backend_name is None:
            get = getattr(self.cuda, "get_allocator_backend", None)
            self.backend_name = str(get()) if get is not None else ""
        return self.backend_name

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
        try:
            frac = float(get(d))
        except RuntimeError:  # a backend that does not keep it (torch's TORCH_CHECK): the counters still count
            return None
        # cudaMallocAsync answers ~1.2e8 when no fraction was set (torch 2.11, run 39): no fraction at all.
        return frac if 0.0 < frac <= 1.0 else None

    def settings(self, conf, devices):
        items = []
        if self.backend():
            items.append(("backend", self.backend()))
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
        self.comp.watch_exceptions(classes=self.oom_classes())

    def oom_classes(self):
        found = []
        for mod in (getattr(self.jax, "errors", None), sys.modules.get("jaxlib.xla_extension"),
                    sys.modules.get("jax._src.lib")):
            for n in self.error_types:
                c = getattr(mod, n, None) if mod is not None else None
                if c is not None and c not in found:
                    found.append(c)
        return found

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
        records.append(rec_arrays("jax", sorted(groups.items(), key=lambda kv: -kv[1][1])))


class Cupy:
    name = "cupy"
    error_types = ("OutOfMemoryError",)

    def __init__(self, comp, cupy):
        self.comp = comp
        self.cupy = cupy

    def ready(self):
        return hasattr(self.cupy, "get_default_memory_pool")

    def attach(self):
        self.comp.watch_exceptions(classes=self.oom_classes())

    def oom_classes(self):
        memory = getattr(getattr(self.cupy, "cuda", None), "memory", None)
        c = getattr(memory, "OutOfMemoryError", None)
        return [c] if c is not None else []

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
