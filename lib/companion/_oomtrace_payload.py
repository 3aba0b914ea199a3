"""oomtrace's Python companion: the FRAMEWORK payload's encoding (docs/FORMAT.md, FRAMEWORK).

Part of the companion embedded in liboomtrace.so (registered as the module `_oomtrace_payload`, loaded
before the modules that import it): the records the frameworks' adapters (_oomtrace_frameworks) build and
the companion (_oomtrace_companion) hands the library. Pure encoding, and the one stderr line every part
of the companion says through.
"""
import sys
from array import array

LAYOUT_VERSION = 1
INFO, STATS, SETTINGS, SEGMENTS, BLOCKS, ARRAYS, ERROR, BLOCK_FRAMES, ROLES, STEPS = range(1, 11)
ALL_DEVICES = (1 << 32) - 1
ERROR_TEXT_MAX = 4096
STEPS_KEPT = 64
U64 = (1 << 64) - 1
BLOCK_STATES = {"inactive": 0, "active_allocated": 1, "active_pending_free": 2}


def _say(msg):
    """One line on stderr, never raising (stderr may be closed or replaced by the program)."""
    try:
        sys.stderr.write("oomtrace: %s\n" % msg)
        sys.stderr.flush()
    except BaseException:
        pass


# ---- the payload's encoding (docs/FORMAT.md, FRAMEWORK) ----

def put_uv(out, v):
    v = int(v)
    if v < 0:
        v = 0
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def put_sv(out, v):
    v = int(v)
    put_uv(out, (v << 1) if v >= 0 else ((-v) << 1) - 1)


def put_str(out, s, limit=None):
    b = s if isinstance(s, (bytes, bytearray)) else str(s).encode("utf-8", "replace")
    if limit is not None and len(b) > limit:
        b = b[:limit]
    put_uv(out, len(b))
    out += b


def put_u64(out, values):
    """A u64 column: n little-endian uint64, packed."""
    col = array("Q", values)
    if sys.byteorder != "little":
        col.byteswap()
    out += col.tobytes()


def payload(records):
    out = bytearray()
    put_uv(out, LAYOUT_VERSION)
    put_uv(out, len(records))
    for kind, body in records:
        put_uv(out, kind)
        put_uv(out, len(body))
        out += body
    return bytes(out)


def _body(framework, n):
    """A record's body so far: the framework's name and a count."""
    b = bytearray()
    put_str(b, framework)
    put_uv(b, n)
    return b


def rec_info(framework, version, reason, taken_ns, collect_ns):
    b = bytearray()
    put_str(b, framework)
    put_str(b, version)
    put_str(b, reason)
    put_uv(b, taken_ns)
    put_uv(b, collect_ns)
    return (INFO, b)


def _pairs(b, items, put_value):
    """n, then n × { str key; value }."""
    put_uv(b, len(items))
    for k, v in items:
        put_str(b, k)
        put_value(b, v)
    return b


def rec_stats(framework, device, items):
    b = bytearray()
    put_str(b, framework)
    put_uv(b, ALL_DEVICES if device is None else device)
    return (STATS, _pairs(b, items, put_sv))


def rec_settings(framework, items):
    b = bytearray()
    put_str(b, framework)
    return (SETTINGS, _pairs(b, items, put_str))


def rec_arrays(framework, groups):
    """groups: ((dtype, shape, device), (count, bytes)) in the order to write."""
    b = _body(framework, len(groups))
    for (dtype, shape, dev), (count, nbytes) in groups:
        put_str(b, dtype)
        put_str(b, shape)
        for v in (dev, count, nbytes):
            put_uv(b, v)
    return (ARRAYS, b)


def rec_error(framework, text, device, request):
    b = bytearray()
    put_str(b, framework)
    put_str(b, text, ERROR_TEXT_MAX)
    put_uv(b, device if device is not None and device >= 0 else 0)
    put_uv(b, request or 0)
    return (ERROR, b)


def _mask(v):
    return int(v) & U64


