#include "analyze/timeline.h"

#include <stdlib.h>

#include "model/replay.h"

#define NS_MAX (OT_TL_TOP + 1)

/* One replay state: the net bytes per series since the first kept event (modulo 2^64: a hostile ring
 * may overflow, and unsigned arithmetic keeps that defined), at a time. */
struct state {
    uint64_t t, ord; /* ord: the event's ordinal, to order two states of the same time */
    uint64_t total;  /* sum of net (compared as signed) */
    uint64_t net[NS_MAX];
};

struct build {
    struct ot_timeline *tl;
    size_t ns, cap;
    uint64_t *t, *net; /* points: times and net vectors */
    bool exact;
    size_t nbuckets;
    uint64_t t0, span;
    bool in_bucket;
    size_t cur;
    struct state lo, hi;
};

static void push(struct build *b, const struct state *st)
{
    if (b->tl->npoints >= b->cap)
        return; /* cannot happen: cap bounds both modes */
    size_t i = b->tl->npoints++;
    uint64_t t = st->t;
    if (i > 0 && t < b->t[i - 1])
        t = b->t[i - 1]; /* threads' clocks interleave: keep the axis monotonic */
    b->t[i] = t;
    memcpy(b->net + i * b->ns, st->net, b->ns * sizeof(uint64_t));
}

static void flush(struct build *b)
{
    if (!b->in_bucket)
        return;
    const struct state *x = &b->lo, *y = &b->hi;
    if (y->ord < x->ord) {
        const struct state *z = x;
        x = y;
        y = z;
    }
    push(b, x);
    if (y->ord != x->ord)
        push(b, y);
    b->in_bucket = false;
}

static void record(struct build *b, const struct state *st)
{
    if (b->exact) {
        push(b, st);
        return;
    }
    size_t bi = 0;
    if (st->t > b->t0) {
        double f = (double)(st->t - b->t0) / (double)b->span * (double)b->nbuckets;
        bi = f >= (double)(b->nbuckets - 1) ? b->nbuckets - 1 : (size_t)f;
    }
    if (b->in_bucket && bi <= b->cur) {
        if ((int64_t)st->total < (int64_t)b->lo.total)
            b->lo = *st;
        if ((int64_t)st->total > (int64_t)b->hi.total)
            b->hi = *st;
        return;
    }
    flush(b);
    b->in_bucket = true;
    b->cur = bi;
    b->lo = b->hi = *st;
}

static size_t series_of(const struct ot_timeline *tl, uint64_t stack_id)
{
    for (size_t i = 0; i + 1 < tl->nseries; i++)
        if (tl->stack_id[i] == stack_id)
            return i;
    return tl->nseries - 1;
}

/* The replay's walk: the state after each event of the device, recorded as a point. */
struct walk {
    struct ot_timeline *tl;
    struct build *b;
    struct state st;
    uint64_t ord;
    size_t cut_point; /* the first point after the last unlisted context end */
    const struct ot_snapshot *s;
};

/* A context end of the device whose frees the snapshot does not list in full. */
static bool unlisted_end(const struct ot_timeline *tl, const struct ot_snapshot *s, const struct snap_event *e)
{
    if (e->kind != OT_EV_CONTEXT_END || (e->device != tl->device && e->device != -1) || !e->size)
        return false;
    const struct ot_ctx_end *ce = ot_snapshot_ctx_end(s, e->seq);
    return !ce || ce->n < ce->nfreed;
}

static bool on_device(const struct snap_event *e, void *ctx)
{
    const struct walk *w = ctx;
    return e->device == w->tl->device && ot_category_is_device64(e->category);
}

