#!/bin/sh
# Walk 9, #8: a signal sent to the launcher's whole process group (GNU timeout, kill -TERM -- -PGID, supervisord's
# stopasgroup; Slurm and systemd signal every process of the job's control group) reaches the command from its
# sender: the launcher must not pass it on as well, or a SIGTERM handler that saves a checkpoint is entered twice
# and its first save abandoned. One sent to the launcher's process id alone (kill PID) is still passed on, once;
# a terminal's Ctrl-C (through a pseudo-terminal here) reaches the command once.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "group_signals: FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/oomtrace-grp.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OOMTRACE_QUIET=1
unset OOMTRACE_DIR OOMTRACE_DUMP
launcher=$PWD/tools/oomtrace

# ckterm.py: SIGTERM and SIGINT save a checkpoint, slowly (1.5 s of writes), then exit 0. A second signal during
# the save enters the handler again: two "start" lines.
cat >"$work/ckterm.py" <<'PY'
import os, signal, sys, time
log = sys.argv[1]
def save(sig, frame):
    with open(log, "a") as f:
        f.write("start %s\n" % signal.Signals(sig).name)
    end = time.time() + 1.5
    while time.time() < end:
        with open(log + ".ckpt", "a") as f:
            f.write("x")
        time.sleep(0.01)
    with open(log, "a") as f:
        f.write("saved\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, save)
signal.signal(signal.SIGINT, save)
open(log + ".ready", "w").close()
time.sleep(60)
PY
# spawn.py: runs its arguments in a process group of their own, SIGINT and SIGQUIT at their defaults (a shell's
# background command ignores them), its process id being the group's.
cat >"$work/spawn.py" <<'PY'
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
signal.signal(signal.SIGQUIT, signal.SIG_DFL)
os.setpgid(0, 0)
os.execvp(sys.argv[1], sys.argv[1:])
PY

n=0
# start: the launcher running ckterm.py in a group of its own; its pid (the group's) in $pid, the log in $log
start() {
    n=$((n + 1))
    log=$work/log$n
    python3 "$work/spawn.py" "$launcher" run --dir "$work/d" -- python3 "$work/ckterm.py" "$log" >"$work/out$n" 2>&1 &
    pid=$!
    i=0
    until [ -e "$log.ready" ]; do
        i=$((i + 1))
        [ "$i" -lt 600 ] || { kill -KILL -- "-$pid"; fail "case $n: ckterm.py did not start: $(cat "$work/out$n")"; }
        sleep 0.05
    done
}
# once CASE SIG: the launcher ended with status 0 after one save for SIG, neither more nor less
once() {
    wait "$pid"
    rc=$?
    got=$(cat "$log" 2>/dev/null | tr '\n' ';')
    [ "$got" = "start $2;saved;" ] && [ "$rc" -eq 0 ] ||
        fail "$1: the handler ran '$got' (want 'start $2;saved;'), status $rc: $(grep '^oomtrace' "$work/out$n")"
}

for s in TERM INT; do
    start
    kill -s "$s" -- "-$pid"
    once "SIG$s to the launcher's process group" "SIG$s"
    grep -q "passed on" "$work/out$n" && fail "SIG$s to the group was said passed on: $(grep '^oomtrace' "$work/out$n")"
    start
    kill -s "$s" "$pid"
    once "SIG$s to the launcher's pid" "SIG$s"
    grep -q "^oomtrace: SIG$s passed on to python3; its report follows when it ends\$" "$work/out$n" ||
        fail "SIG$s to the launcher's pid: not said: $(grep '^oomtrace' "$work/out$n")"
done

# GNU timeout signals its command's pid, then its whole group (its own, made at its start).
# ckterm.py must be ready by then: on a loaded machine that did not start it in time, once more with longer.
for s in TERM INT; do
    for secs in 8 40; do
        n=$((n + 1))
        log=$work/log$n
        timeout -s "$s" "$secs" python3 "$work/spawn.py" "$launcher" run --dir "$work/d" -- python3 "$work/ckterm.py" \
            "$log" >"$work/out$n" 2>&1
        rc=$?
        [ -e "$log.ready" ] && break
    done
    got=$(cat "$log" 2>/dev/null | tr '\n' ';')
    [ "$got" = "start SIG$s;saved;" ] ||
        fail "timeout -s $s: the handler ran '$got' (want 'start SIG$s;saved;'), status $rc: $(grep '^oomtrace' "$work/out$n")"
done

# Ctrl-C at a terminal: the foreground process group gets SIGINT from the kernel, the command once.
n=$((n + 1))
log=$work/log$n
python3 - "$launcher" "$work" "$log" >"$work/out$n" 2>&1 <<'PY' || fail "Ctrl-C through a terminal: $(cat "$work/out$n")"
import os, pty, select, sys, time
launcher, work, log = sys.argv[1:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(launcher, [launcher, "run", "--dir", work + "/d", "--", "python3", work + "/ckterm.py", log])
out = b""
def drain(t):
    global out
    end = time.time() + t
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                out += os.read(fd, 4096)
            except OSError:  # the terminal's other end closed: the launcher is ending
                time.sleep(max(0, end - time.time()))
                return
for _ in range(600):
    if os.path.exists(log + ".ready"):
        break
    drain(0.05)
else:
    sys.exit("ckterm.py did not start: %r" % out)
os.write(fd, b"\x03")
for _ in range(600):
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    drain(0.05)
else:
    os.kill(pid, 9)
    sys.exit("the launcher did not end: %r" % out)
got = open(log).read().replace("\n", ";") if os.path.exists(log) else ""
if got != "start SIGINT;saved;" or os.waitstatus_to_exitcode(status) != 0:
    sys.exit("the handler ran %r, status %d: %r" % (got, os.waitstatus_to_exitcode(status), out))
PY
# Walk 9, #10b: a command ended by the signal the launcher passed on is not "the command's own failure": the
# last line (and the summary) says what happened.
rm -f "$work/cmd.pid"
LD_LIBRARY_PATH="$PWD/build/fake" FAKECUDA_CAPACITY=1G python3 "$work/spawn.py" "$launcher" run --dir "$work/d" \
    --max-peak 1G --summary "$work/sum.md" -- sh -c '"$1"; echo $$ >"$0"; exec sleep 30' "$work/cmd.pid" \
    "$PWD/build/tests/door_linked" >"$work/pass.out" 2>&1 &
pid=$!
i=0
until [ -s "$work/cmd.pid" ] && grep -q "^sleep" "/proc/$(cat "$work/cmd.pid")/cmdline" 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -lt 600 ] || { kill -KILL -- "-$pid"; fail "door_linked then sleep did not start: $(cat "$work/pass.out")"; }
    sleep 0.05
done
kill -TERM "$pid"
wait "$pid"
rc=$?
want="sh was ended by SIGTERM, which oomtrace passed on from its own SIGTERM; the launcher's status is 143 (the gate passed)"
[ "$rc" -eq 143 ] && [ "$(tail -1 "$work/pass.out")" = "== oomtrace: $want" ] ||
    fail "SIGTERM passed on, with a gate: status $rc, last line '$(tail -1 "$work/pass.out")', want '== oomtrace: $want'"
grep -qF "**$want**" "$work/sum.md" || fail "SIGTERM passed on: the summary: $(grep 'oomtrace run' "$work/sum.md")"
echo "group_signals: ok"
