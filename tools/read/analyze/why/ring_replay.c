/* The replay behind ring.c's statements: the event ring up to the target, with the live bytes and each
 * call site's growth sampled at every marker (or window boundary). */
#include "analyze/why/ring_replay.h"

#include <stdlib.h>
#include <string.h>

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 256;
    while (ncap < need)
        ncap *= 2;
    void *np = realloc(*p, ncap * elem);
    if (!np)
        return false;
    *p = np;
    *cap = ncap;
    return true;
}

/* A site's rise or fall over the interval that ends at marker k. Its level at marker k-1 is where it was last
 * sampled (nothing changed it since), or nothing: it was born in the interval. Falls count from its first
 * rise on: the span of its growth. */
static void sample(struct site_state *x, size_t k, size_t prev, uint8_t kind)
{
    if (prev != NO_MARK) {
        uint64_t pc = x->mark_idx == NO_MARK ? 0 : x->mark_count, pb = x->mark_idx == NO_MARK ? 0 : x->mark_bytes;
        bool up = x->cur_bytes > pb || (x->cur_count > pc && x->cur_bytes >= pb);
        bool down = x->cur_bytes < pb || (x->cur_count < pc && x->cur_bytes <= pb);
        if (up) {
            if (!x->rises++) {
                x->first_rise = prev;
                x->first_count = pc;
                x->first_bytes = pb;
            }
            x->rise_bytes = ot_sat_add(x->rise_bytes, x->cur_bytes - pb);
            x->last_rise = k;
            if (kind != NO_KIND) {
                if (!x->krises[kind]++) {
                    x->kfirst[kind] = (uint32_t)prev;
                    x->kfirst_count[kind] = pc;
                    x->kfirst_bytes[kind] = pb;
                }
                x->klast[kind] = (uint32_t)prev;
            }
        } else if (down && x->rises) {
            x->falls++;
        }
    }
    x->mark_count = x->cur_count;
    x->mark_bytes = x->cur_bytes;
    x->mark_idx = k;
    x->ctx_end_bytes = 0;
}

static void close_window(struct replay *r, size_t from, size_t to)
{
    if (!r->have_best || r->delta > r->best_delta) {
        r->have_best = true;
        r->best_delta = r->delta;
        r->best_from = from;
        r->best_to = to;
        r->best_allocs = r->w_allocs;
        r->best_frees = r->w_frees;
    }
    r->delta = 0;
    r->w_allocs = r->w_frees = 0;
}

/* "step 12" or "step 12 input_ids=(2, 1024)": the companion's marker after an optimizer step. */
static bool step_label(struct ot_str l)
{
    return l.n > 5 && memcmp(l.p, "step ", 5) == 0 && l.p[5] >= '0' && l.p[5] <= '9';
}

