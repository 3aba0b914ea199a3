"""The optimizer step post hook in C (lib/runtime/companion_step.c, _step_hook), run by tests/sh/companion.sh
under the preloaded library in every CPython it tests. A stand-in of the companion's _StepHook (its state's
attributes and the three methods the C hook hands steps to) and of its counters (`due`):
- a common step calls no Python method and leaves no object the collector tracks (before: a STEPS tuple a
  step in a Python deque, 64 kept), counts the step in C (count()), keeps its entry in the C ring (the last 64, entries())
  and writes the marker "step N";
- another optimizer, sampled inputs waiting (seen), the model's roots not watched yet: post_step(opt);
  the counters due: slow_step(step, "") with the step counted; a sample due: the step recorded, then arm();
  off or broken: nothing; the state is what load() last read;
- the hook, its state and the builtins are freed with the hook (a cycle the collector breaks).
Prints one line: "ok", or what differs. The markers are checked by the caller from the snapshot that
oomtrace_dump(b"test") writes."""
import ctypes
import gc
import sys
import weakref

cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuInit(0)
p = ctypes.c_uint64()
cuda.cuMemAlloc_v2(ctypes.byref(p), 1 << 20)
for _ in range(1000):  # the companion starts at the interpreter's next pending call
    pass
make = sys.modules["_oomtrace_companion"]._companion.step_hook
INF = float("inf")
calls = []
bad = []


def expect(cond, what):
    if not cond:
        bad.append(what)


class Counters:
    due = INF


class Opt:
    pass


class Hook:
    off = broken = False
    watched = True
    seen = ""
    due = INF

    def post_step(self, o, *rest):
        calls.append(("post_step", o is opt))

    def slow_step(self, n, shapes):
        calls.append(("slow_step", n, shapes))

    def arm(self):
        calls.append(("arm",))


opt, other = Opt(), Opt()
h, c = Hook(), Counters()
h.primary = weakref.ref(opt)
post, load, count, entries = make(h, c)
h.fn = post  # the hook keeps its builtin, as _StepHook does: a cycle through the bound state
count(10)
load()



def steps(fn, n):
    """What the collector counts (tracked objects made less freed) over n calls of fn as torch calls it."""
    gc.collect()
    gc.disable()
    g0 = gc.get_count()[0]
    for _ in range(n):
        fn(opt, (), {})
    g1 = gc.get_count()[0]
    gc.enable()
    return g1 - g0


base = steps(lambda *a: None, 70)  # the loop's own
left = steps(post, 70) - base
e = entries()
expect(calls == [], "a common step called Python: %s" % calls)
expect(abs(left) <= 1, "70 common steps left %d tracked objects" % left)  # 3.9-3.10: the loop's own moves by 1
expect(count() == 80, "count %r" % count())
expect([x[0] for x in e] == list(range(17, 81)), "the ring: %s" % [x[0] for x in e][:3])
expect(all(x[1] > 0 and x[2:] == (0, 0, "") for x in e), "an entry: %r" % (e[0],))
expect(all(a[1] <= b[1] for a, b in zip(e, e[1:])), "the entries' times go back")

post(other, (), {})
h.seen = "(2, 8)"
load()
post(opt, (), {})
h.seen = ""
h.watched = False
load()
post(opt, (), {})
h.watched = True
c.due = 0
load()
post(opt, (), {})
c.due = INF
h.due = 0
load()
post(opt, (), {})
h.due = INF
h.off = True
load()
post(opt, (), {})
h.off, h.broken = False, True
load()
post(opt, (), {})
h.broken = False
load()
post(opt, (), {})
post(opt)
post()  # no optimizer: nothing, and no exception
expect(calls == [("post_step", False), ("post_step", True), ("post_step", True), ("slow_step", 81, ""), ("arm",)],
       "the steps left to Python: %s" % calls)
expect(count() == 84 and [x[0] for x in entries()][-3:] == [82, 83, 84], "after: %s %s" % (count(), entries()[-3:]))
count(82)  # set back (a benchmark restores it): the entries past it go
expect([x[0] for x in entries()][-2:] == [80, 82] and len(entries()) == 62, "set back: %s" % entries()[-2:])
count(84)
try:
    count("12")
    bad.append("count('12') did not raise")
except TypeError:
    pass
h.primary = None  # an optimizer that died: its weak reference reads None
load()
post(opt, (), {})
expect(calls[-1] == ("post_step", True), "no primary: %s" % calls[-1:])

ref = weakref.ref(h)
del h, post, load, count, entries
gc.collect()
expect(ref() is None, "the hook outlives its builtins' cycle")
ctypes.CDLL(None).oomtrace_dump(b"test")
print("ok" if not bad else "; ".join(bad))
