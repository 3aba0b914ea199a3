"""What each tensor storage is to the program: a parameter, a gradient, optimizer state or a module buffer.

Part of the companion embedded in liboomtrace.so (registered as the module `_oomtrace_roles`). The
companion calls `collect(torch)` when it takes a snapshot and encodes the result as the ROLES record of the
FRAMEWORK section (docs/FORMAT.md); it calls `install_step_hook(torch, on_step)` once torch is imported,
and owns the STEPS record.

Identity, not guesswork: the reader matches these storages to the allocator's blocks by address, so that a
report can say "gradients 1.2 GiB" instead of guessing from stacks.

Modules and optimizers are found with `gc.get_objects()` at snapshot time, not through a global forward
hook: a hook would cost every module call of every step, while a scan costs only the snapshot (measured by
bench/roles_bench.py). Optimizers also register themselves from the step hook, so an optimizer whose first
`step()` is running (the Adam first-step OOM) is found either way.

Nothing here may raise into the program: every entry point catches everything, prints one line on
stderr and steps aside.
"""

import functools
import gc
import sys
import types
import weakref

PARAMETERS = 1
GRADIENTS = 2
OPTIMIZER_STATE = 3
BUFFERS = 4

# The step hook remembers at most this many characters of the outermost module's input shapes.
_SHAPES_MAX = 200

_warned = set()


def _warn(what, exc):
    # One line per kind of failure, not one per snapshot.
    if what in _warned:
        return
    _warned.add(what)
    try:
        sys.stderr.write("oomtrace: %s failed (%s: %s); the report will lack it\n"
                         % (what, type(exc).__name__, str(exc)[:200]))
    except Exception:
        pass


def _storage(t):
    """(data_ptr, nbytes) of the storage under tensor t, or None (no storage, meta tensor, sparse...)."""
    try:
        if hasattr(t, "untyped_storage"):
            s = t.untyped_storage()
        else:
            s = t.storage()
        ptr = s.data_ptr()
        n = s.nbytes() if hasattr(s, "nbytes") else s.size() * t.element_size()
    except Exception:
        return None
    if not ptr:
        return None
    return ptr, n


def _is_cuda(t):
    try:
        return t.device.type == "cuda"
    except Exception:
        return False


class _Found:
    """Storages seen so far, first role wins: a parameter that is also in an optimizer's state stays a
    parameter, a storage shared by several tensors appears once."""

    def __init__(self, torch, include_cpu):
        self.torch = torch
        self.include_cpu = include_cpu
        self.seen = set()
        self.out = []

    def add(self, category, label, t):
        if not isinstance(t, self.torch.Tensor):
            return
        if not self.include_cpu and not _is_cuda(t):
            return
        st = _storage(t)
        if st is None or st[0] in self.seen:
            return
        self.seen.add(st[0])
        self.out.append((category, label, st[0], st[1]))


_optimizers = weakref.WeakSet()


def _scan(torch):
    """Every live nn.Module and Optimizer, by one pass over the collector's objects."""
    Module = torch.nn.Module
    Optimizer = torch.optim.Optimizer
    modules, optimizers = [], []
    for o in gc.get_objects():
        # type(o), not isinstance(o, ...): isinstance reads o.__class__, and some objects warn or run code
        # on attribute access (torch.distributed.reduce_op prints a deprecation warning).
        t = type(o)
        if issubclass(t, Module):
            modules.append(o)
        elif issubclass(t, Optimizer):
            optimizers.append(o)
    for o in list(_optimizers):
        if not any(o is x for x in optimizers):
            optimizers.append(o)
    return modules, optimizers


def _collect(torch, include_cpu):
    found = _Found(torch, include_cpu)
    modules, optimizers = _scan(torch)
    params = []
    for m in modules:
        try:
            params.extend(m.parameters(recurse=False))
        except Exception as e:  # a module subclass with a broken override: skip that one
            _warn("reading a module's parameters", e)
    good = []
    for opt in optimizers:
        try:
            for g in opt.param_groups:
                params.extend(g.get("params", ()))
            good.append(opt)
        except Exception as e:
            _warn("reading an optimizer's parameters", e)
    optimizers = good
    # Parameters first (a gradient or state tensor never aliases a parameter's storage on purpose, but
    # if it did the parameter role is the one the user thinks of), then gradients, then state, buffers.
    for p in params:
        found.add(PARAMETERS, "parameters", p)
    for p in params:
        g = getattr(p, "grad", None)
        if g is not None:
            found.add(GRADIENTS, "gradients", g)
    for opt in optimizers:
        cls = type(opt).__name__
        try:
            for state in list(opt.state.values()):
                if not isinstance(state, dict):
                    continue
                for key, v in list(state.items()):
                    found.add(OPTIMIZER_STATE, "%s.%s" % (cls, key), v)
        except Exception as e:
            _warn("reading an optimizer's state", e)
    for m in modules:
        try:
            for b in m.buffers(recurse=False):
                found.add(BUFFERS, "buffers", b)
        except Exception as e:
            _warn("reading a module's buffers", e)
    return found.out


