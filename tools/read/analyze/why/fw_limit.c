/* framework_limit: a framework's own limit refused the request, not a full device (PyTorch's per-process
 * memory fraction). jax_preallocation: JAX reserved its pool at start; the setting that controls it. */
#include "analyze/why/item.h"
#include "analyze/why/remedy.h"
#include "analyze/allocview.h"

#include <inttypes.h>

static uint64_t device_free(const struct ot_snapshot *s, int64_t dev, bool *known)
{
    const struct snap_device *d = ot_snapshot_device(s, dev);
    *known = d && (d->flags & OT_DEV_MEMINFO_KNOWN);
    return *known ? d->free_bytes : 0;
}

void why_fw_limit(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_snapshot *s = a->s;
    /* Only the framework's own refusal: a failed driver call was not refused by the fraction. */
    if (!s->has_failure || s->failure.device < 0 || !s->fw.present || s->failure.api != OT_API_framework_allocator)
        return;
    int64_t dev = s->failure.device;
    uint64_t req = s->failure.requested_bytes, limit, ppm = 0, reserved = 0;
    char b1[32], b2[32], b3[32];
    struct why_item_b b;
    bool known;
    uint64_t freeb = device_free(s, dev, &known);
    if (ot_fw_stat(s, "torch", (uint64_t)dev, "memory_fraction_limit_bytes", &limit) &&
        ot_fw_stat(s, "torch", (uint64_t)dev, "reserved_bytes", &reserved) && ot_sat_add(reserved, req) > limit &&
        why_item_begin(&b, w, "framework_limit")) {
        bool has_ppm = ot_fw_stat(s, "torch", (uint64_t)dev, "memory_fraction_ppm", &ppm);
        fprintf(b.f, "PyTorch's per-process memory fraction refused the request, not a full device: the fraction");
        if (has_ppm)
            fprintf(b.f, " %.2f", (double)ppm / 1e6);
        fprintf(b.f, " limits this process to %s on device %" PRId64 ", it had reserved %s and asked for %s more",
                why_bytes(b1, limit), dev, why_bytes(b2, reserved), why_bytes(b3, req));
        if (known && freeb >= req)
            fprintf(b.f, ", while the device still had %s free", why_bytes(b1, freeb));
        fputs(" (torch.cuda.set_per_process_memory_fraction).", b.f);
        why_num_i(&b, "device", dev);
        why_num_u(&b, "limit_bytes", limit);
        if (has_ppm)
            why_num_u(&b, "fraction_ppm", ppm);
        why_num_u(&b, "reserved_bytes", reserved);
        why_num_u(&b, "requested_bytes", req);
        if (known)
            why_num_u(&b, "device_free_bytes", freeb);
        why_item_end(&b);
    }
}

/* The fraction refused it (why: framework_limit): the fraction that fits what was reserved plus the request,
 * or, where even the whole device would not, less memory; and the call site whose tensors held the most at the
 * failure, when freeing them would make the room. A site's driver bytes under a caching allocator are its
 * segments, whose tensors may be gone (cached): what its segments hold allocated is what freeing it gives. */
void remedy_fw_limit(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_why_item *it = why_find(a->why, "framework_limit");
    if (!it)
        return;
    const struct ot_snapshot *s = a->s;
    const int64_t dev = s->failure.device;
    const uint64_t limit = item_num(it, "limit_bytes"), reserved = item_num(it, "reserved_bytes"),
                   req = item_num(it, "requested_bytes"), need = ot_sat_add(reserved, req);
    const struct snap_device *d = ot_snapshot_device(s, dev);
    const uint64_t total = d && (d->flags & OT_DEV_MEMINFO_KNOWN) ? d->total_bytes : 0;
    const struct ot_site *top = a->has_at_failure && a->at_failure.n ? &a->at_failure.v[0] : NULL;
    uint64_t held = top ? top->bytes : 0;
    const struct ot_fw_creator *c = top && a->fw ? ot_allocview_creator(a->fw, top->stack_id) : NULL;
    if (c)
        held = c->allocated_bytes;
    const bool site = top && held && limit < need && held >= need - limit;
    /* Hundredths, rounded up: the fraction's own rounding must not refuse the same request again. */
    const uint64_t hundredths =
        total ? (uint64_t)(((unsigned __int128)need * 100 + total - 1) / total) : 0;
    const bool fits = total && need < UINT64_MAX && hundredths <= 100; /* (a saturated sum fits nothing) */
    char b1[32], b2[32], b3[32];
    struct why_item_b b;
    if (!why_item_begin(&b, w, "framework_limit"))
        return;
    fprintf(b.f, "PyTorch's per-process memory fraction, not the device, refused the request: ");
    if (fits)
        fprintf(b.f, "raise it to at least %" PRIu64 ".%02" PRIu64 " (torch.cuda.set_per_process_memory_fraction: "
                "the %s reserved plus the %s asked for, of the device's %s), or do not set it",
                hundredths / 100, hundredths % 100, why_bytes(b1, reserved), why_bytes(b2, req), why_bytes(b3, total));
    else if (total)
        fprintf(b.f, "no fraction makes room, as the %s reserved plus the %s asked for are more than the device's %s: "
                "free memory before the request, or make the request smaller",
                why_bytes(b1, reserved), why_bytes(b2, req), why_bytes(b3, total));
    else
        fprintf(b.f, "raise it (torch.cuda.set_per_process_memory_fraction) so that it allows at least the %s reserved "
                "plus the %s asked for", why_bytes(b1, reserved), why_bytes(b2, req));
    if (site) {
        fputs(total && !fits ? "; " : "; or ", b.f);
        fputs("free what ", b.f);
        why_put_headline(b.f, a, top->stack_id);
        fprintf(b.f, " holds (%s of live %s at the failure) before the request", why_bytes(b1, held),
                c ? "tensors in its segments" : "allocations");
    }
    fputc('.', b.f);
    WHY_NUMS_U(&b, {"limit_bytes", limit}, {"needed_bytes", need}, {"device_total_bytes", total},
               {"fraction_hundredths", fits ? hundredths : 0});
    if (site) {
        why_num_u(&b, "site_bytes", held);
        why_num_u(&b, "stack_id", top->stack_id);
    }
    why_item_end(&b);
}