static void visit(const struct ot_replay_step *rs, void *ctx)
{
    struct walk *w = ctx;
    struct ot_timeline *tl = w->tl;
    struct state *st = &w->st;
    const struct snap_event *e = rs->e;
    if (!rs->tracked) {
        if (unlisted_end(tl, w->s, e)) {
            flush(w->b);
            tl->cut_ends++;
            tl->cut_seq = e->seq;
            tl->cut_t_ns = e->time_ns;
            w->cut_point = tl->npoints;
            st->t = e->time_ns;
            st->ord = w->ord++;
            record(w->b, st); /* the level just after it: the chart's first point */
        }
        return;
    }
    if (tl->events++ == 0) {
        st->t = e->time_ns;
        st->ord = w->ord++;
        record(w->b, st); /* the level before the first kept event */
    }
    size_t k;
    if (e->kind == OT_EV_ALLOC) {
        k = series_of(tl, e->stack_id);
        st->net[k] += e->size;
        st->total += e->size;
    } else {
        if (rs->matched) {
            k = series_of(tl, rs->alloc.id);
        } else {
            k = tl->nseries - 1;
            tl->unmatched_frees++;
        }
        st->net[k] -= e->size;
        st->total -= e->size;
    }
    st->t = e->time_ns;
    st->ord = w->ord++;
    record(w->b, st);
}

static void set_end(struct ot_timeline *tl, const struct ot_analysis *a, const uint64_t *netfinal)
{
    const struct ot_snapshot *s = a->s;
    size_t other = tl->nseries - 1;
    if (s->has_live) {
        tl->end_from_live = true;
        for (size_t i = 0; i < s->nlive; i++) {
            const struct ot_record *r = &s->live[i];
            if (r->device != tl->device || !ot_category_is_device64(r->category))
                continue;
            size_t k = series_of(tl, r->stack_id);
            tl->end[k] = ot_sat_add(tl->end[k], r->size);
        }
        return;
    }
    /* No LIVE: the total is DEVICES' tracked bytes; the top sites are assumed to have started the ring
     * with nothing, and "other" holds the rest. */
    const struct snap_device *d = ot_snapshot_device(s, tl->device);
    uint64_t total = d ? d->tracked_bytes : 0, sum = 0;
    for (size_t k = 0; k < other; k++) {
        int64_t v = (int64_t)netfinal[k];
        tl->end[k] = v > 0 ? (uint64_t)v : 0;
        sum = ot_sat_add(sum, tl->end[k]);
    }
    tl->end[other] = total > sum ? total - sum : 0;
}

