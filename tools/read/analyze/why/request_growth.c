/* growing_request: what one step needs grew from each step to the next (a batch or sequence length that grows
 * with a curriculum, dynamic padding that follows longer and longer inputs), so the run fails at some step
 * whatever else it frees. step_demand sees a step that asked for 1.5x the one before; a need that grows by a
 * steady amount is a few percent a step and passes under it (walk 11, #2: a request 16 MiB larger each step,
 * 1.01x the one before, failed at step 99 and the report named only a 2 MiB-a-step leak beside it).
 *
 * Measured over the steps that markers of the latest step's kind began (a validation pass every tenth step
 * is judged apart): the failed request's call site's largest allocation in each step, the failed request in
 * the step under way (a framework's OOM: the allocations under its line of the user's code, ring.c's req_line); else, and without a failure, how far live memory rose above each step's start (its
 * height). The growth's projection (growth.c) counts the height's rise too (walk 11, #1: "lasts about 536
 * more steps" where the run failed 60 steps later). */
#include "analyze/why/ring_replay.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The run: at least this many steps, the value rising in at least RISE_NUM of RISE_DEN of the steps between
 * them, never falling by more than 1/FALL_DEN of itself, and at least doubling from its first step to its last. */
#define MIN_STEPS 8
#define RISE_NUM 4
#define RISE_DEN 5
#define FALL_DEN 8
/* ... and its growth at least this share of the device's used memory (cuMemGetInfo), as every statement about
 * a step's need (step_demand). */
#define MIN_SHARE_PCT 15

static uint64_t above(int64_t top, int64_t base)
{
    return top > base ? (uint64_t)top - (uint64_t)base : 0;
}

/* The value of the step that bound marker b began and marker e (the next step's start) ends; e == r->nm: the
 * step under way at the failure or the snapshot. */
static uint64_t step_value(const struct replay *r, bool by_site, size_t b, size_t e)
{
    const struct ot_snapshot *s = r->a->s;
    bool failed = e == r->nm && s->has_failure;
    if (by_site) {
        uint64_t v = e < r->nm ? r->mreq[e] : r->req_cur;
        return failed && s->failure.requested_bytes > v ? s->failure.requested_bytes : v;
    }
    int64_t top = r->mlive[b];
    for (size_t k = b + 1; k <= e; k++) {
        int64_t hi = k < r->nm ? r->mhigh[k] : r->high;
        if (hi > top)
            top = hi;
    }
    uint64_t v = above(top, r->mlive[b]);
    if (failed) {
        uint64_t want = ot_sat_add(above(r->live, r->mlive[b]), s->failure.requested_bytes);
        if (want > v)
            v = want;
    }
    return v;
}

static bool label_step(const struct ot_analysis *a, uint64_t seq, uint64_t *step)
{
    struct ot_str l;
    return ot_marker_label(a, seq, &l) && why_label_step(l, step);
}

bool why_step_growth(const struct replay *r, bool by_site, struct step_growth *g)
{
    const struct ot_snapshot *s = r->a->s;
    if (r->windows || r->sites_off || r->nbound < MIN_STEPS || (by_site && (!s->has_failure || !r->req_stack)))
        return false;
    size_t *at = malloc((r->nbound + 1) * sizeof(*at));
    uint64_t *v = malloc((r->nbound + 1) * sizeof(*v));
    size_t m = 0;
    if (!at || !v) {
        free(at);
        free(v);
        return false;
    }
    uint8_t kind = r->mkind[r->last_bound];
    for (size_t k = 0, next; k < r->nm; k = next) {
        for (next = k + 1; next < r->nm && !r->mbound[next]; next++)
            ;
        if (!r->mbound[k] || r->mkind[k] != kind)
            continue;
        at[m] = k;
        v[m++] = step_value(r, by_site, k, next);
    }
    /* Without a failure, the step under way is counted only when it already needed as much as the one before:
     * it has not ended. */
    bool under_way = s->has_failure || (m >= 2 && v[m - 1] >= v[m - 2]);
    if (!under_way && m)
        m--;
    bool found = false;
    size_t rises = 0, falls = 0;
    for (size_t i = m; m >= MIN_STEPS && v[m - 1] && i-- > 1;) {
        uint64_t prev = v[i - 1], next = v[i];
        if (!prev || next < prev - prev / FALL_DEN)
            break; /* a step without it, or a fall by more than an eighth: the run starts after it */
        rises += next > prev;
        falls += next < prev;
        size_t between = m - i;
        if (between + 1 >= MIN_STEPS && rises * RISE_DEN >= between * RISE_NUM && v[m - 1] / 2 >= prev) {
            found = true;
            *g = (struct step_growth){.by_site = by_site, .n = between + 1, .rises = rises, .falls = falls,
                                      .first = at[i - 1], .last = at[m - 1], .from = prev, .to = v[m - 1],
                                      .under_way = under_way};
            g->prev_to = v[m - 2];
            g->prev_last = at[m - 2];
        }
    }
    free(at);
    free(v);
    if (!found)
        return false;
    uint64_t s0, s1;
    g->numbered = label_step(r->a, r->mseq[g->first], &s0) && label_step(r->a, r->mseq[g->last], &s1) && s1 > s0;
    g->steps = g->numbered ? s1 - s0 : g->n - 1;
    g->per_step = (g->to - g->from) / g->steps;
    return g->per_step > 0;
}

