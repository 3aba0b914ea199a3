#!/bin/sh
# Leak statements by the shape of the growth (walk 9, issue 13). Each program runs under the tracer against
# the stand-in driver (1 GiB) with a marker per step, and its report is checked:
#   evalleak.py   a validation pass every 10 steps ("valid N") keeps 10 MiB each time, the steps nothing: the
#                 growth is judged over the intervals the "valid N" markers began (#13: no leak statement, and
#                 the remedy blamed the validation pass's size).
#   validfree.py  the same validation pass frees all it takes: no leak statement.
#   warmup.py     grows 30 MiB a step for 10 steps, then stays flat; a large request fails at step 20: a
#                 warm-up, not "a suspected leak ... rose in 10 of 20" (#7); as warmup3.py, at step 13 (3
#                 flat steps: walk 10, #10).
#   slowleak.py   keeps 4 MiB in about 60% of the steps, spread out: still a leak.
#   project.py    4 MiB kept a step, each step also needs 100 MiB at its height (or every 10th step a 300 MiB
#                 validation pass); a snapshot at step 60, then on to the OOM: the projected steps are the ones
#                 the program ran (#3: 19% and 2x too long), in steps also where "valid N" markers come between.
#   twoleak.py    two sites keep 6 and 2 MiB a step: both are named, the larger first (#10d); as twodrop.py,
#                 with a 4K ring that dropped most events, the remedy says its total is over the events kept.
#   manyvalid.py, manysteps.py, manyfinal.py  past 1,024 markers (the labels the MARKERS section keeps): the
#                 labels come from the ring's marker events, so the statements still name the kind ("valid N"),
#                 count steps (1,2xx of them, with the separator), and compare a phase with the step before it,
#                 never with a marker known only by its seq (walk 11, #3).
#   early.py      most of the peak allocated before the first marker: said so, not "one marked phase" (#9).
#   growreq.py    each step's request grows by 8 MiB (a curriculum) and the step keeps 1 MiB; a snapshot at step 30,
#                 then on to the OOM (walk 11, #1, #2): the request's growth is stated with its rate, its remedy
#                 (bound the input) comes before the leak's and says how many steps the leak's fix alone lets run,
#                 and the snapshot's projection counts the height's rise (the steps the program ran); as growonly.py,
#                 without the leak, the statement's own projection. None of the programs above gets the statement.
set -u
cd "$(dirname "$0")/../.."
NAME=leak_shapes
. tests/sh/lib/drv_programs.sh
. tests/sh/lib/leak_programs.sh

cat >"$T/evalleak.py" <<'PY'
from steps import keep, mark, scratch
weights = []
assert keep(weights, 200)
outputs = []
def validate():
    return scratch(30) and keep(outputs, 10)  # the leak: outputs.append(out)