bool why_label_step(struct ot_str l, uint64_t *step)
{
    if (!step_label(l))
        return false;
    uint64_t v = 0;
    size_t i = 5;
    for (; i < l.n && l.p[i] >= '0' && l.p[i] <= '9'; i++) {
        if (v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(l.p[i] - '0');
    }
    if (i < l.n && l.p[i] != ' ' && l.p[i] != ',' && l.p[i] != ':')
        return false;
    *step = v;
    return true;
}

/* A marker's kind, added to the kinds seen when there is room (marker indexes past 32 bits have none). */
static uint8_t kind_of(struct replay *r, const struct ot_str *label, size_t k)
{
    if (!label || k >= UINT32_MAX)
        return NO_KIND;
    size_t n = why_label_kind(*label), cmp = n < WHY_KIND_BYTES ? n : WHY_KIND_BYTES;
    for (size_t i = 0; i < r->nkinds; i++)
        if (r->kind_len[i] == n && memcmp(r->kinds[i], label->p, cmp) == 0)
            return (uint8_t)i;
    if (r->nkinds == WHY_KINDS)
        return NO_KIND;
    memcpy(r->kinds[r->nkinds], label->p, cmp);
    r->kind_len[r->nkinds] = n;
    return (uint8_t)r->nkinds++;
}

/* A marker: a program's (label), or a window's boundary (NULL). */
static void on_marker(struct replay *r, uint64_t seq, uint64_t time_ns, const struct ot_str *label)
{
    if (!grow((void **)&r->mseq, &r->mcap, r->nm + 1, sizeof(uint64_t)) ||
        !grow((void **)&r->mtime, &r->tcap, r->nm + 1, sizeof(uint64_t)) ||
        !grow((void **)&r->mlive, &r->lcap, r->nm + 1, sizeof(int64_t)) ||
        !grow((void **)&r->mstep, &r->scap_, r->nm + 1, sizeof(bool)) ||
        !grow((void **)&r->mfrees, &r->fcap, r->nm + 1, sizeof(uint64_t)) ||
        !grow((void **)&r->mhigh, &r->hcap, r->nm + 1, sizeof(int64_t)) ||
        !grow((void **)&r->mbusy, &r->bcap, r->nm + 1, sizeof(size_t)) ||
        !grow((void **)&r->mbound, &r->ocap, r->nm + 1, sizeof(bool)) ||
        !grow((void **)&r->mkind, &r->kcap, r->nm + 1, sizeof(uint8_t)) ||
        !grow((void **)&r->mreq, &r->qcap, r->nm + 1, sizeof(uint64_t))) {
        r->sites_off = true;
        return;
    }
    size_t k = r->nm;
    uint64_t stepno = 0;
    bool numbered = label && why_label_step(*label, &stepno);
    bool boundary = !(numbered && r->have_step && stepno == r->cur_step);
    r->have_step = numbered;
    r->cur_step = stepno;
    r->group_busy |= r->w_allocs + r->w_frees > 0;
    r->mtime[k] = time_ns;
    r->mlive[k] = r->live;
    r->mstep[k] = label && step_label(*label);
    r->mfrees[k] = r->w_frees;
    r->mhigh[k] = r->high;
    r->mbound[k] = boundary;
    r->mkind[k] = kind_of(r, label, k);
    r->mreq[k] = r->req_cur;
    if (boundary)
        r->req_cur = 0;
    if (boundary) {
        r->mbusy[k] = (r->nbound ? r->mbusy[r->last_bound] : 0) + r->group_busy;
        r->group_busy = false;
    } else {
        r->mbusy[k] = k ? r->mbusy[k - 1] : 0;
    }
    r->high = r->live;
    r->mseq[r->nm++] = seq;
    close_window(r, k == 0 ? NO_MARK : k - 1, k);
    if (r->sites_off || !boundary)
        return;
    size_t prev = r->nbound ? r->last_bound : NO_MARK;
    for (size_t i = 0; i < r->ndirty; i++) {
        struct site_state *x = &r->sites[r->dirty[i]];
        sample(x, k, prev, prev == NO_MARK ? NO_KIND : r->mkind[prev]);
        x->dirty = false;
    }
    r->ndirty = 0;
    r->last_bound = k;
    r->nbound++;
}

static struct site_state *site_for(struct replay *r, uint64_t stack_id, uint32_t *idx)
{
    if (r->nsites >= OT_WHY_MAX_SITES)
        return NULL;
    uint32_t k = ot_u64map_put(&r->site_idx, stack_id, (uint32_t)r->nsites);
    if (k == OT_U64MAP_NONE)
        return NULL;
    if (k == r->nsites) {
        if (!grow((void **)&r->sites, &r->scap, r->nsites + 1, sizeof(*r->sites)) ||
            !grow((void **)&r->dirty, &r->dcap, r->scap, sizeof(uint32_t))) {
            return NULL;
        }
        struct site_state *x = &r->sites[r->nsites++];
        memset(x, 0, sizeof(*x));
        x->stack_id = stack_id;
        x->mark_idx = NO_MARK;
    }
    *idx = k;
    return &r->sites[k];
}

static void touch(struct replay *r, uint32_t idx)
{
    struct site_state *x = &r->sites[idx];
    if (!x->dirty) {
        x->dirty = true;
        r->dirty[r->ndirty++] = idx;
    }
}

/* delta + sign * size, saturating: sizes come from the file. */
static int64_t sat_step(int64_t delta, uint64_t size, int sign)
{
    int64_t v = size > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)size;
    if (sign > 0)
        return delta > INT64_MAX - v ? INT64_MAX : delta + v;
    return delta < INT64_MIN + v ? INT64_MIN : delta - v;
}

