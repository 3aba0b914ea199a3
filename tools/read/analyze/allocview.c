/* The allocator's view: segments joined to driver allocations by address (see allocview.h). */
#include "analyze/allocview.h"

#include <stddef.h>
#include <stdlib.h>

/* A driver allocation as an address range: a live record itself, or a VMM mapping of one. */
struct drange {
    uint64_t start, size;
    const struct ot_record *rec;
};

/* An expandable segment maps its memory piece by piece; past this many pieces only the count grows. */
#define OT_MAX_CREATORS_SCANNED 4096

static int cmp_drange(const void *a, const void *b)
{
    const struct drange *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int cmp_pair(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static int cmp_segview(const void *a, const void *b)
{
    const struct ot_fw_segview *x = a, *y = b;
    if (x->seg->device != y->seg->device)
        return x->seg->device < y->seg->device ? -1 : 1;
    return x->seg->address < y->seg->address ? -1 : x->seg->address > y->seg->address;
}

/* Handle -> VMM record, for the mappings: records sorted by handle, found by binary search. */
struct hrec {
    uint64_t handle;
    const struct ot_record *rec;
};

static int cmp_hrec(const void *a, const void *b)
{
    const struct hrec *x = a, *y = b;
    return x->handle < y->handle ? -1 : x->handle > y->handle;
}

static const struct ot_record *find_handle(const struct hrec *h, size_t n, uint64_t handle)
{
    size_t lo = ot_lower_bound_u64(h, n, sizeof(*h), offsetof(struct hrec, handle), handle);
    return lo < n && h[lo].handle == handle ? h[lo].rec : NULL;
}

static struct drange *driver_ranges(const struct ot_snapshot *s, size_t *nout)
{
    size_t n = 0, nvmm = 0;
    for (size_t i = 0; i < s->nlive; i++) {
        uint64_t c = s->live[i].category;
        n += c == OT_CAT_DEVICE || c == OT_CAT_ASYNC || c == OT_CAT_MANAGED;
        nvmm += c == OT_CAT_VMM;
    }
    struct drange *r = malloc((n + s->nmappings + 1) * sizeof(*r));
    struct hrec *h = malloc((nvmm + 1) * sizeof(*h));
    if (!r || !h) {
        free(r);
        free(h);
        return NULL;
    }
    size_t k = 0, kh = 0;
    for (size_t i = 0; i < s->nlive; i++) {
        const struct ot_record *l = &s->live[i];
        if (l->category == OT_CAT_DEVICE || l->category == OT_CAT_ASYNC || l->category == OT_CAT_MANAGED)
            r[k++] = (struct drange){l->address, l->size, l};
        else if (l->category == OT_CAT_VMM)
            h[kh++] = (struct hrec){l->address, l};
    }
    qsort(h, kh, sizeof(*h), cmp_hrec);
    for (size_t i = 0; i < s->nmappings; i++) {
        const struct ot_record *rec = find_handle(h, kh, s->mappings[i].handle);
        if (rec)
            r[k++] = (struct drange){s->mappings[i].address, s->mappings[i].size, rec};
    }
    free(h);
    qsort(r, k, sizeof(*r), cmp_drange);
    *nout = k;
    return r;
}

static bool overlaps(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
    uint64_t ae = ot_sat_add(a, an), be = ot_sat_add(b, bn);
    return a < be && b < ae;
}

/* The driver ranges overlapping a segment: the first range starting at or below its end, walked back
 * while they may still overlap would be quadratic on a hostile file, so ranges are walked forward from
 * the last one starting at or below the segment's start. */
static void join(struct ot_fw_segview *v, const struct drange *r, size_t nr)
{
    const struct ot_fw_segment *g = v->seg;
    size_t lo = 0, hi = nr;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid].start <= g->address)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t i = lo ? lo - 1 : 0;
    uint64_t end = ot_sat_add(g->address, g->total_size);
    for (size_t scanned = 0; i < nr && r[i].start < end && scanned < OT_MAX_CREATORS_SCANNED; i++, scanned++) {
        if (r[i].rec->device != (int64_t)g->device || !overlaps(r[i].start, r[i].size, g->address, g->total_size))
            continue;
        if (!v->creator || (r[i].start <= g->address && v->creator->address > g->address))
            v->creator = r[i].rec;
        v->ncreators++;
    }
}

