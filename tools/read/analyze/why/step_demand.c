/* step_demand: the interval the failure ended (a step, when the program marks its steps) asked for much
 * more than the one before it, which fit and gave its memory back: what the step was given grew, as in
 * the guides' sequence length that jumped just before the OOM. Without the companion's view of the
 * inputs, the markers' labels (the program's own, e.g. "step 5 seq_len=16384") are what tells the user
 * which input it was.
 *
 * An interval's demand is how far live memory rose above where it started; the failing one's includes
 * the failed request. The interval before must have freed something: a caching allocator that frees
 * nothing to the driver shows only its new segments, not a step's demand. */
#include "analyze/why/item.h"

#include <inttypes.h>

/* How many times the previous interval's demand the failing one must ask for to be stated. */
#define MIN_RATIO 1.5
/* ... and the share of the device's used memory (cuMemGetInfo) it must be, as for every remedy. */
#define MIN_SHARE_PCT 15

static uint64_t rise(int64_t from, int64_t to)
{
    return to > from ? (uint64_t)to - (uint64_t)from : 0;
}

/* Markers of one kind: their labels agree up to the first digit ("step 19" and "step 20"; not "step 19" and
 * "export"). A marker whose label is not known (ot_marker_label) is taken to be of the kind of the other only
 * when the two are adjacent: the walk back for the failing interval's own kind stops at a labelled marker of
 * that kind, never at the newest whose label was lost (walk 11, #3c: "after the marker at seq 1430", 1,000
 * steps back, for the step before). */
static bool unlabelled(const struct ot_analysis *a, uint64_t seq)
{
    struct ot_str l;
    return !ot_marker_label(a, seq, &l);
}

static bool same_kind(const struct ot_analysis *a, uint64_t x, uint64_t y)
{
    return unlabelled(a, x) || unlabelled(a, y) || why_same_kind(a, x, y);
}

size_t why_step_demand_prev(const struct ot_analysis *a, const uint64_t *mseq, size_t nm)
{
    size_t last = nm - 1;
    if (same_kind(a, mseq[last - 1], mseq[last]))
        return last - 1;
    for (size_t j = last - 1; j-- > 0;)
        if (why_same_kind(a, mseq[j], mseq[last]))
            return j;
    return last - 1;
}

void why_step_demand(struct ot_why *w, const struct ot_analysis *a, int64_t dev, const struct why_interval *prev,
                     const struct why_interval *last)
{
    const struct ot_snapshot *s = a->s;
    const struct snap_device *d = ot_snapshot_device(s, dev);
    if (!s->has_failure || s->failure.device != dev || !d || !(d->flags & OT_DEV_MEMINFO_KNOWN) ||
        d->free_bytes > d->total_bytes || !prev->frees)
        return;
    uint64_t before = rise(prev->start_live, prev->high_live), held = rise(last->start_live, last->end_live);
    /* The failing interval's highest: live at the failure with the request on top, or higher earlier. */
    uint64_t demand = ot_sat_add(held, s->failure.requested_bytes), high = rise(last->start_live, last->high_live);
    if (high > demand)
        demand = high;
    double used = (double)(d->total_bytes - d->free_bytes);
    if (!before || (double)demand < MIN_RATIO * (double)before || (double)demand * 100 < used * MIN_SHARE_PCT)
        return;
    /* A phase of another kind after the steps (an export, a validation pass) asked for more than a step: said
     * as a phase of its own, not as a step given a larger input (walk 8, #32). */
    bool same = same_kind(a, prev->marker_seq, last->marker_seq);
    char b1[32], b2[32], b3[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "step_demand", "The %s under way at the failure asked for %.1fx the %s: after ",
                      same ? "interval" : "phase", (double)demand / (double)before,
                      !same ? "interval of another kind before it" : prev->adjacent ? "one before it" : "last one of its kind"))
        return;
    why_put_marker(b.f, a, last->marker_seq);
    fprintf(b.f, " live memory on device %" PRId64 " rose by %s up to the failure, whose request asked for %s more (%s in all), "
            "where after ", dev, why_bytes(b1, held), why_bytes(b2, s->failure.requested_bytes), why_bytes(b3, demand));
    why_put_marker(b.f, a, prev->marker_seq);
    fprintf(b.f, " it rose by %s at most, and that interval fit and freed its memory.", why_bytes(b1, before));
    why_num_i(&b, "device", dev);
    WHY_NUMS_U(&b, {"step_demand_bytes", demand}, {"previous_demand_bytes", before}, {"held_bytes", held},
               {"marker_seq", last->marker_seq}, {"previous_marker_seq", prev->marker_seq}, {"same_kind", same},
               {"live_before_bytes", last->start_live > 0 ? (uint64_t)last->start_live : 0});
    why_item_end(&b);
}
