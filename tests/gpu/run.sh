#!/usr/bin/env bash
# GPU validation of oomtrace: runs each workload of tests/gpu once plain and once with build/liboomtrace.so
# preloaded, diffs what the preload must not change, reads every snapshot with build/oomtrace-read (text and
# JSON), and leaves $OUT/gpu-results.tar.gz (everything) plus $OUT/summary.txt (also printed at the end).
#
#   bash tests/gpu/run.sh [workload ...]        # from anywhere; all workloads by default
#
# Workloads: train_oom (+ its --segments-at-oom variant), train_oom_segments, vmm_nvcc, ctx_reset, alloc_expandable,
# alloc_async, mark_steps, neighbour, cuda_graphs, cupy_alloc, jax_alloc (= jax_prealloc + jax_noprealloc),
# cudnn_bench, nccl_allreduce and ddp_rank_oom (these two only with 2 GPUs visible); the framework layer's
# fw_fragmentation fw_fraction fw_jax_prealloc fw_cupy_then_torch fw_graph_pool fw_cudnn_probes
# fw_async_backend fw_earlier (= framework);
# issue 12's ut_adam_first_step ut_eval_grad ut_gpt2_batch ut_summed_loss ut_leak_nomarkers ut_stray_process
# (= userterms); fast_oom (its modes first, fraction-first, leak), ipc_size and grow_request.
# Env: OUT (default ./gpu-out), GPU_TEST_BUDGET (seconds for the workloads, default 310 with one GPU and 400
# with two), GPU_TEST_TIMEOUT (per run, default 120), PYTHON (default python3).
# Needs build/liboomtrace.so and build/oomtrace-read (make) and .carry/lib (libunwind & co. for the preload).
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd -P)
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd -P)
PY=$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)' 2>/dev/null) # the real one, not a shim
[ -n "$PY" ] && [ -x "$PY" ] || PY=${PYTHON:-python3}
PER=${GPU_TEST_TIMEOUT:-120}
LIB=$ROOT/build/liboomtrace.so
READER=$ROOT/build/oomtrace-read
CARRY_LD=$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/oomtrace-gpu.XXXXXX") || exit 1
R=$WORK/gpu-results
mkdir -p "$R"
START=$SECONDS

# NVLink multicast must stay off on the GPU machines, for every process started from here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 OMP_NUM_THREADS=4 PYTHONDONTWRITEBYTECODE=1
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF XLA_PYTHON_CLIENT_PREALLOCATE XLA_PYTHON_CLIENT_MEM_FRACTION \
    XLA_PYTHON_CLIENT_ALLOCATOR LD_PRELOAD OOMTRACE_DIR OOMTRACE_DUMP OOMTRACE_SIGNAL

if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    IFS=, read -r -a GPUS <<<"$CUDA_VISIBLE_DEVICES"
else
    mapfile -t GPUS < <(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | tr -d ' ')
