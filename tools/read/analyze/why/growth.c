/* growing_site: a call site whose live allocations rose across the replay's markers (or windows), seldom fell,
 * and still holds its growth: a suspected leak (ring.c replays the ring; ring_replay.c samples the sites).
 *
 * Growth is measured between markers: the program's own (oomtrace.mark) or the companion's optimizer-step
 * markers ("step N"), whose intervals are steps. A ring with no marker at all is cut into WINDOWS windows
 * of equal event counts instead, and growth is then stated per second when its run spans a second or more
 * (why_rate_ok), else as bytes over the span and per allocation kept. */
#include "analyze/why/ring_replay.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/breakdown.h"
#include "analyze/stackview.h"

/* The companion recorded optimizer steps: its markers are then those labelled "step N". */
static bool companion_steps(const struct ot_snapshot *s)
{
    for (size_t i = 0; i < s->fw.nsteps; i++)
        if (ot_str_eq(s->fw.steps[i].framework, "torch"))
            return true;
    return false;
}
/* Where a run of growth starts or ends: a marker, or a window's boundary. */
static void put_mark(FILE *f, const struct replay *r, size_t k)
{
    if (r->windows)
        fprintf(f, "seq %" PRIu64, r->mseq[k]);
    else
        why_put_marker(f, r->a, r->mseq[k]);
}

/* Windows are not iterations: a program that builds a model or an optimizer's state grows through the
 * windows as steadily as one that leaks. A loop that leaks also frees its temporaries as it goes, so
 * without markers a site's growth counts only when every window of its span saw frees. */
static bool frees_throughout(const struct replay *r, size_t from, size_t to)
{
    for (size_t k = from + 1; k <= to; k++)
        if (!r->mfrees[k])
            return false;
    return true;
}

/* A caching allocator frees nothing to the driver: growth then may be its cache. Its own view tells:
 * when its segments on the device hold less free space than a tenth of the growth, the growth is live
 * tensors. */
static bool framework_allocated(const struct ot_analysis *a, int64_t dev, uint64_t gain)
{
    if (!a->fw || !a->fw->present)
        return false;
    for (size_t i = 0; i < a->fw->ndevs; i++) {
        const struct ot_fw_devview *v = &a->fw->devs[i];
        if ((int64_t)v->device == dev && v->nsegments && v->free_bytes < gain / 10)
            return true;
    }
    return false;
}

/* A marker's step: its label starts "step N" (the companion's "step 12", a program's "step 3 micro-batch 1"). */
static bool marker_step(const struct ot_analysis *a, uint64_t seq, uint64_t *step)
{
    struct ot_str l;
    return ot_marker_label(a, seq, &l) && why_label_step(l, step);
}

/* A kind of marker as its label says it ("valid N"), else as the replay kept it from the labels it saw:
 * never by a marker's seq, which names no kind (walk 11, #3a: "after each marker of the marker at seq 32"). */
static void put_kind(FILE *f, const struct replay *r, size_t k, unsigned kind)
{
    if (why_put_kind(f, r->a, r->mseq[k]))
        return;
    size_t n = r->kind_len[kind] < WHY_KIND_BYTES ? r->kind_len[kind] : WHY_KIND_BYTES;
    fputc('"', f);
    ot_fput_safe_max(f, (struct ot_str){r->kinds[kind], n}, 60);
    fputs(n && memchr(" =:#_-", r->kinds[kind][n - 1], 6) ? "N\"" : "\"", f);
}

/* A leak's shape, measured over the whole marked span from the marker before the site's first rise to the
 * last marker (walk 8, #23), in steps where the markers' labels number them (a marker per micro-batch, "step
 * 3 micro-batch 1", makes one interval a step): it rose in at least GROWTH_MIN_RISES intervals and in at
 * least one in GROWTH_RISE_SHARE of the span's busy ones (a leak made every few steps, by an evaluation or a
 * logger), fell in at most half as many as it rose (a cache whose eviction lags falls now and then), kept at
 * least half of what its rises added, and still holds at least half of its net growth at the snapshot (walk
 * 7, #26: churn that holds nothing at the end is no leak). Its growth still goes on at the span's end: its
 * latest rise no further back than twice its average gap between rises and one more (walk 9, #7: a warm-up
 * that grew for 10 steps and then stayed flat read "rose in 10 of 40 intervals"), and its flat end not so long
 * that a site rising as often as it did would seldom have one (stopped()).
 *
 * Where markers of several kinds divide the ring, a site that does not qualify so is judged again over the
 * intervals each kind began alone (walk 9, #13: what a validation pass every tenth step keeps rises in one
 * interval of ten). */