step = 0
while True:
    mark(b"step %d" % step)
    if not scratch(64):
        raise SystemExit(1)
    step += 1
    if step % 10 == 0:
        mark(b"valid %d" % (step // 10))
        if not validate():
            raise SystemExit(1)
PY
traced evalleak
has evalleak-oom "the growth after each validation marker" 'One call site grew after each marker "valid N" \(a suspected leak\): its live allocations on device 0 rose in 7[0-9] of the 7[0-9] intervals such a marker began and never fell, from 0 allocations \(0 B\) at marker "valid 1" \(seq [0-9]+\) to 7[0-9] allocations \(7[0-9]0 MiB\) at marker "step 7[0-9]0" \(seq [0-9]+\): .*evalleak\.py:6 in validate \(stack [0-9]+\); \+7[0-9]0 MiB in all, \+10\.0 MiB per such interval; it holds 7[0-9]0 MiB at the failure\.'
has evalleak-oom "the remedy names the site that keeps it" 'Live memory grew by 10\.0 MiB after each marker "valid N", over 7[0-9] of them \(7[0-9]0 MiB in all\), kept by .*evalleak\.py:6 in validate \(stack [0-9]+\): free what it allocates after each such marker'
hasnt evalleak-oom "the validation pass's size or a larger input blamed" 'Give it less at once|given more'
grep -q '"marker_kind": 1,' "$T/evalleak-oom.json" || { echo "leak_shapes: FAIL: evalleak: JSON marker_kind"; failed=1; }

cat >"$T/validfree.py" <<'PY'
from steps import keep, mark, scratch
weights = []
assert keep(weights, 200)
for step in range(1, 200):
    mark(b"step %d" % step)
    assert scratch(64)
    if step % 10 == 0:
        mark(b"valid %d" % (step // 10))
        assert scratch(300)
mark(b"export")
assert not scratch(900)
PY
traced validfree
hasnt validfree-oom "a leak in a validation pass that frees all it takes" 'suspected leak|Live memory grew|grew after each'

cat >"$T/warmup.py" <<'PY'
from steps import keep, mark, scratch
weights = []
assert keep(weights, 200)
state = []
for step in range(20):
    mark(b"step %d" % step)
    assert scratch(64)
    if step < 10:
        assert keep(state, 30)  # a warm-up: buffers made on first use
mark(b"step 20")
assert not scratch(900)
PY
traced warmup
hasnt warmup-oom "a warm-up called a leak" 'suspected leak|Live memory grew'
# The same warm-up with only 3 flat steps before the failure (walk 10, #10: "rose in 10 of 13 steps").
sed 's/range(20)/range(13)/; s/step 20/step 13/' "$T/warmup.py" >"$T/warmup3.py"
traced warmup3
hasnt warmup3-oom "a warm-up with 3 flat steps called a leak" 'suspected leak|Live memory grew'

cat >"$T/slowleak.py" <<'PY'
import random
from steps import keep, mark, scratch
random.seed(7)
weights = []
assert keep(weights, 200)
kept = []
step = 0
while True:
    mark(b"step %d" % step)
    if not scratch(64):
        raise SystemExit(1)
    if random.random() < 0.6 and not keep(kept, 4):
        raise SystemExit(1)
    step += 1
PY
traced slowleak
has slowleak-oom "a slow leak spread out" 'One call site grew across steps \(a suspected leak\): its live allocations on device 0 rose in 1[0-9]{2} of 2[0-9]{2} steps'

cat >"$T/project.py" <<'PY'
import sys
from steps import dump, keep, mark, scratch
need, valid = int(sys.argv[1]), int(sys.argv[2])
weights = []
assert keep(weights, 200)
kept = []
step = 0
after = None
while True:
    mark(b"step %d" % step)
    if not scratch(need) or not keep(kept, 4):
        break
    step += 1
    if valid and step % 10 == 0:
        mark(b"valid %d" % (step // 10))
        if not scratch(valid):
            break
    if step == 60:
        dump(b"projection")
        after = 0
    elif after is not None:
        after += 1
print(after)
PY
# projected UNIT LO HI NAME: the report's "lasts about N more UNIT" is within LO..HI percent of the steps the
# program ran after its snapshot.
projected() {
    ran=$(cat "$T/$4.out")
    said=$(grep -Eo "lasts about [0-9]+ more $1" "$T/$4-dump.txt" | grep -Eo '[0-9]+')
    [ -n "$said" ] && [ "$ran" -gt 0 ] && [ $((said * 100)) -ge $((ran * $2)) ] && [ $((said * 100)) -le $((ran * $3)) ] ||
        { echo "leak_shapes: FAIL: $4: projected ${said:-no} $1, ran $ran steps"; failed=1; }
}
ARGS="100 0"
traced project
projected steps 97 103 project
has project-dump "what a step needs at its height" 'more steps, as each step also needs up to 100 MiB at its height'
mv "$T/project" "$T/project100"
ARGS="16 300"
traced project
ARGS=
projected steps 85 103 project
has project-dump "what a validation pass needs at its height" '\+4\.00 MiB per step over 60 steps and the 5 intervals other markers began; .* lasts about [0-9]+ more steps, as each step also needs up to 300 MiB at its height'

cat >"$T/twoleak.py" <<'PY'
from steps import keep, mark, scratch
weights = []
assert keep(weights, 200)
losses, grads = [], []
def keep_loss():
    return keep(losses, 2)
def keep_grad():
    return keep(grads, 6)
step = 0
while True:
    mark(b"step %d" % step)
    if not scratch(64) or not keep_grad() or not keep_loss():
        raise SystemExit(1)
    step += 1
PY
traced twoleak
has twoleak-oom "both sites named, the larger first" 'twoleak\.py:8 in keep_grad \(stack [0-9]+\); \+5[0-9]{2} MiB in all, \+6\.00 MiB per step .*; 1 other site grew so too: .*twoleak\.py:6 in keep_loss \(stack [0-9]+\) \(\+1[0-9]{2} MiB in all, holding 1[0-9]{2} MiB\)'

has twoleak-oom "the remedy's total, kept by both" 'Live memory grew by 8\.00 MiB per step over [0-9]+ steps \(7[0-9]{2} MiB in all; the growing sites above kept 7[0-9]{2} MiB of it\)'
# The same with a ring that dropped most events: the device's growth too is over the events kept (walk 10, #16).
sed 's/keep(losses, 2)/keep(losses, 1)/; s/keep(grads, 6)/keep(grads, 2)/; s/not scratch(64)/not all(scratch(1) for _ in range(8))/' \
    "$T/twoleak.py" >"$T/twodrop.py"
traced twodrop OOMTRACE_RING=4K
has twodrop-oom "the remedy's total over the events kept, beside what the site holds" 'Live memory grew by 3\.00 MiB per step over [0-9]+ steps \([0-9]+ MiB in all over the events the ring kept, its first [0-9,]+ dropped; the growing sites above kept [0-9]+ MiB of it, and the largest holds [45][0-9]{2} MiB at the failure\)'

cat >"$T/manyvalid.py" <<'PY'
from steps import keep, mark, scratch
weights = []
assert keep(weights, 100)
outputs = []
step = 0
while True:
    mark(b"step %d" % step)
    if not scratch(20):
        raise SystemExit(1)
    step += 1
    if step % 10 == 0:
        mark(b"valid %d" % (step // 10))
        if not keep(outputs, 8):
            raise SystemExit(1)
PY
traced manyvalid
has manyvalid-oom "the kind named past 1,024 markers" 'One call site grew after each marker "valid N" \(a suspected leak\): its live allocations on device 0 rose in 1[0-9]{2} of the 1[0-9]{2} intervals such a marker began and never fell, from 0 allocations \(0 B\) at marker "valid 1" \(seq [0-9]+\)'
has manyvalid-oom "the remedy names the kind" 'Live memory grew by 8\.00 MiB after each marker "valid N", over 1[0-9]{2} of them'
hasnt manyvalid-oom "a marker known only by its seq" 'marker at seq'

cat >"$T/manysteps.py" <<'PY'
from steps import keep, mark, scratch
kept = []
step = 0
while True:
    mark(b"step %d" % step)
    if not scratch(10) or not keep(kept, 1):
        raise SystemExit(1)
    step += 1
PY
traced manysteps FAKECUDA_CAPACITY=1300M
has manysteps-oom "steps, from the kept labels, with the separator" 'One call site grew across steps \(a suspected leak\): its live allocations on device 0 rose in 1,2[0-9]{2} of 1,2[0-9]{2} steps and never fell, from 0 allocations \(0 B\) at marker "step 0" \(seq 1\)'
has manysteps-oom "the remedy per step" 'Live memory grew by 1\.00 MiB per step over 1,2[0-9]{2} steps'
hasnt manysteps-oom "a marker known only by its seq" 'marker at seq'

cat >"$T/manyfinal.py" <<'PY'
from drv import try_alloc
from steps import keep, mark, scratch
weights = []
assert keep(weights, 200)
for step in range(1100):
    mark(b"step %d" % step)
    assert scratch(50)
mark(b"final")
rc, _ = try_alloc(900 << 20)
assert rc == 2
PY
traced manyfinal
has manyfinal-oom "a phase compared with the step before it" 'The phase under way at the failure asked for 18\.0x the interval of another kind before it: after marker "final" \(seq [0-9]+\) .* where after marker "step 1099" \(seq [0-9]+\) it rose by 50\.0 MiB at most'
hasnt manyfinal-oom "a marker known only by its seq" 'marker at seq'
has manyfinal-oom "the weights before the first marker the tracer kept, with the labels it dropped" 'Most of the peak was allocated before the first kept marker: 200 MiB of the 250 MiB peak on device 0 \(80\.0%, 1 allocation\) was allocated before marker "step [0-9]+" \(seq [0-9]+\), the first of the latest 1,024 markers the tracer keeps apart from its event ring'

# Walk 11, #9: with every marker kept, the weights allocated before the first are not "a marked phase", nor
# before the first "kept" marker.
cat >"$T/early.py" <<'PY'
from drv import try_alloc
from steps import keep, mark, scratch
weights = []
assert keep(weights, 600)
for step in range(20):
    mark(b"step %d" % step)
    assert scratch(50)
rc, _ = try_alloc(900 << 20)
assert rc == 2
PY
traced early
has early-oom "before the first marker" 'Most of the peak was allocated before the first marker: 600 MiB of the 650 MiB peak on device 0 \(92\.3%, 1 allocation\) was allocated before marker "step 0" \(seq [0-9]+\)\.'
hasnt early-oom "a marked phase, or a kept marker where none was dropped" 'one marked phase|first kept marker'

cat >"$T/growreq.py" <<'PY'
import sys
from steps import dump, keep, mark, scratch
leak = int(sys.argv[1])
weights = []
assert keep(weights, 200)
kept = []
step = 0
after = None
while True:
    mark(b"step %d" % step)
    if not scratch((step + 1) * 8) or (leak and not keep(kept, leak)):
        break
    if step == 30:
        dump(b"projection")
        after = 0
    elif after is not None:
        after += 1
    step += 1
print(after)
PY
ARGS=1
traced growreq
ARGS=
has growreq-oom "the failed request's growth, with its rate" 'The request grew from step to step: the largest allocation on device 0 at .*steps\.py:3 in scratch \(stack [0-9]+\), the failed request.s call site, rose in 9[0-9] of 9[0-9] steps and never fell, from 8\.00 MiB after marker "step 0" \(seq [0-9]+\) to 7[0-9]{2} MiB after marker "step 9[0-9]" \(seq [0-9]+\), the largest that fit, and 7[0-9]{2} MiB, the failed request, after marker "step 9[0-9]" \(seq [0-9]+\): \+8\.00 MiB a step\.'
has growreq-oom "its remedy first, with the steps the leak's fix alone lets run" '^  - The request at .*steps\.py:3 in scratch \(stack [0-9]+\) grew by 8\.00 MiB a step, to 7[0-9]{2} MiB at the failure: bound what one step gets .*; fixing the leak above \(1\.00 MiB a step\) alone gives back the 9[0-9]\.0 MiB it holds, which this growth uses up in about 1[0-9] more steps \(to step 1[0-9]{2}\)\.'
grep -A3 '^What to try' "$T/growreq-oom.txt" | sed -n 3p | grep -q '^  - Live memory grew by 1\.00 MiB per step' ||
    { echo "leak_shapes: FAIL: growreq: the leak's remedy second"; failed=1; }
has growreq-dump "the projection counts the height's rise" 'lasts about [0-9]+ more steps, as each step also needs up to 2[0-9]{2} MiB at its height and 8\.00 MiB more each step \(that height grew in 30 of 30 steps\)'
projected steps 97 103 growreq
sed 's/^leak = int(sys.argv\[1\])/leak = 0/' "$T/growreq.py" >"$T/growonly.py"
ARGS=
traced growonly
has growonly-dump "without a leak, the statement's own projection" 'Each step needed more than the one before: how far live memory on device 0 rose above a step.s start grew in 30 of 30 steps and never fell, from 8\.00 MiB after marker "step 0" \(seq [0-9]+\) to 248 MiB after marker "step 30" \(seq [0-9]+\) \(under way at the peak\): \+8\.00 MiB a step\..*at this rate the device.s free memory \([0-9.]+ MiB at the snapshot\) holds about [0-9]+ more steps\.'
ran=$(cat "$T/growonly.out")
said=$(grep -Eo 'holds about [0-9]+ more steps' "$T/growonly-dump.txt" | grep -Eo '[0-9]+')
[ -n "$said" ] && [ $((said * 100)) -ge $((ran * 97)) ] && [ $((said * 100)) -le $((ran * 103)) ] ||
    { echo "leak_shapes: FAIL: growonly: projected ${said:-no} steps, ran $ran"; failed=1; }
hasnt growonly-oom "no leak remedy without a leak" 'Live memory grew'
for r in evalleak-oom validfree-oom warmup-oom warmup3-oom slowleak-oom project-dump project-oom twoleak-oom twodrop-oom \
    manyvalid-oom manysteps-oom manyfinal-oom early-oom; do
    hasnt "$r" "a growing request where none grew" 'The request grew from|needed more than the one before|bound what one step gets|more each step'
done

[ "$failed" -eq 0 ] && echo "leak_shapes: ok (15 programs)"
exit "$failed"
