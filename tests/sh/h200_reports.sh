#!/bin/sh
# Reports on real snapshots from the H200 (docs/validation.md, runs 7, 8 and later; tests/gpu/fw_*.py and
# cupy_alloc.py under torch 2.11, JAX 0.11.2, CuPy 14.2): each one's first screen must name what the user
# needs, from the numbers the companion recorded. A statement that goes missing or turns wrong fails here.
set -u
cd "$(dirname "$0")/../.."
READER=${READER:-build/oomtrace-read}
D=tests/h200
T=$(mktemp)
trap 'rm -f "$T"' EXIT INT TERM
failed=0
has() { # file, pattern, what
    if ! grep -Eq -- "$2" "$T"; then
        echo "h200_reports: FAIL: $1: $3 (no line matching: $2)"
        failed=1
    fi
}
hasnt() {
    if grep -Eq -- "$2" "$T"; then
        echo "h200_reports: FAIL: $1: $3 (a line matches: $2)"
        failed=1
    fi
}
read_one() {
    "$READER" "$D/$1.oomt" >"$T" 2>&1 || { echo "h200_reports: FAIL: $1: exit $?"; failed=1; }
    hasnt "$1" 'unknown trigger|trigger is not oom' "a framework OOM read as an odd trigger"
}

read_one fw_fragmentation
has fw_fragmentation "OUT OF MEMORY in a framework's allocator" "title"
has fw_fragmentation '2 driver-level snapshots before it' "the probes"
has fw_fragmentation 'framework cache \(reserved, not allocated\) +57\.1 GiB' "freed-but-cached memory in the breakdown"
has fw_fragmentation 'Fragmentation: .*largest free block was 424 MiB' "the fragmentation statement"
has fw_fragmentation 'expandable_segments:True before the process starts' "the remedy"
# The line that made the 1 GiB segments is not the holder of 138 GiB of live tensors: at the failure its
# row says what the segments hold now (issue 11).
has fw_fragmentation "^        PyTorch's segments made here: 138 GiB reserved in 138 segments; now 80\.9 GiB of it allocated to tensors and 57\.1 GiB free in the cache" "the creator's row, reserved against allocated"
"$READER" --format json "$D/fw_fragmentation.oomt" >"$T" 2>&1
python3 - "$T" <<'PY' || { echo "h200_reports: FAIL: fw_fragmentation: framework_segments in JSON"; failed=1; }
import json, sys
d = json.load(open(sys.argv[1]))
fs = d["at_failure"]["sites"][0]["framework_segments"]
assert fs["reserved_bytes"] == 148176371712 and fs["free_bytes"] == 61354278912 and fs["misread_as_live"], fs
assert d["peak"]["sites"][0]["framework_segments"] is None
PY

read_one fw_fraction
has fw_fraction "per-process memory fraction refused the request, not a full device" "the fraction statement"
has fw_fraction '0 driver-level snapshots' "no probes"

read_one fw_jax_prealloc
has fw_jax_prealloc 'JAX preallocated its pool' "the preallocation statement"
has fw_jax_prealloc 'XLA_PYTHON_CLIENT_PREALLOCATE=false' "the preallocation remedy"
hasnt fw_jax_prealloc 'gradient checkpointing' "PyTorch's remedy for a JAX program"
has fw_jax_prealloc "^      XLA's preallocated pool \(JAX\) +872 MiB" "the pool beyond JAX's arrays is cache"
has fw_jax_prealloc '^      JAX arrays +104 GiB' "JAX's arrays"
# JAX's arrays are the program's own, not PyTorch's activations, though the venv's path says torch
# (/opt/torch/.venv).
has fw_jax_prealloc "^  the program's own allocations \(inferred\) +104 GiB" "JAX's arrays under the program's own allocations"
hasnt fw_jax_prealloc 'activations and temporaries' "a JAX program's arrays called activations"