def collect(torch, include_cpu=False):
    """[(category, label, data_ptr, nbytes)] for every storage of a parameter, gradient, optimizer state
    or module buffer, each storage once. CUDA tensors only unless include_cpu (the tests run on CPU)."""
    try:
        return _collect(torch, include_cpu)
    except Exception as e:
        _warn("finding parameters, gradients and optimizer state", e)
        return []


def _shape_text(args, kwargs, torch):
    parts = []
    for a in args:
        if isinstance(a, torch.Tensor):
            parts.append(str(tuple(a.shape)))
    for k, a in kwargs.items():
        if isinstance(a, torch.Tensor):
            parts.append("%s=%s" % (k, tuple(a.shape)))
    return ", ".join(parts)[:_SHAPES_MAX]


class _StepHook:
    """Counts the steps of the first optimizer that steps (a GAN's second optimizer does not double the
    count) and remembers the input shapes of the model's outermost module.

    Its callbacks run at every step of the program, so their common path is a few attribute reads: the
    shapes' text is rebuilt only when they change, an optimizer already known is not registered again.
    `off` (tests/gpu/bench_step_hooks.py) makes every callback return at once: the benchmark switches the
    companion's per-step work on and off inside one process; register()/unregister() add and remove the
    hooks themselves through torch's handles."""

    def __init__(self, torch, on_step, fast=None):
        self.torch = torch
        self.on_step = on_step
        self.fast = fast  # on_step's common path in C: fast(step, shapes) -> True when it did the step's part
        self.primary = None
        self.step = 0
        self.shapes = ""
        self.shape_key = None  # the shapes (torch.Size, or (name, torch.Size) for keyword inputs) self.shapes describes
        self.Tensor = getattr(torch, "Tensor", None)
        self.started = False  # a forward of the model or an optimizer step ran since the last step ended
        self.watched = False
        self.roots = []  # the outermost modules whose forward is watched (weak references)
        self.handles = []
        self.pre_handle = None  # the global step pre hook's, until the model's forward hook takes its place
        self.broken = False
        self.off = False

    # The forward hook lives in the model's hook dict, which copy.deepcopy(model) (an EMA model) and pickling
    # (torch.save(model)) copy with the model: the hook's bound method takes this object along, and its torch
    # module cannot be pickled, so both raised into the program. A deep copy shares this live hook (the
    # copy's forward is seen as the model's); a pickle holds, in its place, a harmless callable any Python
    # can load without the tracer: sys.audit with a fixed event name (an audit event, nothing else).
    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        return (types.SimpleNamespace, (), {"pre_forward": functools.partial(sys.audit, "oomtrace.forward_pre_hook"),
                                            "pre_step": functools.partial(sys.audit, "oomtrace.step_pre_hook"),
                                            "post_step": functools.partial(sys.audit, "oomtrace.step_post_hook")})

    def pre_forward(self, module, args, kwargs=None):
        """The inputs' shapes as a list, compared with the last forward's: the text is built only when they
        change (a training loop feeds the same shapes step after step). It runs at every forward of the
        model, after the step's work has left the caches cold, where a Python call costs ten times what it
        costs in a loop (tests/gpu/bench_step_hooks.py): plain loops, no helper call, no comprehension."""
        if self.broken or self.off:
            return None
        try:
            self.started = True
            Tensor = self.Tensor
            key = []
            for a in args:
                if isinstance(a, Tensor):
                    key.append(a.shape)
            if kwargs:
                for k, a in kwargs.items():
                    if isinstance(a, Tensor):
                        key.append((k, a.shape))
            if key != self.shape_key:
                self.shapes = _shape_text(args, kwargs or {}, self.torch)
                self.shape_key = key
        except Exception as e:
            self.broken = True
            _warn("reading the model's input shapes", e)
        return None

    def watch_roots(self, opt):
        """Hooks the outermost modules that own this optimizer's parameters. Done once, at the first step,
        so the forward of every later step costs one Python call and no module call costs more."""
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
            if id(m) in children:
                continue
            if not any(id(p) in mine for p in m.parameters()):
                continue
            self.roots.append(weakref.ref(m))
            self.handles.append(self.watch_forward(m))

    def watch_forward(self, m):
        try:
            return m.register_forward_pre_hook(self.pre_forward, with_kwargs=True)
        except TypeError:  # torch < 2.0: no kwargs
            return m.register_forward_pre_hook(self.pre_forward)

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
            if self.pre_handle is not None and self.shape_key is not None:
                self.drop_pre_step()
            self.step += 1
            self.started = False
            fast = self.fast
            if fast is None or not fast(self.step, self.shapes):
                self.on_step(self.step, self.shapes)
        except Exception as e:
            self.broken = True
            _warn("the optimizer step hook", e)

    def drop_pre_step(self):
        """Once the model's forward hook has run, it says that a step is under way before the optimizer's
        step does (a failure in backward comes before it): the pre hook, one more cold Python call at every
        step, has nothing left to do. Optimizers that step later are found by post_step and the snapshot's scan."""
        h, self.pre_handle = self.pre_handle, None
        remove = getattr(h, "remove", None)
        if remove is None:
            return
        remove()
        if h in self.handles:
            self.handles.remove(h)

    def pre_step(self, opt, args=None, kwargs=None):
        # Known from its first step on, before its state exists: the first-step OOM case.
        if self.off:
            return None
        p = self.primary
        if p is not None and p() is opt:
            self.started = True
            return None
        return _remember(opt, self)

    def register(self, optmod):
        """Registers the global step hooks, and the forward hooks of the modules already watched. False
        when this torch has no global step hook."""
        reg = getattr(optmod, "register_optimizer_step_post_hook", None)
        if reg is None:
            return False
        self.handles.append(reg(self.post_step))
        pre = getattr(optmod, "register_optimizer_step_pre_hook", None)
        if pre is not None and (self.shape_key is None or not self.roots):
            self.pre_handle = pre(self.pre_step)
            self.handles.append(self.pre_handle)
        for r in self.roots:
            m = r()
            if m is not None:
                self.handles.append(self.watch_forward(m))
        return True

    def unregister(self):
        handles, self.handles = self.handles, []
        self.pre_handle = None
        for h in handles:
            remove = getattr(h, "remove", None)
            if remove is not None:
                remove()