fi
NGPU=${#GPUS[@]}
GPU1=${GPUS[0]:-0}
GPU2=${GPUS[0]:-0},${GPUS[1]:-1}
if [ "$NGPU" -ge 2 ]; then BUDGET=${GPU_TEST_BUDGET:-400}; else BUDGET=${GPU_TEST_BUDGET:-310}; fi

log() { echo "[run.sh +$((SECONDS - START))s] $*" >&2; }
left() { echo $((BUDGET - (SECONDS - START))); }

# ---- header: GPUs, versions, build ---------------------------------------------------------------------------
{
    echo "== oomtrace GPU validation $(date -u +%Y-%m-%dT%H:%M:%SZ) host=${HOSTNAME:-$(uname -n)} gpus_visible=$NGPU"
    nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv 2>&1 | head -5
    echo "driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)" \
        "| nvcc $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | cut -d' ' -f2)"
    timeout 90 "$PY" - <<'EOF' 2>>"$R/header.err" | tr '\n' '|' | sed 's/|$/\n/; s/|/ | /g'
import importlib, sys
print("python", sys.version.split()[0])
for name in ("torch", "jax", "jaxlib", "cupy"):
    try:
        m = importlib.import_module(name)
        extra = ""
        if name == "torch":
            extra = f" (cuda {m.version.cuda}, cudnn {m.backends.cudnn.version()})"
        print(name, m.__version__ + extra)
    except Exception as e:
        print(name, "unavailable:", type(e).__name__, str(e)[:80])
EOF
} >"$R/header.txt" 2>>"$R/header.err"
{
    for f in "$LIB" "$READER"; do
        if [ -e "$f" ]; then echo "== ldd $f"; LD_LIBRARY_PATH=$CARRY_LD ldd "$f" 2>&1; else echo "MISSING $f"; fi
    done
    echo "== .carry/lib"; ls -la "$ROOT/.carry/lib" 2>&1
} >"$R/build.txt"
missing=$(grep -E 'not found|^MISSING' "$R/build.txt" | sed 's/=>.*//; s/^[[:space:]]*//' | sort -u | tr '\n' ' ')
echo "build: liboomtrace.so $([ -e "$LIB" ] && echo ok || echo MISSING), oomtrace-read $([ -x "$READER" ] && echo ok || echo MISSING); unresolved: ${missing:-none}" >>"$R/header.txt"
cat "$R/header.txt" >&2

# ---- running ---------------------------------------------------------------------------------------------------
: >"$R/order.txt"
begin() { # begin NAME key=value... : a workload's folder and info.txt
    local d=$R/$1
    mkdir -p "$d/snap" "$d/reports"
    echo "$1" >>"$R/order.txt"
    shift
    printf '%s\n' "$@" >"$d/info.txt"
}

# run_mode NAME plain|traced [VAR=VALUE...] CMD ARGS...
run_mode() {
    local wl=$1 mode=$2 d=$R/$1 t l t0 rc vars=() pre=()
    shift 2
    while [ $# -gt 0 ] && [[ $1 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do vars+=("$1"); shift; done
    l=$(left)
    if [ "$l" -lt 20 ]; then
        echo "time budget spent" >"$d/$mode.skipped"; log "$wl $mode: skipped (budget)"; return
    fi
    t=$PER; [ "$l" -lt "$t" ] && t=$l
    if [ "$mode" = traced ]; then
        pre=("LD_PRELOAD=$LIB" "OOMTRACE_DIR=$d/snap" "LD_LIBRARY_PATH=$CARRY_LD")
        if [ -s "$d/plain.ms" ]; then # a hang under the preload should not eat the others' time
            local cap=$(( $(cat "$d/plain.ms") * 4 / 1000 ))
            [ "$cap" -lt 45 ] && cap=45
            [ "$cap" -lt "$t" ] && t=$cap
        fi
    fi
    printf '%q ' env "${vars[@]}" "${pre[@]}" "$@" >"$d/$mode.cmd"
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader >"$d/$mode.gpu-apps-before" 2>&1
    log "$wl $mode (timeout ${t}s)"
    t0=$(date +%s%N)
    timeout -k 10 "$t" env "${vars[@]}" "${pre[@]}" "$@" >"$d/$mode.out" 2>"$d/$mode.err" </dev/null
    rc=$?
    echo $(( ($(date +%s%N) - t0) / 1000000 )) >"$d/$mode.ms"
    echo "$rc" >"$d/$mode.rc"
    log "$wl $mode: rc=$rc"
}

pair() { # pair NAME [VAR=VALUE...] CMD ARGS...
    run_mode "$1" plain "${@:2}"
    run_mode "$1" traced "${@:2}"
}

T=tests/gpu
C1=CUDA_VISIBLE_DEVICES=$GPU1
C2=CUDA_VISIBLE_DEVICES=$GPU2

wl_train_oom() {
    begin train_oom compare=exact errline=1 expect_rc=1
    pair train_oom "$C1" "$PY" $T/train_oom.py
}
wl_train_oom_segments() {
    begin train_oom_segments compare=none expect_rc=1 "note=traced only: OOM caught, segments summed, dump, re-raise"
    run_mode train_oom_segments traced "$C1" "$PY" $T/train_oom.py --segments-at-oom
}
# build_cu NAME: $T/NAME.cu built by nvcc into $WORK/NAME (the driver linked directly); 1, with a skip line in
# the workload's info.txt, when nvcc fails.
build_cu() {
    local nv home
    nv=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    home=$(dirname "$(dirname "$nv")")
    if ! timeout 120 "$nv" -O2 -o "$WORK/$1" $T/$1.cu -L"$home/lib64/stubs" \
        -L"$home/targets/x86_64-linux/lib/stubs" -lcuda >"$R/$1/build.log" 2>&1; then
        echo "skipped=nvcc failed: $(grep -m1 -i error "$R/$1/build.log" | cut -c1-150)" >>"$R/$1/info.txt"
        return 1
    fi
}
wl_vmm_nvcc() {
    begin vmm_nvcc compare=exact
    build_cu vmm_nvcc || return
    pair vmm_nvcc "$C1" "$WORK/vmm_nvcc"
}
wl_ctx_reset() {
    begin ctx_reset compare=exact "note=cuCtxDestroy per kind, then cudaDeviceReset between 3 phases"
    build_cu ctx_reset || return
    pair ctx_reset "$C1" "$WORK/ctx_reset"
}
wl_alloc_expandable() {
    begin alloc_expandable compare=exact
    pair alloc_expandable "$C1" PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$PY" $T/alloc_expandable.py
}
wl_alloc_async() {
    begin alloc_async compare=exact
    pair alloc_async "$C1" PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "$PY" $T/alloc_async.py
}
wl_mark_steps() {
    begin mark_steps compare=exact
    pair mark_steps "$C1" OOMTRACE_DUMP=exit "$PY" $T/mark_steps.py
}
wl_neighbour() {
    begin neighbour compare=exact
    pair neighbour "$C1" "$PY" $T/neighbour.py
}
# An IPC mapping opened in a spawned child (torch.multiprocessing): counted as imported with its size.
wl_ipc_size() {
    begin ipc_size compare=exact
    pair ipc_size "$C1" "$PY" $T/ipc_size.py
}
wl_cuda_graphs() {
    begin cuda_graphs compare=exact
    pair cuda_graphs "$C1" "$PY" $T/cuda_graphs.py
}
wl_cupy_alloc() {
    begin cupy_alloc compare=exact
    pair cupy_alloc "$C1" "$PY" $T/cupy_alloc.py
}
wl_jax_prealloc() {
    begin jax_prealloc compare=exact
    pair jax_prealloc "$C1" "$PY" $T/jax_alloc.py
}
wl_jax_noprealloc() {
    begin jax_noprealloc compare=exact
    pair jax_noprealloc "$C1" XLA_PYTHON_CLIENT_PREALLOCATE=false "$PY" $T/jax_alloc.py
}
wl_cudnn_bench() {
    begin cudnn_bench compare=exact
    pair cudnn_bench "$C1" "$PY" $T/cudnn_bench.py
}
# The framework layer (issue 11): each OOMs inside a framework (not caught, exit 1) or dumps; the summary's
# "framework:" line says which snapshot is the fatal one, its request, its probes and the allocator's figures.
wl_fw_fragmentation() {
    begin fw_fragmentation compare=exact errline=1 expect_rc=1
    pair fw_fragmentation "$C1" "$PY" $T/fw_fragmentation.py
}
wl_fw_fraction() {
    begin fw_fraction compare=exact errline=1 expect_rc=1
    pair fw_fraction "$C1" "$PY" $T/fw_fraction.py
}
wl_fw_jax_prealloc() {
    begin fw_jax_prealloc compare=exact errline=1 expect_rc=1
    pair fw_jax_prealloc "$C1" "$PY" $T/fw_jax_prealloc.py
}
wl_fw_cupy_then_torch() {
    begin fw_cupy_then_torch compare=exact errline=1 expect_rc=1
    pair fw_cupy_then_torch "$C1" "$PY" $T/fw_cupy_then_torch.py
}
wl_fw_graph_pool() {
    begin fw_graph_pool compare=exact
    pair fw_graph_pool "$C1" "$PY" $T/fw_graph_pool.py
}
wl_fw_async_backend() {
    begin fw_async_backend compare=exact
    pair fw_async_backend "$C1" PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "$PY" $T/fw_async_backend.py
}
# A batch-size search: driver-level snapshots after a caught OOM carry its (earlier) view.
wl_fw_earlier() {
    begin fw_earlier compare=exact errline=1 expect_rc=1
    pair fw_earlier "$C1" "$PY" $T/fw_earlier.py
}
wl_fw_cudnn_probes() {
    begin fw_cudnn_probes compare=exact errline=1 expect_rc=1
    pair fw_cudnn_probes "$C1" "$PY" $T/fw_cudnn_probes.py
}
# The report in the user's terms (issue 12): breakdown, the user's line, What to try. Each OOMs (exit 1)
# except ut_gpt2_batch when transformers is missing; expected report lines are in each script's docstring.
wl_ut_adam_first_step() {
    begin ut_adam_first_step compare=exact errline=1 expect_rc=1
    pair ut_adam_first_step "$C1" "$PY" $T/ut_adam_first_step.py
}
wl_ut_eval_grad() {
    begin ut_eval_grad compare=exact errline=1 expect_rc=1
    pair ut_eval_grad "$C1" "$PY" $T/ut_eval_grad.py
}
wl_ut_gpt2_batch() {
    begin ut_gpt2_batch compare=none "note=rc 1 (OOM) or 0 (transformers missing)"
    pair ut_gpt2_batch "$C1" "$PY" $T/ut_gpt2_batch.py
}
wl_ut_leak_nomarkers() {
    begin ut_leak_nomarkers compare=exact errline=1 expect_rc=1
    pair ut_leak_nomarkers "$C1" "$PY" $T/ut_leak_nomarkers.py
}
wl_ut_stray_process() {
    begin ut_stray_process compare=exact
    pair ut_stray_process "$C1" "$PY" $T/ut_stray_process.py
}
# A program that fails within a second of its first allocation (runs 37-39): each mode must write the
# framework's snapshot, also when torch refuses its very first allocation inside its pool.
wl_fast_oom() {
    for m in first fraction-first leak; do
        begin "fast_oom_$m" compare=exact errline=1 expect_rc=1
        pair "fast_oom_$m" "$C1" "$PY" $T/fast_oom.py "$m"
    done
}
# A request that grows every step under the default caching allocator (growing_request, bound_input).
wl_grow_request() {
    begin grow_request compare=exact errline=1 expect_rc=1
    pair grow_request "$C1" "$PY" $T/grow_request.py
}
wl_ut_summed_loss() {
    begin ut_summed_loss compare=exact errline=1 expect_rc=1
    pair ut_summed_loss "$C1" "$PY" $T/ut_summed_loss.py
}
two_gpus() {
    if [ "$NGPU" -lt 2 ]; then
        begin "$1" "skipped=needs 2 GPUs, $NGPU visible"
        return 1
    fi
}
wl_nccl_allreduce() {
    two_gpus nccl_allreduce || return
    begin nccl_allreduce compare=exact
    pair nccl_allreduce "$C2" "$PY" -m torch.distributed.run --standalone --nproc_per_node=2 $T/nccl_allreduce.py
}
wl_ddp_rank_oom() {
    two_gpus ddp_rank_oom || return
    begin ddp_rank_oom compare=none expect_rc=1 "note=stdout not compared (rank 0 is stopped mid-step)"
    # The launcher stops rank 0 once rank 1 dies: its trace must survive (crash flush, final flush on SIGTERM).
    pair ddp_rank_oom "$C2" OOMTRACE_DUMP=oom,crash,exit OOMTRACE_FLUSH_MS=500 "$PY" -m torch.distributed.run \
        --standalone --nproc_per_node=2 $T/ddp_rank_oom.py
}
# Not in the default list: `run.sh bench` measures step overhead for docs/PERFORMANCE.md (about 6 minutes).
# Plain and traced processes alternate, two rounds per allocator; inside a plain process PyTorch's own
# recorder is switched on and off between steps (tests/gpu/bench_steps.py).
wl_bench() {
    begin bench compare=none "note=timings only; see bench_summary.txt"
    local d=$R/bench alloc conf round modes
    for alloc in ${BENCH_ALLOCS:-default async}; do
        conf=(); [ "$alloc" = async ] && conf=(PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync)
        for round in 1 2; do
            [ "$(left)" -lt 60 ] && { log "bench: budget spent"; break 2; }
            log "bench $alloc round $round"
            # PyTorch's recorder does not support backend:cudaMallocAsync ("does not yet support
            # recordHistory"), so that allocator is measured plain against oomtrace only.
            modes=none,python,all; [ "$alloc" = async ] && modes=none
            timeout -k 10 150 env "$C1" "${conf[@]}" "$PY" $T/bench_steps.py --modes $modes \
                >>"$d/steps-$alloc.jsonl" 2>>"$d/bench.err" </dev/null
            timeout -k 10 150 env "$C1" "${conf[@]}" LD_PRELOAD="$LIB" LD_LIBRARY_PATH="$CARRY_LD" \
                OOMTRACE_DIR="$d/snap" OOMTRACE_DUMP=exit OOMTRACE_QUIET=1 \
                "$PY" $T/bench_steps.py --modes none >>"$d/steps-$alloc.jsonl" 2>>"$d/bench.err" </dev/null
        done
    done
    for round in 1 2 3; do
        timeout -k 10 60 env "$C1" "$PY" $T/bench_async_pair.py >>"$d/pair.jsonl" 2>>"$d/bench.err" </dev/null
        timeout -k 10 60 env "$C1" LD_PRELOAD="$LIB" LD_LIBRARY_PATH="$CARRY_LD" OOMTRACE_DIR="$d" \
            OOMTRACE_QUIET=1 "$PY" $T/bench_async_pair.py >>"$d/pair.jsonl" 2>>"$d/bench.err" </dev/null
    done
    for f in "$d"/snap/*.oomt; do
        [ -e "$f" ] && LD_LIBRARY_PATH=$CARRY_LD "$READER" --format json "$f" >"$f.json" 2>/dev/null
    done
    "$PY" $T/bench_summary.py "$d" >"$d/bench_summary.txt" 2>&1
}

ALL=(train_oom train_oom_segments vmm_nvcc ctx_reset alloc_expandable alloc_async mark_steps neighbour cuda_graphs
    cupy_alloc jax_prealloc jax_noprealloc cudnn_bench nccl_allreduce ddp_rank_oom)
FRAMEWORK=(fw_fragmentation fw_fraction fw_jax_prealloc fw_cupy_then_torch fw_graph_pool fw_cudnn_probes fw_async_backend
    fw_earlier)
ALL+=("${FRAMEWORK[@]}")
USERTERMS=(ut_adam_first_step ut_eval_grad ut_gpt2_batch ut_summed_loss ut_leak_nomarkers ut_stray_process)
ALL+=("${USERTERMS[@]}" fast_oom ipc_size grow_request)
if [ $# -eq 0 ]; then
    SEL=("${ALL[@]}")
else
    SEL=()
    for a in "$@"; do
        a=${a%.py}; a=${a%.cu}; a=${a##*/}
        case $a in
        train_oom) SEL+=(train_oom train_oom_segments) ;;
        jax_alloc) SEL+=(jax_prealloc jax_noprealloc) ;;
        framework) SEL+=("${FRAMEWORK[@]}") ;;
        userterms) SEL+=("${USERTERMS[@]}") ;;
        *) if declare -F "wl_$a" >/dev/null; then SEL+=("$a"); else log "unknown workload: $a"; fi ;;
        esac
    done
