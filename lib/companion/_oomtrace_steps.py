"""The optimizer steps of a PyTorch program: their count, a marker each, and the model's inputs, sampled.

Part of the companion embedded in liboomtrace.so (registered as the module `_oomtrace_steps`, after
_oomtrace_roles). The torch adapter (_oomtrace_frameworks) calls `install_step_hook(torch, on_step,
make_fast)` once torch is imported, and `step_in_progress()` at an OOM.

What runs at every step is one callback: torch's global optimizer-step post hook (torch >= 2.0), a function of
the library (lib/runtime/companion_step.c) that counts the step, keeps its STEPS entry in a C ring and writes
its marker, with no Python code run and no Python object made; the steps it leaves to Python are the first,
the sampled ones and those whose counters are read.
Nothing is added to the model: no hook in its own hook dicts, so a copy or a pickle of it
(copy.deepcopy(model), torch.save(model)) is exactly what it is untraced, and its calls keep torch's fast
path. The model's inputs are read where they are free:
- at the failure, from the failing thread's frames: the outermost module's call (torch's `_call_impl` /
  `_wrapped_call_impl`, whose `*args` and `**kwargs` are the inputs), or the frame that called it, whose
  locals still hold them while `loss.backward()` or `optimizer.step()` runs. A failure on autograd's device
  thread reads the frames of the Python thread that waits in `backward`;
- at a sampled step: after a step, at most every SAMPLE_SPACING_NS, a global forward pre hook (torch's
  global table, `register_module_forward_pre_hook`) is armed, and removed at the next module call, which
  is the model's outermost module when it starts the next step. Armed for one call it costs ~20 us hot,
  63-85 us right after a step (H200, runs 27-29): ~0.008% of the time at this spacing, against the ~12 us
  a step of a hook on the model. Only the sampled steps' STEPS entries and markers carry shapes; the reader names
  the latest one ("where step 2 had ...").
Nothing here may raise into the program: every entry point catches everything, says one line, steps aside.
"""
import gc
import sys
import time
import weakref

from _oomtrace_roles import _optimizers, _warn

# The step hook remembers at most this many characters of the outermost module's input shapes.
_SHAPES_MAX = 200
# The sampled forward pre hook is armed at most this often (monotonic ns).
# Once a second, not every 100 ms (until 2026-12-02): a sample costs 63-85 us right after a step on the H200
# (runs 28-29: +2.3 to +3.9 us a 4 ms step, a fifth of what "no measurable cost" allows); the statement
# compares the failing step's inputs with one earlier step's, which a second-old sample serves as well.
SAMPLE_SPACING_NS = 1000 * 1000 * 1000
_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08
# What the C hook's common path depends on (lib/runtime/companion_step.c, load()): whenever one is set, the
# hook's state in C is read again.
_C_STATE = frozenset(("off", "broken", "watched", "primary", "seen", "due"))


def _shape_text(args, kwargs, torch):
    parts = []
    for a in args:
        if isinstance(a, torch.Tensor):
            parts.append(str(tuple(a.shape)))
    for k, a in kwargs.items():
        if isinstance(a, torch.Tensor):
            parts.append("%s=%s" % (k, tuple(a.shape)))
    return ", ".join(parts)[:_SHAPES_MAX]


# A function's frame.f_locals before 3.13 is a snapshot of its locals that the frame keeps (in its f_locals
# field) until it returns, refreshed only by the next read: read in a training loop's frame, it held the
# loop's tensors after the program let them go (H200, train_oom: a step's input ids; a previous step's
# logits would be gigabytes), which an untraced run frees. So where the read made the snapshot (the field
# was empty), the snapshot is emptied once read. Where the program made one (d = locals(), or a debugger's
# trace function, whose writes to it go back to the frame when it returns), the read refreshes that very
# dict from the frame: its contents as they were are put back once read. The field's place: (offset in the
# frame object, offset in the interpreter's frame it points to, or None), checked once on a frame of ours;
# unchecked, no function frame's locals are read.
_CO_OPTIMIZED = 0x01
_LOCALS_FIELD = {(3, 9): (56, None), (3, 10): (56, None), (3, 11): (24, 24), (3, 12): (24, 40)}


