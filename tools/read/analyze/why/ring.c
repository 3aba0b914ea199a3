/* unfreed_site, nothing_freed, largest_rise, largest_allocation: what a replay of the event ring up to the
 * failure (or the peak) shows; growing_site is growth.c's. */
#include "analyze/why/ring_replay.h"
#include "analyze/why/remedy.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/breakdown.h"
#include "analyze/userline.h"

/* A call site that only adds to what it holds (a cache that takes one allocation per request and never
 * gives any back) grows until the device is full, whatever its size. The windows' growth statement needs
 * frees in every window (building a model grows as steadily); this one needs the site to be the one still
 * growing at the end instead: it made the failed request, or (no failure, and not at exit) the device's
 * latest allocation. At least 3 allocations in the ring, none freed, a quarter of the live memory or more,
 * and no framework on its stack (a caching allocator never frees to the driver by design). Its allocations
 * span several intervals between markers (or windows): three made in the interval under way are a phase's
 * working set, such as a validation pass's, not a cache that fills the device in time (walk 7, #15). */
#define UNFREED_MIN_ALLOCS 3
#define UNFREED_MIN_INTERVALS 3

static bool stated_growing(const struct ot_why *w, uint64_t stack_id)
{
    for (size_t i = 0; i < w->n; i++) {
        const struct ot_why_item *it = &w->v[i];
        if (strcmp(it->kind, "growing_site") != 0)
            continue;
        for (size_t k = 0; k < it->nnum; k++)
            if (strcmp(it->num[k].key, "stack_id") == 0 && it->num[k].u == stack_id)
                return true;
    }
    return false;
}

static void why_unfreed(struct ot_why *w, struct replay *r)
{
    const struct ot_analysis *a = r->a;
    const struct ot_snapshot *s = a->s;
    if (r->sites_off || !r->nsites || r->live <= 0)
        return;
    const struct site_state *x = NULL;
    if (s->has_failure) {
        uint32_t k = s->failure.stack_id ? ot_u64map_get(&r->site_idx, s->failure.stack_id) : OT_U64MAP_NONE;
        if (k == OT_U64MAP_NONE || k >= r->nsites)
            return;
        x = &r->sites[k];
    } else if (s->meta.trigger != OT_TRIGGER_EXIT) {
        for (size_t i = 0; i < r->nsites; i++)
            if (r->sites[i].last_alloc_seq == r->last_alloc_seq && r->sites[i].allocs)
                x = &r->sites[i];
    }
    if (!x || x->allocs < UNFREED_MIN_ALLOCS || x->frees || x->cur_count != x->allocs + x->seed_count ||
        x->cur_bytes * 4 < (uint64_t)r->live || ot_stack_framework(a, x->stack_id) || stated_growing(w, x->stack_id))
        return;
    /* The intervals it grew in: the complete ones, and the one under way after the last marker. */
    size_t grew = x->rises + (x->dirty && x->cur_bytes > (x->mark_idx == NO_MARK ? 0 : x->mark_bytes));
    if (r->nbound >= 2 && grew < UNFREED_MIN_INTERVALS) /* a ring too short for windows has no intervals to tell */
        return;
    uint64_t ring_bytes = x->cur_bytes - x->seed_bytes;
    uint64_t t1 = s->has_failure ? s->failure.time_ns : r->last_time;
    double secs = t1 > x->first_time ? (double)(t1 - x->first_time) / 1e9 : 0.0;
    char b1[32], b2[32], b3[32], b4[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "unfreed_site", "One call site only added to what it held: "))
        return;
    why_put_headline(b.f, a, x->stack_id);
    fprintf(b.f, " made %s allocation%s on device %" PRId64 " in the event ring (%s, %s each on average) and freed none of "
            "them, %.1f%% of the live memory %s",
            ot_fmt_count(b1, x->allocs), x->allocs == 1 ? "" : "s", r->dev, why_bytes(b2, ring_bytes),
            why_bytes(b3, ring_bytes / x->allocs), 100.0 * why_share(x->cur_bytes, (uint64_t)r->live),
            s->has_failure ? "at the failure" : "at the snapshot");
    if (s->has_failure)
        fprintf(b.f, "; the failed request (%s) was its next", why_bytes(b4, s->failure.requested_bytes));
    if (why_rate_ok(t1 > x->first_time ? t1 - x->first_time : 0))
        fprintf(b.f, "; it grew by %s per second over %.3g s", why_bytes(b4, (uint64_t)((double)ring_bytes / secs)), secs);
    fputc('.', b.f);
    why_num_i(&b, "device", r->dev);
    WHY_NUMS_U(&b, {"stack_id", x->stack_id}, {"allocations", x->allocs}, {"site_bytes", ring_bytes},
               {"live_bytes", (uint64_t)r->live}, {"duration_ns", t1 > x->first_time ? t1 - x->first_time : 0});
    why_item_end(&b);
}