read_one fw_cupy_then_torch
has fw_cupy_then_torch "CuPy's memory pool kept 64\.0 GiB that the program had freed" "CuPy's pool cache"
has fw_cupy_then_torch 'framework cache \(reserved, not allocated\) +64\.0 GiB' "CuPy's freed-but-pooled bytes are cache in the breakdown"
has fw_cupy_then_torch "^      CuPy's memory pool +64\.0 GiB" "the cache's part"
has fw_cupy_then_torch 'activations and temporaries \(inferred\) +75\.0 GiB' "only torch's tensors are activations"
# The view's heading names every framework that reported, not the first alone (CuPy above a PyTorch table).
has fw_cupy_then_torch "^Allocator's view \(as the frameworks reported it: CuPy 14\.2\.0 and PyTorch 2\.11\.0\+cu130, " "both reporters"
has fw_cupy_then_torch 'cupy\.get_default_memory_pool\(\)\.free_all_blocks\(\) once its arrays are gone' "the pool's remedy"
"$READER" --format markdown "$D/fw_cupy_then_torch.oomt" >"$T" 2>&1
has fw_cupy_then_torch "^As the frameworks reported it: CuPy 14\.2\.0 and PyTorch 2\.11\.0\+cu130, " "both reporters in markdown"

read_one fw_graph_pool
has fw_graph_pool 'CUDA graph private pool: 1 pool of PyTorch on device 0 reserved 310 MiB in 4 segments' "the graph pool"

read_one fw_cudnn_probes
has fw_cudnn_probes '54 driver-level snapshots before it' "cuDNN's probes counted"
has fw_cudnn_probes 'Failed request: 16\.0 GiB .* by PyTorch' "PyTorch's request"

read_one cupy_alloc
has cupy_alloc 'larger than the whole device: requested 200 GiB' "the request"
hasnt cupy_alloc 'gradient checkpointing' "PyTorch's remedy for a CuPy program"
# CuPy's arrays are the program's own allocations, split by the line that made each.
has cupy_alloc "^  the program's own allocations \(inferred\) +1\.50 GiB" "the program's own allocations"
has cupy_alloc '^      cupy_alloc\.py:16 in <module> +1\.00 GiB' "the 1 GiB array's line"
has cupy_alloc '^      cupy_alloc\.py:17 in <module> +512 MiB' "the 512 MiB array's line"
hasnt cupy_alloc 'activations and temporaries' "a CuPy program's arrays called activations"

# The companion's own frames (Companion.framework_oom, on_exception, on_raise) top the failed request's
# stack of a framework OOM: they are the tracer's, never shown in any format; the full native view counts them.
for w in fw_fragmentation ut_adam_first_step ut_gpt2_batch; do
    for f in text json markdown html folded memviz; do
        "$READER" --format "$f" "$D/$w.oomt" >"$T" 2>&1 || { echo "h200_reports: FAIL: $w --format $f: exit $?"; failed=1; }
        hasnt "$w ($f)" '_oomtrace_companion|<oomtrace>/|Companion\.' "the tracer's own frames shown"
    done
done
"$READER" --native "$D/fw_fragmentation.oomt" >"$T" 2>&1
has fw_fragmentation '\(3 tracer frames hidden\)' "--native counts the tracer's frames"
"$READER" "$D/ut_adam_first_step.oomt" >"$T" 2>&1
has ut_adam_first_step '^    #0  .*/torch/optim/adam\.py:178 in Adam\._init_group' "the failed request's stack starts at the program's side"

# Issue 12's workloads (tests/gpu/ut_*.py, H200 run of 2026-12-01): each report ends with the remedies its
# numbers support, and only those.
read_one ut_adam_first_step
has ut_adam_first_step 'What to try' "a remedy for the optimizer state being created"
has ut_adam_first_step 'The optimizer state was being created when the device ran out, in the first optimizer step: Adam keeps 2 states per parameter \(exp_avg, exp_avg_sq\), which would need 2\.0 x the parameters \(80\.0 GiB' "Adam's need, from its states"
has ut_adam_first_step 'Python stack borrowed from the main thread \([0-9]*\), which waited in torch/autograd/graph\.py:[0-9]* in _engine_run_backward' "autograd's allocations carry the waiting thread's stack"
hasnt ut_adam_first_step 'no Python frames' "a native thread's allocation without a stack"
has ut_adam_first_step '58\.0 GiB of it, 42% of the used memory, existed at the failure' "what existed at the failure"
has ut_adam_first_step 'Adam8bit.*ZeRO-1/2 or FSDP.*SGD with momentum' "the optimizer-state remedies"
hasnt ut_adam_first_step 'grew through the event ring|Live memory grew' "building the state in one step is not a leak"

read_one ut_eval_grad
has ut_eval_grad 'no gradient and no optimizer state exist and no optimizer step ran.*torch\.no_grad\(\) or torch\.inference_mode\(\)' "evaluation with autograd on"
has ut_eval_grad 'and autograd was on at the failure \(torch\.is_grad_enabled\(\)\)' "torch's grad mode at the OOM"
hasnt ut_eval_grad 'gradient checkpointing' "checkpointing for a loop that never runs backward"