#define GROWTH_MIN_RISES 3
#define GROWTH_RISE_SHARE 4
/* The most sites a statement names. */
#define GROWTH_NAMED 3

struct growth {
    const struct site_state *x;
    size_t intervals;  /* busy intervals in its span (with a kind: the intervals its kind began) */
    uint64_t gain;     /* its net growth over the span */
    uint64_t held;     /* its live bytes at the snapshot */
    size_t start;      /* the marker that began its span */
    size_t rises;
    uint64_t from_count, from_bytes, to_count, to_bytes;
    unsigned kind;     /* NO_KIND: every interval counts; else the kind of marker whose intervals it rose in */
};

/* Still growing at the span's end: the intervals since its latest rise (gap) are at most twice the span's
 * intervals per rise, and one more. */
static bool going(size_t gap, size_t rises, size_t n)
{
    return gap * rises <= 2 * n + rises;
}

/* Stopped, though going() allows the gap: flat for the last STOP_MIN_FLAT intervals or more after rising in
 * nearly every one before (a warm-up: buffers made on first use, a cache filled; walk 10, #10: 10 rises then 3
 * flat steps read "a suspected leak ... rose in 10 of 13 steps"). A site that went on rising as often as before
 * (p: its rises over the intervals up to its latest rise, and one more, as a margin on few of them) would be
 * flat this long with a chance under STOP_CHANCE, (1 - p)^gap; judged from STOP_MIN_RISES rises on. "Flat for
 * the last 3 steps" alone would miss about 6% of leaks that rise in 60% of steps, spread out (0.4^3); this
 * misses at most 0.9% more leaks than going() alone, simulated over leaks rising in 30 to 90% of 15 to 200
 * steps (20,000 runs each), and sees a warm-up of 6 steps or more once 3 flat steps follow it. */
#define STOP_MIN_FLAT 3
#define STOP_MIN_RISES 6
#define STOP_CHANCE 0.01
static bool stopped(size_t gap, size_t rises, size_t n)
{
    if (gap < STOP_MIN_FLAT || rises < STOP_MIN_RISES || n < gap)
        return false;
    double p = (double)rises / (double)(n - gap + 1), chance = 1;
    if (p > 1)
        p = 1;
    for (size_t k = 0; k < gap && chance >= STOP_CHANCE; k++)
        chance *= 1 - p;
    return chance < STOP_CHANCE;
}

static bool shaped(const struct replay *r, const struct site_state *x, struct growth *g)
{
    if (g->rises < GROWTH_MIN_RISES || x->mark_bytes <= g->from_bytes)
        return false;
    g->x = x;
    g->gain = x->mark_bytes - g->from_bytes;
    g->to_count = x->mark_count;
    g->to_bytes = x->mark_bytes;
    g->held = ot_sat_add(r->a->s->has_live ? x->snap_bytes : x->cur_bytes, x->ctx_end_bytes);
    return g->rises * GROWTH_RISE_SHARE >= g->intervals && x->falls * 2 <= x->rises && g->gain * 2 >= x->rise_bytes &&
           g->held * 2 >= g->gain;
}

/* The intervals markers of kind k began in [from, to): kc holds, for each marker, the boundaries of each kind
 * before it. */
static size_t kind_count(const uint32_t *kc, size_t from, size_t to, unsigned k)
{
    return kc[to * WHY_KINDS + k] - kc[from * WHY_KINDS + k];
}