static bool stated(const struct ot_why *w, const char *kind)
{
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->v[i].kind, kind) == 0)
            return true;
    return false;
}

/* Sites that allocated in the ring for the program-wide statement below; fewer than this, one of them
 * holds enough for the one-site statements. */
#define NOTHING_FREED_MIN_SITES 4
#define NOTHING_FREED_MIN_ALLOCS 64

/* Context ends whose frees the snapshot does not list: what the ring's replay cannot judge, and why. */
static void why_unlisted_ends(struct ot_why *w, struct replay *r, const char *what)
{
    char b1[32], b2[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "context_ends_unlisted",
                      "%s context end%s on device %" PRId64 " before %s freed %s that the snapshot does not list (it lists "
                      "what the latest context ends freed): the live bytes between markers after %s are not known, so "
                      "no growth, rise or step is judged from the event ring.",
                      ot_fmt_count(b1, r->unlisted_ends), r->unlisted_ends == 1 ? "" : "s", r->dev, what,
                      why_bytes(b2, r->unlisted_bytes), r->unlisted_ends == 1 ? "it" : "them"))
        return;
    why_num_i(&b, "device", r->dev);
    WHY_NUMS_U(&b, {"context_ends", r->unlisted_ends}, {"freed_bytes", r->unlisted_bytes});
    why_item_end(&b);
}

/* Nothing freed on the device in the whole ring, by many call sites none of which stands out (walk 7, #1:
 * 6,554 allocations from 64 sites, 0 frees: the report blamed one site of 64, tied with the others). Not
 * when a framework's allocator is on the stacks: a caching allocator never frees to the driver. */
static void why_nothing_freed(struct ot_why *w, struct replay *r)
{
    const struct ot_analysis *a = r->a;
    const struct ot_snapshot *s = a->s;
    if (r->sites_off || r->frees_on_dev || r->live <= 0 || r->nsites < NOTHING_FREED_MIN_SITES ||
        stated(w, "unfreed_site") || stated(w, "growing_site"))
        return;
    uint64_t allocs = 0, top = 0, first = UINT64_MAX;
    size_t sites = 0;
    for (size_t i = 0; i < r->nsites; i++) {
        const struct site_state *x = &r->sites[i];
        if (!x->allocs)
            continue;
        if (ot_stack_framework(a, x->stack_id))
            return;
        sites++;
        allocs += x->allocs;
        if (x->cur_bytes > top)
            top = x->cur_bytes;
        if (x->first_time < first)
            first = x->first_time;
    }
    if (sites < NOTHING_FREED_MIN_SITES || allocs < NOTHING_FREED_MIN_ALLOCS || top * 4 >= (uint64_t)r->live)
        return;
    /* Counted as the top call sites' table counts its rows: stacks that differ only below the program's
     * line are one. */
    if (a->has_at_failure && a->at_failure.ngroups && a->at_failure.ngroups < sites)
        sites = a->at_failure.ngroups;
    uint64_t t1 = s->has_failure ? s->failure.time_ns : r->last_time;
    char b1[32], b2[32], b3[32], t0s[48], t1s[48];
    struct why_item_b b;
    if (!why_item_say(&b, w, "nothing_freed", "Nothing was freed on device %" PRId64 ": the event ring holds %s allocations and 0 frees",
                      r->dev, ot_fmt_count(b1, allocs)))
        return;
    if (first != UINT64_MAX && t1 >= first)
        fprintf(b.f, " over %s..%s", ot_fmt_reltime(t0s, first, s->meta.start_mono_ns),
                ot_fmt_reltime(t1s, t1, s->meta.start_mono_ns));
    if (r->ring_first_seq > 1)
        fprintf(b.f, " (its first %s events were dropped)", ot_fmt_count(b3, r->ring_first_seq - 1));
    fprintf(b.f, ", from %s call sites, none holding more than %.1f%% of the %s live %s: the program kept everything it "
            "allocated.", ot_fmt_count(b3, sites), 100.0 * why_share(top, (uint64_t)r->live), why_bytes(b2, (uint64_t)r->live),
            s->has_failure ? "at the failure" : "at the snapshot");
    why_num_i(&b, "device", r->dev);
    WHY_NUMS_U(&b, {"allocations", allocs}, {"sites", sites}, {"live_bytes", (uint64_t)r->live}, {"largest_site_bytes", top},
               {"duration_ns", first != UINT64_MAX && t1 > first ? t1 - first : 0});
    why_item_end(&b);
}

/* A statement's number, when the statement was made. */
static bool stated_num(const struct ot_why *w, const char *kind, const char *key, uint64_t *v)
{
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->v[i].kind, kind) == 0)
            for (size_t k = 0; k < w->v[i].nnum; k++)
                if (strcmp(w->v[i].num[k].key, key) == 0) {
                    *v = w->v[i].num[k].u;
                    return true;
                }
    return false;
}