_hook = None


def install_step_hook(torch, on_step, fast=None):
    """Registers the global optimizer-step post hook; on_step(step, input_shapes) runs after each step of
    the program's (first) optimizer, unless fast(step, input_shapes), its common path in C, did its work and
    returned True. Returns True when installed. Torch before 2.0 has no global hook: then there are no
    automatic step markers and the reader uses time windows."""
    global _hook
    try:
        import torch.optim.optimizer as optmod  # the attribute exists only once imported by name
        hook = _StepHook(torch, on_step, fast)
        if not hook.register(optmod):
            return False
        _hook = hook
        return True
    except Exception as e:
        _warn("installing the optimizer step hook", e)
        return False


def _remember(opt, hook=None):
    try:
        _optimizers.add(opt)
        if hook is not None and (hook.primary is None or hook.primary() is opt):
            hook.started = True  # the first step's forward ran before the model's hook existed
    except Exception:
        pass
    return None


def last_input_shapes():
    """The outermost module's input shapes at its latest forward ("" when unknown): the step that is
    running when a snapshot is taken has no STEPS entry yet, this says what it was fed."""
    return _hook.shapes if _hook is not None else ""


def step_in_progress():
    """(number, input shapes) of the optimizer step under way: its model's forward or its optimizer's step
    ran since the last step ended (None when nothing ran since, or there is no step hook). The number is
    the one its STEPS entry will have; the shapes are the outermost module's inputs at its latest forward
    ("" when not seen yet: the first step's forward runs before the model is known)."""
    h = _hook
    if h is None or h.broken or not h.started:
        return None
    return (h.step + 1, h.shapes)
