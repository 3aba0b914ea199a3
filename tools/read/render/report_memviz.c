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

#include "model/replay.h"
#include "render/pickle.h"
#include "render/sitelabel.h"

#define OT_MV_MAX_DEVICES 64          /* device_traces has one list per ordinal below this */
#define OT_MV_MAX_EVENTS 100000u      /* ring events in the trace: the latest ones */

struct mv_event {
    uint64_t kind, addr, size, stack_id, time_ns, seq;
    int64_t device;
    uint64_t level; /* failed: this device's net bytes since the ring's start, before the event */
};

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
    for (size_t i = 0; st && i < st->nframes; i++) {
        const struct ot_frame *fr;
        size_t n = ot_resolve(m->a->res, st->frames[i], &fr);
        for (size_t k = 0; k < n; k++)
            frame_dict(m, &fr[k]);
    }
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

static void entry(struct mv *m, const char *action, const struct mv_event *e, uint64_t stack_id)
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

static void oom_entry(struct mv *m, const struct mv_event *e, uint64_t device_free)
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

static int cmp_rec(const void *x, const void *y)
{
    const struct ot_record *a = *(const struct ot_record *const *)x, *b = *(const struct ot_record *const *)y;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    if (a->address != b->address)
        return a->address < b->address ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static bool wanted_device(int64_t d, bool only, int64_t dev)
{
    return d >= 0 && d < OT_MV_MAX_DEVICES && (!only || d == dev);
}

/* The trace's events: the latest OT_MV_MAX_EVENTS, and each device's net bytes since the ring's start. */
struct trace {
    struct mv_event *ring;
    size_t head, count;
    uint64_t net[OT_MV_MAX_DEVICES];
    int64_t ndev;
    bool only;
    int64_t only_dev;
};

static bool wanted_event(const struct snap_event *e, void *ctx)
{
    const struct trace *t = ctx;
    return ot_category_is_device64(e->category) && wanted_device(e->device, t->only, t->only_dev);
}

static void visit(const struct ot_replay_step *st, void *ctx)
{
    struct trace *t = ctx;
    const struct snap_event *e = st->e;
    if (!st->tracked && (e->kind != OT_EV_FAILED || !wanted_event(e, t)))
        return;
    struct mv_event me = {e->kind, e->addr, e->size, e->stack_id, e->time_ns, e->seq, e->device, 0};
    if (e->kind == OT_EV_ALLOC) {
        t->net[e->device] += e->size;
    } else if (e->kind == OT_EV_FREE) {
        me.stack_id = st->matched ? st->alloc.id : 0;
        t->net[e->device] -= e->size;
    } else {
        me.level = t->net[e->device];
    }
    if (e->device + 1 > t->ndev)
        t->ndev = e->device + 1;
    t->ring[(t->head + t->count) % OT_MV_MAX_EVENTS] = me;
    if (t->count < OT_MV_MAX_EVENTS)
        t->count++;
    else
        t->head = (t->head + 1) % OT_MV_MAX_EVENTS;
}

int ot_report_memviz(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *o)
{
    const struct ot_snapshot *s = a->s;
    struct ot_moment mo;
    ot_moment_of(a, o->at, OT_AT_LIVE, &mo);
    const struct ot_record *recs = mo.recs;
    size_t nrecs = mo.nrecs;
    uint64_t seq_limit = mo.last_seq;
    /* At the peak, the peak's device alone (its records are its own); the failure and the snapshot show
     * every device. */
    bool only = mo.at == OT_AT_PEAK;
    int64_t only_dev = mo.device;
    if (mo.fell_back)
        fprintf(stderr, "oomtrace-read: note: the snapshot does not record the %s's live set; the memviz "
                "segments are the live set at the snapshot\n", ot_at_name(mo.asked));

    /* Segments, in (device, address) order. */
    const struct ot_record **seg = malloc((nrecs ? nrecs : 1) * sizeof(*seg));
    struct mv_event *ring = calloc(OT_MV_MAX_EVENTS, sizeof(*ring));
    if (!seg || !ring) {
        free(seg);
        free(ring);
        fputs("oomtrace-read: out of memory for the memviz report\n", stderr);
        return -1;
    }
    size_t nseg = 0;
    int64_t ndev = 0;
    for (size_t i = 0; i < nrecs; i++) {
        const struct ot_record *r = &recs[i];
        if (!ot_category_is_device64(r->category) || !wanted_device(r->device, only, only_dev))
            continue;
        seg[nseg++] = r;
        if (r->device + 1 > ndev)
            ndev = r->device + 1;
    }
    if (nseg > 1)
        qsort(seg, nseg, sizeof(*seg), cmp_rec);
    for (size_t i = 0; i < s->ndevices; i++)
        if (wanted_device(s->devices[i].ordinal, only, only_dev) && s->devices[i].ordinal + 1 > ndev)
            ndev = s->devices[i].ordinal + 1;

    /* The latest OT_MV_MAX_EVENTS events up to the moment, in a circular buffer. A free's stack is
     * its allocation's: from the ring's own allocations, else from PEAK records made before it. */
    struct trace tr = {.ring = ring, .ndev = ndev, .only = only, .only_dev = only_dev};
    struct ot_replay rp = {.s = s, .last_seq = seq_limit, .track = wanted_event, .visit = visit, .ctx = &tr};
    uint64_t first_seq = a->ev.decoded ? a->ev.first_seq : UINT64_MAX;
    for (size_t k = 0; k < s->npeaks; k++)
        for (size_t i = 0; i < s->peaks[k].count; i++)
            if (s->peaks[k].recs[i].seq < first_seq)
                ot_replay_seed(&rp, &s->peaks[k].recs[i]);
    char err[OT_ERRBUF];
    int rc = ot_replay_run(&rp, err);
    size_t head = tr.head, count = tr.count;
    ndev = tr.ndev;
    if (rc < 0) { /* cannot happen: the analysis read the whole ring */
        fprintf(stderr, "oomtrace-read: %s\n", err);
        free(seg);
        free(ring);
        return -1;
    }

    /* Each device's bytes at the end of the trace, to turn the net of a failed event into a level. */
    uint64_t end[OT_MV_MAX_DEVICES] = {0};
    for (size_t i = 0; i < nseg; i++)
        end[seg[i]->device] += seg[i]->size;

    struct mv m = {.a = a, .s = s};
    struct ot_pickle *p = &m.pk;
    ot_pk_begin(p, f);
    ot_pk_dict(p);
    ot_pk_istr(p, "segments");
    ot_pk_list(p);
    for (size_t i = 0; i < nseg; i++)
        segment(&m, seg[i]);
    ot_pk_list_end(p);
    ot_pk_istr(p, "device_traces");
    ot_pk_list(p);
    for (int64_t d = 0; d < ndev; d++) {
        ot_pk_list(p);
        for (size_t j = 0; j < count; j++) {
            const struct mv_event *e = &ring[(head + j) % OT_MV_MAX_EVENTS];
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
                /* CUDA's free bytes: measured for the failure that triggered the snapshot; for other
                 * failed calls, total - baseline - this process's bytes then, when those are known. */
                const struct snap_device *dv = ot_snapshot_device(s, d);
                uint64_t device_free = 0;
                if (dv && (dv->flags & OT_DEV_MEMINFO_KNOWN)) {
                    if (s->has_failure && e->seq == s->failure.seq) {
                        device_free = dv->free_bytes;
                    } else {
                        uint64_t lvl = end[d] - (tr.net[d] - e->level);
                        uint64_t used = ot_sat_add(lvl, (dv->flags & OT_DEV_BASELINE_KNOWN) ? dv->baseline_used_bytes : 0);
                        device_free = (int64_t)lvl >= 0 && dv->total_bytes > used ? dv->total_bytes - used : 0;
                    }
                }
                oom_entry(&m, e, device_free);
            }
        }
        ot_pk_list_end(p);
    }
    ot_pk_list_end(p);
    ot_pk_dict_end(p);
    ot_pk_end(p);

    ot_u64map_free(&m.frames_memo);
    ot_sb_free(&m.sb);
    free(seg);
    free(ring);
    return ferror(f) ? -1 : 0;
}