/* Without markers the largest allocation is said only when it adds something: not at the call site the
 * peak's statement names already, and at least half of the peak, or at least what the failed request was
 * short (freeing it alone would have made room). A 24 MiB allocation of a 768 MiB peak says nothing. */
static bool largest_allocation_tells(const struct ot_why *w, const struct replay *r)
{
    uint64_t v;
    if (stated_num(w, "peak_site", "stack_id", &v) && v == r->big_stack)
        return false;
    if (stated(w, "nothing_freed")) /* one of many kept allocations alike */
        return false;
    const struct ot_peak_view *p = r->a->peak;
    if (p && p->device == r->dev && r->big_size * 2 >= p->bytes)
        return true;
    return stated_num(w, "request_exceeds_free", "short_bytes", &v) && r->big_size >= v;
}

static void why_rise(struct ot_why *w, struct replay *r, const char *what)
{
    const struct ot_analysis *a = r->a;
    char b1[32], b2[32], b3[32];
    struct why_item_b b;
    if (r->nm == 0 || r->windows) {
        if (!r->big_size || !largest_allocation_tells(w, r) || !why_item_begin(&b, w, "largest_allocation"))
            return;
        fprintf(b.f, "The largest single allocation in the event ring before %s on device %" PRId64 ": %s at seq %" PRIu64 ", at ",
                what, r->dev, why_bytes(b1, r->big_size), r->big_seq);
        why_put_headline(b.f, a, r->big_stack);
        fputs(" (the ring has no marker to divide it into phases).", b.f);
        why_num_i(&b, "device", r->dev);
        WHY_NUMS_U(&b, {"bytes", r->big_size}, {"seq", r->big_seq}, {"stack_id", r->big_stack});
        why_item_end(&b);
        return;
    }
    if (!r->have_best || r->best_delta <= 0)
        return;
    if (!why_item_say(&b, w, "largest_rise",
            "The largest rise in live bytes on device %" PRId64 " between markers before %s: +%s (%s allocation%s, %s free%s) from ",
            r->dev, what, why_bytes(b1, (uint64_t)r->best_delta), ot_fmt_count(b2, r->best_allocs), r->best_allocs == 1 ? "" : "s",
            ot_fmt_count(b3, r->best_frees), r->best_frees == 1 ? "" : "s"))
        return;
    uint64_t from_seq, to_seq;
    if (r->best_from == NO_MARK) {
        from_seq = r->ring_first_seq;
        fprintf(b.f, "the start of the event ring (seq %" PRIu64 ")", from_seq);
    } else {
        from_seq = r->mseq[r->best_from];
        why_put_marker(b.f, a, from_seq);
    }
    fputs(" to ", b.f);
    if (r->best_to == NO_MARK) {
        to_seq = r->target == UINT64_MAX ? r->last_seq : r->target;
        fprintf(b.f, "%s (seq %" PRIu64 ")", what, to_seq);
    } else {
        to_seq = r->mseq[r->best_to];
        why_put_marker(b.f, a, to_seq);
    }
    if (r->big_size)
        fprintf(b.f, "; the largest single allocation in the ring was %s at seq %" PRIu64, why_bytes(b1, r->big_size), r->big_seq);
    fputc('.', b.f);
    why_num_i(&b, "device", r->dev);
    why_num_i(&b, "rise_bytes", r->best_delta);
    WHY_NUMS_U(&b, {"from_seq", from_seq}, {"to_seq", to_seq}, {"allocations", r->best_allocs},
               {"frees", r->best_frees});
    if (r->big_size) {
        why_num_u(&b, "largest_allocation_bytes", r->big_size);
        why_num_u(&b, "largest_allocation_seq", r->big_seq);
    }
    why_item_end(&b);
}

/* Past this many stacks the line's allocations are not looked for; past this many Python frames a stack's user
 * frame is not looked for. */
#define REQ_LINE_STACKS 65536
#define REQ_LINE_FRAMES 256

/* The user frame of a stack (userline.h) from its Python frames alone: native words are not resolved, which
 * would cost a symbol lookup each for every stack of the snapshot. */
static const struct ot_frame *user_frame(struct ot_resolver *res, const struct ot_stack *st)
{
    const struct ot_frame *py[REQ_LINE_FRAMES] = {0};
    size_t n = 0;
    for (size_t i = 0; i < st->nframes && n < REQ_LINE_FRAMES; i++) {
        if (!(st->frames[i] & OT_FRAME_PYTHON))
            continue;
        const struct ot_frame *f;
        size_t k = ot_resolve(res, st->frames[i], &f);
        for (size_t j = 0; j < k && n < REQ_LINE_FRAMES; j++)
            py[n++] = &f[j];
    }
    bool mp;
    size_t u = ot_user_frame_index(py, n, &mp);
    return u < n ? py[u] : NULL;
}

