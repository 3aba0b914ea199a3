"""Issue 12, item 6: another process that is not ours holds most of the card. A holder is started through a
launcher that exits at once, so its parent is no longer this process (as with a stray job left on a shared
card); it takes 60 GiB untraced and waits until a file it was given disappears. This process then takes 4 GiB
at a time until it runs out. Expected: the report names the holder's pid and command name with ~60 GiB, does
not call it a child of this process, and What to try says to stop it or use another card. The `neighbour`
workload is the same with a child (started directly), which the report should name as a child.

stdout: deterministic facts only; pids and NVML's view go to stderr.
"""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucommon as g  # noqa: E402

HOLD_GIB = 60

if len(sys.argv) > 2 and sys.argv[1] == "--launch":  # the launcher: start the holder in its own session, exit
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "OOMTRACE_DIR", "OOMTRACE_DUMP")}
    subprocess.Popen([sys.executable, os.path.abspath(__file__), "--hold", sys.argv[2]], env=env,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
    sys.exit(0)

if len(sys.argv) > 2 and sys.argv[1] == "--hold":
    import torch

    flag = sys.argv[2]
    x = torch.empty(HOLD_GIB * g.GiB, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    torch.cuda.synchronize()
    with open(flag + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {os.getppid()}\n")
    os.rename(flag + ".tmp", flag + ".ready")
    deadline = time.monotonic() + 100  # never outlive the run by much, whatever happens to the parent
    while os.path.exists(flag) and time.monotonic() < deadline:
        time.sleep(0.1)
    sys.exit(0)

tmp = tempfile.mkdtemp(prefix="ut_stray.")
flag = os.path.join(tmp, "hold")
open(flag, "w").close()
env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "OOMTRACE_DIR", "OOMTRACE_DUMP")}
subprocess.run([sys.executable, os.path.abspath(__file__), "--launch", flag], env=env, check=True)
try:
    import torch  # imported while the holder starts

    deadline = time.monotonic() + 60
    while not os.path.exists(flag + ".ready") and time.monotonic() < deadline:
        time.sleep(0.1)
    if not os.path.exists(flag + ".ready"):
        g.out("holder did not start")
        sys.exit(2)
    hold_pid, hold_ppid = (int(v) for v in open(flag + ".ready").read().split())
    g.out(f"holder holds {HOLD_GIB} GiB, not a child: {hold_ppid != os.getpid()}")
    g.check(stream=sys.stderr, holder_pid=hold_pid, holder_ppid=hold_ppid, my_pid=os.getpid())

    chunks = []
    oom = None
    try:
        for _ in range(64):  # 256 GiB: more than any card
            chunks.append(torch.empty(4 * g.GiB, dtype=torch.uint8, device="cuda"))  # LINE:grab
    except torch.OutOfMemoryError as e:
        oom = e
    g.out(f"OutOfMemoryError raised: {oom is not None}")
    if oom is not None:
        g.err(str(oom).splitlines()[0])
    del chunks
finally:
    try:
        os.unlink(flag)  # the holder sees it and exits
    except OSError:
        pass
    deadline = time.monotonic() + 30
    while os.path.exists(flag + ".ready") and time.monotonic() < deadline:
        try:
            pid = int(open(flag + ".ready").read().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError):
            break
        time.sleep(0.1)
g.out("done")
