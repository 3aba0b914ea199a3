"""What each tensor storage is to the program: a parameter, a gradient, optimizer state or a module buffer.

Part of the companion embedded in liboomtrace.so (registered as the module `_oomtrace_roles`). The
companion calls `collect(torch)` when it takes a snapshot and encodes the result as the ROLES record of the
FRAMEWORK section (docs/FORMAT.md). The step hook (_oomtrace_steps) adds the optimizers it sees step.

Identity, not guesswork: the reader matches these storages to the allocator's blocks by address, so that a
report can say "gradients 1.2 GiB" instead of guessing from stacks.

Modules and optimizers are found with `gc.get_objects()` at snapshot time, not through a global forward
hook: a hook would cost every module call of every step, while a scan costs only the snapshot (measured by
bench/roles_bench.py). The step hook adds the optimizers it sees step to `_optimizers`; an optimizer whose
first `step()` is running (the Adam first-step OOM) is found by the scan.

Nothing here may raise into the program: every entry point catches everything, prints one line on
stderr and steps aside.
"""

import gc
import sys
import weakref

PARAMETERS = 1
GRADIENTS = 2
OPTIMIZER_STATE = 3
BUFFERS = 4

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
        # A module, optimizer or tensor the scan could not read: an empty result then says nothing of whether a
        # model was on the GPU (a tensor subclass without a plain storage, a module whose parameters() raises).
        self.unread = False

    def add(self, category, label, t):
        if not isinstance(t, self.torch.Tensor):
            return
        if not self.include_cpu and not _is_cuda(t):
            return
        st = _storage(t)
        if st is None:
            self.unread = True
            return
        if st[0] in self.seen:
            return
        self.seen.add(st[0])
        self.out.append((category, label, st[0], st[1]))


_optimizers = weakref.WeakSet()
# Optimizers whose parameter groups held a device tensor at the last scan (None: no scan, or it failed): a
# model being trained, even before its first optimizer step (the reader then never calls its activations an
# evaluation's that runs with autograd on).
training_optimizers = None


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
            found.unread = True
            _warn("reading a module's parameters", e)
    good = []
    training = 0
    for opt in optimizers:
        try:
            mine = [p for g in opt.param_groups for p in g.get("params", ())]
            params.extend(mine)
            good.append(opt)
            training += any(isinstance(p, torch.Tensor) and (include_cpu or _is_cuda(p)) for p in mine)
        except Exception as e:
            found.unread = True
            _warn("reading an optimizer's parameters", e)
    optimizers = good
    global training_optimizers
    training_optimizers = training
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
            found.unread = True
            _warn("reading an optimizer's state", e)
    for m in modules:
        try:
            for b in m.buffers(recurse=False):
                found.add(BUFFERS, "buffers", b)
        except Exception as e:
            found.unread = True
            _warn("reading a module's buffers", e)
    # Nothing found while something could not be read: not "no model" (None: no record, as for a failed scan).
    return None if found.unread and not found.out else found.out


def collect(torch, include_cpu=False):
    """[(category, label, data_ptr, nbytes)] for every storage of a parameter, gradient, optimizer state
    or module buffer, each storage once. CUDA tensors only unless include_cpu (the tests run on CPU).
    An empty list says the scan ran and found none (no model on the GPU: the reader then counts PyTorch's
    tensors as the program's own, not as a model's activations); None, that the scan failed, or found nothing
    while some module, optimizer or CUDA tensor of theirs could not be read."""
    global training_optimizers
    training_optimizers = None
    try:
        return _collect(torch, include_cpu)
    except Exception as e:
        _warn("finding parameters, gradients and optimizer state", e)
        return None