/* The stacks under the failed request's line of the program's own code, the failure's own left out; false when
 * it has no such line or none shares it (then only its own stack counts, as for a driver's failure). */
static bool req_line(struct ot_u64map *m, const struct ot_analysis *a)
{
    const struct ot_snapshot *s = a->s;
    const struct ot_stack *fst = ot_snapshot_stack(s, s->failure.stack_id);
    const struct ot_frame *line = fst ? user_frame(a->res, fst) : NULL;
    if (!line || s->nstacks > REQ_LINE_STACKS || ot_u64map_init(m, 64) < 0)
        return false;
    size_t n = 0;
    for (size_t i = 0; i < s->nstacks; i++) {
        const struct ot_stack *st = &s->stacks[i];
        const struct ot_frame *u = st == fst ? NULL : user_frame(a->res, st); /* the resolver's frames stay valid */
        if (u && ot_frame_same_line(u, line) && ot_u64map_put(m, st->id, 1) != OT_U64MAP_NONE)
            n++;
    }
    if (!n)
        ot_u64map_free(m);
    return n > 0;
}

/* A request that grew step after step (growing_request) already says what the failing step asked for against
 * the step before it. Where that is less than step_demand's ratio, the driver's view of the two intervals would
 * contradict it: a caching allocator served the step before from its cache, and only its new segments show (run
 * 45: "15.5x the one before it" beside +256 MiB a step, 1.01x). */
static bool grew_steadily(const struct ot_why *w)
{
    const struct ot_why_item *g = why_find(w, "growing_request");
    uint64_t to = g ? item_num(g, "to_bytes") : 0, fit = g ? item_num(g, "largest_fit_bytes") : 0;
    return fit && to < fit + fit / 2;
}

void why_ring(struct ot_why *w, const struct ot_analysis *a, int64_t dev)
{
    const struct ot_snapshot *s = a->s;
    if (!(s->seen & (1u << OT_SEC_EVENTS)) || !a->ev.decoded)
        return;
    struct replay r = {.a = a, .dev = dev, .target = UINT64_MAX};
    const char *what = "the snapshot";
    if (s->has_failure) {
        r.target = s->failure.seq;
        r.req_stack = s->failure.stack_id;
        what = "the failure";
        if (s->meta.trigger == OT_TRIGGER_FRAMEWORK_OOM)
            r.by_line = req_line(&r.req_line, a);
    } else if (a->peak && a->peak->device == dev) {
        r.target = a->peak->seq;
        what = "the peak";
    }
    /* A ring without any marker is cut into windows (a.ev counted the markers when it decoded the ring). */
    uint64_t end = r.target == UINT64_MAX || r.target > a->ev.last_seq ? a->ev.last_seq : r.target;
    if (a->ev.decoded && !a->ev.by_kind[OT_EV_MARKER] && end > a->ev.first_seq + WINDOWS) {
        r.windows = true;
        for (size_t k = 0; k < WINDOWS; k++)
            r.wb[k] = a->ev.first_seq + (end - a->ev.first_seq) / WINDOWS * k;
    }
    /* After a context end whose frees are not listed, the replay's live bytes are too high: no statement is
     * made from them (walk 9, #2: "216 MiB per interval, 21.1 GiB in all" on a 1 GiB device). */
    int rc = why_ring_replay(&r);
    if (rc == 0 && r.unlisted_ends)
        why_unlisted_ends(w, &r, what);
    else if (rc == 0) {
        why_growth(w, &r);
        why_growing_request(w, &r);
        why_unfreed(w, &r);
        why_nothing_freed(w, &r);
        why_rise(w, &r, what);
        /* The last two marker intervals: the one the failure ended and the one before it. */
        if (s->has_failure && !r.windows && r.nm >= 2 && r.mseq[r.nm - 1] < r.target && !grew_steadily(w)) {
            size_t p = why_step_demand_prev(a, r.mseq, r.nm);
            why_step_demand(w, a, dev,
                &(struct why_interval){r.mseq[p], r.mlive[p], r.mhigh[p + 1], r.mlive[p + 1], r.mfrees[p + 1],
                                       p == r.nm - 2},
                &(struct why_interval){r.mseq[r.nm - 1], r.mlive[r.nm - 1], r.high, r.live, r.tail_frees, true});
        }
    }
    free(r.mseq);
    free(r.mtime);
    free(r.mlive);
    free(r.mstep);
    free(r.mfrees);
    free(r.mhigh);
    free(r.mbusy);
    free(r.mbound);
    free(r.mkind);
    free(r.mreq);
    if (r.by_line)
        ot_u64map_free(&r.req_line);
    free(r.sites);
    free(r.dirty);
    ot_u64map_free(&r.site_idx);
}
