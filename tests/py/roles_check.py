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

# The hook, the way torch >= 2.0 calls it after each optimizer's step (1.13 has no global hook: the
# stand-in registration below calls the same function torch would).
hooks = []
steps = []
if not roles.install_step_hook(torch, lambda step, shapes: steps.append((step, shapes))):
    import torch.optim.optimizer as optmod
    assert not hasattr(optmod, "register_optimizer_step_post_hook"), "a torch with the hook refused it"
    optmod.register_optimizer_step_post_hook = lambda h: hooks.append(h)
    assert roles.install_step_hook(torch, lambda step, shapes: steps.append((step, shapes)))
    del optmod.register_optimizer_step_post_hook

for i, seq in enumerate((12, 12, 24)):
    x = torch.randint(0, 100, (4 * seq,))
    loss = net(x).sum() + (free_param * 2).sum()
    loss.backward()
    adam.step()
    for h in hooks:
        h(adam, (), {})
    other(torch.randn(3, 16)).sum().backward()
    sgd.step()
    for h in hooks:
        h(sgd, (), {})

# Steps count the first optimizer only; the shapes are those of the outermost module's input (found at the
# first step, so the first step's shapes are not known yet).
assert [s for s, _ in steps] == [1, 2, 3], steps
assert steps[1][1] == "(48,)" and steps[2][1] == "(96,)", steps
assert roles.last_input_shapes() == "(96,)"
# Between steps nothing is under way; a forward of the model starts the next step, which is numbered and
# fed as its STEPS entry will be.
assert roles.step_in_progress() is None, roles.step_in_progress()
net(torch.randint(0, 100, (200,)))
assert roles.step_in_progress() == (4, "(200,)"), roles.step_in_progress()

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
# The model carries the companion's forward hook: copying it (an EMA model) or pickling it (torch.save(model))
# works as untraced: a deep copy shares the live hook, a pickle holds a harmless stand-in that a Python
# without the tracer loads and calls (sys.audit with a fixed event name).
import copy  # noqa: E402
import io  # noqa: E402
import pickle  # noqa: E402
import subprocess  # noqa: E402
assert any(getattr(h, "__self__", None) is roles._hook for h in net._forward_pre_hooks.values()), "no hook to copy"
twin = copy.deepcopy(net)
twin(torch.randint(0, 100, (8,)))
buf = io.BytesIO()
torch.save(net, buf)
buf.seek(0)
clone = torch.load(buf, weights_only=False)
clone(torch.randint(0, 100, (8,)))
pickle.loads(pickle.dumps(net))(torch.randint(0, 100, (8,)))
hooks_blob = pickle.dumps(list(net._forward_pre_hooks.values()))
r = subprocess.run([sys.executable, "-c", "import pickle, sys\nhooks = pickle.loads(sys.stdin.buffer.read())\n"
                    "print([h(None, (1,), {}) for h in hooks])"], input=hooks_blob, capture_output=True)
assert r.returncode == 0 and r.stdout.strip() == b"[None]", (r.stdout, r.stderr[-500:])
print("roles: ok")
