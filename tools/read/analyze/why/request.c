/* request_exceeds_total, request_exceeds_free, request_within_free: the failed request against the
 * device's total and free memory; host_request: a failed request for page-locked host memory, which no
 * device's free memory decides. */
#include "analyze/why/item.h"

#include <inttypes.h>

/* cuMemAllocHost / cuMemHostAlloc refused (walk 7, #17: a 64 TiB pinned request read "Peak: unknown" and
 * "device -1", with no Why): the host's RAM or the locked-memory limit decides, not a device. */
static void host_request(struct ot_why *w, const struct ot_analysis *a)
{
    const struct snap_failure *fl = &a->s->failure;
    char b1[32], b2[32];
    struct why_item_b b;
    if (!why_item_begin(&b, w, "host_request"))
        return;
    fputs("The failed request was for page-locked (pinned) host memory, not device memory: ", b.f);
    if (fl->requested_bytes)
        fprintf(b.f, "the host's RAM or the process's locked-memory limit (ulimit -l, a container's memlock) refused %s",
                why_bytes(b1, fl->requested_bytes));
    else
        fputs("the host's RAM or the process's locked-memory limit (ulimit -l, a container's memlock) refused it", b.f);
    const struct snap_device *fd = NULL;
    for (size_t i = 0; i < a->s->ndevices; i++) {
        const struct snap_device *d = &a->s->devices[i];
        if ((d->flags & OT_DEV_MEMINFO_KNOWN) && (!fd || d->ordinal < fd->ordinal))
            fd = d;
    }
    if (fd)
        fprintf(b.f, "; device %" PRId64 " had %s free (cuMemGetInfo at the snapshot), which does not decide it", fd->ordinal,
                why_bytes(b2, fd->free_bytes));
    fputc('.', b.f);
    why_num_u(&b, "requested_bytes", fl->requested_bytes);
    why_num_u(&b, "category", fl->category);
    if (fd) {
        why_num_i(&b, "device", fd->ordinal);
        why_num_u(&b, "device_free_bytes", fd->free_bytes);
    }
    why_item_end(&b);
}

void why_request(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_snapshot *s = a->s;
    if (!s->has_failure)
        return;
    const struct snap_failure *fl = &s->failure;
    if (fl->device < 0) {
        host_request(w, a);
        return;
    }
    const struct snap_device *d = ot_snapshot_device(s, fl->device);
    if (!d || !(d->flags & OT_DEV_MEMINFO_KNOWN))
        return;
    char b1[32], b2[32], b3[32];
    struct why_item_b b;
    uint64_t req = fl->requested_bytes;
    if (!req) /* the framework did not say how much it asked for: nothing to set against free memory */
        return;
    if (req > d->total_bytes) {
        if (!why_item_say(&b, w, "request_exceeds_total",
                "The failed request alone is larger than the whole device: requested %s > total %s of device %" PRId64 ".",
                why_bytes(b1, req), why_bytes(b2, d->total_bytes), fl->device))
            return;
    } else if (req > d->free_bytes) {
        if (!why_item_say(&b, w, "request_exceeds_free",
                "The failed request alone exceeded the device's free memory: requested %s > free %s on device %" PRId64
                " (cuMemGetInfo at the snapshot), %s short",
                why_bytes(b1, req), why_bytes(b2, d->free_bytes), fl->device, why_bytes(b3, req - d->free_bytes)))
            return;
        if (a->has_at_failure)
            fprintf(b.f, "; this process held %s live on the device at the failure", why_bytes(b1, a->at_failure.bytes));
        fputc('.', b.f);
    } else {
        if (!why_item_say(&b, w, "request_within_free",
                "The failed request (%s) was not larger than the free memory measured at the snapshot (%s on device %" PRId64
                ", cuMemGetInfo).",
                why_bytes(b1, req), why_bytes(b2, d->free_bytes), fl->device))
            return;
    }
    why_num_i(&b, "device", fl->device);
    WHY_NUMS_U(&b, {"requested_bytes", req}, {"free_bytes", d->free_bytes}, {"total_bytes", d->total_bytes});
    if (req > d->free_bytes)
        why_num_u(&b, "short_bytes", req - d->free_bytes);
    if (a->has_at_failure)
        why_num_u(&b, "live_at_failure_bytes", a->at_failure.bytes);
    why_item_end(&b);
}
