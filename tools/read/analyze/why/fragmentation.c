/* fragmentation: a framework's request failed although its segments held enough free memory, because
 * no free block was large enough (the request against the largest free block and the reserved-but-free
 * bytes). framework_cache: whole segments with no live tensor, so their creator holds no tensor now. */
#include "analyze/why/item.h"

#include <inttypes.h>

static const char *name_of(struct ot_str fw, char *buf, size_t n)
{
    const char *d = ot_fw_display_name(fw);
    if (d)
        return d;
    snprintf(buf, n, "%.*s", (int)(fw.n < 32 ? fw.n : 32), fw.p ? fw.p : "");
    for (char *c = buf; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
            *c = '?';
    return buf;
}

void why_fragmentation(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_snapshot *s = a->s;
    if (!s->has_failure || s->failure.device < 0 || !a->fw)
        return;
    uint64_t req = s->failure.requested_bytes;
    for (size_t i = 0; i < a->fw->ndevs; i++) {
        const struct ot_fw_devview *d = &a->fw->devs[i];
        if (d->device != (uint64_t)s->failure.device || !d->default_free_bytes)
            continue;
        /* The free memory inside the segments would have covered the request, but not in one piece. */
        if (d->largest_free >= req || d->default_free_bytes < req)
            continue;
        char nb[40], b1[32], b2[32], b3[32], b4[32], b5[32];
        const char *fw = name_of(d->framework, nb, sizeof(nb));
        struct why_item_b b;
        if (!why_item_say(&b, w, "fragmentation",
                "Fragmentation: %s's segments on device %" PRIu64 " held %s free (reserved %s, allocated %s), more"
                " than the %s requested, but their largest free block was %s",
                fw, d->device, why_bytes(b1, d->default_free_bytes), why_bytes(b2, d->reserved_bytes),
                why_bytes(b3, d->allocated_bytes), why_bytes(b4, req), why_bytes(b5, d->largest_free)))
            return;
        uint64_t split = 0;
        bool has_split = ot_str_eq(d->framework, "torch") && ot_fw_stat(s, "torch", d->device, "inactive_split_bytes", &split);
        if (has_split)
            fprintf(b.f, "; %s sat free inside split blocks (inactive_split_bytes)", why_bytes(b1, split));
        struct ot_str exp = ot_fw_setting_get(&s->fw, "torch", "expandable_segments");
        if (ot_str_eq(d->framework, "torch") && !ot_str_eq(exp, "True") && !ot_str_eq(exp, "true"))
            fputs(". Setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True before the process starts lets"
                  " segments grow in place instead of leaving pieces", b.f);
        fputc('.', b.f);
        WHY_NUMS_U(&b, {"device", d->device}, {"requested_bytes", req}, {"largest_free_block_bytes", d->largest_free},
                   {"free_in_segments_bytes", d->default_free_bytes}, {"reserved_bytes", d->reserved_bytes},
                   {"allocated_bytes", d->allocated_bytes});
        if (has_split)
            why_num_u(&b, "inactive_split_bytes", split);
        why_item_end(&b);
    }
}

void why_framework_cache(struct ot_why *w, const struct ot_analysis *a, int64_t dev)
{
    const struct ot_allocview *v = a->fw;
    const struct ot_fw_devview *d;
    for (size_t i = 0; (d = why_fw_dev_next(a, dev, &i));) {
        if (!d->ncached)
            continue;
        /* The creator that made most of the cached segments: its tensors are gone. */
        const struct ot_fw_creator *top = NULL;
        for (size_t k = 0; k < v->ncreators; k++)
            if (v->creators[k].cached_bytes && (!top || v->creators[k].cached_bytes > top->cached_bytes))
                top = &v->creators[k];
        char nb[40], b1[32], b2[32];
        const char *fw = name_of(d->framework, nb, sizeof(nb));
        struct why_item_b b;
        if (!why_item_say(&b, w, "framework_cache",
                "%s kept %s in %zu segment%s on device %" PRIu64 " with no live tensor in them: memory the program"
                " freed, cached by %s and still reserved from the device (of %s reserved)",
                fw, why_bytes(b1, d->cached_bytes), d->ncached, d->ncached == 1 ? "" : "s", d->device, fw,
                why_bytes(b2, d->reserved_bytes)))
            return;
        if (top && top->has_stack) {
            fprintf(b.f, "; %s of it was first allocated at ", why_bytes(b1, top->cached_bytes));
            why_put_headline(b.f, a, top->stack_id);
            fputs(", which holds no tensor there now", b.f);
        }
        fputc('.', b.f);
        WHY_NUMS_U(&b, {"device", d->device}, {"cached_bytes", d->cached_bytes}, {"cached_segments", d->ncached},
                   {"reserved_bytes", d->reserved_bytes});
        if (top && top->has_stack) {
            why_num_u(&b, "creator_stack_id", top->stack_id);
            why_num_u(&b, "creator_cached_bytes", top->cached_bytes);
        }
        why_item_end(&b);
    }
}
