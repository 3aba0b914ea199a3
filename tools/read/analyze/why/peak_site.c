/* peak_site: one call site holds at least half of the peak. */
#include "analyze/why/item.h"

#include <inttypes.h>

void why_peak_site(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_peak_view *p = a->peak;
    if (!p || !p->has_sites || !p->sites.n || !p->bytes)
        return;
    const struct ot_site *top = &p->sites.v[0];
    double sh = why_share(top->bytes, p->bytes);
    if (sh < 0.5)
        return;
    char b1[32], b2[32], b3[32];
    struct why_item_b b;
    if (!why_item_say(&b, w, "peak_site",
            "Most of the peak came from one call site: %s of the %s peak on device %" PRId64 " (%.1f%%), in %s allocation%s, at ",
            why_bytes(b1, top->bytes), why_bytes(b2, p->bytes), p->device, 100.0 * sh, ot_fmt_count(b3, top->count),
            top->count == 1 ? "" : "s"))
        return;
    why_put_headline(b.f, a, top->stack_id);
    uint64_t live, held = 0;
    bool before = why_peak_long_before(a, &live);
    if (before) {
        held = why_site_live(a->s, p->device, top->stack_id);
        fprintf(b.f, "; that peak (seq %" PRIu64 ") came before the failure, which found %s live on the device, %s of it at "
                "this site%s", p->seq, why_bytes(b1, live), why_bytes(b2, held), held ? "" : " (freed since)");
    }
    fputc('.', b.f);
    why_num_i(&b, "device", p->device);
    WHY_NUMS_U(&b, {"peak_bytes", p->bytes}, {"site_bytes", top->bytes}, {"site_count", top->count});
    why_num_f(&b, "share", sh);
    why_num_u(&b, "stack_id", top->stack_id);
    if (before)
        WHY_NUMS_U(&b, {"failure_live_bytes", live}, {"site_bytes_at_failure", held});
    why_item_end(&b);
}
