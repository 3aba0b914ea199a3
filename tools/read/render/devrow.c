#include "render/devrow.h"

#include <stdio.h>

void ot_devrow_of(const struct ot_snapshot *s, const struct snap_device *d, struct ot_devrow *r)
{
    bool mi = d->flags & OT_DEV_MEMINFO_KNOWN, bl = d->flags & OT_DEV_BASELINE_KNOWN;
    char b[32];
    snprintf(r->cell[OT_DEVROW_TOTAL], sizeof(r->cell[0]), "%s", mi ? ot_fmt_bytes(b, d->total_bytes) : "?");
    snprintf(r->cell[OT_DEVROW_FREE], sizeof(r->cell[0]), "%s", mi ? ot_fmt_bytes(b, d->free_bytes) : "?");
    ot_fmt_bytes(r->cell[OT_DEVROW_TRACKED], d->tracked_bytes);
    ot_fmt_bytes(r->cell[OT_DEVROW_PEAK], d->peak_bytes);
    snprintf(r->cell[OT_DEVROW_BASELINE], sizeof(r->cell[0]), "%s", bl ? ot_fmt_bytes(b, d->baseline_used_bytes) : "?");
    size_t np = 0;
    uint64_t other = ot_other_process_bytes(s, d->ordinal, &np);
    r->cell[OT_DEVROW_OTHERS][0] = 0;
    if (np)
        snprintf(r->cell[OT_DEVROW_OTHERS], sizeof(r->cell[0]), "%s in %zu", ot_fmt_bytes(b, other), np);
    struct ot_pool_totals pt = ot_pools_of(s, d->ordinal);
    r->cell[OT_DEVROW_POOLS][0] = 0;
    if (pt.count)
        ot_fmt_bytes(r->cell[OT_DEVROW_POOLS], pt.reserved_bytes);
}
