#!/bin/sh
# `make demo`: runs a program that runs out of device memory under the tracer and prints the report.
# With a working GPU and PyTorch, the program is tests/gpu/train_oom.py on the real device; otherwise it is
# tests/demo/train_sim.py on the stand-in driver, a SIMULATED 8 GiB device.
set -u
cd "$(dirname "$0")/.."
out=${OOMTRACE_DEMO_DIR:-$PWD/build/demo}
rm -rf "$out" && mkdir -p "$out"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
    python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "== demo on the GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
    LD_PRELOAD=$PWD/build/liboomtrace.so OOMTRACE_DIR=$out python3 tests/gpu/train_oom.py
else
    echo "== no GPU here: demo on the stand-in driver, a SIMULATED 8 GiB device (tests/fakecuda)"
    LD_LIBRARY_PATH=$PWD/build/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FAKECUDA_CAPACITY=8G \
        FAKECUDA_NAME="simulated" LD_PRELOAD=$PWD/build/liboomtrace.so OOMTRACE_DIR=$out \
        python3 tests/demo/train_sim.py
fi
echo "== the program exited with status $? (as it would untraced)"
snap=$(ls -t "$out"/*.oomt 2>/dev/null | tail -1)
if [ -z "$snap" ]; then
    echo "demo: no snapshot was written" >&2
    exit 1
fi
echo "== build/oomtrace-read $snap"
build/oomtrace-read --frames 6 "$snap"