static void measure(struct ot_fw_segview *v, const struct ot_framework *fw)
{
    const struct ot_fw_segment *g = v->seg;
    if (!g->nblocks) {
        v->allocated_bytes = g->allocated_size;
        v->free_bytes = g->total_size - g->allocated_size;
    }
    for (size_t k = g->first_block; k < g->first_block + g->nblocks; k++) {
        const struct ot_fw_block *b = &fw->blocks[k];
        if (b->state == OT_FW_BLOCK_INACTIVE) {
            v->free_bytes = ot_sat_add(v->free_bytes, b->size);
            if (b->size > v->largest_free)
                v->largest_free = b->size;
        } else {
            v->allocated_bytes = ot_sat_add(v->allocated_bytes, b->size);
        }
    }
    v->cached = v->allocated_bytes == 0 && g->total_size > 0;
}

static int build_devs(struct ot_allocview *v)
{
    /* Segments are sorted by device; a framework's segments of one device are then one run per framework
     * within it. Framework names are few: a linear search over the views of the current device suffices. */
    v->devs = calloc(v->nsegs ? v->nsegs : 1, sizeof(*v->devs));
    if (!v->devs)
        return -1;
    size_t dev_first = 0;
    uint64_t *pools = malloc((v->nsegs ? v->nsegs : 1) * 2 * sizeof(uint64_t));
    size_t np = 0;
    if (!pools)
        return -1;
    for (size_t i = 0; i < v->nsegs; i++) {
        const struct ot_fw_segview *sv = &v->segs[i];
        const struct ot_fw_segment *g = sv->seg;
        if (i && g->device != v->segs[i - 1].seg->device)
            dev_first = v->ndevs;
        struct ot_fw_devview *d = NULL;
        for (size_t k = dev_first; k < v->ndevs; k++)
            if (v->devs[k].framework.n == g->framework.n && !memcmp(v->devs[k].framework.p, g->framework.p, g->framework.n))
                d = &v->devs[k];
        if (!d) {
            d = &v->devs[v->ndevs++];
            d->framework = g->framework;
            d->device = g->device;
        }
        d->nsegments++;
        d->reserved_bytes = ot_sat_add(d->reserved_bytes, g->total_size);
        d->allocated_bytes = ot_sat_add(d->allocated_bytes, sv->allocated_bytes);
        d->free_bytes = ot_sat_add(d->free_bytes, sv->free_bytes);
        if (sv->cached) {
            d->ncached++;
            d->cached_bytes = ot_sat_add(d->cached_bytes, g->total_size);
        }
        if (!sv->creator && !v->earlier)
            d->nunjoined++;
        if (g->flags & OT_FW_SEG_EXPANDABLE) {
            d->nexpandable++;
            d->expandable_bytes = ot_sat_add(d->expandable_bytes, g->total_size);
        }
        if (g->pool_id || (g->flags & OT_FW_SEG_PRIVATE_POOL)) {
            d->nprivate_segments++;
            pools[2 * np] = (uint64_t)(d - v->devs);
            pools[2 * np++ + 1] = g->pool_id;
            d->private_bytes = ot_sat_add(d->private_bytes, g->total_size);
            d->private_allocated_bytes = ot_sat_add(d->private_allocated_bytes, sv->allocated_bytes);
        } else {
            d->default_free_bytes = ot_sat_add(d->default_free_bytes, sv->free_bytes);
            if (sv->largest_free > d->largest_free)
                d->largest_free = sv->largest_free;
        }
    }
    /* Distinct private pools per view: (view, pool id) pairs, sorted. */
    qsort(pools, np, 2 * sizeof(uint64_t), cmp_pair);
    for (size_t i = 0; i < np; i++)
        if (!i || pools[2 * i] != pools[2 * i - 2] || pools[2 * i + 1] != pools[2 * i - 1])
            v->devs[pools[2 * i]].nprivate_pools++;
    free(pools);
    return 0;
}

