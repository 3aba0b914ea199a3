/* pool_cached: memory stream-ordered pools reserved beyond what their allocations used. */
#include "analyze/why/item.h"

#include <inttypes.h>

void why_pools(struct ot_why *w, const struct ot_analysis *a, int64_t dev)
{
    const struct ot_snapshot *s = a->s;
    struct ot_pool_totals pt = ot_pools_of(s, dev);
    if (!pt.count || pt.reserved_bytes <= pt.used_bytes)
        return;
    uint64_t cached = pt.reserved_bytes - pt.used_bytes;
    char b1[32], b2[32], b3[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "pool_cached",
            "Memory was returned to stream-ordered pools but not to the device: %zu pool%s on device %" PRId64
            " reserved %s while their allocations used %s, so %s sat in the pools (cuMemPoolGetAttribute at the snapshot)",
            pt.count, pt.count == 1 ? "" : "s", dev, why_bytes(b1, pt.reserved_bytes), why_bytes(b2, pt.used_bytes), why_bytes(b3, cached)))
        return;
    why_num_i(&b, "device", dev);
    WHY_NUMS_U(&b, {"pools", pt.count}, {"reserved_bytes", pt.reserved_bytes}, {"used_bytes", pt.used_bytes},
               {"cached_bytes", cached});
    const struct snap_device *d = ot_snapshot_device(s, dev);
    if (s->has_failure && s->failure.device == dev && d && (d->flags & OT_DEV_MEMINFO_KNOWN) &&
        s->failure.requested_bytes > d->free_bytes) {
        uint64_t avail = ot_sat_add(d->free_bytes, cached);
        fprintf(b.f, "; free + pooled = %s %s the failed request of %s", why_bytes(b1, avail),
                avail >= s->failure.requested_bytes ? "would have covered" : "would still not cover",
                why_bytes(b2, s->failure.requested_bytes));
        why_num_u(&b, "free_plus_cached_bytes", avail);
    }
    fputc('.', b.f);
    why_item_end(&b);
}
