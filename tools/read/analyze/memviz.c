/* What the memviz report shows (memviz.h): its segments, its trace, the free bytes at failed calls. */
#include <stdlib.h>
#include <string.h>

#include "analyze/memviz.h"
#include "model/replay.h"

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
    struct ot_mv_event *ring;
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
    struct ot_mv_event me = {e->kind, e->addr, e->size, e->stack_id, e->time_ns, e->seq, e->device, 0, 0};
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

int ot_mv_trace_build(const struct ot_analysis *a, enum ot_at at, struct ot_mv_trace *t, char *err)
{
    const struct ot_snapshot *s = a->s;
    memset(t, 0, sizeof(*t));
    struct ot_moment *mo = &t->mo;
    ot_moment_of(a, at, OT_AT_LIVE, mo);
    const struct ot_record *recs = mo->recs;
    size_t nrecs = mo->nrecs;
    bool only = mo->at == OT_AT_PEAK;
    int64_t only_dev = mo->device;

    /* Segments, in (device, address) order. */
    const struct ot_record **seg = malloc((nrecs ? nrecs : 1) * sizeof(*seg));
    struct ot_mv_event *ring = calloc(OT_MV_MAX_EVENTS, sizeof(*ring));
    t->seg = seg;
    t->ring = ring;
    if (!seg || !ring) {
        snprintf(err, OT_ERRBUF, "out of memory for the memviz report");
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
    t->nseg = nseg;
    for (size_t i = 0; i < s->ndevices; i++)
        if (wanted_device(s->devices[i].ordinal, only, only_dev) && s->devices[i].ordinal + 1 > ndev)
            ndev = s->devices[i].ordinal + 1;

    /* The latest OT_MV_MAX_EVENTS events up to the moment, in a circular buffer. A free's stack is
     * its allocation's: from the ring's own allocations, else from PEAK records made before it. */
    struct trace tr = {.ring = ring, .ndev = ndev, .only = only, .only_dev = only_dev};
    struct ot_replay rp = {.s = s, .last_seq = mo->last_seq, .track = wanted_event, .visit = visit, .ctx = &tr};
    uint64_t first_seq = a->ev.decoded ? a->ev.first_seq : UINT64_MAX;
    for (size_t k = 0; k < s->npeaks; k++)
        for (size_t i = 0; i < s->peaks[k].count; i++)
            if (s->peaks[k].recs[i].seq < first_seq)
                ot_replay_seed(&rp, &s->peaks[k].recs[i]);
    if (ot_replay_run(&rp, err) < 0) /* cannot happen: the analysis read the whole ring */
        return -1;
    t->head = tr.head;
    t->count = tr.count;
    t->ndev = tr.ndev;

    /* Each device's bytes at the end of the trace, to turn the net of a failed event into a level. */
    uint64_t end[OT_MV_MAX_DEVICES] = {0};
    for (size_t i = 0; i < nseg; i++)
        end[seg[i]->device] += seg[i]->size;
    /* CUDA's free bytes: measured for the failure that triggered the snapshot; for other failed calls,
     * total - baseline - this process's bytes then, when those are known. */
    for (size_t j = 0; j < t->count; j++) {
        struct ot_mv_event *e = &ring[(t->head + j) % OT_MV_MAX_EVENTS];
        if (e->kind == OT_EV_ALLOC || e->kind == OT_EV_FREE)
            continue;
        const struct snap_device *dv = ot_snapshot_device(s, e->device);
        if (!dv || !(dv->flags & OT_DEV_MEMINFO_KNOWN))
            continue;
        if (s->has_failure && e->seq == s->failure.seq) {
            e->device_free = dv->free_bytes;
        } else {
            uint64_t lvl = end[e->device] - (tr.net[e->device] - e->level);
            uint64_t used = ot_sat_add(lvl, (dv->flags & OT_DEV_BASELINE_KNOWN) ? dv->baseline_used_bytes : 0);
            e->device_free = (int64_t)lvl >= 0 && dv->total_bytes > used ? dv->total_bytes - used : 0;
        }
    }
    return 0;
}

void ot_mv_trace_free(struct ot_mv_trace *t)
{
    free(t->seg);
    free(t->ring);
}