fi

if [ ! -e "$LIB" ]; then
    log "build/liboomtrace.so is missing: build it (make) before running this"
    echo "build/liboomtrace.so missing: nothing was run" >>"$R/header.txt"
    SEL=()
fi
for w in "${SEL[@]}"; do "wl_$w"; done

# ---- reports: every snapshot through oomtrace-read, JSON first (the summary needs it), 8 at a time -------------
read_one() { # read_one SNAPSHOT OUTFILE json|text TIMEOUT
    local fmt=()
    [ "$3" = json ] && fmt=(--format json)
    LD_LIBRARY_PATH=$CARRY_LD timeout -k 5 "$4" "$READER" "$1" "${fmt[@]}" >"$2" 2>"$2.err" </dev/null
    echo $? >"$2.rc"
}
read_all() { # read_all json|text EXT TIMEOUT PHASE_SECONDS: starts no new read after PHASE_SECONDS
    local s b end=$((SECONDS + $4))
    while IFS=$'\t' read -r s b; do
        [ "$SECONDS" -ge "$end" ] && { echo "time budget spent" >"$b.$2.err"; continue; }
        read_one "$s" "$b.$2" "$1" "$3" &
        while [ "$(jobs -rp | wc -l)" -ge 8 ]; do wait -n; done
    done <"$WORK/jobs"
    wait
}
if [ -x "$READER" ]; then
    : >"$WORK/jobs"
    for w in "${SEL[@]}"; do
        [ -d "$R/$w/snap" ] || continue
        find "$R/$w/snap" -type f | sort | head -8 | while read -r f; do
            printf '%s\t%s\n' "$f" "$R/$w/reports/$(basename "$f")"
        done >>"$WORK/jobs"
    done
    log "reading $(wc -l <"$WORK/jobs") snapshots"
    read_all json json 40 40
    read_all text txt 30 25
    if [ -n "$(ls -A "$R/ddp_rank_oom/snap" 2>/dev/null)" ]; then
        (cd "$R/ddp_rank_oom" && LD_LIBRARY_PATH=$CARRY_LD timeout -k 5 30 "$READER" snap >merged.txt 2>merged.err
            echo $? >merged.rc)
    fi
    log "reports done"
