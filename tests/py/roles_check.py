"""Checks lib/companion/_oomtrace_roles.py against real nn.Module and torch.optim objects (Debian's
python3-torch, CPU): every label's bytes must equal the sum over the program's own tensors, each storage
counted once. Run with /usr/bin/python3; prints "roles: ok" or fails with an assertion."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "lib", "companion"))
import _oomtrace_roles as roles  # noqa: E402

torch.manual_seed(0)


def nbytes(t):
    return t.numel() * t.element_size()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(100, 32)
        self.body = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.BatchNorm1d(64), torch.nn.ReLU(),
                                        torch.nn.Linear(64, 32))
        self.head = torch.nn.Linear(32, 100, bias=False)
        self.head.weight = self.emb.weight  # tied: one storage, two modules

    def forward(self, x):
        return self.head(self.body(self.emb(x)))


net = Net()
other = torch.nn.Linear(16, 8)                      # a second model, with SGD momentum
free_param = torch.nn.Parameter(torch.zeros(5, 7))  # a parameter in no module, only in an optimizer
adam = torch.optim.Adam(list(net.parameters()) + [free_param], lr=1e-3)
sgd = torch.optim.SGD(other.parameters(), lr=0.1, momentum=0.9)

# Before any step: parameters and buffers only.
got = roles.collect(torch, include_cpu=True)
cats = {c for c, _, _, _ in got}
assert cats == {roles.PARAMETERS, roles.BUFFERS}, cats

# The step hook, the way torch >= 2.0 calls it after each optimizer's step (1.13 has no global hook: the
# stand-in registration below calls the same function torch would). Nothing runs at the model's calls but
# a sampled global forward pre hook (torch's own table), armed after a step at most every second.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "lib", "companion"))
import _oomtrace_steps as steps_mod  # noqa: E402
hooks = []
steps = []
clock = [10 ** 12]
steps_mod.time = type("T", (), {"monotonic_ns": staticmethod(lambda: clock[0])})  # steps 1 ms apart, unless moved
if not steps_mod.install_step_hook(torch, lambda step, shapes: steps.append((step, shapes))):
    import torch.optim.optimizer as optmod
    assert not hasattr(optmod, "register_optimizer_step_post_hook"), "a torch with the hook refused it"
    optmod.register_optimizer_step_post_hook = lambda h: hooks.append(h)
    assert steps_mod.install_step_hook(torch, lambda step, shapes: steps.append((step, shapes)))
    del optmod.register_optimizer_step_post_hook
hook = steps_mod._hook
glob = torch.nn.modules.module._global_forward_pre_hooks
under_way = []


class Probe(torch.autograd.Function):
    """Says what the companion reads at a failure in the forward (the model's call on the stack) and in
    the backward (loss.backward() on the stack, the model's call gone)."""
    @staticmethod
    def forward(ctx, x):
        under_way.append(("forward", steps_mod.step_in_progress()))
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        under_way.append(("backward", steps_mod.step_in_progress()))
        return g


class Probed(torch.nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, scale=None):
        return Probe.apply(self.net(x).float())


probed = Probed(net)
adam = torch.optim.Adam(list(probed.parameters()) + [free_param], lr=1e-3)
seen = []


def train(seq, moved_ms):
    clock[0] += moved_ms * 10 ** 6
    batch = torch.randint(0, 100, (4 * seq,))
    scale = torch.ones(2)
    loss = probed(batch, scale=scale).sum() + (free_param * 2).sum()
    loss.backward()
    other(torch.randn(3, 16)).sum().backward()  # before the steps: the call after adam's is the model's
    adam.step()
    for h in hooks:
        h(adam, (), {})
    seen.append(len(glob))
    sgd.step()
    for h in hooks:
        h(sgd, (), {})


for seq, ms in ((12, 1), (12, 1), (12, 150), (24, 1500), (24, 1)):
    train(seq, ms)
# Steps count the first optimizer only. The model is found at the first step's end, the sampled hook armed
# right after (step 2 is sampled), then not again before 1 s passed: not at step 3's end (150 ms later), but at
# step 4's (after a 1.5 s pause: step 5 is sampled); the sample after it is armed at step 5's end; only the
# sampled steps carry shapes.
assert [s for s, _ in steps] == [1, 2, 3, 4, 5], steps
assert [sh for _, sh in steps] == ["", "(48,), scale=(2,)", "", "", "(96,), scale=(2,)"], steps
assert hook.samples == 2 and seen == [1, 0, 0, 1, 0], (hook.samples, seen)
# At a failure: the step under way is the next one, with the inputs of the model's call on the stack
# (forward), or those the calling frame still holds (backward: `batch` and the keyword `scale`, learnt at
# the last sample). Before the first step's end nothing is said (no optimizer seen yet; no call of its).
assert [u for u in under_way if u[0] == "forward"][:2] == [("forward", None), ("forward", (2, "(48,), scale=(2,)"))], under_way
assert under_way[1] == ("backward", None), under_way
# Step 4 was not sampled: its backward reads `batch` and `scale` in train()'s frame, learnt at step 2's sample.
assert under_way[-4:] == [("forward", (4, "(96,), scale=(2,)")), ("backward", (4, "(96,), scale=(2,)")),
                          ("forward", (5, "(96,), scale=(2,)")), ("backward", (5, "(96,), scale=(2,)"))], under_way
# Between steps nothing is under way; the model's call, even an evaluation's, starts the next one.
assert steps_mod.step_in_progress() is None
del under_way[:]
with torch.no_grad():
    probed(torch.randint(0, 100, (200,)))
assert under_way == [("forward", (6, "(200,)"))], under_way
assert len(glob) == 0, "no hook armed between samples"
# An optimizer's step on the stack is a step under way too (the Adam first-step OOM); the inputs, from the
# frame that called the model at the last sample, are not on this stack.


class Stepping(torch.optim.SGD):
    def step(self, closure=None):
        under_way.append(("optimizer", steps_mod.step_in_progress()))


Stepping(other.parameters(), lr=0.1).step()
assert under_way[-1] == ("optimizer", (6, "")), under_way

got = roles.collect(torch, include_cpu=True)
ptrs = [p for _, _, p, _ in got]
assert len(ptrs) == len(set(ptrs)), "a storage appears twice"

by_label = {}
for cat, label, ptr, n in got:
    by_label.setdefault((cat, label), 0)
    by_label[(cat, label)] += n

params = {p.data_ptr(): nbytes(p) for p in list(net.parameters()) + list(other.parameters()) + [free_param]}
want = {
    (roles.PARAMETERS, "parameters"): sum(params.values()),
    (roles.GRADIENTS, "gradients"): sum(nbytes(p.grad) for p in list(net.parameters()) + list(other.parameters())
                                        + [free_param]),
    (roles.BUFFERS, "buffers"): sum(nbytes(b) for b in list(net.buffers()) + list(other.buffers())),
}
for opt in (adam, sgd):
    for st in opt.state.values():
        for k, v in st.items():
            if torch.is_tensor(v):
                key = (roles.OPTIMIZER_STATE, "%s.%s" % (type(opt).__name__, k))
                want[key] = want.get(key, 0) + v.untyped_storage().nbytes() if hasattr(v, "untyped_storage") \
                    else want.get(key, 0) + v.storage().nbytes()
assert (roles.OPTIMIZER_STATE, "Adam.exp_avg") in want and (roles.OPTIMIZER_STATE, "SGD.momentum_buffer") in want
# The tied weight is one storage: the parameter sum above is over distinct data pointers already.
assert len(params) == len(list(net.parameters())) + 2 + 1
assert by_label == want, (by_label, want)

# CUDA only by default: nothing on this CPU machine.
assert roles.collect(torch) == []

# Never raises into the program: a broken object in the heap is stepped over with one line.
class Broken(torch.optim.Optimizer):
    def __init__(self):
        pass

    @property
    def param_groups(self):
        raise RuntimeError("boom")

b = Broken()
assert roles.collect(torch, include_cpu=True) == got, "one broken optimizer lost the others' roles"
# Nothing found on the GPU while an optimizer could not be read: not "no model" (None), which the snapshot would
# otherwise say.
assert roles.collect(torch) is None
# A scan that found nothing is an empty list (the snapshot then says no model was on the GPU); a scan that
# failed as a whole is None (the snapshot says nothing of roles), with its one line.
assert roles.collect(object()) is None
# The model carries nothing of the companion: its hook dicts are empty, and a copy or a pickle of it is the
# same whether the step hook is installed or not (tests/gpu/step_sample_check.py compares the bytes traced
# and untraced on the GPU).
import copy  # noqa: E402
import pickle  # noqa: E402
for m in probed.modules():
    assert not m._forward_pre_hooks and not m._forward_hooks and not m._backward_hooks, m
blob = pickle.dumps(probed)
hook.unregister()
assert pickle.dumps(probed) == blob, "the pickle changed with the step hook"
twin = copy.deepcopy(probed)
twin(torch.randint(0, 100, (8,)))
print("roles: ok")
