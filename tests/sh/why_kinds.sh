#!/bin/sh
# One list of Why statements and What to try remedies (walk 6, #18: --help's list had fallen behind the
# reports): the kinds oomtrace-read --help prints (tools/read/analyze/why/kinds.c) are exactly the kinds the
# code makes (every why_item_say / why_item_begin under tools/read/analyze), and each of --help's two lists is
# exactly the matching table of docs/JSON.md (## why, ## what_to_try); and each remedy either answers a Why
# statement in What to try's order (remedies.c, answers[]) or is named there as resting on a share.
set -u
cd "$(dirname "$0")/../.."
READER=${READER:-build/oomtrace-read}
[ -x "$READER" ] || { echo "why_kinds: $READER is missing (make)"; exit 1; }
"$READER" --help >/tmp/oomtrace-why-kinds.$$ || { echo "why_kinds: FAIL: --help"; exit 1; }
python3 - /tmp/oomtrace-why-kinds.$$ <<'PY'
import glob, re, sys
help_text = open(sys.argv[1]).read().splitlines()

def help_list(start, stop):
    out, on = [], False
    for line in help_text:
        if line.startswith(start):
            on = True
            continue
        if on and line.startswith(stop):
            break
        m = re.match(r"^    ([a-z_]+)  ", line)
        if on and m:
            out.append(m.group(1))
    return out

why = help_list("  why ", "  what to try ")
remedies = help_list("  what to try ", "  events ")

made = set()
for path in glob.glob("tools/read/analyze/**/*.c", recursive=True):
    src = open(path).read()
    for m in re.finditer(r"why_item_(?:say|begin)\(([^;]*?)\)", src, re.S):
        args = m.group(1).split(",")
        if len(args) < 3 or path.endswith("why/item.c"):
            continue
        kind = re.fullmatch(r'\s*"([a-z_]+)"\s*', args[2])
        if not kind:
            sys.exit(f"why_kinds: FAIL: {path}: a statement's kind is not a literal: {args[2].strip()}")
        made.add(kind.group(1))

doc = open("docs/JSON.md").read()
def doc_table(heading):
    part = doc.split("\n" + heading + "\n", 1)[1]
    part = re.split(r"\n#{1,2} ", part, 1)[0]
    table = part.split("| kind | when | numbers |", 1)[1]
    return re.findall(r"^\| `([a-z_]+)` \|", table, re.M)

fails = []
def same(what, a, b, an, bn):
    if sorted(a) != sorted(set(a)):
        fails.append(f"{what}: {an} lists a kind twice")
    if set(a) != set(b):
        fails.append(f"{what}: only in {an}: {sorted(set(a) - set(b))}; only in {bn}: {sorted(set(b) - set(a))}")

if len(why) < 15 or len(remedies) < 10:
    fails.append(f"--help's lists are short: {len(why)} statements, {len(remedies)} remedies")
if set(why) | set(remedies) != made:
    fails.append(f"--help against the code: only in --help: {sorted((set(why) | set(remedies)) - made)}; "
                 f"made but not in --help: {sorted(made - set(why) - set(remedies))}")
same("statements", why, doc_table("## why"), "--help", "docs/JSON.md ## why")
same("remedies", remedies, doc_table("## what_to_try"), "--help", "docs/JSON.md ## what_to_try")
# What to try's order (remedies.c, answers[]): each remedy answers a Why statement, or is one that rests on a
# category's share, which the comment above the table names; a remedy added to neither would silently rank
# with the shares (helper-77's note).
rem_src = open("tools/read/analyze/why/remedies.c").read()
head, table = rem_src.split("} answers[] = {", 1)
pairs = re.findall(r'\{"([a-z_]+)", "([a-z_]+)"\}', table.split("};", 1)[0])
comment = head[head.rfind("/*"):]
for r, st in pairs:
    if r not in remedies or st not in why:
        fails.append(f"answers[]: {r} -> {st} is not a remedy answering a statement of --help's lists")
unanswered = set(remedies) - {r for r, _ in pairs}
unnamed = sorted(k for k in unanswered if not re.search(r"\b" + k + r"\b", comment))
if unnamed:
    fails.append(f"remedies that answer no Why statement and that answers[]' comment does not name: {unnamed}")
for f in fails:
    print("why_kinds: FAIL:", f)
if fails:
    sys.exit(1)
print(f"why_kinds: {len(why)} statements and {len(remedies)} remedies, the same in --help, the code and docs/JSON.md")
PY
rc=$?
rm -f /tmp/oomtrace-why-kinds.$$
exit $rc
