#include "analyze/sites.h"

#include <stdlib.h>

static bool keep(const struct ot_record *r, const struct ot_site_filter *f)
{
    if (!f->any_device && r->device != f->device)
        return false;
    /* Device memory is on a device: host-located VMM memory (device -1, category vmm, flag 0x2) is not. */
    if (f->device_memory)
        return r->device >= 0 && ot_category_is_device64(r->category);
    return r->category == f->category;
}

static int cmp_site(const void *a, const void *b)
{
    const struct ot_site *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

int ot_sites_build(const struct ot_record *recs, size_t n, const struct ot_site_filter *f, struct ot_sites *out)
{
    memset(out, 0, sizeof(*out));
    struct ot_u64map idx = {0};
    size_t cap = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ot_record *r = &recs[i];
        if (!keep(r, f))
            continue;
        if (out->n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            struct ot_site *v = realloc(out->v, ncap * sizeof(*v));
            if (!v)
                goto oom;
            out->v = v;
            cap = ncap;
        }
        if (out->n >= OT_U64MAP_NONE)
            goto oom;
        uint32_t k = ot_u64map_put(&idx, r->stack_id, (uint32_t)out->n);
        if (k == OT_U64MAP_NONE)
            goto oom;
        if (k == out->n)
            out->v[out->n++] = (struct ot_site){r->stack_id, 0, 0};
        struct ot_site *s = &out->v[k];
        s->bytes = ot_sat_add(s->bytes, r->size);
        s->count++;
        out->bytes = ot_sat_add(out->bytes, r->size);
        out->count++;
    }
    ot_u64map_free(&idx);
    if (out->n > 1)
        qsort(out->v, out->n, sizeof(*out->v), cmp_site);
    return 0;
oom:
    ot_u64map_free(&idx);
    ot_sites_free(out);
    return -1;
}

void ot_sites_free(struct ot_sites *s)
{
    free(s->v);
    free(s->groups);
    free(s->member);
    memset(s, 0, sizeof(*s));
}
