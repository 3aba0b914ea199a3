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

static void sample(const struct replay *r, struct site_state *x, size_t k)
{
    if (k == 0 || x->mark_idx == NO_MARK) {
        /* The first marker, or a site born in the interval that ends here (it was 0 at marker k-1). */
        if (k > 0 && (x->cur_bytes > 0 || x->cur_count > 0)) {
            x->run = 1;
            x->run_start = k - 1;
            x->run_from_count = 0;
            x->run_from_bytes = 0;
        } else {
            x->run = 0;
        }
    } else {
        /* An interval without change at this site broke the run, unless nothing at all happened on the device
         * in it: a marker right after another (another thread's, a logger's) is no interval of the program's. */
        if (x->mark_idx != k - 1 && r->mbusy[k - 1] != r->mbusy[x->mark_idx])
            x->run = 0;
        bool up = x->cur_bytes > x->mark_bytes || (x->cur_count > x->mark_count && x->cur_bytes >= x->mark_bytes);
        if (up) {
            if (x->run == 0) {
                x->run_start = k - 1;
                x->run_from_count = x->mark_count;
                x->run_from_bytes = x->mark_bytes;
            }
            x->run++;
        } else {
            x->run = 0;
        }
    }
    if (x->run > 0) {
        uint64_t gain = x->cur_bytes - x->run_from_bytes, best_gain = x->best_to_bytes - x->best_from_bytes;
        if (x->run > x->best_run || (x->run == x->best_run && gain > best_gain)) {
            x->best_run = x->run;
            x->best_start = x->run_start;
            x->best_end = k;
            x->best_from_count = x->run_from_count;
            x->best_from_bytes = x->run_from_bytes;
            x->best_to_count = x->cur_count;
            x->best_to_bytes = x->cur_bytes;
        }
    }
    x->mark_count = x->cur_count;
    x->mark_bytes = x->cur_bytes;
    x->mark_idx = k;
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

static void on_marker(struct replay *r, uint64_t seq, uint64_t time_ns, bool step)
{
    if (!grow((void **)&r->mseq, &r->mcap, r->nm + 1, sizeof(uint64_t)) ||
        !grow((void **)&r->mtime, &r->tcap, r->nm + 1, sizeof(uint64_t)) ||
        !grow((void **)&r->mlive, &r->lcap, r->nm + 1, sizeof(int64_t)) ||
        !grow((void **)&r->mstep, &r->scap_, r->nm + 1, sizeof(bool)) ||
        !grow((void **)&r->mfrees, &r->fcap, r->nm + 1, sizeof(uint64_t)) ||
        !grow((void **)&r->mhigh, &r->hcap, r->nm + 1, sizeof(int64_t)) ||
        !grow((void **)&r->mbusy, &r->bcap, r->nm + 1, sizeof(size_t))) {
        r->sites_off = true;
        return;
    }
    size_t k = r->nm;
    r->mtime[k] = time_ns;
    r->mlive[k] = r->live;
    r->mstep[k] = step;
    r->mfrees[k] = r->w_frees;
    r->mhigh[k] = r->high;
    r->mbusy[k] = (k ? r->mbusy[k - 1] : 0) + (r->w_allocs + r->w_frees > 0);
    r->high = r->live;
    r->mseq[r->nm++] = seq;
    close_window(r, k == 0 ? NO_MARK : k - 1, k);
    if (r->sites_off)
        return;
    for (size_t i = 0; i < r->ndirty; i++) {
        struct site_state *x = &r->sites[r->dirty[i]];
        sample(r, x, k);
        x->dirty = false;
    }
    r->ndirty = 0;
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
    touch(r, si);
}

static bool on_device(const struct snap_event *e, void *ctx)
{
    const struct replay *r = ctx;
    return e->device == r->dev && e->device >= 0 && ot_category_is_device64(e->category);
}

static void visit(const struct ot_replay_step *st, void *ctx)
{
    struct replay *r = ctx;
    const struct snap_event *e = st->e;
    if (!r->any_event) {
        r->any_event = true;
        r->ring_first_seq = e->seq;
    }
    r->last_seq = e->seq;
    r->last_time = e->time_ns;
    while (r->windows && r->next_w < WINDOWS && e->seq >= r->wb[r->next_w])
        on_marker(r, r->wb[r->next_w++], e->time_ns, false);
    if (e->kind == OT_EV_MARKER)
        on_marker(r, e->seq, e->time_ns, step_label(e->label));
    else if (st->tracked && e->kind == OT_EV_ALLOC)
        on_alloc(r, st);
    else if (st->tracked)
        on_free(r, st);
}

int why_ring_replay(struct replay *r)
{
    struct ot_replay rp = {.s = r->a->s, .last_seq = r->target, .track = on_device, .visit = visit, .ctx = r};
    char err[OT_ERRBUF];
    r->rp = &rp;
    int rc = ot_replay_run(&rp, err);
    r->rp = NULL;
    if (rc < 0)
        return -1;
    if (r->windows && r->any_event) {
        /* The last window ends at the target (or the ring's end). */
        on_marker(r, r->target == UINT64_MAX ? r->last_seq : r->target, r->last_time, false);
        return 0;
    }
    r->tail_frees = r->w_frees;
    if (r->nm > 0)
        close_window(r, r->nm - 1, NO_MARK);
    return 0;
}