int ot_timeline_build(struct ot_timeline *tl, const struct ot_analysis *a, int64_t device, const struct ot_sites *top,
                      size_t max_points, char errbuf[OT_ERRBUF])
{
    const struct ot_snapshot *s = a->s;
    memset(tl, 0, sizeof(*tl));
    tl->device = device;
    size_t ntop = top ? (top->n < OT_TL_TOP ? top->n : OT_TL_TOP) : 0;
    for (size_t i = 0; i < ntop; i++)
        tl->stack_id[i] = top->v[i].stack_id;
    tl->nseries = ntop + 1;
    if (max_points < 8)
        max_points = 8;

    struct build b = {.tl = tl, .ns = tl->nseries, .cap = max_points};
    uint64_t upper = ot_sat_add(a->ev.by_kind[OT_EV_ALLOC], a->ev.by_kind[OT_EV_FREE]);
    b.exact = upper + 2 <= max_points;
    tl->downsampled = !b.exact;
    b.nbuckets = (max_points - 2) / 2;
    b.t0 = a->ev.first_time_ns;
    b.span = a->ev.last_time_ns > b.t0 ? a->ev.last_time_ns - b.t0 : 1;
    b.t = malloc(b.cap * sizeof(uint64_t));
    b.net = malloc(b.cap * b.ns * sizeof(uint64_t));
    tl->t_ns = b.t;
    tl->v = b.net;
    if (!b.t || !b.net)
        goto oom;

    /* Allocations live at the peak that the ring never saw being made: their frees can still be
     * charged to the right site. */
    struct walk w = {.tl = tl, .b = &b, .s = s};
    struct ot_replay rp = {.s = s, .last_seq = UINT64_MAX, .track = on_device, .visit = visit, .ctx = &w};
    uint64_t first_seq = a->ev.decoded ? a->ev.first_seq : UINT64_MAX;
    const struct ot_peak *pk = ot_snapshot_peak(s, device);
    for (size_t i = 0; pk && i < pk->count; i++) {
        const struct ot_record *r = &pk->recs[i];
        if (r->device == device && ot_category_is_device64(r->category) && r->seq < first_seq)
            ot_replay_seed(&rp, r);
    }
    int rc = ot_replay_run(&rp, errbuf);
    struct state st = w.st;
    if (rc < 0)
        goto fail;
    flush(&b);

    /* The last state lasts until the snapshot. */
    uint64_t t_end = tl->npoints ? b.t[tl->npoints - 1] : (a->ev.decoded ? a->ev.first_time_ns : s->meta.start_mono_ns);
    if (s->meta.mono_ns > t_end)
        t_end = s->meta.mono_ns;
    if (tl->npoints == 0) {
        st.t = t_end;
        push(&b, &st);
    }
    st.t = t_end;
    push(&b, &st);

    if (w.cut_point) { /* the levels before the last unlisted end are unknown: drop them */
        tl->npoints -= w.cut_point;
        memmove(b.t, b.t + w.cut_point, tl->npoints * sizeof(uint64_t));
        memmove(b.net, b.net + w.cut_point * b.ns, tl->npoints * b.ns * sizeof(uint64_t));
    }
    set_end(tl, a, st.net);
    for (size_t p = 0; p < tl->npoints; p++) {
        uint64_t total = 0;
        uint64_t *row = b.net + p * b.ns;
        for (size_t k = 0; k < b.ns; k++) {
            int64_t lvl = (int64_t)(tl->end[k] - (st.net[k] - row[k]));
            if (lvl < 0) {
                tl->negative = true;
                lvl = 0;
            }
            row[k] = (uint64_t)lvl;
            total = ot_sat_add(total, row[k]);
        }
        if (total > tl->max_total || p == 0) {
            tl->max_total = total;
            tl->max_total_t_ns = b.t[p];
        }
    }
    return 0;
oom:
    snprintf(errbuf, OT_ERRBUF, "out of memory while building the timeline");
fail:
    ot_timeline_free(tl);
    return -1;
}

void ot_timeline_free(struct ot_timeline *tl)
{
    ot_sites_free(&tl->own);
    tl->top = NULL;
    free(tl->t_ns);
    free(tl->v);
    tl->t_ns = tl->v = NULL;
    tl->npoints = 0;
}

static int64_t timeline_device(const struct ot_analysis *a)
{
    if (a->s->has_failure && a->s->failure.device >= 0) /* -1: a failed host allocation */
        return a->s->failure.device;
    if (a->peak)
        return a->peak->device;
    return a->s->ndevices ? a->s->devices[0].ordinal : 0;
}

int ot_timeline_of(struct ot_timeline *tl, const struct ot_analysis *a, size_t max_points, char errbuf[OT_ERRBUF])
{
    int64_t dev = timeline_device(a);
    struct ot_sites own = {0};
    const struct ot_sites *top = NULL;
    for (size_t i = 0; i < a->npeaks && !top; i++)
        if (a->peaks[i].device == dev && a->peaks[i].has_sites)
            top = &a->peaks[i].sites;
    if (!top && a->has_at_failure && a->failure_device == dev)
        top = &a->at_failure;
    if (!top && a->s->has_live) {
        struct ot_site_filter flt = {.device = dev, .device_memory = true};
        if (ot_sites_build(a->s->live, a->s->nlive, &flt, &own) == 0)
            top = &own;
    }
    if (ot_timeline_build(tl, a, dev, top, max_points, errbuf) < 0) {
        ot_sites_free(&own);
        return -1;
    }
    tl->own = own;
    tl->top = top == &own ? &tl->own : top;
    return 0;
}
