/* pool_cap (Why and What to try): a request the device had room for, refused by a pool the program created
 * (walk 7, #31). cuMemPoolCreate's maxSize caps what one pool may reserve, and an allocation from it
 * (cuMemAllocFromPoolAsync) that would take it past the cap fails with out of memory while the device has
 * free memory: the report said only "not larger than the free memory" and had no remedy. The cap itself is
 * not in the snapshot (no pool attribute reads it back); the pools the program created are, with what they
 * reserve and use, so the statement names the pool as the limit and what it held. */
#include "analyze/why/remedy.h"

#include <inttypes.h>

/* The failed request was made from a pool, within the device's free memory; the program's own pools on its
 * device (the default pool aside) and what they hold. 0 when that is not the case. */
static int capped(const struct ot_snapshot *s, const struct snap_device **dp, struct ot_pool_totals *pt)
{
    if (!s->has_failure || s->failure.device < 0 || !s->failure.requested_bytes ||
        strncmp(ot_api_name64(s->failure.api), "cuMemAllocFromPoolAsync", 23) != 0)
        return 0;
    const struct snap_device *d = ot_snapshot_device(s, s->failure.device);
    if (!d || !(d->flags & OT_DEV_MEMINFO_KNOWN) || s->failure.requested_bytes > d->free_bytes)
        return 0;
    *pt = (struct ot_pool_totals){0};
    for (size_t i = 0; i < s->npools; i++) {
        const struct snap_pool *p = &s->pools[i];
        if (p->device != s->failure.device || (p->flags & OT_POOL_DEFAULT))
            continue;
        pt->count++;
        if (p->flags & OT_POOL_UNREADABLE)
            continue;
        pt->reserved_bytes = ot_sat_add(pt->reserved_bytes, p->reserved_bytes);
        pt->used_bytes = ot_sat_add(pt->used_bytes, p->used_bytes);
    }
    *dp = d;
    return 1;
}

void why_pool_cap(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_snapshot *s = a->s;
    const struct snap_device *d;
    struct ot_pool_totals pt;
    if (!capped(s, &d, &pt))
        return;
    char b1[32], b2[32], b3[32], b4[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "pool_cap",
            "The request of %s was made from a memory pool (%s) while device %" PRId64 " had %s free: a pool created "
            "with a maximum size (cuMemPoolCreate's maxSize) refuses an allocation that would take it past that size, "
            "whatever the device has free",
            why_bytes(b1, s->failure.requested_bytes), ot_api_name64(s->failure.api), s->failure.device,
            why_bytes(b2, d->free_bytes)))
        return;
    if (pt.count)
        fprintf(b.f, "; the %zu pool%s the program created on it reserved %s and used %s (cuMemPoolGetAttribute at the "
                "snapshot; the cap itself is not recorded)",
                pt.count, pt.count == 1 ? "" : "s", why_bytes(b3, pt.reserved_bytes), why_bytes(b4, pt.used_bytes));
    fputc('.', b.f);
    why_num_i(&b, "device", s->failure.device);
    WHY_NUMS_U(&b, {"requested_bytes", s->failure.requested_bytes}, {"free_bytes", d->free_bytes},
               {"pools", pt.count}, {"reserved_bytes", pt.reserved_bytes}, {"used_bytes", pt.used_bytes});
    why_item_end(&b);
}

void remedy_pool_cap(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_why_item *it = why_find(a->why, "pool_cap");
    if (!it)
        return;
    uint64_t req = item_num(it, "requested_bytes"), used = item_num(it, "used_bytes");
    char b1[32], b2[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "pool_cap",
            "The pool's maximum size refused the request, not the device: raise maxSize when the pool is created "
            "(cuMemPoolCreate; 0 leaves only the device's memory as the limit) to at least what it holds in use plus "
            "the request, %s + %s, or make this allocation from another pool (cuMemAllocAsync takes the device's "
            "default pool).",
            why_bytes(b1, used), why_bytes(b2, req)))
        return;
    WHY_NUMS_U(&b, {"requested_bytes", req}, {"pool_used_bytes", used}, {"needed_bytes", ot_sat_add(used, req)});
    why_item_end(&b);
}