static bool growth_of(const struct replay *r, const uint32_t *kc, const struct site_state *x, struct growth *g)
{
    size_t end = r->last_bound;
    if (x->mark_idx == NO_MARK)
        return false;
    if (x->rises && x->first_rise < end) {
        *g = (struct growth){.intervals = r->mbusy[end] - r->mbusy[x->first_rise], .start = x->first_rise,
                             .rises = x->rises, .from_count = x->first_count, .from_bytes = x->first_bytes, .kind = NO_KIND};
        size_t gap = r->mbusy[end] - r->mbusy[x->last_rise];
        if (shaped(r, x, g) && going(gap, x->rises, g->intervals) && !stopped(gap, x->rises, g->intervals) &&
            (!r->windows || frees_throughout(r, x->first_rise, end)))
            return true;
    }
    for (unsigned k = 0; kc && k < r->nkinds; k++) {
        if (x->krises[k] < GROWTH_MIN_RISES || x->kfirst[k] >= end)
            continue;
        *g = (struct growth){.intervals = kind_count(kc, x->kfirst[k], end, k), .start = x->kfirst[k],
                             .rises = x->krises[k], .from_count = x->kfirst_count[k], .from_bytes = x->kfirst_bytes[k],
                             .kind = k};
        size_t gap = kind_count(kc, x->klast[k] + 1, end, k);
        if (shaped(r, x, g) && going(gap, x->krises[k], g->intervals) && !stopped(gap, x->krises[k], g->intervals))
            return true;
    }
    return false;
}

/* Keeps the GROWTH_NAMED largest growths, largest first (then more rises, then the lower stack id). */
static void rank(struct growth *top, size_t *ntop, const struct growth *g)
{
    size_t i = *ntop;
    while (i > 0) {
        const struct growth *p = &top[i - 1];
        if (g->gain < p->gain || (g->gain == p->gain && (g->rises < p->rises ||
                                  (g->rises == p->rises && g->x->stack_id > p->x->stack_id))))
            break;
        i--;
    }
    if (i >= GROWTH_NAMED)
        return;
    size_t last = *ntop < GROWTH_NAMED ? *ntop : GROWTH_NAMED - 1;
    memmove(&top[i + 1], &top[i], (last - i) * sizeof(*top));
    top[i] = *g;
    if (*ntop < GROWTH_NAMED)
        (*ntop)++;
}

/* Sites the site table shows as one row (at the failure): those under one line of the program. Past this many
 * members the group is not looked into. */
#define GROUP_MAX 4096

static bool in_group(const struct ot_sites *t, const struct ot_site_group *g, uint64_t stack_id)
{
    for (size_t m = 0; m < g->n; m++)
        if (t->v[t->member[g->first + m]].stack_id == stack_id)
            return true;
    return false;
}

static const struct ot_site_group *group_of(const struct ot_analysis *a, uint64_t stack_id)
{
    const struct ot_sites *t = &a->at_failure;
    for (size_t i = 0; a->has_at_failure && i < t->ngroups; i++) {
        const struct ot_site_group *g = &t->groups[i];
        if (g->key != OT_GROUP_SITE && g->n > 1 && g->n <= GROUP_MAX && in_group(t, g, stack_id))
            return g;
    }
    return NULL;
}

/* For each marker, the boundaries of each kind before it; NULL with fewer than two kinds (or no memory). */
static uint32_t *kind_counts(const struct replay *r)
{
    if (r->windows || r->nkinds < 2 || r->nm >= UINT32_MAX)
        return NULL;
    uint32_t *kc = calloc((r->nm + 1) * WHY_KINDS, sizeof(*kc));
    for (size_t k = 0; kc && k < r->nm; k++) {
        memcpy(&kc[(k + 1) * WHY_KINDS], &kc[k * WHY_KINDS], WHY_KINDS * sizeof(*kc));
        if (r->mbound[k] && r->mkind[k] != NO_KIND)
            kc[(k + 1) * WHY_KINDS + r->mkind[k]]++;
    }
    return kc;
}

/* The most live memory rose above a step's start (a marker that starts one) in the span, the step under way
 * included: what each step needs at its height besides what it keeps, a validation pass's too. *now: how far
 * the step under way has risen (its allocations that the snapshot's free memory already leaves out). */
static uint64_t step_height(const struct replay *r, size_t start, uint64_t *now)
{
    uint64_t h = 0, cur = 0;
    int64_t base = r->mlive[start], top = base;
    for (size_t k = start + 1; k <= r->nm; k++) {
        int64_t hi = k < r->nm ? r->mhigh[k] : r->high;
        if (hi > top)
            top = hi;
        cur = top > base ? (uint64_t)top - (uint64_t)base : 0;
        if (cur > h)
            h = cur;
        if (k < r->nm && r->mbound[k])
            base = top = r->mlive[k];
    }
    *now = cur;
    return h;
}

