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

The companion's parts, each a module of its own (Makefile, COMPANION_PY, gives their load order):
_oomtrace_payload (the payload's encoding), _oomtrace_frameworks (one adapter per framework: what its
allocator holds, its OOM hooks), _oomtrace_roles (parameters, gradients, optimizer state; the step hook),
and this one: the entry points the library calls, attaching to frameworks as they are imported, watching
for their OOM exceptions, and handing payloads to the library.
"""
import os
import sys
import time

from _oomtrace_frameworks import FRAMEWORKS, _initializing, _request_from_text
from _oomtrace_payload import _say, payload, rec_error, rec_info

_TEST_FAIL = os.environ.get("OOMTRACE_TEST_COMPANION_FAIL", "")  # tests only: inject a failure


def _bind(name, argtypes, keep_gil=False):
    """The library's entry point `name` through ctypes. A CDLL function releases the GIL for the call and
    takes it back after: where another Python thread waits for the GIL (a DataLoader's pin-memory thread, a
    progress bar's), taking it back can wait for that thread's switch interval (5 ms). keep_gil (PyDLL) is
    for a short call that never waits on Python: the step marker takes only the library's lock for a copy
    (tests/gpu/bench_step_hooks.py times both with a busy Python thread)."""
    import ctypes
    f = getattr(ctypes.PyDLL(None) if keep_gil else ctypes.CDLL(None), name)
    f.argtypes = argtypes
    f.restype = ctypes.c_int
    return f


class Companion:
    def __init__(self):
        import ctypes
        # Snapshots are written with the GIL released: they take long, and may wait on the library's lock.
        self.state_fn = _bind("oomtrace_framework_state", [ctypes.c_char_p, ctypes.c_size_t])
        self.oom_fn = _bind("oomtrace_framework_oom", [ctypes.c_char_p, ctypes.c_ulonglong, ctypes.c_int,
                                                       ctypes.c_char_p, ctypes.c_size_t])
        # At every optimizer step: the library's builtin (lib/runtime/companion.c puts it in this module
        # before _start), else ctypes keeping the GIL.
        mark = globals().get("_mark")
        self.mark_fn = mark if mark is not None else _bind("oomtrace_mark", [ctypes.c_char_p], keep_gil=True)
        # The step's STEPS entry and marker in one C call (lib/runtime/companion_step.c); None: Python's path.
        self.step_fast = globals().get("_step_fast")
        self.step_hook = globals().get("_step_hook")  # the step hook itself in C
        self.attached = {}  # name -> adapter
        self.given_up = set()
        self.collect_failed = set()
        self.watching = False
        self.sees_raises = False  # sys.monitoring RAISE events: exceptions the program catches are seen too
        self.created = set()      # before 3.12: OOM exception classes whose creation is watched
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
                # What was collected before the failure stays: an adapter records the moment of an OOM (the
                # step under way, its inputs) before the allocator's state, which may fail by itself.
                if name not in self.collect_failed:  # said once; later snapshots lack it the same way
                    self.collect_failed.add(name)
                    _say("%s: collecting the allocator's state failed (%s: %s); snapshots lack what was not "
                         "collected before it" % (name, type(e).__name__, e))
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

    # -- JAX's and CuPy's OOMs are exceptions --
    def watch_exceptions(self, fallback=True, classes=()):
        """Where a framework's OOM exception becomes visible. First the creation of the given exception
        classes (watch_created), on every Python: each one the program raises, caught or not, and nothing
        else of the program pays for it. Where a class is missing or refuses the wrapper, from 3.12
        sys.monitoring's RAISE events: every raise of the program, caught or not, calls the companion
        (about 3 a step in a PyTorch 2 training step; what they cost a step is measured by
        tests/gpu/bench_step_hooks.py, piece "raise"). Before 3.12, and when fallback, the uncaught ones
        through sys.excepthook and threading.excepthook, chained to the program's own. True when the
        classes' raises are seen, caught or not."""
        if classes:
            wrapped = [self.watch_created(cls) for cls in classes]
            if all(wrapped):
                return True
        if self.sees_raises or self.watch_raises():
            return True
        if fallback and not getattr(self, "uncaught", False):
            self.uncaught = True
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
        return False

    def watch_raises(self):
        """sys.monitoring's RAISE events (3.12+) for on_raise, on tool id 4 or 3, whichever is free; True
        when on. Never one of the ids Python names (0 debugger, 1 coverage, 2 profiler, 5 optimizer): a
        coverage run or a debugger started after the companion takes its own id, and would get ValueError
        (helper-91 #9). With both taken, only uncaught OOMs are seen (the fallback)."""
        mon = getattr(sys, "monitoring", None)
        if mon is None or self.watching:
            return self.sees_raises
        self.watching = True
        for tool in (4, 3):
            if mon.get_tool(tool) is None:
                mon.use_tool_id(tool, "oomtrace")
                mon.register_callback(tool, mon.events.RAISE, self.on_raise)
                mon.set_events(tool, mon.get_events(tool) | mon.events.RAISE)
                self.sees_raises = True
                return True
        _say("sys.monitoring's tool ids 3 and 4 are taken; framework OOMs are seen only when uncaught")
        return False

    def watch_created(self, cls):
        """Before 3.12 no event says that an exception was raised, but its creation does: an OOM raised
        from C (PyTorch, XLA) becomes an exception object only where Python code handles it, caught or not,
        and never where the framework swallows it in C++ (cuDNN's workspace probes, PyTorch's retries);
        CuPy creates its own where it raises. The class's __init__ is wrapped: the original runs first, and
        the companion's part never raises. False when the class refuses the attribute."""
        if cls in self.created:
            return True
        if not isinstance(cls, type) or not issubclass(cls, BaseException):
            return False
        init, comp = cls.__init__, self

        def __init__(exc, *args, **kwargs):
            init(exc, *args, **kwargs)
            try:
                comp.on_exception(exc)
            except Exception:
                pass
        __init__.__wrapped__ = init
        try:
            cls.__init__ = __init__
        except (TypeError, AttributeError):
            return False
        self.created.add(cls)
        return True

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
                if name == "torch" and a.observer_attached and not (self.sees_raises or a.raises_seen):
                    return  # its observer wrote the snapshot already
                text = str(exc)
                now = time.monotonic()
                # The same exception passes each frame it unwinds; JAX's wrapper re-raises its text. An id
                # alone is not the same exception: a freed one's id comes back.
                self.recent = [r for r in self.recent if now - r[2] < 2.0]
                if any(r[1] == text and (r[0] == id(exc) or name == "jax") for r in self.recent):
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
