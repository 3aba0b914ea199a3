#!/bin/sh
# Layering: each room of the reader and of the library depends only on the rooms below it, and no two
# reader files (a header with its sources counted as one) include each other, directly or around a loop.
#   tools/read: model <- symbols <- analyze <- render <- modes <- tools/oomtrace-read.c
#   lib:        common <- driver <- capture <- record <- snapshot <- runtime <- intercept
#               (every file is in a room: no header at the top of lib/ that all rooms include)
# Writer and reader share only include/oomtrace_format.h: neither includes the other's files.
# Calls as well as includes: from the built objects (build/, or $B), no room's object uses a function or
# variable that a room above it defines (nm). The wrappers of intercept/ (the driver's and the C library's
# own names: cuMemAlloc_v2, dlsym, execve) are not counted: a tracer call reaches them as any caller's does.
# Declarations: a header of the library declares only what its own room defines, so that including a
# room's header is depending on that room (a catch-all header low down would hide an upward dependency).
# Then the check checks itself: on a copy of the sources with an upward include planted, and with a
# function of runtime/ declared in a header of common/, it must fail, naming each.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
# check [DIR]: the checks on the sources under DIR (default: the repository), the objects under $B.
check() {
    LAYERING_ROOT=${1:-.} B=${B:-$ROOT/build} python3 - <<'PY'
import os, re, sys
os.chdir(os.environ.get('LAYERING_ROOT', '.'))

INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
bad = []

def sources(top):
    for d, _, fs in os.walk(top):
        for f in sorted(fs):
            if f.endswith(('.c', '.h')):
                yield os.path.join(d, f)

def includes(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        return INC.findall(f.read())

# --- the reader ---
ROOMS = ['model', 'symbols', 'analyze', 'render', 'modes']
RANK = {r: i for i, r in enumerate(ROOMS)}
files = list(sources('tools/read')) + ['tools/oomtrace-read.c']

def room_of(path):
    rel = os.path.relpath(path, 'tools/read')
    return rel.split(os.sep)[0] if not rel.startswith('..') else None

def unit(path):
    """A header and the sources that implement it are one unit: tools/read/analyze/why.h and
    tools/read/analyze/why/*.c are the unit analyze/why."""
    rel = os.path.relpath(path, 'tools/read')
    if rel.startswith('..'):
        return 'oomtrace-read'
    base = os.path.splitext(rel)[0]
    parts = base.split(os.sep)
    if len(parts) == 3:  # a folder of its own: analyze/why/ring.c belongs to analyze/why
        return '/'.join(parts[:2])
    return '/'.join(parts)

graph = {}
for f in files:
    here = room_of(f)
    rank = RANK.get(here, len(ROOMS)) if here else len(ROOMS)
    for inc in includes(f):
        top = inc.split('/')[0]
        if inc == 'oomtrace_format.h':
            continue
        if top not in RANK:
            bad.append(f'{f}: includes "{inc}", which is not a reader room (the writer and reader share only oomtrace_format.h)')
            continue
        if RANK[top] > rank:
            bad.append(f'{f}: includes "{inc}": {here} may not depend on {top}, which comes after it ({" <- ".join(ROOMS)})')
        target = os.path.join('tools/read', inc)
        u, v = unit(f), unit(target)
        if u != v:
            graph.setdefault(u, set()).add(v)

# Cycles among units (depth-first search).
state = {}
def dfs(u, stack):
    state[u] = 1
    stack.append(u)
    for v in sorted(graph.get(u, ())):
        if state.get(v) == 1:
            bad.append('a loop of includes: ' + ' -> '.join(stack[stack.index(v):] + [v]))
        elif not state.get(v):
            dfs(v, stack)
    stack.pop()
    state[u] = 2
for u in sorted(graph):
    if not state.get(u):
        dfs(u, [])

# --- the library (the order is docs/ARCHITECTURE.md's) ---
LIB_ROOMS = ['common', 'driver', 'capture', 'record', 'snapshot', 'runtime', 'intercept']
LIB_RANK = {r: i for i, r in enumerate(LIB_ROOMS)}
PUBLIC = {'oomtrace_format.h', 'oomtrace.h'}
lib_files = [f for f in sources('lib')]
for f in lib_files:
    rel = os.path.relpath(f, 'lib')
    here = rel.split(os.sep)[0] if os.sep in rel else None
    rank = LIB_RANK.get(here)
    if rank is None:
        bad.append(f'{f}: not in a room of the library ({" <- ".join(LIB_ROOMS)})')
        continue
    for inc in includes(f):
        if inc in PUBLIC:
            continue
        top = inc.split('/')[0]
        if top not in LIB_RANK or '/' not in inc:
            bad.append(f'{f}: includes "{inc}", which is not a room of the library (the writer and reader share only oomtrace_format.h)')
            continue
        target = LIB_RANK[top]
        if target > rank:
            bad.append(f'{f}: includes "{inc}": {here or rel} may not depend on {top}, which comes after it ({" <- ".join(LIB_ROOMS)})')

# --- calls, from the objects' symbols ---
import glob, subprocess
B = os.environ.get('B', 'build')

def symbols(obj):
    out = subprocess.run(['nm', '-P', obj], capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 2:
            yield f[0], f[1]

def check_calls(top, src, rooms, counted):
    rank = {r: i for i, r in enumerate(rooms)}
    objs = [(o, os.path.relpath(o, top).split(os.sep)[0]) for o in sorted(glob.glob(f'{top}/*/**/*.o', recursive=True))]
    # Only objects of sources that still exist: a build directory keeps those of files since moved.
    def has_source(o):
        base = os.path.join(src, os.path.relpath(o, top))[:-2]
        return os.path.exists(base + '.c') or os.path.exists(base + '.S')
    objs = [(o, r) for o, r in objs if r in rank and has_source(o)]
    defined, used = {}, []
    for o, r in objs:
        for name, t in symbols(o):
            if t == 'U':
                used.append((o, r, name))
            elif t.isupper() and counted(name, r):
                defined[name] = (r, o)
    for o, r, name in used:
        if name in defined and rank[defined[name][0]] > rank[r]:
            bad.append(f'{o}: uses {name}, defined in {defined[name][1]}: {r} may not depend on {defined[name][0]}')
    return len(objs)

# --- declarations: a library header declares what its own room defines ---
DECL = re.compile(r'(?:^|;|\})\s*((?:extern\s+)?(?!static\b|typedef\b|struct\b|enum\b|union\b)[A-Za-z_][\w\s\*]*?(?<!struct )(?<!enum )(?<!union )\b(ot_\w+)(?=\s*(?:\(|;|\[|__attribute__)))', re.M)

def check_declarations(top):
    defined = {}
    for o in glob.glob(f'{top}/*/*.o'):
        for name, t in symbols(o):
            if t.isupper() and t != 'U':
                defined.setdefault(name, set()).add(os.path.relpath(o, top).split(os.sep)[0])
    n = 0
    for h in sorted(glob.glob('lib/*/*.h')):
        room = h.split('/')[1]
        with open(h, encoding='utf-8', errors='replace') as f:
            t = f.read()
        t = re.sub(r'/\*.*?\*/', ' ', t, flags=re.S)
        t = re.sub(r'^\s*#.*$', ' ', t, flags=re.M)
        prev = None
        while prev != t:  # struct, enum and function bodies out: what is left is the header's declarations
            prev, t = t, re.sub(r'\{[^{}]*\}', ';', t)
        for m in DECL.finditer(t):
            rooms = defined.get(m.group(2))
            n += 1
            if rooms and room not in rooms:
                bad.append(f'{h}: declares {m.group(2)}, which {" and ".join(sorted(rooms))}/ defines: a header declares only what its own room defines')
    return n

nobj = ndecl = 0
if glob.glob(f'{B}/lib/*/*.o') and glob.glob(f'{B}/tools/read/*/*.o'):
    nobj += check_calls(f'{B}/lib', 'lib', LIB_ROOMS, lambda name, room: room != 'intercept' or name.startswith('ot_'))
    nobj += check_calls(f'{B}/tools/read', 'tools/read', ROOMS, lambda name, room: True)
    ndecl = check_declarations(f'{B}/lib')
else:
    bad.append(f'no objects under {B}/lib and {B}/tools/read to check calls in (make test-build first)')

for b in bad:
    print('layering:', b)
if bad:
    sys.exit(1)
print(f'layering: ok (tools/read: {len(files)} files, {len(graph)} units that include others; lib: {len(lib_files)} files, '
      f'{ndecl} declarations in its headers; calls in {nobj} objects)')
PY
}

check || exit 1

# The check on a copy with two faults planted: common/ including a header of runtime/, and a header of
# common/ declaring runtime's ot_ready (what lib/internal.h did for every room).
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/tools" && cp -r lib "$T/" && cp -r tools/read tools/oomtrace-read.c "$T/tools/"
printf '#include "runtime/init.h"\n' >>"$T/lib/common/log.c"
printf '#include "runtime/init.h"\n' >>"$T/lib/common/log.h"
printf 'int ot_ready(void);\n' >>"$T/lib/common/self.h"
check "$T" >"$T/out" 2>&1 && { echo "layering: FAILED: the check passed a copy with an upward include"; exit 1; }
for want in 'lib/common/log.c: includes "runtime/init.h": common may not depend on runtime' \
    'lib/common/self.h: declares ot_ready, which runtime/ defines'; do
    grep -qF "$want" "$T/out" || { echo "layering: FAILED: the planted fault was not named: $want"; cat "$T/out"; exit 1; }
done
echo "layering: the check fails on a planted upward include and on a declaration outside its room"
