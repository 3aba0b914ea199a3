/* The memviz report: a pickle in the format of torch.cuda.memory._snapshot(), which PyTorch's
 * memory_viz page (pytorch.org/memory_viz) and torch.cuda._memory_viz open:
 *
 *   {"segments": [segment...], "device_traces": [[entry...] for devices 0..N-1]}
 *
 * oomtrace sees driver allocations, which are what PyTorch calls segments: each allocation live at
 * the chosen moment becomes a segment holding one active block of the same size, and each ring event
 * becomes trace entries in the order PyTorch's allocator would write them (an allocation is
 * segment_alloc + alloc, a free is free_requested + free_completed + segment_free, a failed allocation
 * is oom). The segments are the state at the end of the trace, as memory_viz expects: the trace stops
 * at the chosen moment (the snapshot by default, or the peak or the failure with --at).
 *
 * Frames are innermost first, as PyTorch's: Python frames as {filename, line, name}; native frames with
 * their source file and line when debug info resolved them, else {filename: module path, line: 0}. A
 * free has no stack of its own in oomtrace: it carries the stack of the allocation it frees. Each
 * stack's frame list is written once and referenced from the memo after that. */
#include <inttypes.h>
#include <stdlib.h>

#include "analyze/memviz.h"
#include "render/pickle.h"
#include "render/sitelabel.h"
#include "analyze/stackview.h"

struct mv {
    const struct ot_analysis *a;
    const struct ot_snapshot *s;
    struct ot_pickle pk;
    struct ot_u64map frames_memo; /* stack id -> memo id of its frame list */
    struct ot_sb sb;
};

static void frame_dict(struct mv *m, const struct ot_frame *f)
{
    struct ot_pickle *p = &m->pk;
    ot_pk_dict(p);
    if (f->kind == OT_FRAME_PY) {
        ot_pk_istr(p, "filename");
        ot_pk_str(p, f->file.p ? f->file : ot_cstr("??"));
        ot_pk_key_u64(p, "line", f->has_line ? f->line : 0);
        ot_pk_istr(p, "name");
        if (f->function.p)
            ot_pk_str(p, f->function);
        else
            ot_pk_istr(p, "??");
    } else {
        bool src = f->symbolized && f->file.p;
        ot_pk_istr(p, "filename");
        ot_pk_str(p, src ? f->file : f->module.p ? f->module : ot_cstr("??"));
        ot_pk_key_u64(p, "line", src && f->has_line ? f->line : 0);
        ot_pk_istr(p, "name");
        ot_sb_reset(&m->sb);
        ot_lbl_frame(&m->sb, f);
        ot_pk_str(p, ot_sb_view(&m->sb));
    }
    ot_pk_dict_end(p);
}

/* "frames": the stack's list, written once and then fetched from the memo. */
static void frames(struct mv *m, uint64_t stack_id)
{
    struct ot_pickle *p = &m->pk;
    ot_pk_istr(p, "frames");
    uint32_t id = ot_u64map_get(&m->frames_memo, stack_id);
    if (id != OT_U64MAP_NONE) {
        ot_pk_memo_get(p, id);
        return;
    }
    ot_pk_list(p);
    const struct ot_stack *st = stack_id ? ot_snapshot_stack(m->s, stack_id) : NULL;
    struct ot_frame_walk w;
    for (ot_walk_begin(&w, m->a->res, st, OT_WALK_ALL); ot_walk_next(&w);)
        frame_dict(m, w.f);
    id = ot_pk_list_end_memo(p);
    ot_u64map_put(&m->frames_memo, stack_id, id); /* out of memory: the next use writes the list again */
}

/* Microseconds on the wall clock, as PyTorch's time_us: monotonic times are moved by the snapshot's
 * (wall, monotonic) pair; without a wall time, microseconds since the tracer started. */
static uint64_t time_us(const struct ot_snapshot *s, uint64_t t_ns)
{
    const struct ot_meta *mt = &s->meta;
    if (mt->wall_ns && mt->mono_ns && mt->wall_ns >= mt->mono_ns)
        return (mt->wall_ns - mt->mono_ns + t_ns) / 1000u;
    return t_ns > mt->start_mono_ns ? (t_ns - mt->start_mono_ns) / 1000u : 0;
}