void why_jax_prealloc(struct ot_why *w, const struct ot_analysis *a, int64_t dev)
{
    const struct ot_snapshot *s = a->s;
    uint64_t limit, in_use = 0;
    bool earlier;
    /* From a view taken before the snapshot's moment, only what JAX fixed at its start: the limit, not the use */
    if (dev < 0 || !ot_fw_jax_prealloc_limit(s, (uint64_t)dev, &limit, &earlier) ||
        (!earlier && !ot_fw_stat(s, "jax", (uint64_t)dev, "bytes_in_use", &in_use)))
        return;
    char b1[32], b2[32], b3[32];
    struct why_item_b b;
    if (!why_item_begin(&b, w, "jax_preallocation"))
        return;
    w->earlier_read |= earlier;
    const struct snap_device *d = ot_snapshot_device(s, dev);
    struct ot_str frac = ot_fw_setting_get(earlier ? &s->fw_earlier : &s->fw, "jax", "XLA_PYTHON_CLIENT_MEM_FRACTION");
    fprintf(b.f, "JAX preallocated its pool at start: XLA's allocator may use %s on device %" PRId64, why_bytes(b1, limit), dev);
    if (d && d->total_bytes)
        fprintf(b.f, " (%.0f%% of the device's %s)", 100.0 * why_share(limit, d->total_bytes), why_bytes(b2, d->total_bytes));
    if (earlier)
        fputs(", a limit fixed when JAX started (from the frameworks' earlier report, whose use of the pool is not the"
              " state now)", b.f);
    else
        fprintf(b.f, ", and its arrays used %s of it", why_bytes(b3, in_use));
    uint64_t largest;
    bool has_largest = !earlier && ot_fw_stat(s, "jax", (uint64_t)dev, "largest_free_block_bytes", &largest);
    if (has_largest)
        fprintf(b.f, "; its largest free block was %s", why_bytes(b1, largest));
    if (!earlier && s->has_failure && s->failure.device == dev)
        fprintf(b.f, " against the request of %s", why_bytes(b2, s->failure.requested_bytes));
    if (frac.p && frac.n)
        fputs(". XLA_PYTHON_CLIENT_MEM_FRACTION sets the pool's share; XLA_PYTHON_CLIENT_PREALLOCATE=false allocates on demand"
              " instead", b.f);
    else
        fputs(". XLA_PYTHON_CLIENT_MEM_FRACTION (unset: 75%) sets the pool's share; XLA_PYTHON_CLIENT_PREALLOCATE=false"
              " allocates on demand instead", b.f);
    fputc('.', b.f);
    why_num_i(&b, "device", dev);
    why_num_u(&b, "bytes_limit", limit);
    if (!earlier)
        why_num_u(&b, "bytes_in_use", in_use);
    if (has_largest)
        why_num_u(&b, "largest_free_block_bytes", largest);
    if (d && d->total_bytes)
        why_num_u(&b, "total_bytes", d->total_bytes);
    if (s->has_failure && s->failure.device == dev)
        why_num_u(&b, "requested_bytes", s->failure.requested_bytes);
    why_item_end(&b);
}
