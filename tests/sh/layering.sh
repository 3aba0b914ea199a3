#!/bin/sh
# Layering: each room of the reader and of the library depends only on the rooms below it, and no two
# reader files (a header with its sources counted as one) include each other, directly or around a loop.
#   tools/read: model <- symbols <- analyze <- render <- modes <- tools/oomtrace-read.c
#   lib:        common <- driver <- capture <- record <- snapshot <- runtime <- intercept
#               (lib/internal.h, the library's shared declarations, sits with common)
# Writer and reader share only include/oomtrace_format.h: neither includes the other's files.
set -u
cd "$(dirname "$0")/../.."
python3 - <<'PY'
import os, re, sys

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
LIB_SHARED = {'internal.h': 0}  # lib/internal.h: with common
PUBLIC = {'oomtrace_format.h', 'oomtrace.h'}
lib_files = [f for f in sources('lib')]
for f in lib_files:
    rel = os.path.relpath(f, 'lib')
    here = rel.split(os.sep)[0] if os.sep in rel else None
    rank = LIB_RANK[here] if here in LIB_RANK else LIB_SHARED.get(rel)
    if rank is None:
        bad.append(f'{f}: not in a room of the library ({" <- ".join(LIB_ROOMS)})')
        continue
    for inc in includes(f):
        if inc in PUBLIC:
            continue
        if inc in LIB_SHARED:
            target = LIB_SHARED[inc]
            top = 'internal.h'
        else:
            top = inc.split('/')[0]
            if top not in LIB_RANK:
                bad.append(f'{f}: includes "{inc}", which is not a room of the library (the writer and reader share only oomtrace_format.h)')
                continue
            target = LIB_RANK[top]
        if target > rank:
            bad.append(f'{f}: includes "{inc}": {here or rel} may not depend on {top}, which comes after it ({" <- ".join(LIB_ROOMS)})')

for b in bad:
    print('layering:', b)
if bad:
    sys.exit(1)
print(f'layering: ok (tools/read: {len(files)} files, {len(graph)} units that include others; lib: {len(lib_files)} files)')
PY