static bool leak_stated(const struct ot_why *w)
{
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->v[i].kind, "growing_site") == 0)
            return true;
    return false;
}

void why_growing_request(struct ot_why *w, const struct replay *r)
{
    const struct ot_analysis *a = r->a;
    const struct ot_snapshot *s = a->s;
    const struct snap_device *d = ot_snapshot_device(s, r->dev);
    struct step_growth g;
    if (!why_step_growth(r, true, &g) && !why_step_growth(r, false, &g))
        return;
    /* A growth too small beside what the device holds is not why it filled. */
    if (d && (d->flags & OT_DEV_MEMINFO_KNOWN) && d->free_bytes <= d->total_bytes &&
        (double)(g.to - g.from) * 100 < (double)(d->total_bytes - d->free_bytes) * MIN_SHARE_PCT)
        return;
    const char *unit = g.numbered ? "step" : "interval";
    char b1[32], b2[32], b3[32];
    struct why_item_b b;
    if (g.by_site) {
        if (!why_item_say(&b, w, "growing_request", "The request grew from %s to %s: the largest allocation on device %" PRId64
                          " at ", unit, unit, r->dev))
            return;
        why_put_headline(b.f, a, r->req_stack);
        fprintf(b.f, ", the failed request's call site, rose in %zu of %zu %ss", g.rises, g.n - 1, unit);
    } else if (!why_item_say(&b, w, "growing_request", "Each %s needed more than the one before: how far live memory on "
                             "device %" PRId64 " rose above a %s's start grew in %zu of %zu %ss", unit, r->dev, unit, g.rises,
                             g.n - 1, unit)) {
        return;
    }
    if (g.falls)
        fprintf(b.f, " and fell in %zu, by less than an eighth each time", g.falls);
    else
        fputs(" and never fell", b.f);
    fprintf(b.f, ", from %s after ", why_bytes(b1, g.from));
    why_put_marker(b.f, a, r->mseq[g.first]);
    /* With a failure the last step's value is the failed request (or holds it): the one before is the
     * largest that fit. */
    if (s->has_failure) {
        fprintf(b.f, " to %s after ", why_bytes(b1, g.prev_to));
        why_put_marker(b.f, a, r->mseq[g.prev_last]);
        fprintf(b.f, ", the largest that fit, and %s, %s, after ", why_bytes(b2, g.to),
                g.by_site ? "the failed request" : "with the failed request");
        why_put_marker(b.f, a, r->mseq[g.last]);
    } else {
        fprintf(b.f, " to %s after ", why_bytes(b1, g.to));
        why_put_marker(b.f, a, r->mseq[g.last]);
        if (g.under_way)
            fprintf(b.f, " (under way at the %s)", r->target == UINT64_MAX ? "snapshot" : "peak");
    }
    fprintf(b.f, ": +%s a %s. A %s's own need that grows (a batch or sequence length that grows with a curriculum, "
            "padding to ever longer inputs) exceeds at some %s what the device has free, whatever else is freed",
            why_bytes(b3, g.per_step), unit, unit, unit);
    /* Without a failure, when it ends: the step under way holds part of its height already (live, not in the
     * free memory). With a leak beside it, the leak's statement says when both together fill the device. */
    if (!s->has_failure && d && (d->flags & OT_DEV_MEMINFO_KNOWN) && !leak_stated(w)) {
        uint64_t now = above(r->live, r->mlive[r->last_bound]), more = 0;
        /* Up to what the device holds above the step's start at the snapshot: the replay may stop at the peak,
         * whose allocations the snapshot's free memory no longer leaves out. */
        uint64_t held = above(d->tracked_bytes > INT64_MAX ? INT64_MAX : (int64_t)d->tracked_bytes, r->mlive[r->last_bound]);
        if (now > held)
            now = held;
        if (now > g.to)
            now = g.to;
        if (ot_sat_add(d->free_bytes, now) > g.to)
            more = (ot_sat_add(d->free_bytes, now) - g.to) / g.per_step;
        fprintf(b.f, ": at this rate the device's free memory (%s at the snapshot) holds about %" PRIu64 " more %s%s",
                why_bytes(b1, d->free_bytes), more, unit, more == 1 ? "" : "s");
    }
    fputc('.', b.f);
    why_num_i(&b, "device", r->dev);
    WHY_NUMS_U(&b, {"stack_id", g.by_site ? r->req_stack : 0}, {"steps_in_run", g.n}, {"rises", g.rises},
               {"falls", g.falls}, {"from_bytes", g.from}, {"to_bytes", g.to}, {"largest_fit_bytes", s->has_failure ? g.prev_to : 0},
               {"bytes_per_step", g.per_step}, {"steps", g.steps}, {"numbered_steps", g.numbered},
               {"from_marker_seq", r->mseq[g.first]}, {"to_marker_seq", r->mseq[g.last]});
    why_item_end(&b);
}