def _locals_field(frame, at):
    import ctypes
    p = ctypes.c_void_p.from_address(id(frame) + at[0]).value
    if at[1] is not None:
        p = ctypes.c_void_p.from_address(p + at[1]).value if p else None
    return p or 0


def _locals_check():
    if sys.version_info >= (3, 13):
        return "proxy"  # a write-through view of the frame: nothing kept
    at = _LOCALS_FIELD.get(sys.version_info[:2])
    if at is None or sys.implementation.name != "cpython":
        return None
    try:
        f = sys._getframe()
        before = _locals_field(f, at)
        loc = f.f_locals
        ok = before == 0 and _locals_field(f, at) == id(loc)
        loc.clear()
        f = None  # a local holding its own frame keeps it, and its callers (the importer's), alive
        return at if ok else None
    except Exception:
        return None


_LOCALS = _locals_check()


def _with_locals(frame, fn, default=None):
    """fn(the frame's locals), leaving nothing held by the read; default where they cannot be read so."""
    if _LOCALS == "proxy" or not frame.f_code.co_flags & _CO_OPTIMIZED:
        return fn(frame.f_locals)  # (a module's or a class body's: its namespace itself)
    if _LOCALS is None:
        return default
    p = _locals_field(frame, _LOCALS)
    kept = None
    if p:
        import ctypes
        held = ctypes.cast(ctypes.c_void_p(p), ctypes.py_object).value
        kept = dict(held)
    loc = frame.f_locals
    refs = sys.getrefcount(loc)
    try:
        return fn(loc)
    finally:
        # Unless the program took it meanwhile (its code ran in fn: a property, another thread's turn):
        # then the snapshot is the one it asked for.
        if sys.getrefcount(loc) <= refs:
            loc.clear()
            if kept is not None:
                held.update(kept)


def _call_inputs(frame, loc=None):
    """(args, kwargs) of a module call's frame (loc: its locals, when read already): its *args and
    **kwargs, whatever torch names them (1.13: `*input`; 2.x: `*args`)."""
    code = frame.f_code
    if loc is None:
        return _with_locals(frame, lambda loc: _call_inputs(frame, loc), ((), {}))
    n = code.co_argcount + code.co_kwonlyargcount
    args, kwargs = (), {}
    if code.co_flags & _CO_VARARGS:
        args = loc.get(code.co_varnames[n], ())
        n += 1
    if code.co_flags & _CO_VARKEYWORDS:
        kwargs = loc.get(code.co_varnames[n], {})
    return (args if isinstance(args, tuple) else ()), (kwargs if isinstance(kwargs, dict) else {})


class _Frames:
    """What one thread's frames say at a failure, read from the innermost outward."""

    def __init__(self, hook, frame):
        self.call = None       # the outermost call of a model's module (a root's, once the roots are known)
        self.caller = None     # a frame of the function that last called the model at a sampled step
        self.backward = False  # torch.autograd.backward / grad is running
        self.optimizer = False  # a method of an optimizer is running (its step)
        Optimizer = hook.torch.optim.Optimizer
        n = 0
        while frame is not None and n < 400:
            code = frame.f_code
            if code in hook.call_codes:
                if _with_locals(frame, lambda loc: hook.is_root(loc.get("self")), False):
                    self.call = frame
            elif code in hook.backward_codes:
                self.backward = True
            elif code is hook.caller_code and self.caller is None:
                self.caller = frame
            elif code.co_argcount and code.co_varnames[0] == "self" and not self.optimizer:
                self.optimizer = _with_locals(frame, lambda loc: isinstance(loc.get("self"), Optimizer), False)
            frame = frame.f_back
            n += 1

    def step(self):
        return self.call is not None or self.backward or self.optimizer


