#!/bin/sh
# The README's text and markdown samples are what the reader prints now: the block after "**Text**" and the
# one after "**Markdown**" must be the first lines of the command the README gives for each, on H200
# snapshots in tests/h200. When the report changes, paste the command's output into the README.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "readme_samples: FAIL: $*"; exit 1; }
READER=${READER:-build/oomtrace-read}
[ -x "$READER" ] || fail "$READER is missing (make)"
python3 - "$READER" <<'PY' || exit 1
import re, subprocess, sys
readme = open("README.md", encoding="utf-8").read()
said = []
for title, fence in (("**Text** (`build/oomtrace-read", ""), ("**Markdown** (`--format markdown`", "markdown")):
    part = readme.split(title, 1)[1]
    # The text sample's command starts inside its title.
    cmd = re.search(r"`build/oomtrace-read ([^`|]*?) \| head -n (\d+)`", title[title.index("`"):] + part)
    if not cmd:
        sys.exit(f"readme_samples: FAIL: the sample after {title!r} does not give its command")
    block = re.search(r"```" + fence + r"\n(.*?)\n```", part, re.S)
    args, n = cmd.group(1).split(), int(cmd.group(2))
    out = subprocess.run([sys.argv[1]] + args, capture_output=True, text=True, check=True).stdout.split("\n")[:n]
    while out and not out[-1].strip():
        out.pop()
    if block.group(1) != "\n".join(out):
        got = block.group(1).split("\n")
        k = next((i for i, (a, b) in enumerate(zip(got, out)) if a != b), min(len(got), len(out)))
        sys.exit(f"readme_samples: FAIL: README's sample differs from `oomtrace-read {' '.join(args)}` at its "
                 f"line {k + 1}: README {got[k][:80] if k < len(got) else None!r}, now {out[k][:80] if k < len(out) else None!r}")
    said.append(f"the first {n} lines of oomtrace-read {' '.join(args)}")
print("readme_samples: ok (" + "; ".join(said) + ")")
PY