void why_growth(struct ot_why *w, struct replay *r)
{
    const struct ot_analysis *a = r->a;
    const struct ot_snapshot *s = a->s;
    if (r->sites_off || r->nbound < 4)
        return;
    struct growth top[GROWTH_NAMED], g;
    size_t ntop = 0, qualifying = 0;
    uint32_t *kc = kind_counts(r);
    for (size_t i = 0; i < r->nsites; i++) {
        if (!growth_of(r, kc, &r->sites[i], &g))
            continue;
        qualifying++;
        rank(top, &ntop, &g);
    }
    if (!ntop) {
        free(kc);
        return;
    }
    struct growth best = top[0];
    /* Sites of one row of the site table (under one line of the program) that grew alike are said as that
     * line, with their sums (an H200 run's three stacks under "ut_summed_loss.py:19 in train" kept 256 MiB a
     * step each, and the statement named one of them for the 769 MiB a step). */
    const struct ot_site_group *grp = group_of(a, best.x->stack_id);
    size_t grouped = 0;
    for (size_t i = 0; grp && i < r->nsites; i++) {
        if (!growth_of(r, kc, &r->sites[i], &g) || g.kind != best.kind || !in_group(&a->at_failure, grp, g.x->stack_id))
            continue;
        if (grouped++ == 0) {
            best.gain = best.held = best.from_count = best.from_bytes = best.to_count = best.to_bytes = 0;
        }
        best.gain = ot_sat_add(best.gain, g.gain);
        best.held = ot_sat_add(best.held, g.held);
        best.from_count = ot_sat_add(best.from_count, g.from_count);
        best.from_bytes = ot_sat_add(best.from_bytes, g.from_bytes);
        best.to_count = ot_sat_add(best.to_count, g.to_count);
        best.to_bytes = ot_sat_add(best.to_bytes, g.to_bytes);
    }
    free(kc);
    if (grouped > 1) {
        qualifying -= grouped - 1;
        size_t k = 1;
        for (size_t i = 1; i < ntop; i++)
            if (!in_group(&a->at_failure, grp, top[i].x->stack_id))
                top[k++] = top[i];
        ntop = k;
    } else {
        grouped = 0;
        best = top[0];
    }
    const char *subject = grouped ? "The call sites under one line" : "One call site", *its = grouped ? "their" : "its";
    const struct site_state *x = best.x;
    bool kind = best.kind != NO_KIND;
    size_t start = best.start, end = r->last_bound;
    /* The span's unit: optimizer steps when every marker it spans is the companion's step marker; steps when
     * the markers' labels number them (the rate then per step: "step 3 micro-batch 1" are four intervals a
     * step, grouped); seconds when the ring had no marker (windows); the intervals one kind of marker began;
     * else marker intervals. */
    bool steps = !r->windows && !kind && companion_steps(s), numbered = !r->windows && !kind;
    for (size_t k = start; (steps || numbered) && k <= end; k++) {
        steps = steps && r->mstep[k];
        numbered = numbered && r->mstep[k];
    }
    uint64_t s0, s1, nsteps = 0;
    if (numbered && marker_step(a, r->mseq[start], &s0) && marker_step(a, r->mseq[end], &s1) && s1 > s0)
        nsteps = s1 - s0;
    numbered = numbered && nsteps;
    /* Steps with markers of another kind between them (a validation pass every tenth step): the rate is per
     * step still, by the step markers that began intervals, the others' growth included (walk 9, #3: "339
     * more intervals" where 170 steps ran). */
    size_t others = 0;
    if (!r->windows && !kind && !numbered) {
        size_t sb = 0;
        for (size_t k = start; k < end; k++)
            if (r->mbound[k]) {
                sb += r->mstep[k];
                others += !r->mstep[k];
            }
        if (sb > others)
            nsteps = sb;
        else
            others = 0;
    }
    /* Counted in steps, a step without an allocation or free is a step still. */
    if ((steps || numbered) && nsteps > best.intervals)
        best.intervals = nsteps;
    uint64_t t0 = r->mtime[start], t1 = r->mtime[end];
    uint64_t ns = t1 > t0 ? t1 - t0 : 0;
    double secs = (double)ns / 1e9;
    bool per_second = r->windows && why_rate_ok(ns);
    uint64_t gain = best.gain, n = best.intervals ? best.intervals : 1;
    uint64_t kept = x->mark_count > best.from_count ? x->mark_count - best.from_count : 0;
    const char *unit = r->windows ? "windows" : steps || numbered ? "steps" : "intervals";
    char sp[32];
    /* The device's growth over the same span, when it too rose far more often than it fell (sites that
     * grew together, as a summed loss keeps several tensors per step). */
    int64_t dev_gain;
    if (__builtin_sub_overflow(r->mlive[end], r->mlive[start], &dev_gain))
        dev_gain = 0; /* saturated levels (a hostile ring): no device growth to speak of */
    size_t dev_up = 0, dev_down = 0;
    for (size_t k = start + 1, prev = start; k <= end; k++) {
        if (!r->mbound[k])
            continue;
        dev_up += r->mlive[k] > r->mlive[prev];
        dev_down += r->mlive[k] < r->mlive[prev];
        prev = k;
    }
    if (dev_down * 2 > dev_up)
        dev_gain = 0;
    /* No free on the device is a caching allocator's way (it never gives back to the driver) only when the
     * growing site allocates through one: a program that calls the driver itself and frees nothing is the
     * leak (walk 6, #17). */
    bool cache_may_be = r->frees_on_dev == 0 && ot_stack_framework(a, x->stack_id) != NULL;
    bool suspect = r->frees_on_dev || !cache_may_be;
    const char *at = s->has_failure ? "at the failure" : "at the snapshot";
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    struct why_item_b b;
    if (r->windows) {
        if (!why_item_say(&b, w, "growing_site",
                "%s grew through the event ring%s: with no marker to divide it, the ring up to %s (seq %" PRIu64
                "..%" PRIu64 ") cut into %d windows of equal event counts shows %s live allocations on device %" PRId64
                " rising in %zu of %zu windows", subject,
                suspect ? " (a suspected leak)" : "", s->has_failure ? "the failure" : r->target != UINT64_MAX ? "the peak" : "the snapshot",
                r->mseq[0], r->mseq[end], WINDOWS, its, r->dev, best.rises, (size_t)n))
            return;
    } else if (kind) {
        if (!why_item_begin(&b, w, "growing_site"))
            return;
        fprintf(b.f, "%s grew after each marker ", subject);
        put_kind(b.f, r, start, best.kind);
        fprintf(b.f, "%s: %s live allocations on device %" PRId64 " rose in %s of the %s intervals such a marker began",
                suspect ? " (a suspected leak)" : "", its, r->dev, ot_fmt_count(b1, best.rises), ot_fmt_count(b2, n));
    } else if (!why_item_say(&b, w, "growing_site",
            "%s grew across %s%s: %s live allocations on device %" PRId64 " rose in %s of %s %s", subject,
            steps ? "optimizer steps" : numbered ? "steps" : "marker intervals", suspect ? " (a suspected leak)" : "", its, r->dev,
            ot_fmt_count(b1, best.rises), ot_fmt_count(b2, n), unit)) {
        return;
    }
    if (x->falls)
        fprintf(b.f, r->windows ? " and falling in %s" : " and fell in %s", ot_fmt_count(b1, x->falls));
    else
        fputs(r->windows ? " and never falling" : " and never fell", b.f);
    fprintf(b.f, ", from %s allocation%s (%s) at ", ot_fmt_count(b1, best.from_count), best.from_count == 1 ? "" : "s",
            why_bytes(b2, best.from_bytes));
    put_mark(b.f, r, start);
    /* A ring that dropped its first events: the levels count the allocations made before them that were
     * still live (the live set is exact), and the statement says the ring is not the whole run. */
    if (r->ring_first_seq > 1)
        fprintf(b.f, " (%s first %s events were dropped, and the counts include the allocations made before them "
                "that were still live)", start == 0 ? "the ring's first kept marker: its" : "the ring's",
                ot_fmt_count(b3, r->ring_first_seq - 1));
    fprintf(b.f, " to %s allocation%s (%s) at ", ot_fmt_count(b3, best.to_count), best.to_count == 1 ? "" : "s",
            why_bytes(b4, best.to_bytes));
    put_mark(b.f, r, end);
    if (r->windows && ns)
        fprintf(b.f, ", %s later", why_span(sp, sizeof sp, ns));
    fputs(": ", b.f);
    if (grouped) {
        ot_put_short_frame(b.f, grp->line);
        fprintf(b.f, " (%zu call sites %s, the largest stack %" PRIu64 ")", grouped,
                grp->key == OT_GROUP_USER_LINE ? "below this line" : "with this headline", x->stack_id);
    } else {
        why_put_headline(b.f, a, x->stack_id);
    }
    /* The rate: the site's, and the whole device's over the same span when other sites grew with it. */
    fprintf(b.f, "; +%s in all", why_bytes(b5, gain));
    if (nsteps)
        fprintf(b.f, ", +%s per step over %s step%s", why_bytes(b5, gain / nsteps), ot_fmt_count(b1, nsteps), nsteps == 1 ? "" : "s");
    if (others)
        fprintf(b.f, " and the %s interval%s other markers began", ot_fmt_count(b1, others), others == 1 ? "" : "s");
    if (nsteps)
        ;
    else if (per_second)
        fprintf(b.f, ", +%s per second", why_bytes(b5, (uint64_t)((double)gain / secs)));
    else if (r->windows) {
        if (kept)
            fprintf(b.f, ", %s per allocation kept", why_bytes(b5, gain / kept));
        if (ns)
            fputs(" (less than a second: too short a span for a rate per second)", b.f);
    } else if (kind) {
        fprintf(b.f, ", +%s per such interval", why_bytes(b5, gain / n));
    } else
        fprintf(b.f, ", +%s per interval", why_bytes(b5, gain / n));
    if (x->ctx_end_bytes)
        fprintf(b.f, "; it held %s until its context ended, which freed %s of it: the program had not given it back",
                why_bytes(b5, best.held), why_bytes(b4, x->ctx_end_bytes));
    else
        fprintf(b.f, "; %s %s %s", grouped ? "they hold" : "it holds", why_bytes(b5, best.held), at);
    /* The others that grew so, by name up to GROWTH_NAMED in all (walk 9, #10d: two leaking sites, one named). */
    if (qualifying > 1) {
        fprintf(b.f, "; %zu other site%s grew so too", qualifying - 1, qualifying == 2 ? "" : "s");
        for (size_t i = 1; i < ntop; i++) {
            fputs(i == 1 ? (qualifying > ntop ? ", the largest: " : ": ") : i + 1 == ntop ? " and " : ", ", b.f);
            why_put_headline(b.f, a, top[i].x->stack_id);
            fprintf(b.f, " (+%s in all, holding %s)", why_bytes(b5, top[i].gain), why_bytes(b4, top[i].held));
        }
        if (dev_gain > 0 && (uint64_t)dev_gain > gain) {
            fprintf(b.f, ", and live memory on the device grew by %s over the same span", why_bytes(b5, (uint64_t)dev_gain));
            if (nsteps)
                fprintf(b.f, ", %s per step in all", why_bytes(b5, (uint64_t)dev_gain / nsteps));
            else if (per_second)
                fprintf(b.f, ", %s per second in all", why_bytes(b5, (uint64_t)((double)dev_gain / secs)));
            else if (!r->windows)
                fprintf(b.f, ", %s per interval in all", why_bytes(b5, (uint64_t)dev_gain / n));
        }
    }
    /* How long the device's free memory lasts at this rate: only without a failure (with one it has run
     * out already), and with cuMemGetInfo's figure. Between markers, what a step rises to above its start
     * (a validation pass's too) must stay free besides: the steps last until the growth leaves less than
     * that (walk 9, #3: "311 more steps" where each step also needed 100 MiB ran 263). */
    const struct snap_device *d = ot_snapshot_device(s, r->dev);
    uint64_t rate = dev_gain > 0 && (uint64_t)dev_gain > gain ? (uint64_t)dev_gain : gain;
    uint64_t now = 0, height = r->windows ? 0 : step_height(r, start, &now);
    /* The step under way holds part of its height already (live at the snapshot, not in its free memory), up
     * to what the device holds above the step's start. */
    int64_t above = d ? (int64_t)(d->tracked_bytes > INT64_MAX ? INT64_MAX : d->tracked_bytes) - r->mlive[r->last_bound] : 0;
    if (above < 0 || (uint64_t)above < now)
        now = above > 0 ? (uint64_t)above : 0;
    uint64_t room = d ? ot_sat_add(d->free_bytes, now) : 0;
    /* A height that itself rose from step to step (a batch or sequence length that grows) rises on: each step
     * then needs its growth more than the one before, besides what the leak keeps (walk 11, #1: "lasts about
     * 536 more steps" at a height of 642 MiB that rose 16 MiB a step; the run failed 60 steps later). The
     * height is the latest step's, and the rise is in the leak's unit (steps, or marker intervals). */
    struct step_growth hg;
    uint64_t rise = 0;
    if (!r->windows && !kind && why_step_growth(r, false, &hg) && hg.numbered == (nsteps != 0)) {
        rise = hg.per_step;
        if (hg.to > height)
            height = hg.to;
    }
    room = room > height ? room - height : 0;
    /* Nor once a context's end freed the growth: the free memory at the snapshot is after it. */
    bool project = !s->has_failure && !x->ctx_end_bytes && d && (d->flags & OT_DEV_MEMINFO_KNOWN) && rate;
    if (project && nsteps)
        fprintf(b.f, "; at this rate the device's free memory (%s at the snapshot) lasts about %s more steps",
                why_bytes(b5, d->free_bytes), ot_fmt_count(b1, room / (rate / nsteps + rise ? rate / nsteps + rise : 1)));
    else if (project && per_second)
        fprintf(b.f, "; at this rate the device's free memory (%s at the snapshot) lasts about %.3g more seconds",
                why_bytes(b5, d->free_bytes), (double)d->free_bytes / ((double)rate / secs));
    else if (project && r->windows && kept)
        fprintf(b.f, "; at this rate the device's free memory (%s at the snapshot) has room for about %" PRIu64
                " more of its allocations", why_bytes(b5, d->free_bytes), d->free_bytes / (rate / kept ? rate / kept : 1));
    else if (project && !r->windows)
        fprintf(b.f, "; at this rate the device's free memory (%s at the snapshot) lasts about %s more %s",
                why_bytes(b5, d->free_bytes), ot_fmt_count(b1, room / (rate / n + rise ? rate / n + rise : 1)), kind ? "such intervals" : "intervals");
    if (project && !r->windows && height)
        fprintf(b.f, ", as each %s also needs up to %s at its height", nsteps ? "step" : "interval", why_bytes(b5, height));
    if (project && !r->windows && rise)
        fprintf(b.f, " and %s more each %s (that height grew in %zu of %zu %ss)", why_bytes(b4, rise), nsteps ? "step" : "interval",
                hg.rises, hg.n - 1, nsteps ? "step" : "interval");
    bool live = framework_allocated(a, r->dev, gain);
    if (r->frees_on_dev == 0 && live)
        fputs(" (the ring holds no free on this device, but the framework's allocator reports its segments allocated,"
              " not cached: this is live tensors)", b.f);
    else if (cache_may_be)
        fputs(" (the ring holds no free on this device at all: a caching allocator keeps what it takes, so this may be its"
              " cache growing rather than a leak)", b.f);
    else if (r->frees_on_dev == 0)
        fputs(" (the ring holds no free on this device at all, and no caching allocator is on the site's stack: the program"
              " allocates from the driver itself and gives nothing back)", b.f);
    fputc('.', b.f);
    why_num_i(&b, "device", r->dev);
    WHY_NUMS_U(&b, {"stack_id", x->stack_id}, {"intervals", n}, {"rises", best.rises}, {"falls", x->falls},
               {"from_count", best.from_count}, {"from_bytes", best.from_bytes}, {"to_count", best.to_count},
               {"to_bytes", best.to_bytes}, {"growth_bytes", gain}, {"steps", nsteps}, {"held_bytes", best.held},
               {"from_marker_seq", r->mseq[start]}, {"to_marker_seq", r->mseq[end]}, {"sites", qualifying},
               {"frees_in_ring", r->frees_on_dev}, {"dropped_events", r->ring_first_seq > 1 ? r->ring_first_seq - 1 : 0},
               {"context_end_bytes", x->ctx_end_bytes}, {"marker_kind", kind}, {"height_bytes", height},
               {"height_growth_bytes", rise});
    for (size_t i = 1; i < ntop; i++) {
        why_num_u(&b, i == 1 ? "second_stack_id" : "third_stack_id", top[i].x->stack_id);
        why_num_u(&b, i == 1 ? "second_growth_bytes" : "third_growth_bytes", top[i].gain);
    }
    why_num_u(&b, "line_sites", grouped);
    why_num_i(&b, "device_growth_bytes", dev_gain);
    why_num_u(&b, "step_markers", steps);
    why_num_u(&b, "time_windows", r->windows);
    if (r->windows)
        why_num_u(&b, "duration_ns", ns);
    why_num_u(&b, "framework_allocated", live);
    why_num_u(&b, "allocator_on_stack", ot_stack_framework(a, x->stack_id) != NULL);
    why_item_end(&b);
}