else
    log "no build/oomtrace-read: snapshots not read"
fi

# ---- summary and packing ---------------------------------------------------------------------------------------
echo "elapsed $((SECONDS - START))s (workload budget ${BUDGET}s, per-run timeout ${PER}s); everything: gpu-results.tar.gz" \
    >"$R/footer.txt"
timeout 60 "$PY" "$ROOT/$T/summarize.py" "$R" >"$R/summary.txt" 2>"$R/summary.err" ||
    { echo "summarize.py failed:"; tail -5 "$R/summary.err"; cat "$R/header.txt"; } >>"$R/summary.txt"
[ -s "$R/bench/bench_summary.txt" ] && cat "$R/bench/bench_summary.txt" >>"$R/summary.txt"
cp "$R/summary.txt" "$OUT/summary.txt"
tar -C "$WORK" -czf "$OUT/gpu-results.tar.gz" gpu-results
size=$(stat -c %s "$OUT/gpu-results.tar.gz")
if [ "$size" -gt $((15 * 1024 * 1024)) ]; then # what comes back: at most 8 files of 16 MiB each
    tar -C "$WORK" -czf "$OUT/gpu-results.tar.gz" --exclude='gpu-results/*/snap/*' gpu-results
    tar -C "$WORK" -cf - gpu-results --wildcards 'gpu-results/*/snap/*' 2>/dev/null | gzip -1 |
        split -b 15m -d -a 1 - "$OUT/gpu-snapshots.tar.gz.part"
    ls "$OUT"/gpu-snapshots.tar.gz.part* 2>/dev/null | sort | tail -n +7 | xargs -r rm -f
    echo "(results over 15 MiB: snapshots split into gpu-snapshots.tar.gz.part*; cat them together; at most 6 parts kept)" \
        >>"$OUT/summary.txt"
fi
cat "$OUT/summary.txt"
rm -rf "$WORK"
exit 0
