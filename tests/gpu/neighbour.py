"""Two processes on one GPU. Process A (a child started without LD_PRELOAD, so untraced) takes 60 GiB and waits
until its stdin closes. Process B (this one, traced in run.sh's second run) then takes 4 GiB at a time until it
runs out of memory. B's OOM snapshot should list A's pid with ~60 GiB (+ its context) in PROCESSES (from NVML);
A's memory was in use before B's first allocation, so it belongs to B's baseline_used_bytes, not to tracked.

stdout: deterministic facts only. A's pid, its bytes and NVML's view go to stderr as CHECK lines.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

HOLD_GIB = 60

if len(sys.argv) > 1 and sys.argv[1] == "--hold":
    import torch

    x = torch.empty(HOLD_GIB * g.GiB, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    torch.cuda.synchronize()
    print(f"READY {os.getpid()} {x.numel()} {torch.cuda.memory_reserved()}", flush=True)
    sys.stdin.read()  # until B closes our stdin (or dies)
    sys.exit(0)

env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "OOMTRACE_DIR", "OOMTRACE_DUMP")}
a = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--hold"], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, env=env, text=True)
try:
    import torch  # imported while A starts

    line = a.stdout.readline().split()
    if len(line) != 4 or line[0] != "READY":
        g.out(f"neighbour did not start (said {line!r})")
        sys.exit(2)
    a_pid, a_bytes, a_reserved = int(line[1]), int(line[2]), int(line[3])
    g.out(f"neighbour holds {a_bytes // g.GiB} GiB")
    g.check(stream=sys.stderr, neighbour_pid=a_pid, neighbour_bytes=a_bytes, neighbour_reserved=a_reserved)
    try:
        smi = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
                             env=env, capture_output=True, text=True, timeout=20).stdout.strip()
        g.err("nvidia-smi compute apps: " + smi.replace("\n", "; "))
    except Exception as e:
        g.err(f"nvidia-smi failed: {e!r}")

    chunks = []
    oom = None
    try:
        for _ in range(64):  # 256 GiB: more than any card
            chunks.append(torch.empty(4 * g.GiB, dtype=torch.uint8, device="cuda"))
    except torch.OutOfMemoryError as e:
        oom = e
    g.out(f"B: OutOfMemoryError raised: {oom is not None}")
    g.check(stream=sys.stderr, b_chunks=len(chunks), b_bytes=len(chunks) * 4 * g.GiB,
            b_reserved=torch.cuda.memory_reserved())
    if oom is not None:
        g.err(f"B: {str(oom).splitlines()[0]}")
    del chunks
finally:
    if a.stdin:
        a.stdin.close()
    try:
        a.wait(timeout=30)
    except subprocess.TimeoutExpired:
        a.kill()
        a.wait()
g.out(f"neighbour exited: rc={a.returncode}")
