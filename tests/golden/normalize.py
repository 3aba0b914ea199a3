#!/usr/bin/env python3
"""Normalises oomtrace-read output for golden files (tests/golden/run.sh): what differs between runs and
machines is replaced by a placeholder, the rest is kept byte for byte.

  normalize.py KIND --root DIR [--tmp DIR] [--host NAME] [--pid N]... < output > normalised
  KIND: text (text, markdown, diff, run tables, stderr), json, folded

Replaced: the repository root and the scratch directory, the host name, the pids of the traced
programs, times and dates, addresses and offsets, the Python version and interpreter path, the
symbolization line, ring byte counts; frames of the C runtime (libc, _start), which depend on the
machine's glibc and its debug info, are dropped; runs of spaces inside a line become one."""
import argparse
import json
import re
import sys

LIBC_FRAME = re.compile(r"__libc_start|libc_start_call_main|sysdeps/|csu/|\(libc\.so|\blibc\.so\.|\b_start\+0x|\b_start \(")


def common(s, a):
    if a.tmp:
        s = s.replace(a.tmp, "<TMP>")
    s = s.replace(a.root + "/", "<ROOT>/").replace(a.root, "<ROOT>")
    if a.host:
        s = re.sub(r"(?<![\w.])" + re.escape(a.host) + r"(?![\w.])", "HOST", s)
    # A pid is a number like any other: one that reads as a size, a count or a share ("672 MiB" while a
    # traced process was pid 672), or a value after '=' ("seq_len=8192" in a marker while one was pid 8192),
    # stays.
    for p in a.pid:
        s = re.sub(r"(?<![\w.,+=])" + re.escape(p) + r"(?![\w.]|,\d| ?(?:B|KiB|MiB|GiB|TiB|bytes|allocation|free|%))", "PID", s)
    # A flush file's name carries its run's id (start time in ns and random bits), new at every run.
    s = re.sub(r"-r[0-9a-f]{17,}-flush\.oomt", "-RUN-flush.oomt", s)
    return s


def text(s, a):
    s = common(s, a)
    out = []
    frame_no = 0
    for line in s.split("\n"):
        is_frame = re.search(r"^\s*#\d+\s", line) is not None
        # Python < 3.12 gives comprehensions a frame of their own; 3.12 inlines them.
        if is_frame and (LIBC_FRAME.search(line) or "<listcomp>" in line or "<genexpr>" in line):
            continue
        line = re.sub(r"\.<locals>\.<(listcomp|genexpr)>", "", line)
        if is_frame:
            line = re.sub(r"#\d+", "#%d" % frame_no, line, count=1)
            frame_no += 1
        else:
            frame_no = 0
        line = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? UTC", "DATE", line)
        line = re.sub(r"[+-]?\d+\.\d+ s\b", "T s", line)
        line = re.sub(r"\bthread \d+", "thread TID", line)
        line = re.sub(r"0x[0-9a-f]{6,}", "0xADDR", line)
        line = re.sub(r"\+0x[0-9a-f]+", "+0xOFF", line)
        line = re.sub(r"Python \d+\.\d+\.\d+\w*", "Python X", line)
        line = re.sub(r"\(\d+ native frames? hidden", "(N native frames hidden", line)
        line = re.sub(r"ring [\d.]+ [KMGT]?i?B (compressed )?of", lambda m: "ring X " + (m.group(1) or "") + "of", line)
        if line.lstrip().startswith("Symbols:"):
            line = "Symbols: (normalised)"
        if line.lstrip().startswith("cmdline:"):
            line = re.sub(r"cmdline: \S*python\S*", "cmdline: PYTHON", line)
        m = re.match(r"^(\s*)(.*)$", line)
        line = m.group(1) + re.sub(r" {2,}", " ", m.group(2)).rstrip()
        out.append(line)
    return "\n".join(out)


def folded(s, a):
    s = common(s, a)
    out = []
    for line in s.split("\n"):
        if not line:
            out.append(line)
            continue
        stack, _, count = line.rpartition(" ")
        parts = [p for p in stack.split(";") if not LIBC_FRAME.search(p) and p not in ("_start", "__libc_start_main")]
        parts = [re.sub(r"\+0x[0-9a-f]+", "+0xOFF", p) for p in parts]
        out.append(";".join(parts) + " " + count)
    return "\n".join(out)


VOLATILE_NUM = {"pid", "ppid", "tid", "max_pid", "min_pid", "wall_ns", "mono_ns", "start_mono_ns", "time_ns", "peak_time_ns", "address",
                "offset", "module_offset", "ring_used_bytes", "first_time_ns", "last_time_ns"}


def is_libc(frame):
    if not isinstance(frame, dict) or frame.get("kind") != "native":
        return False
    mod = (frame.get("module") or "").rsplit("/", 1)[-1]
    fn = frame.get("function") or ""
    f = frame.get("file") or ""
    return mod.startswith("libc.so") or mod.startswith("ld-linux") or fn.startswith("__libc_start") or fn == "_start" \
        or "sysdeps/" in f or "csu/" in f


def walk(v, a, key=None):
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if k in VOLATILE_NUM and isinstance(x, int):
                out[k] = 0
            elif k == "symbolization":
                out[k] = "(normalised)"
            elif k in ("python_version",) and isinstance(x, str):
                out[k] = "X"
            elif k in ("stack", "frames") and isinstance(x, list):
                out[k] = [walk(f, a) for f in x if not is_libc(f)]
            else:
                out[k] = walk(x, a, k)
        return out
    if isinstance(v, list):
        if key == "cmdline" and v and "python" in str(v[0]):
            v = ["PYTHON"] + v[1:]
        return [walk(x, a) for x in v]
    if isinstance(v, str):
        s = common(v, a)
        s = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? UTC", "DATE", s)
        s = re.sub(r"\+0x[0-9a-f]+", "+0xOFF", s)
        return s
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["text", "json", "folded"])
    ap.add_argument("--root", required=True)
    ap.add_argument("--tmp")
    ap.add_argument("--host")
    ap.add_argument("--pid", action="append", default=[])
    a = ap.parse_args()
    s = sys.stdin.read()
    if a.kind == "json":
        sys.stdout.write(json.dumps(walk(json.loads(s), a), indent=1, sort_keys=False) + "\n")
    elif a.kind == "folded":
        sys.stdout.write(folded(s, a))
    else:
        sys.stdout.write(text(s, a))


if __name__ == "__main__":
    main()