static int cmp_stack_of(const void *a, const void *b)
{
    const struct ot_fw_segview *x = *(const struct ot_fw_segview *const *)a, *y = *(const struct ot_fw_segview *const *)b;
    uint64_t sx = x->creator ? x->creator->stack_id + 1 : 0, sy = y->creator ? y->creator->stack_id + 1 : 0;
    return sx < sy ? -1 : sx > sy;
}

static int cmp_creator(const void *a, const void *b)
{
    const struct ot_fw_creator *x = a, *y = b;
    if (x->reserved_bytes != y->reserved_bytes)
        return x->reserved_bytes > y->reserved_bytes ? -1 : 1;
    return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

static int build_creators(struct ot_allocview *v)
{
    if (!v->nsegs)
        return 0;
    const struct ot_fw_segview **by = malloc(v->nsegs * sizeof(*by));
    v->creators = calloc(v->nsegs, sizeof(*v->creators));
    if (!by || !v->creators) {
        free(by);
        return -1;
    }
    for (size_t i = 0; i < v->nsegs; i++)
        by[i] = &v->segs[i];
    qsort(by, v->nsegs, sizeof(*by), cmp_stack_of);
    for (size_t i = 0; i < v->nsegs; i++) {
        const struct ot_fw_segview *sv = by[i];
        bool has = sv->creator != NULL;
        uint64_t id = has ? sv->creator->stack_id : 0;
        struct ot_fw_creator *c = v->ncreators ? &v->creators[v->ncreators - 1] : NULL;
        if (!c || c->has_stack != has || c->stack_id != id) {
            c = &v->creators[v->ncreators++];
            c->stack_id = id;
            c->has_stack = has;
            c->framework = sv->seg->framework;
        }
        c->nsegments++;
        c->reserved_bytes = ot_sat_add(c->reserved_bytes, sv->seg->total_size);
        c->allocated_bytes = ot_sat_add(c->allocated_bytes, sv->allocated_bytes);
        c->free_bytes = ot_sat_add(c->free_bytes, sv->free_bytes);
        if (sv->cached) {
            c->ncached++;
            c->cached_bytes = ot_sat_add(c->cached_bytes, sv->seg->total_size);
        }
    }
    free(by);
    qsort(v->creators, v->ncreators, sizeof(*v->creators), cmp_creator);
    if (ot_u64map_init(&v->creator_index, v->ncreators) < 0)
        return -1;
    for (size_t i = 0; i < v->ncreators; i++)
        if (v->creators[i].has_stack && ot_u64map_put(&v->creator_index, v->creators[i].stack_id, (uint32_t)i) == OT_U64MAP_NONE)
            return -1;
    return 0;
}

const struct ot_fw_creator *ot_allocview_creator(const struct ot_allocview *v, uint64_t stack_id)
{
    if (!v || !v->ncreators)
        return NULL;
    uint32_t i = ot_u64map_get(&v->creator_index, stack_id);
    return i == OT_U64MAP_NONE ? NULL : &v->creators[i];
}

bool ot_fw_segments_misread(uint64_t reserved_bytes, uint64_t free_bytes)
{
    return reserved_bytes && free_bytes >= reserved_bytes / 10;
}

/* The view of fw; joined to the snapshot's driver allocations only when it shows the snapshot's moment
 * (an earlier view's segments may have been freed, and their addresses reused, since). */
static struct ot_allocview *build(const struct ot_snapshot *s, const struct ot_framework *fw, bool earlier)
{
    struct ot_allocview *v = calloc(1, sizeof(*v));
    if (!v)
        return NULL;
    v->fw = fw;
    v->present = fw->present;
    v->earlier = earlier;
    v->fatal = !earlier && s->meta.trigger == OT_TRIGGER_FRAMEWORK_OOM;
    v->info = fw->ninfo ? &fw->info[0] : NULL;
    v->error = fw->nerrors ? &fw->errors[fw->nerrors - 1] : NULL;
    /* Without its records (a view that moved to fw_earlier), the framework the library was told refused. */
    v->fatal_framework = v->error ? v->error->framework
                         : v->info ? v->info->framework
                         : v->fatal ? s->meta.reason
                                    : (struct ot_str){NULL, 0};
    if (!v->present)
        return v;
    for (size_t i = 0; i < fw->nblocks; i++)
        v->blocks_with_stacks += fw->blocks[i].nframes > 0;
    if (!fw->nsegments)
        return v;
    size_t nr = 0;
    struct drange *r = earlier ? NULL : driver_ranges(s, &nr);
    v->segs = calloc(fw->nsegments, sizeof(*v->segs));
    if ((!earlier && !r) || !v->segs) {
        free(r);
        ot_allocview_free(v);
        return NULL;
    }
    v->nsegs = fw->nsegments;
    for (size_t i = 0; i < v->nsegs; i++) {
        v->segs[i].seg = &fw->segments[i];
        measure(&v->segs[i], fw);
        if (!earlier)
            join(&v->segs[i], r, nr);
    }
    free(r);
    qsort(v->segs, v->nsegs, sizeof(*v->segs), cmp_segview);
    if (build_devs(v) < 0 || (!earlier && build_creators(v) < 0)) {
        ot_allocview_free(v);
        return NULL;
    }
    return v;
}

struct ot_allocview *ot_allocview_new(const struct ot_snapshot *s)
{
    return build(s, &s->fw, false);
}

struct ot_allocview *ot_allocview_earlier(const struct ot_snapshot *s)
{
    return s->fw_earlier.present ? build(s, &s->fw_earlier, true) : NULL;
}

void ot_allocview_free(struct ot_allocview *v)
{
    if (!v)
        return;
    free(v->segs);
    free(v->devs);
    free(v->creators);
    ot_u64map_free(&v->creator_index);
    free(v);
}

const struct ot_fw_devview *ot_allocview_dev(const struct ot_allocview *v, const char *framework, uint64_t device)
{
    for (size_t i = 0; v && i < v->ndevs; i++)
        if (v->devs[i].device == device && ot_str_eq(v->devs[i].framework, framework))
            return &v->devs[i];
    return NULL;
}

bool ot_fw_stat(const struct ot_snapshot *s, const char *framework, uint64_t device, const char *key, uint64_t *out)
{
    return ot_fw_stat_of(&s->fw, framework, device, key, out);
}

bool ot_fw_jax_prealloc_limit(const struct ot_snapshot *s, uint64_t device, uint64_t *limit, bool *earlier)
{
    const struct ot_framework *fw = &s->fw;
    *earlier = false;
    if (!ot_fw_setting_get(fw, "jax", "preallocate_effective").p) {
        fw = &s->fw_earlier;
        *earlier = true;
    }
    return ot_str_eq(ot_fw_setting_get(fw, "jax", "preallocate_effective"), "true") &&
           ot_fw_stat_of(fw, "jax", device, "bytes_limit", limit);
}

bool ot_fw_stat_of(const struct ot_framework *fw, const char *framework, uint64_t device, const char *key,
                   uint64_t *out)
{
    int64_t v;
    if (!ot_fw_stat_get(fw, framework, device, key, &v) && !ot_fw_stat_get(fw, framework, OT_FW_DEVICE_ALL, key, &v))
        return false;
    if (v < 0)
        return false;
    *out = (uint64_t)v;
    return true;
}

const char *ot_fw_display_name(struct ot_str framework)
{
    if (ot_str_eq(framework, "torch"))
        return "PyTorch";
    if (ot_str_eq(framework, "jax"))
        return "JAX";
    if (ot_str_eq(framework, "cupy"))
        return "CuPy";
    return NULL;
}
