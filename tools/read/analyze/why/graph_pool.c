/* graph_private_pool: CUDA graphs' private pools, whose memory serves only their graphs. */
#include "analyze/why/item.h"

#include <inttypes.h>

void why_graph_pool(struct ot_why *w, const struct ot_analysis *a, int64_t dev)
{
    const struct ot_fw_devview *d;
    for (size_t i = 0; (d = why_fw_dev_next(a, dev, &i));) {
        if (!d->nprivate_segments)
            continue;
        char b1[32], b2[32], b3[32];
        struct why_item_b b;
        if (!why_item_begin(&b, w, "graph_private_pool"))
            return;
        const char *fw = ot_fw_display_name(d->framework);
        fprintf(b.f, "CUDA graph private pool%s: %zu pool%s of %s on device %" PRIu64 " reserved %s in %zu segment%s"
                " (%s allocated, %s free); that memory serves only its graph's replays, not other allocations",
                d->nprivate_pools == 1 ? "" : "s", d->nprivate_pools, d->nprivate_pools == 1 ? "" : "s",
                fw ? fw : "a framework", d->device, why_bytes(b1, d->private_bytes), d->nprivate_segments,
                d->nprivate_segments == 1 ? "" : "s", why_bytes(b2, d->private_allocated_bytes),
                why_bytes(b3, d->private_bytes - d->private_allocated_bytes));
        if (d->reserved_bytes)
            fprintf(b.f, " (%.1f%% of what it reserved)", 100.0 * why_share(d->private_bytes, d->reserved_bytes));
        fputc('.', b.f);
        WHY_NUMS_U(&b, {"device", d->device}, {"pools", d->nprivate_pools}, {"segments", d->nprivate_segments},
                   {"reserved_bytes", d->private_bytes}, {"allocated_bytes", d->private_allocated_bytes},
                   {"framework_reserved_bytes", d->reserved_bytes});
        why_item_end(&b);
    }
}