static void entry(struct mv *m, const char *action, const struct ot_mv_event *e, uint64_t stack_id)
{
    struct ot_pickle *p = &m->pk;
    ot_pk_dict(p);
    ot_pk_key_istr(p, "action", action);
    ot_pk_key_u64(p, "addr", e->addr);
    ot_pk_key_u64(p, "size", e->size);
    ot_pk_key_i64(p, "stream", 0);
    ot_pk_key_u64(p, "time_us", time_us(m->s, e->time_ns));
    frames(m, stack_id);
    ot_pk_dict_end(p);
}

static void oom_entry(struct mv *m, const struct ot_mv_event *e, uint64_t device_free)
{
    struct ot_pickle *p = &m->pk;
    ot_pk_dict(p);
    ot_pk_key_istr(p, "action", "oom");
    ot_pk_key_u64(p, "device_free", device_free);
    ot_pk_key_u64(p, "size", e->size);
    ot_pk_key_i64(p, "stream", 0);
    ot_pk_key_u64(p, "time_us", time_us(m->s, e->time_ns));
    frames(m, e->stack_id);
    ot_pk_dict_end(p);
}

static void segment(struct mv *m, const struct ot_record *r)
{
    struct ot_pickle *p = &m->pk;
    ot_pk_dict(p);
    ot_pk_key_i64(p, "device", r->device);
    ot_pk_key_u64(p, "address", r->address);
    ot_pk_key_u64(p, "total_size", r->size);
    ot_pk_key_u64(p, "allocated_size", r->size);
    ot_pk_key_u64(p, "active_size", r->size);
    ot_pk_key_u64(p, "requested_size", r->size);
    ot_pk_key_i64(p, "stream", 0);
    ot_pk_key_istr(p, "segment_type", r->size > (1u << 20) ? "large" : "small");
    ot_pk_istr(p, "segment_pool_id");
    ot_pk_tuple2_begin(p);
    ot_pk_i64(p, 0);
    ot_pk_i64(p, 0);
    ot_pk_tuple2_end(p);
    ot_pk_istr(p, "is_expandable");
    ot_pk_bool(p, false);
    frames(m, r->stack_id);
    ot_pk_istr(p, "blocks");
    ot_pk_list(p);
    ot_pk_dict(p);
    ot_pk_key_u64(p, "address", r->address);
    ot_pk_key_u64(p, "size", r->size);
    ot_pk_key_u64(p, "requested_size", r->size);
    ot_pk_key_istr(p, "state", "active_allocated");
    frames(m, r->stack_id);
    ot_pk_dict_end(p);
    ot_pk_list_end(p);
    ot_pk_dict_end(p);
}

int ot_report_memviz(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *o)
{
    struct ot_mv_trace t;
    char err[OT_ERRBUF];
    int rc = ot_mv_trace_build(a, o->at, &t, err);
    if (t.mo.fell_back)
        fprintf(stderr, "oomtrace-read: note: the snapshot does not record the %s's live set; the memviz "
                "segments are the live set at the snapshot\n", ot_at_name(t.mo.asked));
    if (rc < 0) {
        fprintf(stderr, "oomtrace-read: %s\n", err);
        ot_mv_trace_free(&t);
        return -1;
    }

    struct mv m = {.a = a, .s = a->s};
    struct ot_pickle *p = &m.pk;
    ot_pk_begin(p, f);
    ot_pk_dict(p);
    ot_pk_istr(p, "segments");
    ot_pk_list(p);
    for (size_t i = 0; i < t.nseg; i++)
        segment(&m, t.seg[i]);
    ot_pk_list_end(p);
    ot_pk_istr(p, "device_traces");
    ot_pk_list(p);
    for (int64_t d = 0; d < t.ndev; d++) {
        ot_pk_list(p);
        for (size_t j = 0; j < t.count; j++) {
            const struct ot_mv_event *e = ot_mv_event_at(&t, j);
            if (e->device != d)
                continue;
            if (e->kind == OT_EV_ALLOC) {
                entry(&m, "segment_alloc", e, e->stack_id);
                entry(&m, "alloc", e, e->stack_id);
            } else if (e->kind == OT_EV_FREE) {
                entry(&m, "free_requested", e, e->stack_id);
                entry(&m, "free_completed", e, e->stack_id);
                entry(&m, "segment_free", e, e->stack_id);
            } else {
                oom_entry(&m, e, e->device_free);
            }
        }
        ot_pk_list_end(p);
    }
    ot_pk_list_end(p);
    ot_pk_dict_end(p);
    ot_pk_end(p);

    ot_u64map_free(&m.frames_memo);
    ot_sb_free(&m.sb);
    ot_mv_trace_free(&t);
    return ferror(f) ? -1 : 0;
}