# A batch-size search (tests/gpu/fw_earlier.py, run 100): its first attempt runs out in the first forward, before any
# backward or optimizer step, with an optimizer over the model: training, not an evaluation with autograd on.
read_one fw_earlier_first
has fw_earlier_first 'Activations and temporaries are 100% of the peak \(128 GiB\): gradient checkpointing' "the activations remedy for a first training step"
hasnt fw_earlier_first 'torch\.no_grad\(\)' "no_grad for a model with an optimizer"
# The driver-level snapshot of the next attempt carries the caught OOM's view: shown as earlier, read by nothing.
read_one fw_earlier_driver
has fw_earlier_driver "^Allocator's view, earlier \(.*taken 1\.2 s before the failure, at PyTorch's own out-of-memory error; 3 device allocations and 0 frees came between: not the state at the failure" "the earlier view, said as such"
hasnt fw_earlier_driver '^  parameters|segments by the call site|PyTorch at the out-of-memory' "the earlier view read as the failure's"

read_one ut_summed_loss
# Its three stacks under one line (one row of the site table) kept 256 MiB a step each: the growth is said of
# that line, with their sums, not of one stack's 256 MiB (lead's note, walk 9's issue 13).
has ut_summed_loss 'The call sites under one line grew across optimizer steps: their live allocations on device 0 rose in 182 of 182 steps and never fell.*: ut_summed_loss\.py:19 in train \(3 call sites below this line, the largest stack [0-9]+\); \+136 GiB in all, \+768 MiB per step over 182 steps; they hold 138 GiB at the failure' "the growth of the line's sites together"
has ut_summed_loss 'Live memory grew by 769 MiB per optimizer step over 182 steps \(137 GiB in all; the growing sites above kept 136 GiB of it\)' "the remedy's share of the device's growth"
has ut_summed_loss 'not cached: this is live tensors' "the allocator's view: live tensors, not cache"
has ut_summed_loss 'at marker "step 183 [^"]*" \(seq 747\): ut_summed_loss\.py:19 in train' "the growing site by the user's line (borrowed from the thread waiting in backward)"
has ut_summed_loss 'Live memory grew by 769 MiB per optimizer step over 182 steps.*loss\.item\(\).*retain_graph=True' "the leak remedy"
hasnt ut_summed_loss 'gradient checkpointing \(torch' "checkpointing for memory held across steps"
hasnt ut_summed_loss "inputs changed" "the same inputs every step"

read_one ut_gpt2_batch
has ut_gpt2_batch 'Activations and temporaries are 93% of the peak' "the activation remedy"
has ut_gpt2_batch "The model's inputs changed just before the failure: optimizer step 3 was under way with input_ids=\(64, 1024\), labels=\(64, 1024\), where step 2 had input_ids=\(2, 1024\)" "the batch that jumped"
has ut_gpt2_batch 'PyTorch at the out-of-memory: autograd on .*; optimizer step 3 under way, the model.s inputs input_ids=\(64, 1024\), labels=\(64, 1024\)' "the failing step and its inputs (the companion's hook)"
hasnt ut_gpt2_batch 'step_in_progress' "the companion's keys as such"
hasnt ut_gpt2_batch 'Adam8bit' "an 8-bit optimizer for state that is 4.5% of the device"

