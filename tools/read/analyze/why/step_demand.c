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
    char b1[32], b2[32], b3[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "step_demand", "The interval under way at the failure asked for %.1fx the one before it: after ",
                      (double)demand / (double)before))
        return;
    why_put_marker(b.f, s, last->marker_seq);
    fprintf(b.f, " live memory on device %" PRId64 " rose by %s up to the failure, whose request asked for %s more (%s in all), "
            "where after ", dev, why_bytes(b1, held), why_bytes(b2, s->failure.requested_bytes), why_bytes(b3, demand));
    why_put_marker(b.f, s, prev->marker_seq);
    fprintf(b.f, " it rose by %s at most, and that interval fit and freed its memory.", why_bytes(b1, before));
    why_num_i(&b, "device", dev);
    WHY_NUMS_U(&b, {"step_demand_bytes", demand}, {"previous_demand_bytes", before}, {"held_bytes", held},
               {"marker_seq", last->marker_seq}, {"previous_marker_seq", prev->marker_seq});
    why_item_end(&b);
}
