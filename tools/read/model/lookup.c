/* Lookups in a parsed snapshot (the format's names are oomtrace_format.h's). */
#include "model/snapshot.h"

#include <stddef.h>
#include <string.h>

const struct ot_stack *ot_snapshot_stack(const struct ot_snapshot *s, uint64_t id)
{
    uint32_t i = ot_u64map_get(&s->stack_index, id);
    return i == OT_U64MAP_NONE ? NULL : &s->stacks[i];
}

const struct ot_pyframe *ot_snapshot_pyframe(const struct ot_snapshot *s, uint64_t id)
{
    uint32_t i = ot_u64map_get(&s->pyframe_index, id);
    return i == OT_U64MAP_NONE ? NULL : &s->pyframes[i];
}

const struct ot_symbol *ot_snapshot_symbol(const struct ot_snapshot *s, uint64_t address)
{
    uint32_t i = ot_u64map_get(&s->symbol_index, address);
    return i == OT_U64MAP_NONE ? NULL : &s->symbols[i];
}

const struct ot_module *ot_snapshot_module(const struct ot_snapshot *s, uint64_t address)
{
    /* Last module starting at or below the address; modules may overlap in a hostile file, in which
     * case the answer is one of them, which is all a reader can do. */
    size_t lo = 0, hi = s->nmodules;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->modules[mid].start <= address)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const struct ot_module *m = &s->modules[lo - 1];
    return address < m->end ? m : NULL;
}

const struct snap_device *ot_snapshot_device(const struct ot_snapshot *s, int64_t ordinal)
{
    for (size_t i = 0; i < s->ndevices; i++)
        if (s->devices[i].ordinal == ordinal)
            return &s->devices[i];
    return NULL;
}

const struct ot_peak *ot_snapshot_peak(const struct ot_snapshot *s, int64_t device)
{
    for (size_t i = 0; i < s->npeaks; i++)
        if (s->peaks[i].device == device)
            return &s->peaks[i];
    return NULL;
}

const struct snap_thread *ot_snapshot_thread(const struct ot_snapshot *s, uint64_t tid)
{
    for (size_t i = 0; i < s->nthreads; i++)
        if (s->threads[i].tid == tid && s->threads[i].name.n)
            return &s->threads[i];
    return NULL;
}

/* The first of n items (size bytes apart, ascending by the uint64_t seq at offset off) whose seq is at
 * least seq; n when none. */
static size_t seq_from(const void *items, size_t n, size_t size, size_t off, uint64_t seq)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t at;
        memcpy(&at, (const char *)items + mid * size + off, sizeof at);
        if (at < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

size_t ot_snapshot_marker_from(const struct ot_snapshot *s, uint64_t seq)
{
    return seq_from(s->markers, s->nmarkers, sizeof(*s->markers), offsetof(struct snap_marker, seq), seq);
}

const struct ot_ctx_end *ot_snapshot_ctx_end(const struct ot_snapshot *s, uint64_t seq)
{
    size_t i = seq_from(s->ctx_ends, s->nctx_ends, sizeof(*s->ctx_ends), offsetof(struct ot_ctx_end, seq), seq);
    return i < s->nctx_ends && s->ctx_ends[i].seq == seq ? &s->ctx_ends[i] : NULL;
}

const struct snap_marker *ot_snapshot_marker(const struct ot_snapshot *s, uint64_t seq)
{
    size_t i = ot_snapshot_marker_from(s, seq);
    return i < s->nmarkers && s->markers[i].seq == seq ? &s->markers[i] : NULL;
}

size_t ot_markers_before(const struct ot_snapshot *s, uint64_t seq, size_t max, size_t *first)
{
    size_t lo = ot_snapshot_marker_from(s, seq);
    size_t n = lo < max ? lo : max;
    *first = lo - n;
    return n;
}