# Near-identical sites group under the program's own line (its innermost frame outside libraries, with the
# same callers): GPT-2's forward is one row of ~93%, not five rows of ~12% by library line and native path.
read_one ut_gpt2_batch
has ut_gpt2_batch '^   1\. 129 GiB in 188 allocations, 92\.6% of peak: ut_gpt2_batch\.py:23 in train_step \(39 call sites below this line\)' "the training line's group at the peak"
has ut_gpt2_batch '^        17\.2 GiB in 11 allocations, 12\.4%: → transformers/pytorch_utils\.py:119 in Conv1D\.forward \(stack 37\)' "a member under its line"
hasnt ut_gpt2_batch '^   [0-9]+\. .*% of peak: ut_gpt2_batch\.py:23 in train_step → ' "a member left as a row of its own"
read_one ut_eval_grad
has ut_eval_grad '^   1\. 138 GiB in 142 allocations, 99\.3% of live: ut_eval_grad\.py:16 in evaluate \(6 call sites below this line\)' "the eval line's group"
has ut_eval_grad '^   2\. 1\.00 GiB in 5 allocations, 0\.7% of live: ut_eval_grad\.py:10 in <module> \(2 call sites below this line\)' "another line stays apart"
# autograd's allocations borrow the waiting thread's stack: they group under the backward() line.
read_one ut_adam_first_step
has ut_adam_first_step '^   2\. 40\.1 GiB in 44 allocations, 29\.0% of live: ut_adam_first_step\.py:20 in train_step \(5 call sites below this line\)' "the gradients under loss.backward()'s line"
hasnt ut_adam_first_step '^   [0-9]+\. .*: at::detail::empty_cuda' "a row named by a native frame"
"$READER" --split "$D/ut_gpt2_batch.oomt" >"$T" 2>&1
has ut_gpt2_batch '^   1\. 17\.2 GiB in 11 allocations, 12\.4% of peak: ut_gpt2_batch\.py:23 in train_step → transformers/pytorch_utils\.py:119' "--split: one row per site"
"$READER" --format json "$D/ut_gpt2_batch.oomt" >"$T" 2>&1
python3 - "$T" <<'PY' || { echo "h200_reports: FAIL: ut_gpt2_batch: the JSON groups"; failed=1; }
import json, sys
d = json.load(open(sys.argv[1]))
g = d["peak"]["groups"][0]
assert g["key"] == "user_line" and g["line"] == "ut_gpt2_batch.py:23 in train_step", g["line"]
assert abs(g["share"] - 0.926) < 0.001 and len(g["stack_ids"]) == 39, g
sites = {s["stack_id"]: s["bytes"] for s in d["peak"]["sites"]}
assert sum(sites[i] for i in g["stack_ids"]) == g["bytes"]
assert sum(x["bytes"] for x in d["peak"]["groups"]) == d["peak"]["bytes"]
PY

# PyTorch's cudaMallocAsync backend has no OOM observer: the companion records the OOM where it reaches Python,
# without the request's size (H200 run 11, tests/gpu/fw_async_backend.py).
read_one fw_async_backend
has fw_async_backend "OUT OF MEMORY in a framework's allocator" "title"
has fw_async_backend '^Failed request: size not reported \(0 bytes\) by PyTorch' "an unknown size is not 0 B"
hasnt fw_async_backend 'The failed request \(0 B\)' "no statement on a request of unknown size"
has fw_async_backend 'Allocation on device 0 would exceed allowed memory' "PyTorch's own message"
"$READER" --format markdown "$D/fw_async_backend.oomt" >"$T" 2>&1
has fw_async_backend '^\*\*Failed request:\*\* size not reported by' "markdown: an unknown size"

# A curriculum that asks for 256 MiB more each step under the default caching allocator (tests/gpu/grow_request.py,
# run 49, its framework OOM): Why states the request's growth, and What to try answers it first; checkpointing,
# for activations at 53% of the peak inferred from stacks, comes after it (runs 45-46: it came first, by bytes).
read_one grow_request
has grow_request 'The request grew from step to step: .*grow_request\.py:27 in train .*rose in 91 of 91 steps and never fell.*\+256 MiB a step' "the growth"
has grow_request 'activations and temporaries \(inferred\) +116 GiB +99\.5% +74\.3 GiB +53\.4%' "activations at the peak"
sed -n '/^What to try/,/^$/p' "$T" | sed -n '2,3p' >"$T.try"
{ sed -n 1p "$T.try" | grep -q 'The request at grow_request\.py:27 in train .* grew by 256 MiB a step, to 23\.2 GiB at the failure: bound what one step gets' &&
    sed -n 2p "$T.try" | grep -q 'Activations and temporaries are 53% of the peak .*gradient checkpointing'; } ||
    { echo "h200_reports: FAIL: grow_request: What to try is not the growth's remedy, then checkpointing: $(cut -c1-80 "$T.try")"; failed=1; }
rm -f "$T.try"
"$READER" --format json "$D/grow_request.oomt" >"$T" 2>&1
python3 - "$T" <<'PY' || { echo "h200_reports: FAIL: grow_request: what_to_try in JSON"; failed=1; }
import json, sys
d = json.load(open(sys.argv[1]))
assert [w["kind"] for w in d["what_to_try"]] == ["bound_input", "activations"], [w["kind"] for w in d["what_to_try"]]
assert d["what_to_try"][0]["numbers"]["bytes_per_step"] == 256 << 20, d["what_to_try"][0]
PY

[ "$failed" -eq 0 ] && echo "h200_reports: ok (16 snapshots)"
exit "$failed"