static void on_alloc(struct replay *r, const struct ot_replay_step *st)
{
    const struct snap_event *e = st->e;
    r->delta = sat_step(r->delta, e->size, 1);
    r->live = sat_step(r->live, e->size, 1);
    if (r->live > r->high)
        r->high = r->live;
    r->w_allocs++;
    r->last_alloc_seq = e->seq;
    if (r->req_stack && e->size > r->req_cur &&
        (e->stack_id == r->req_stack || (r->by_line && ot_u64map_get(&r->req_line, e->stack_id) != OT_U64MAP_NONE)))
        r->req_cur = e->size;
    if (e->size > r->big_size) {
        r->big_size = e->size;
        r->big_seq = e->seq;
        r->big_stack = e->stack_id;
    }
    if (r->sites_off)
        return;
    uint32_t si;
    struct site_state *x = site_for(r, e->stack_id, &si);
    /* The bound on the live allocations before this one (the replay has added it already). */
    if (!x || ot_replay_live(r->rp) - (st->matched ? 0 : 1) >= OT_WHY_MAX_LIVE || r->rp->live.oom) {
        r->sites_off = true;
        return;
    }
    if (st->matched) {
        /* The address was taken again without a free the ring saw: the old allocation is gone. */
        uint32_t oi = ot_u64map_get(&r->site_idx, st->alloc.id);
        struct site_state *o = &r->sites[oi];
        o->cur_count -= o->cur_count ? 1 : 0;
        o->cur_bytes -= st->alloc.size <= o->cur_bytes ? st->alloc.size : o->cur_bytes;
        o->frees++;
        touch(r, oi);
    }
    if (!x->allocs++)
        x->first_time = e->time_ns;
    x->last_alloc_seq = e->seq;
    x->cur_count++;
    x->cur_bytes = ot_sat_add(x->cur_bytes, e->size);
    touch(r, si);
}

static void on_free(struct replay *r, const struct ot_replay_step *st)
{
    r->delta = sat_step(r->delta, st->e->size, -1);
    r->live = sat_step(r->live, st->e->size, -1);
    r->w_frees++;
    r->frees_on_dev++;
    if (r->sites_off || !st->matched)
        return; /* allocated before the ring's first event */
    uint32_t si = ot_u64map_get(&r->site_idx, st->alloc.id);
    struct site_state *x = &r->sites[si];
    x->cur_count -= x->cur_count ? 1 : 0;
    x->cur_bytes -= st->alloc.size <= x->cur_bytes ? st->alloc.size : x->cur_bytes;
    x->frees++;
    if (r->any_ctx_end && st->e->seq == r->ctx_end_seq)
        x->ctx_end_bytes = ot_sat_add(x->ctx_end_bytes, st->alloc.size);
    touch(r, si);
}

static bool on_device(const struct snap_event *e, void *ctx)
{
    const struct replay *r = ctx;
    return e->device == r->dev && e->device >= 0 && ot_category_is_device64(e->category);
}

/* Past the target, only a context's end is heard: what it frees of a site counts as held by it (the
 * program never gave it back), as when the end comes before the target. */
static void after_target(struct replay *r, const struct ot_replay_step *st)
{
    const struct snap_event *e = st->e;
    if (e->kind == OT_EV_CONTEXT_END) {
        r->any_ctx_end = true;
        r->ctx_end_seq = e->seq;
        return;
    }
    if (r->sites_off || !st->tracked || !st->matched || e->kind != OT_EV_FREE || !r->any_ctx_end ||
        e->seq != r->ctx_end_seq)
        return;
    uint32_t si = ot_u64map_get(&r->site_idx, st->alloc.id);
    if (si != OT_U64MAP_NONE && si < r->nsites)
        r->sites[si].ctx_end_bytes = ot_sat_add(r->sites[si].ctx_end_bytes, st->alloc.size);
}