class _Slot:
    """The sampled hook's entry in torch's global table (torch's handle's dict and key): removed and put
    back without a new handle each time."""

    def __init__(self, table, key):
        self.table, self.key = table, key

    def remove(self):
        self.table.pop(self.key, None)


class _StepHook:
    """Counts the steps of the first optimizer that steps (a GAN's second optimizer does not double the
    count), and samples the model's inputs (the module docstring says how).

    post_step runs at every step of the program, where the step's work has left the caches cold (a Python
    call costs ten times what it costs in a loop: tests/gpu/bench_step_hooks.py): its common path is a few
    attribute reads and the C call. `off` (the benchmarks) makes every callback return at once;
    register()/unregister() add and remove the hooks themselves through torch's handles. With the hook in C,
    the instance is a _CStepHook."""

    def __init__(self, torch, on_step, make_fast=None, make_hook=None):
        self.c_post = self.c_load = self.c_count = self.c_entries = None
        self.torch = torch
        self.on_step = on_step
        self.primary = None
        self.step = 0
        self.seen = ""  # the inputs the sampled hook saw in the step under way ("": none)
        self.due = 0  # monotonic ns from which the next step arms the sampled hook
        self.sampling = None  # the armed global forward pre hook's handle (or slot)
        self.slot = None  # where torch's table keeps it: arming again is one store there
        self.sample_fn = self.sample  # one bound method: torch's table compares and keeps it
        self.samples = 0
        self.caller_code = None  # the code that called the model at the last sample, and how it passed the
        self.caller_names = ()   # inputs: ((keyword or None, its local name), ...)
        self.watched = False
        self.roots = []  # the outermost modules that own the primary optimizer's parameters (weak references)
        self.handles = []
        self.broken = False
        self.off = False
        Module = torch.nn.Module
        self.call_codes = {getattr(f, "__code__", None) for f in
                           (getattr(Module, "_call_impl", None), getattr(Module, "_wrapped_call_impl", None))} - {None}
        self.machinery = {c.co_filename for c in self.call_codes}  # torch's module.py
        autograd = getattr(torch, "autograd", None)
        self.backward_codes = {getattr(getattr(autograd, n, None), "__code__", None) for n in ("backward", "grad")} - {None}
        mod = getattr(getattr(torch.nn, "modules", None), "module", None)
        self.register_sampler = getattr(mod, "register_module_forward_pre_hook", None)
        # on_step's common path in C: fast(step, shapes) -> True when it did the step's part; False, having
        # done nothing, when the counters or this hook (`due`: the next sample) are due
        self.fast = make_fast(self) if make_fast is not None else None
        # post_step itself in C (lib/runtime/companion_step.c, _step_hook): torch calls it straight; it hands
        # every case but the common one to post_step, slow_step and arm. None: post_step is the hook.
        made = make_hook(self) if make_hook is not None else None
        if isinstance(made, tuple) and len(made) == 4:
            step = self.step
            self.c_post, self.c_load, self.c_count, self.c_entries = made
            self.c_count(step)
            self.c_load()

    def is_root(self, m):
        if not self.roots:
            return isinstance(m, self.torch.nn.Module)  # before the first step's end: any module's call
        for r in self.roots:
            if r() is m:
                return True
        return False

    def watch_roots(self, opt):
        """The outermost modules that own this optimizer's parameters: found once, at the first step."""
        self.watched = True
        mine = set()
        for g in opt.param_groups:
            for p in g.get("params", ()):
                mine.add(id(p))
        Module = self.torch.nn.Module
        modules = [o for o in gc.get_objects() if issubclass(type(o), Module)]
        children = set()
        for m in modules:
            for c in m.children():
                children.add(id(c))
        for m in modules:
            if id(m) not in children and any(id(p) in mine for p in m.parameters()):
                self.roots.append(weakref.ref(m))

    def post_step(self, opt, args=None, kwargs=None):
        if self.broken or self.off:
            return
        try:
            p = self.primary
            if p is None or p() is not opt:
                _optimizers.add(opt)
                if p is None:
                    self.primary = weakref.ref(opt)
                else:
                    return
            if not self.watched:
                self.watch_roots(opt)
            n = self.step + 1  # one read and one store: with the hook in C the count lives there
            self.step = n
            shapes = self.seen
            if shapes:
                self.seen = ""
            fast = self.fast
            # A sampled step's entry is on_step's to keep (Torch.last_sampled): not the C path's.
            if shapes or fast is None or not fast(n, shapes):
                self.slow_step(n, shapes)
        except Exception as e:
            self.broken = True
            _warn("the optimizer step hook", e)

    def slow_step(self, step, shapes):
        """A step the C path left: the counters are due (on_step reads them), the step's inputs were
        sampled (on_step keeps its entry), or there is no C path."""
        self.on_step(step, shapes)
        if time.monotonic_ns() >= self.due:
            self.arm()

    def arm(self):
        """Arms the sampled hook (unless armed, or the model is not known yet); the next arming is due
        SAMPLE_SPACING_NS from now. The first arming registers it through torch; later ones put it back in
        the same slot of torch's table (one dict store, not a new handle)."""
        self.due = time.monotonic_ns() + SAMPLE_SPACING_NS
        if self.sampling is not None or not self.roots or self.register_sampler is None:
            return
        slot = self.slot
        if slot is not None:
            slot.table[slot.key] = self.sample_fn
            self.sampling = slot
            return
        h = self.register_sampler(self.sample_fn)
        ref, key = getattr(h, "hooks_dict_ref", None), getattr(h, "id", None)
        table = ref() if ref is not None else None
        if isinstance(table, dict) and table.get(key) is self.sample_fn:
            self.slot = h = _Slot(table, key)
        self.sampling = h

    def sample(self, module, args):
        """The global forward pre hook, armed for one module call: the first call after a step is the
        model's outermost module starting the next step (any other module: no sample this time). Its
        keyword inputs are not passed to a global hook: they are read from torch's call frame."""
        h, self.sampling = self.sampling, None
        if h is not None:
            h.remove()
        if self.off or self.broken:
            return None
        try:
            if not self.is_root(module):
                return None
            f = sys._getframe(1)
            kwargs = {}
            while f is not None and f.f_code.co_filename in self.machinery:
                if f.f_code in self.call_codes and not kwargs:
                    kwargs = _with_locals(f, lambda loc: _call_inputs(f, loc)[1] if loc.get("self") is module else {}, {})
                f = f.f_back
            self.seen = _shape_text(args, kwargs, self.torch)
            self.samples += 1
            self.learn_caller(f, args, kwargs)
        except Exception as e:
            self.broken = True
            _warn("reading the model's input shapes", e)
        return None

    def learn_caller(self, f, args, kwargs):
        """How the function that called the model holds its inputs: each tensor input's local name in the
        caller's frame (by identity), so that a failure later in the step (in backward, in the optimizer's
        step) reads the inputs of the step under way there."""
        self.caller_code, self.caller_names = None, ()
        if f is None:
            return
        Tensor = self.torch.Tensor

        def find(loc):
            names = []
            for key, a in [(None, a) for a in args] + list(kwargs.items()):
                if not isinstance(a, Tensor):
                    continue
                for name, v in loc.items():  # a loop, not next(genexpr): closing a generator raises in it
                    if v is a:
                        names.append((key, name))
                        break
                else:
                    return ()
            return tuple(names)

        names = _with_locals(f, find, ())
        if names:
            self.caller_code, self.caller_names = f.f_code, names

    def at_failure(self, frame):
        """(step, shapes) of the step under way, as the failing thread's frames say (the thread that waits in
        backward, where the failing one has none: autograd's device thread), or None."""
        if self.broken or not self.call_codes:
            return None
        seen = _Frames(self, frame)
        if not (seen.step() or seen.caller):
            import _thread
            # This thread's entry is this very frame: bound to a local of it, it would hold itself, and with
            # it every caller's frame up to the failing line of the program, whose tensors a caught OOM then
            # kept (H200, a batch-size search: 114 GiB after the except, not freed by gc.collect() on 3.12).
            others = sys._current_frames()
            others.pop(_thread.get_ident(), None)
            for f in others.values():
                other = _Frames(self, f)
                if other.backward:
                    seen = other
                    break
            others = f = other = None
        # An evaluation between steps counts as under way, an evaluation before any step does not (no
        # optimizer yet: eval with grad on is its own statement).
        if not (seen.optimizer or (self.primary is not None and (seen.step() or self.seen))):
            return None
        if seen.call is not None:
            args, kwargs = _call_inputs(seen.call)
            shapes = _shape_text(args, kwargs, self.torch)
        elif self.seen:
            shapes = self.seen
        else:
            shapes = self.caller_shapes(seen.caller)
        return (self.step + 1, shapes)

    def caller_shapes(self, f):
        if f is None:
            return ""

        def shapes(loc):
            args, kwargs = [], {}
            for key, name in self.caller_names:
                a = loc.get(name)
                if not isinstance(a, self.torch.Tensor):
                    return ""
                if key is None:
                    args.append(a)
                else:
                    kwargs[key] = a
            return _shape_text(args, kwargs, self.torch)

        return _with_locals(f, shapes, "")

    def register(self, optmod):
        """Registers the global step post hook. False when this torch has none."""
        reg = getattr(optmod, "register_optimizer_step_post_hook", None)
        if reg is None:
            return False
        self.handles.append(reg(self.c_post if self.c_post is not None else self.post_step))
        return True

    def unregister(self):
        handles, self.handles = self.handles, []
        if self.sampling is not None:
            handles.append(self.sampling)
            self.sampling = None
        for h in handles:
            remove = getattr(h, "remove", None)
            if remove is not None:
                remove()


