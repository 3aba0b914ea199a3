#!/bin/sh
# The README's markdown sample is what the reader prints now: the block after "**Markdown**" must be the
# first lines of the command the README gives for it, on the H200 snapshot in tests/h200. When the markdown
# report changes, paste the command's output into the README.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "readme_samples: FAIL: $*"; exit 1; }
READER=${READER:-build/oomtrace-read}
[ -x "$READER" ] || fail "$READER is missing (make)"
python3 - "$READER" <<'PY' || exit 1
import re, subprocess, sys
readme = open("README.md", encoding="utf-8").read()
part = readme.split("**Markdown** (`--format markdown`", 1)[1]
cmd = re.search(r"`build/oomtrace-read (--format markdown [^`|]*?) \| head -n (\d+)`", part)
if not cmd:
    sys.exit("readme_samples: FAIL: the markdown sample does not give its command")
block = re.search(r"```markdown\n(.*?)\n```", part, re.S)
args, n = cmd.group(1).split(), int(cmd.group(2))
out = subprocess.run([sys.argv[1]] + args, capture_output=True, text=True, check=True).stdout.split("\n")[:n]
while out and not out[-1].strip():
    out.pop()
want = "\n".join(out)
if block.group(1) != want:
    got = block.group(1).split("\n")
    k = next((i for i, (a, b) in enumerate(zip(got, out)) if a != b), min(len(got), len(out)))
    sys.exit(f"readme_samples: FAIL: README's markdown sample differs from `oomtrace-read {' '.join(args)}` at its "
             f"line {k + 1}: README {got[k][:80] if k < len(got) else None!r}, now {out[k][:80] if k < len(out) else None!r}")
print(f"readme_samples: ok (the markdown sample is the first {n} lines of oomtrace-read {' '.join(args)})")
PY