static void visit(const struct ot_replay_step *st, void *ctx)
{
    struct replay *r = ctx;
    const struct snap_event *e = st->e;
    if (r->target != UINT64_MAX && e->seq > r->target) {
        after_target(r, st);
        return;
    }
    if (!r->any_event) {
        r->any_event = true;
        r->ring_first_seq = e->seq;
    }
    r->last_seq = e->seq;
    r->last_time = e->time_ns;
    while (r->windows && r->next_w < WINDOWS && e->seq >= r->wb[r->next_w])
        on_marker(r, r->wb[r->next_w++], e->time_ns, NULL);
    if (e->kind == OT_EV_CONTEXT_END) {
        r->any_ctx_end = true;
        r->ctx_end_seq = e->seq;
        if ((e->device == r->dev || e->device < 0) && e->size && !ot_snapshot_ctx_end(r->a->s, e->seq)) {
            r->unlisted_ends++;
            r->unlisted_bytes = ot_sat_add(r->unlisted_bytes, e->size);
        }
    }
    if (e->kind == OT_EV_MARKER)
        on_marker(r, e->seq, e->time_ns, &e->label);
    else if (st->tracked && e->kind == OT_EV_ALLOC)
        on_alloc(r, st);
    else if (st->tracked)
        on_free(r, st);
}

/* An allocation made before the ring's first kept event and live at the snapshot (or at the peak): its site
 * starts the ring holding it, so levels are the live set's, not counts from zero (walk 7, #10), and its
 * free in the ring is charged to it. */
static void seed_one(struct replay *r, struct ot_replay *rp, const struct ot_record *rec, uint64_t first_seq)
{
    struct ot_addrval v;
    if (rec->device != r->dev || !ot_category_is_device64(rec->category) || rec->seq >= first_seq ||
        ot_addrmap_get(&rp->seeded, rec->address, &v))
        return;
    ot_replay_seed(rp, rec);
    r->live = sat_step(r->live, rec->size, 1);
    r->high = r->live;
    r->seeded_count++;
    r->seeded_bytes = ot_sat_add(r->seeded_bytes, rec->size);
    uint32_t si;
    struct site_state *x = r->sites_off ? NULL : site_for(r, rec->stack_id, &si);
    if (!x) {
        r->sites_off = true;
        return;
    }
    x->seed_count++;
    x->seed_bytes = ot_sat_add(x->seed_bytes, rec->size);
    x->cur_count++;
    x->cur_bytes = ot_sat_add(x->cur_bytes, rec->size);
    touch(r, si);
}

static void seed(struct replay *r, struct ot_replay *rp)
{
    const struct ot_snapshot *s = r->a->s;
    uint64_t first_seq = r->a->ev.decoded ? r->a->ev.first_seq : UINT64_MAX;
    for (size_t i = 0; s->has_live && i < s->nlive; i++)
        seed_one(r, rp, &s->live[i], first_seq);
    const struct ot_peak *pk = ot_snapshot_peak(s, r->dev);
    for (size_t i = 0; pk && i < pk->count; i++)
        seed_one(r, rp, &pk->recs[i], first_seq);
}

/* What each site holds in the live set at the snapshot: growth it gave back before then was no leak. */
static void holdings(struct replay *r)
{
    const struct ot_snapshot *s = r->a->s;
    for (size_t i = 0; !r->sites_off && s->has_live && i < s->nlive; i++) {
        const struct ot_record *rec = &s->live[i];
        if (rec->device != r->dev || !ot_category_is_device64(rec->category))
            continue;
        uint32_t k = ot_u64map_get(&r->site_idx, rec->stack_id);
        if (k == OT_U64MAP_NONE || k >= r->nsites)
            continue;
        r->sites[k].snap_count++;
        r->sites[k].snap_bytes = ot_sat_add(r->sites[k].snap_bytes, rec->size);
    }
}

int why_ring_replay(struct replay *r)
{
    /* With context ends in the snapshot, to the ring's end: one after the target may free a site's growth. */
    struct ot_replay rp = {.s = r->a->s, .last_seq = r->a->s->nctx_ends ? UINT64_MAX : r->target, .track = on_device,
                           .visit = visit, .ctx = r};
    char err[OT_ERRBUF];
    r->rp = &rp;
    seed(r, &rp);
    int rc = ot_replay_run(&rp, err);
    r->rp = NULL;
    if (rc < 0)
        return -1;
    holdings(r);
    if (r->windows && r->any_event) {
        /* The last window ends at the target (or the ring's end). */
        on_marker(r, r->target == UINT64_MAX ? r->last_seq : r->target, r->last_time, NULL);
        return 0;
    }
    r->tail_frees = r->w_frees;
    if (r->nm > 0)
        close_window(r, r->nm - 1, NO_MARK);
    return 0;
}