class _CStepHook(_StepHook):
    """The hook with its post hook in C (lib/runtime/companion_step.c): the step count lives in C (`step`
    reads and sets it there), the common steps' STEPS entries in its ring (c_entries), and what its common
    path depends on (_C_STATE) is read again by C whenever Python sets it. A class of its own, so that the
    Python path without the library's builtins pays for neither."""

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        if name in _C_STATE:
            load = self.__dict__.get("c_load")
            if load is not None:
                load()

    @property
    def step(self):
        c = self.c_count
        return self._step if c is None else c()

    @step.setter
    def step(self, n):
        c = self.__dict__.get("c_count")
        if c is None:
            self._step = n
        else:
            c(n)


_hook = None


def install_step_hook(torch, on_step, make_fast=None, make_hook=None):
    """Registers the global optimizer-step post hook; on_step(step, input_shapes) runs after each step of
    the program's (first) optimizer, unless fast(step, input_shapes), its common path in C (make_fast(hook)
    makes it), did its work and returned True. make_hook(hook), where given, makes the hook itself in C.
    Returns True when installed. Torch before 2.0 has no global hook: then there are no automatic step
    markers and the reader uses time windows."""
    global _hook
    try:
        import torch.optim.optimizer as optmod  # the attribute exists only once imported by name
        hook = (_StepHook if make_hook is None else _CStepHook)(torch, on_step, make_fast, make_hook)
        if not hook.register(optmod):
            return False
        _hook = hook
        return True
    except Exception as e:
        _warn("installing the optimizer step hook", e)
        return False


def step_in_progress():
    """(number, input shapes) of the optimizer step under way at a failure, read from the calling thread's
    frames: the model's call, backward or an optimizer's step is running (None otherwise, or without the
    step hook). The number is the one its STEPS entry will have; the shapes are the outermost module's
    inputs ("" when not found)."""
    h = _hook
    if h is None:
        return None
    try:
        return h.at_failure(sys._getframe(1))
    except Exception as e:
        _warn("reading the step under way", e)
        return None