def _pool_id(pid):
    """torch's segment_pool_id (a, b) folded as (a << 32) ^ b; (0, 0) is the default pools."""
    if isinstance(pid, (tuple, list)) and len(pid) == 2:
        return ((int(pid[0]) << 32) ^ int(pid[1])) & U64
    try:
        return _mask(pid or 0)
    except (TypeError, ValueError):
        return 0


def torch_segment_records(segments, with_frames=False):
    """SEGMENTS, BLOCKS (and BLOCK_FRAMES) from torch.cuda.memory._snapshot()'s segments. Columns are
    built one comprehension each and packed with array('Q'): 100k blocks stay well under the 200 ms
    budget (bench/companion_collect.py)."""
    seg_cols = [[] for _ in range(10)]
    per_seg = [s.get("blocks") or () for s in segments]
    first = 0
    for s, blocks in zip(segments, per_seg):
        pool = _pool_id(s.get("segment_pool_id"))
        flags = (1 if s.get("is_expandable") else 0) | (2 if s.get("segment_type") == "large" else 0) | \
            (4 if pool else 0)
        vals = (s.get("device", 0), s.get("address", 0), s.get("total_size", 0), s.get("allocated_size", 0),
                s.get("requested_size", 0), s.get("stream", 0), pool, flags, first, len(blocks))
        for c, v in zip(seg_cols, vals):
            c.append(_mask(v or 0))
        first += len(blocks)
    blocks = [b for bl in per_seg for b in bl]
    b_seg = []
    for i, bl in enumerate(per_seg):
        b_seg.extend([i] * len(bl))
    states = BLOCK_STATES
    state = [states.get(b.get("state"), 0) for b in blocks]
    # A free block keeps the requested size of the tensor that last held it (seen on torch 2.11: 1 GiB
    # requested in a free 424 MiB block): it means nothing there, so it is written as 0.
    requested = [b.get("requested_size", 0) if st else 0 for b, st in zip(blocks, state)]
    cols = ([b["address"] for b in blocks], [b["size"] for b in blocks], requested, state, b_seg)
    seg = _body("torch", len(segments))
    for c in seg_cols:
        put_u64(seg, c)
    blk = _body("torch", len(blocks))
    for c in cols:
        put_u64(blk, c)
    out = [(SEGMENTS, seg), (BLOCKS, blk)]
    if with_frames:
        frames = [(i, b["frames"]) for i, b in enumerate(blocks) if b.get("frames")]
        fb = _body("torch", len(frames))
        for index, fr in frames:
            put_uv(fb, index)
            put_uv(fb, len(fr))
            for f in fr:
                put_str(fb, f.get("filename", ""))
                put_uv(fb, f.get("line", 0) or 0)
                put_str(fb, f.get("name", ""))
        out.append((BLOCK_FRAMES, fb))
    return out


def rec_roles(framework, roles):
    """ROLES from _oomtrace_roles.collect(): (category, label, data_ptr, nbytes), one row per storage."""
    labels, index = [], {}
    addr, size, lab = [], [], []
    seen = set()
    for category, label, ptr, nbytes in roles:
        if ptr in seen:
            continue
        seen.add(ptr)
        key = (int(category), str(label))
        if key not in index:
            index[key] = len(labels)
            labels.append(key)
        addr.append(_mask(ptr))
        size.append(_mask(nbytes))
        lab.append(index[key])
    b = _body(framework, len(labels))
    for category, label in labels:
        put_uv(b, category)
        put_str(b, label)
    put_uv(b, len(addr))
    for c in (addr, size, lab):
        put_u64(b, c)
    return (ROLES, b)


def rec_steps(framework, steps):
    b = _body(framework, len(steps))
    for step, t_ns, allocated, reserved, shapes in steps:
        put_uv(b, step)
        put_uv(b, t_ns)
        put_uv(b, allocated)
        put_uv(b, reserved)
        put_str(b, shapes, 1024)
    return (STEPS, b)
