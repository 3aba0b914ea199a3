#include "analyze/why.h"

#include <inttypes.h>
#include <stdlib.h>

#include "analyze/stackview.h"

/* Bounds on the ring replay's memory: past these, per-site growth is not computed (the other
 * statements are unaffected). */
#define OT_WHY_MAX_LIVE (16u << 20)
#define OT_WHY_MAX_SITES (1u << 20)
#define OT_WHY_PIDS_SHOWN 4

struct item_b {
    struct ot_why *w;
    struct ot_why_item *it;
    FILE *f;
    char *buf;
    size_t len;
};

static bool item_begin(struct item_b *b, struct ot_why *w, const char *kind)
{
    memset(b, 0, sizeof(*b));
    if (w->n >= OT_WHY_MAX_ITEMS)
        return false;
    b->w = w;
    b->it = &w->v[w->n];
    memset(b->it, 0, sizeof(*b->it));
    b->it->kind = kind;
    b->f = open_memstream(&b->buf, &b->len);
    return b->f != NULL;
}

static void item_end(struct item_b *b)
{
    if (!b->f)
        return;
    if (fclose(b->f) != 0 || !b->buf) {
        free(b->buf);
        return;
    }
    b->it->text = b->buf;
    b->w->n++;
}

static struct ot_why_number *num(struct item_b *b, const char *key)
{
    if (b->it->nnum >= OT_WHY_MAX_NUMBERS)
        return NULL;
    struct ot_why_number *n = &b->it->num[b->it->nnum++];
    n->key = key;
    return n;
}

static void num_u(struct item_b *b, const char *key, uint64_t v)
{
    struct ot_why_number *n = num(b, key);
    if (n) {
        n->kind = OT_WHY_U64;
        n->u = v;
    }
}

static void num_i(struct item_b *b, const char *key, int64_t v)
{
    struct ot_why_number *n = num(b, key);
    if (n) {
        n->kind = OT_WHY_I64;
        n->i = v;
    }
}

static void num_f(struct item_b *b, const char *key, double v)
{
    struct ot_why_number *n = num(b, key);
    if (n) {
        n->kind = OT_WHY_F64;
        n->f = v;
    }
}

static const char *bytes(char *buf, uint64_t v)
{
    return ot_fmt_bytes(buf, v);
}

static void put_headline(FILE *f, const struct ot_analysis *a, uint64_t stack_id)
{
    struct ot_stack_info si;
    ot_stack_info(a->res, a->s, stack_id, &si);
    ot_put_headline(f, &si, true);
    fprintf(f, " (stack %" PRIu64 ")", stack_id);
}

/* The MARKERS entry with this seq, or NULL (the ring can hold markers MARKERS no longer keeps). */
static const struct ot_marker *marker_at(const struct ot_snapshot *s, uint64_t seq)
{
    size_t lo = 0, hi = s->nmarkers;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->markers[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->nmarkers && s->markers[lo].seq == seq ? &s->markers[lo] : NULL;
}

static void put_marker(FILE *f, const struct ot_snapshot *s, uint64_t seq)
{
    const struct ot_marker *m = marker_at(s, seq);
    if (m) {
        fputs("marker \"", f);
        ot_fput_safe_max(f, m->label, 120);
        fprintf(f, "\" (seq %" PRIu64 ")", seq);
    } else {
        fprintf(f, "the marker at seq %" PRIu64, seq);
    }
}

static double share(uint64_t part, uint64_t whole)
{
    return whole ? (double)part / (double)whole : 0.0;
}

/* ---- the failed request ---- */

static void why_request(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_snapshot *s = a->s;
    if (!s->has_failure)
        return;
    const struct ot_failure *fl = &s->failure;
    const struct ot_device *d = ot_snapshot_device(s, fl->device);
    if (!d || !(d->flags & OT_DEV_MEMINFO_KNOWN))
        return;
    char b1[32], b2[32], b3[32];
    struct item_b b;
    uint64_t req = fl->requested_bytes;
    if (req > d->total_bytes) {
        if (!item_begin(&b, w, "request_exceeds_total"))
            return;
        fprintf(b.f, "The failed request alone is larger than the whole device: requested %s > total %s of device %" PRId64 ".",
                bytes(b1, req), bytes(b2, d->total_bytes), fl->device);
    } else if (req > d->free_bytes) {
        if (!item_begin(&b, w, "request_exceeds_free"))
            return;
        fprintf(b.f, "The failed request alone exceeded the device's free memory: requested %s > free %s on device %" PRId64
                " (cuMemGetInfo at the snapshot), %s short",
                bytes(b1, req), bytes(b2, d->free_bytes), fl->device, bytes(b3, req - d->free_bytes));
        if (a->has_at_failure)
            fprintf(b.f, "; this process held %s live on the device at the failure", bytes(b1, a->at_failure.bytes));
        fputc('.', b.f);
    } else {
        if (!item_begin(&b, w, "request_within_free"))
            return;
        fprintf(b.f, "The failed request (%s) was not larger than the free memory measured at the snapshot (%s on device %" PRId64
                ", cuMemGetInfo).",
                bytes(b1, req), bytes(b2, d->free_bytes), fl->device);
    }
    num_i(&b, "device", fl->device);
    num_u(&b, "requested_bytes", req);
    num_u(&b, "free_bytes", d->free_bytes);
    num_u(&b, "total_bytes", d->total_bytes);
    if (req > d->free_bytes)
        num_u(&b, "short_bytes", req - d->free_bytes);
    if (a->has_at_failure)
        num_u(&b, "live_at_failure_bytes", a->at_failure.bytes);
    item_end(&b);
}

/* ---- other processes ---- */

static void why_others(struct ot_why *w, const struct ot_analysis *a, int64_t dev)
{
    const struct ot_snapshot *s = a->s;
    if (!s->has_processes)
        return;
    size_t nother = 0;
    uint64_t other = ot_other_process_bytes(s, dev, &nother);
    if (!nother || !other)
        return;
    char b1[32], b2[32], b3[32], b4[32];
    struct item_b b;
    if (!item_begin(&b, w, "other_processes"))
        return;
    fprintf(b.f, "Memory was held by other processes: %s in %zu other process%s on device %" PRId64 " (", bytes(b1, other),
            nother, nother == 1 ? "" : "es", dev);
    size_t shown = 0;
    uint64_t top_pid = 0, top_bytes = 0;
    for (size_t i = 0; i < s->nprocesses; i++) {
        const struct ot_process *p = &s->processes[i];
        if (p->device != dev || p->pid == s->meta.pid)
            continue;
        if (p->used_bytes > top_bytes || !top_pid) {
            top_bytes = p->used_bytes;
            top_pid = p->pid;
        }
        if (shown < OT_WHY_PIDS_SHOWN) {
            fprintf(b.f, "%spid %" PRIu64 ": %s", shown ? ", " : "", p->pid, bytes(b1, p->used_bytes));
            shown++;
        }
    }
    if (nother > shown)
        fprintf(b.f, ", %zu more", nother - shown);
    fputs("; NVML at the snapshot)", b.f);
    const struct ot_device *d = ot_snapshot_device(s, dev);
    uint64_t tracked = d ? d->tracked_bytes : 0;
    if (d)
        fprintf(b.f, "; this process tracked %s", bytes(b1, tracked));
    bool mi = d && (d->flags & OT_DEV_MEMINFO_KNOWN) && d->total_bytes >= d->free_bytes;
    bool bl = d && (d->flags & OT_DEV_BASELINE_KNOWN);
    /* NVML's own line for this process is the direct measure: everything the process holds on the
     * device, context and modules included. Untracked is what of it no allocation call explains. */
    uint64_t self_used = 0;
    for (size_t i = 0; i < s->nprocesses; i++)
        if (s->processes[i].device == dev && s->processes[i].pid == s->meta.pid)
            self_used = s->processes[i].used_bytes;
    if (mi && self_used) {
        uint64_t used = d->total_bytes - d->free_bytes;
        fprintf(b.f, "; the device used %s; NVML counts %s for this process, so untracked in this process "
                "(context, modules, memory no allocation call explains) = %s%s", bytes(b1, used), bytes(b2, self_used),
                self_used >= tracked ? "" : "-", bytes(b3, self_used >= tracked ? self_used - tracked : tracked - self_used));
        num_u(&b, "used_bytes", used);
        num_u(&b, "self_nvml_bytes", self_used);
        num_i(&b, "untracked_bytes", self_used >= tracked ? (int64_t)(self_used - tracked) : -(int64_t)(tracked - self_used));
    } else if (mi) {
        uint64_t used = d->total_bytes - d->free_bytes;
        uint64_t base = bl ? d->baseline_used_bytes : 0;
        uint64_t known = ot_sat_add(ot_sat_add(base, tracked), other);
        fprintf(b.f, "; the device used %s", bytes(b1, used));
        if (bl)
            fprintf(b.f, ", %s of it before this process's first allocation (baseline)", bytes(b2, base));
        if (used >= known)
            fprintf(b.f, "; untracked in this process = used - %stracked - others = %s", bl ? "baseline - " : "",
                    bytes(b3, used - known));
        else
        {
            uint64_t wo = ot_sat_add(tracked, other);
            fprintf(b.f, "; untracked in this process = used - %stracked - others = -%s, below zero: the baseline, measured"
                    " before this process's first allocation, overlaps the other processes' usage or was partly released"
                    " since; used - tracked - others = %s%s",
                    bl ? "baseline - " : "", bytes(b4, known - used), used >= wo ? "" : "-",
                    bytes(b3, used >= wo ? used - wo : wo - used));
            num_i(&b, "used_minus_tracked_minus_others_bytes", used >= wo ? (int64_t)(used - wo) : -(int64_t)(wo - used));
        }
        num_u(&b, "used_bytes", used);
        if (bl)
            num_u(&b, "baseline_bytes", base);
        num_i(&b, "untracked_bytes", used >= known ? (int64_t)(used - known) : -(int64_t)(known - used));
    }
    fputc('.', b.f);
    num_i(&b, "device", dev);
    num_u(&b, "other_bytes", other);
    num_u(&b, "other_processes", nother);
    num_u(&b, "largest_other_pid", top_pid);
    num_u(&b, "largest_other_bytes", top_bytes);
    if (d)
        num_u(&b, "tracked_bytes", tracked);
    item_end(&b);
}

/* ---- pools ---- */

static void why_pools(struct ot_why *w, const struct ot_analysis *a, int64_t dev)
{
    const struct ot_snapshot *s = a->s;
    struct ot_pool_totals pt = ot_pools_of(s, dev);
    if (!pt.count || pt.reserved_bytes <= pt.used_bytes)
        return;
    uint64_t cached = pt.reserved_bytes - pt.used_bytes;
    char b1[32], b2[32], b3[32];
    struct item_b b;
    if (!item_begin(&b, w, "pool_cached"))
        return;
    fprintf(b.f, "Memory was returned to stream-ordered pools but not to the device: %zu pool%s on device %" PRId64
            " reserved %s while their allocations used %s, so %s sat in the pools (cuMemPoolGetAttribute at the snapshot)",
            pt.count, pt.count == 1 ? "" : "s", dev, bytes(b1, pt.reserved_bytes), bytes(b2, pt.used_bytes), bytes(b3, cached));
    num_i(&b, "device", dev);
    num_u(&b, "pools", pt.count);
    num_u(&b, "reserved_bytes", pt.reserved_bytes);
    num_u(&b, "used_bytes", pt.used_bytes);
    num_u(&b, "cached_bytes", cached);
    const struct ot_device *d = ot_snapshot_device(s, dev);
    if (s->has_failure && s->failure.device == dev && d && (d->flags & OT_DEV_MEMINFO_KNOWN) &&
        s->failure.requested_bytes > d->free_bytes) {
        uint64_t avail = ot_sat_add(d->free_bytes, cached);
        fprintf(b.f, "; free + pooled = %s %s the failed request of %s", bytes(b1, avail),
                avail >= s->failure.requested_bytes ? "would have covered" : "would still not cover",
                bytes(b2, s->failure.requested_bytes));
        num_u(&b, "free_plus_cached_bytes", avail);
    }
    fputc('.', b.f);
    item_end(&b);
}

/* ---- the peak: one site, one phase ---- */

static void why_peak_site(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_peak_view *p = a->peak;
    if (!p || !p->has_sites || !p->sites.n || !p->bytes)
        return;
    const struct ot_site *top = &p->sites.v[0];
    double sh = share(top->bytes, p->bytes);
    if (sh < 0.5)
        return;
    char b1[32], b2[32], b3[32];
    struct item_b b;
    if (!item_begin(&b, w, "peak_site"))
        return;
    fprintf(b.f, "Most of the peak came from one call site: %s of the %s peak on device %" PRId64 " (%.1f%%), in %s allocation%s, at ",
            bytes(b1, top->bytes), bytes(b2, p->bytes), p->device, 100.0 * sh, ot_fmt_count(b3, top->count),
            top->count == 1 ? "" : "s");
    put_headline(b.f, a, top->stack_id);
    fputc('.', b.f);
    num_i(&b, "device", p->device);
    num_u(&b, "peak_bytes", p->bytes);
    num_u(&b, "site_bytes", top->bytes);
    num_u(&b, "site_count", top->count);
    num_f(&b, "share", sh);
    num_u(&b, "stack_id", top->stack_id);
    item_end(&b);
}

static const struct ot_marker *g_sort_markers; /* qsort has no context argument */

static int cmp_marker_label(const void *x, const void *y)
{
    const struct ot_marker *a = &g_sort_markers[*(const size_t *)x], *b = &g_sort_markers[*(const size_t *)y];
    size_t n = a->label.n < b->label.n ? a->label.n : b->label.n;
    int c = n ? memcmp(a->label.p, b->label.p, n) : 0;
    if (c)
        return c;
    if (a->label.n != b->label.n)
        return a->label.n < b->label.n ? -1 : 1;
    return *(const size_t *)x < *(const size_t *)y ? -1 : 1;
}

static bool same_label(const struct ot_marker *a, const struct ot_marker *b)
{
    return a->label.n == b->label.n && (a->label.n == 0 || memcmp(a->label.p, b->label.p, a->label.n) == 0);
}

static void why_peak_phase(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_snapshot *s = a->s;
    const struct ot_peak_view *p = a->peak;
    if (!p || !p->section || !p->bytes || !s->nmarkers)
        return;
    size_t m = s->nmarkers;
    if (s->markers[0].seq >= p->seq)
        return; /* no marker before the peak */
    size_t *order = malloc(m * sizeof(size_t));
    size_t *group = malloc(m * sizeof(size_t)); /* marker -> its label group (the group's first marker) */
    uint64_t *gbytes = calloc(m + 1, sizeof(uint64_t)); /* [m]: before the first marker */
    uint64_t *gcount = calloc(m + 1, sizeof(uint64_t));
    uint64_t *mbytes = calloc(m, sizeof(uint64_t)); /* per marker interval */
    if (!order || !group || !gbytes || !gcount || !mbytes)
        goto out;
    for (size_t i = 0; i < m; i++)
        order[i] = i;
    g_sort_markers = s->markers;
    qsort(order, m, sizeof(size_t), cmp_marker_label);
    /* A group is named by its lowest marker index: the first of its run, as ties sort by index. */
    for (size_t i = 0; i < m; i++) {
        size_t k = order[i];
        group[k] = (i > 0 && same_label(&s->markers[order[i - 1]], &s->markers[k])) ? group[order[i - 1]] : k;
    }
    const struct ot_peak *sec = p->section;
    for (size_t r = 0; r < sec->count; r++) {
        const struct ot_record *rec = &sec->recs[r];
        if (rec->device != p->device || rec->device < 0 || !ot_category_is_device64(rec->category))
            continue;
        size_t lo = 0, hi = m; /* first marker with seq >= rec->seq */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (s->markers[mid].seq < rec->seq)
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t g = lo == 0 ? m : group[lo - 1];
        gbytes[g] = ot_sat_add(gbytes[g], rec->size);
        gcount[g]++;
        if (lo > 0)
            mbytes[lo - 1] = ot_sat_add(mbytes[lo - 1], rec->size);
    }
    size_t best = m;
    for (size_t g = 0; g < m; g++)
        if (gbytes[g] > gbytes[best])
            best = g;
    double sh = share(gbytes[best], p->bytes);
    if (sh < 0.5 || !gbytes[best])
        goto out;
    char b1[32], b2[32], b3[32];
    struct item_b b;
    if (!item_begin(&b, w, "peak_phase"))
        goto out;
    fprintf(b.f, "Most of the peak was allocated in one marked phase: %s of the %s peak on device %" PRId64 " (%.1f%%, %s allocation%s) ",
            bytes(b1, gbytes[best]), bytes(b2, p->bytes), p->device, 100.0 * sh, ot_fmt_count(b3, gcount[best]),
            gcount[best] == 1 ? "" : "s");
    num_i(&b, "device", p->device);
    num_u(&b, "peak_bytes", p->bytes);
    num_u(&b, "phase_bytes", gbytes[best]);
    num_u(&b, "phase_count", gcount[best]);
    num_f(&b, "share", sh);
    if (best == m) {
        fputs("was allocated before the first kept ", b.f);
        put_marker(b.f, s, s->markers[0].seq);
        num_u(&b, "before_marker_seq", s->markers[0].seq);
        num_u(&b, "intervals", 0);
    } else {
        size_t intervals = 0, last = best;
        for (size_t i = 0; i < m; i++)
            if (group[i] == best && mbytes[i]) {
                intervals++;
                last = i;
            }
        if (intervals <= 1) {
            fputs("was allocated after ", b.f);
            put_marker(b.f, s, s->markers[last].seq);
            if (last + 1 < m && s->markers[last + 1].seq < p->seq) {
                fputs(" and before ", b.f);
                put_marker(b.f, s, s->markers[last + 1].seq);
            } else {
                fprintf(b.f, ", up to the peak (seq %" PRIu64 ")", p->seq);
            }
        } else {
            fprintf(b.f, "was allocated in the %zu intervals that follow markers labelled \"", intervals);
            ot_fput_safe_max(b.f, s->markers[best].label, 120);
            fprintf(b.f, "\" (the last at seq %" PRIu64 ")", s->markers[last].seq);
        }
        num_u(&b, "marker_seq", s->markers[last].seq);
        num_u(&b, "intervals", intervals);
    }
    fputc('.', b.f);
    item_end(&b);
out:
    free(order);
    free(group);
    free(gbytes);
    free(gcount);
    free(mbytes);
}

/* ---- the ring: growing sites, the largest rise ---- */

#define NO_MARK SIZE_MAX

struct site_state {
    uint64_t stack_id;
    uint64_t cur_count, cur_bytes;   /* live now (from allocations seen in the ring) */
    uint64_t mark_count, mark_bytes; /* at the last marker it was sampled at */
    size_t mark_idx;                 /* that marker, or NO_MARK */
    size_t run, run_start;           /* growth intervals in a row ending at mark_idx, and where they began */
    uint64_t run_from_count, run_from_bytes;
    size_t best_run, best_start, best_end;
    uint64_t best_from_count, best_from_bytes, best_to_count, best_to_bytes;
    bool dirty;
};

/* Live allocations by address, with deletion (the ring frees what it allocates: the table stays the size
 * of the live set, not of the ring). Open addressing, linear probing, tombstones. */
struct amap {
    uint64_t *key, *size;
    uint32_t *site;
    uint8_t *state; /* 0 empty, 1 full, 2 deleted */
    size_t cap, used, full; /* used: full + deleted */
};

static size_t amap_hash(uint64_t k, size_t cap)
{
    k ^= k >> 30;
    k *= 0xbf58476d1ce4e5b9ULL;
    k ^= k >> 27;
    k *= 0x94d049bb133111ebULL;
    k ^= k >> 31;
    return (size_t)k & (cap - 1);
}

static void amap_free(struct amap *m)
{
    free(m->key);
    free(m->size);
    free(m->site);
    free(m->state);
    memset(m, 0, sizeof(*m));
}

static bool amap_alloc(struct amap *m, size_t cap)
{
    m->key = malloc(cap * sizeof(uint64_t));
    m->size = malloc(cap * sizeof(uint64_t));
    m->site = malloc(cap * sizeof(uint32_t));
    m->state = calloc(cap, 1);
    m->cap = cap;
    m->used = m->full = 0;
    if (m->key && m->size && m->site && m->state)
        return true;
    amap_free(m);
    return false;
}

static size_t amap_find(const struct amap *m, uint64_t key)
{
    if (!m->cap)
        return SIZE_MAX;
    for (size_t i = amap_hash(key, m->cap), n = 0; n < m->cap; i = (i + 1) & (m->cap - 1), n++) {
        if (m->state[i] == 0)
            return SIZE_MAX;
        if (m->state[i] == 1 && m->key[i] == key)
            return i;
    }
    return SIZE_MAX;
}

/* Room for one more entry; false when out of memory. */
static bool amap_reserve(struct amap *m)
{
    if (m->cap && (m->used + 1) * 4 <= m->cap * 3)
        return true;
    size_t ncap = m->cap ? m->cap : 1024;
    while ((m->full + 1) * 2 > ncap)
        ncap *= 2;
    struct amap n;
    if (!amap_alloc(&n, ncap))
        return false;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->state[i] != 1)
            continue;
        size_t k = amap_hash(m->key[i], n.cap);
        while (n.state[k])
            k = (k + 1) & (n.cap - 1);
        n.state[k] = 1;
        n.key[k] = m->key[i];
        n.size[k] = m->size[i];
        n.site[k] = m->site[i];
        n.used++;
        n.full++;
    }
    amap_free(m);
    *m = n;
    return true;
}

/* Inserts a key known to be absent. */
static void amap_put_new(struct amap *m, uint64_t key, uint32_t site, uint64_t size)
{
    size_t i = amap_hash(key, m->cap);
    while (m->state[i] == 1)
        i = (i + 1) & (m->cap - 1);
    if (m->state[i] == 0)
        m->used++;
    m->state[i] = 1;
    m->key[i] = key;
    m->site[i] = site;
    m->size[i] = size;
    m->full++;
}

static void amap_erase(struct amap *m, size_t i)
{
    m->state[i] = 2;
    m->full--;
}

struct replay {
    const struct ot_analysis *a;
    int64_t dev;
    uint64_t target;
    /* markers in the ring before the target */
    uint64_t *mseq;
    size_t nm, mcap;
    /* sites */
    struct ot_u64map site_idx;
    struct amap live;
    struct site_state *sites;
    size_t nsites, scap;
    uint32_t *dirty;
    size_t ndirty, dcap;
    bool sites_off; /* a bound or out of memory: no growth statement */
    /* windows */
    int64_t delta;
    uint64_t w_allocs, w_frees;
    bool have_best;
    int64_t best_delta;
    size_t best_from, best_to; /* marker indexes; NO_MARK: ring start / the target */
    uint64_t best_allocs, best_frees;
    uint64_t ring_first_seq, last_seq;
    bool any_event;
    /* the largest allocation */
    uint64_t big_size, big_seq, big_stack;
    uint64_t frees_on_dev;
};

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 256;
    while (ncap < need)
        ncap *= 2;
    void *np = realloc(*p, ncap * elem);
    if (!np)
        return false;
    *p = np;
    *cap = ncap;
    return true;
}

static void sample(struct site_state *x, size_t k)
{
    if (k == 0 || x->mark_idx == NO_MARK) {
        /* The first marker, or a site born in the interval that ends here (it was 0 at marker k-1). */
        if (k > 0 && (x->cur_bytes > 0 || x->cur_count > 0)) {
            x->run = 1;
            x->run_start = k - 1;
            x->run_from_count = 0;
            x->run_from_bytes = 0;
        } else {
            x->run = 0;
        }
    } else {
        if (x->mark_idx != k - 1)
            x->run = 0; /* an interval without change broke the run */
        bool up = x->cur_bytes > x->mark_bytes || (x->cur_count > x->mark_count && x->cur_bytes >= x->mark_bytes);
        if (up) {
            if (x->run == 0) {
                x->run_start = k - 1;
                x->run_from_count = x->mark_count;
                x->run_from_bytes = x->mark_bytes;
            }
            x->run++;
        } else {
            x->run = 0;
        }
    }
    if (x->run > 0) {
        uint64_t gain = x->cur_bytes - x->run_from_bytes, best_gain = x->best_to_bytes - x->best_from_bytes;
        if (x->run > x->best_run || (x->run == x->best_run && gain > best_gain)) {
            x->best_run = x->run;
            x->best_start = x->run_start;
            x->best_end = k;
            x->best_from_count = x->run_from_count;
            x->best_from_bytes = x->run_from_bytes;
            x->best_to_count = x->cur_count;
            x->best_to_bytes = x->cur_bytes;
        }
    }
    x->mark_count = x->cur_count;
    x->mark_bytes = x->cur_bytes;
    x->mark_idx = k;
}

static void close_window(struct replay *r, size_t from, size_t to)
{
    if (!r->have_best || r->delta > r->best_delta) {
        r->have_best = true;
        r->best_delta = r->delta;
        r->best_from = from;
        r->best_to = to;
        r->best_allocs = r->w_allocs;
        r->best_frees = r->w_frees;
    }
    r->delta = 0;
    r->w_allocs = r->w_frees = 0;
}

static void on_marker(struct replay *r, uint64_t seq)
{
    if (!grow((void **)&r->mseq, &r->mcap, r->nm + 1, sizeof(uint64_t))) {
        r->sites_off = true;
        return;
    }
    size_t k = r->nm;
    r->mseq[r->nm++] = seq;
    close_window(r, k == 0 ? NO_MARK : k - 1, k);
    if (r->sites_off)
        return;
    for (size_t i = 0; i < r->ndirty; i++) {
        struct site_state *x = &r->sites[r->dirty[i]];
        sample(x, k);
        x->dirty = false;
    }
    r->ndirty = 0;
}

static struct site_state *site_for(struct replay *r, uint64_t stack_id, uint32_t *idx)
{
    if (r->nsites >= OT_WHY_MAX_SITES)
        return NULL;
    uint32_t k = ot_u64map_put(&r->site_idx, stack_id, (uint32_t)r->nsites);
    if (k == OT_U64MAP_NONE)
        return NULL;
    if (k == r->nsites) {
        if (!grow((void **)&r->sites, &r->scap, r->nsites + 1, sizeof(*r->sites)) ||
            !grow((void **)&r->dirty, &r->dcap, r->scap, sizeof(uint32_t))) {
            return NULL;
        }
        struct site_state *x = &r->sites[r->nsites++];
        memset(x, 0, sizeof(*x));
        x->stack_id = stack_id;
        x->mark_idx = NO_MARK;
    }
    *idx = k;
    return &r->sites[k];
}

static void touch(struct replay *r, uint32_t idx)
{
    struct site_state *x = &r->sites[idx];
    if (!x->dirty) {
        x->dirty = true;
        r->dirty[r->ndirty++] = idx;
    }
}

/* delta + sign * size, saturating: sizes come from the file. */
static int64_t sat_step(int64_t delta, uint64_t size, int sign)
{
    int64_t v = size > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)size;
    if (sign > 0)
        return delta > INT64_MAX - v ? INT64_MAX : delta + v;
    return delta < INT64_MIN + v ? INT64_MIN : delta - v;
}

static void on_alloc(struct replay *r, const struct ot_event *e)
{
    r->delta = sat_step(r->delta, e->size, 1);
    r->w_allocs++;
    if (e->size > r->big_size) {
        r->big_size = e->size;
        r->big_seq = e->seq;
        r->big_stack = e->stack_id;
    }
    if (r->sites_off)
        return;
    uint32_t si;
    struct site_state *x = site_for(r, e->stack_id, &si);
    if (!x || r->live.full >= OT_WHY_MAX_LIVE) {
        r->sites_off = true;
        return;
    }
    size_t k = amap_find(&r->live, e->addr);
    if (k != SIZE_MAX) {
        /* The address was taken again without a free the ring saw: the old allocation is gone. */
        struct site_state *old = &r->sites[r->live.site[k]];
        old->cur_count -= old->cur_count ? 1 : 0;
        old->cur_bytes -= r->live.size[k] <= old->cur_bytes ? r->live.size[k] : old->cur_bytes;
        touch(r, r->live.site[k]);
        r->live.site[k] = si;
        r->live.size[k] = e->size;
    } else {
        if (!amap_reserve(&r->live)) {
            r->sites_off = true;
            return;
        }
        amap_put_new(&r->live, e->addr, si, e->size);
    }
    x->cur_count++;
    x->cur_bytes = ot_sat_add(x->cur_bytes, e->size);
    touch(r, si);
}

static void on_free(struct replay *r, const struct ot_event *e)
{
    r->delta = sat_step(r->delta, e->size, -1);
    r->w_frees++;
    r->frees_on_dev++;
    if (r->sites_off)
        return;
    size_t k = amap_find(&r->live, e->addr);
    if (k == SIZE_MAX)
        return; /* allocated before the ring's first event */
    uint32_t si = r->live.site[k];
    uint64_t size = r->live.size[k];
    struct site_state *x = &r->sites[si];
    x->cur_count -= x->cur_count ? 1 : 0;
    x->cur_bytes -= size <= x->cur_bytes ? size : x->cur_bytes;
    amap_erase(&r->live, k);
    touch(r, si);
}

static int replay_ring(struct replay *r)
{
    const struct ot_snapshot *s = r->a->s;
    struct ot_event_reader rd;
    ot_event_reader_init(&rd, s);
    const struct ot_event *ev;
    size_t n;
    char err[OT_ERRBUF];
    int rc;
    bool done = false;
    while (!done && (rc = ot_event_reader_next(&rd, &ev, &n, err)) > 0) {
        for (size_t i = 0; i < n; i++) {
            const struct ot_event *e = &ev[i];
            if (e->seq > r->target) {
                done = true;
                break;
            }
            if (!r->any_event) {
                r->any_event = true;
                r->ring_first_seq = e->seq;
            }
            r->last_seq = e->seq;
            if (e->kind == OT_EV_MARKER) {
                on_marker(r, e->seq);
                continue;
            }
            if (e->device != r->dev || e->device < 0 || !ot_category_is_device64(e->category))
                continue;
            if (e->kind == OT_EV_ALLOC)
                on_alloc(r, e);
            else if (e->kind == OT_EV_FREE)
                on_free(r, e);
        }
    }
    ot_event_reader_free(&rd);
    if (!done && rc < 0)
        return -1;
    if (r->nm > 0)
        close_window(r, r->nm - 1, NO_MARK);
    return 0;
}

static void why_growth(struct ot_why *w, struct replay *r)
{
    const struct ot_analysis *a = r->a;
    const struct ot_snapshot *s = a->s;
    if (r->sites_off || r->nm < 4)
        return;
    /* Sites dirty since the last marker have their runs up to date already: only complete intervals count. */
    const struct site_state *best = NULL;
    size_t qualifying = 0;
    for (size_t i = 0; i < r->nsites; i++) {
        const struct site_state *x = &r->sites[i];
        if (x->best_run < 3)
            continue;
        qualifying++;
        if (!best || x->best_run > best->best_run ||
            (x->best_run == best->best_run &&
             x->best_to_bytes - x->best_from_bytes > best->best_to_bytes - best->best_from_bytes) ||
            (x->best_run == best->best_run &&
             x->best_to_bytes - x->best_from_bytes == best->best_to_bytes - best->best_from_bytes &&
             x->stack_id < best->stack_id))
            best = x;
    }
    if (!best)
        return;
    char b1[32], b2[32], b3[32], b4[32];
    struct item_b b;
    if (!item_begin(&b, w, "growing_site"))
        return;
    fprintf(b.f, "One call site grew across marker intervals%s: its live allocations on device %" PRId64
            " rose in each of %zu consecutive intervals, from %s allocation%s (%s) at ",
            r->frees_on_dev ? " (a suspected leak)" : "", r->dev, best->best_run, ot_fmt_count(b1, best->best_from_count),
            best->best_from_count == 1 ? "" : "s", bytes(b2, best->best_from_bytes));
    put_marker(b.f, s, r->mseq[best->best_start]);
    fprintf(b.f, " to %s allocation%s (%s) at ", ot_fmt_count(b3, best->best_to_count), best->best_to_count == 1 ? "" : "s",
            bytes(b4, best->best_to_bytes));
    put_marker(b.f, s, r->mseq[best->best_end]);
    fputs(": ", b.f);
    put_headline(b.f, a, best->stack_id);
    if (qualifying > 1)
        fprintf(b.f, "; %zu other site%s grew for 3 or more intervals too", qualifying - 1, qualifying == 2 ? "" : "s");
    if (r->frees_on_dev == 0)
        fputs(" (the ring holds no free on this device at all: a caching allocator keeps what it takes, so this may be its"
              " cache growing rather than a leak)", b.f);
    fputc('.', b.f);
    num_i(&b, "device", r->dev);
    num_u(&b, "stack_id", best->stack_id);
    num_u(&b, "intervals", best->best_run);
    num_u(&b, "from_count", best->best_from_count);
    num_u(&b, "from_bytes", best->best_from_bytes);
    num_u(&b, "to_count", best->best_to_count);
    num_u(&b, "to_bytes", best->best_to_bytes);
    num_u(&b, "from_marker_seq", r->mseq[best->best_start]);
    num_u(&b, "to_marker_seq", r->mseq[best->best_end]);
    num_u(&b, "sites", qualifying);
    num_u(&b, "frees_in_ring", r->frees_on_dev);
    item_end(&b);
}

static void why_rise(struct ot_why *w, struct replay *r, const char *what)
{
    const struct ot_analysis *a = r->a;
    const struct ot_snapshot *s = a->s;
    char b1[32], b2[32], b3[32];
    struct item_b b;
    if (r->nm == 0) {
        if (!r->big_size || !item_begin(&b, w, "largest_allocation"))
            return;
        fprintf(b.f, "The largest single allocation in the event ring before %s on device %" PRId64 ": %s at seq %" PRIu64 ", at ",
                what, r->dev, bytes(b1, r->big_size), r->big_seq);
        put_headline(b.f, a, r->big_stack);
        fputs(" (the ring has no marker to divide it into phases).", b.f);
        num_i(&b, "device", r->dev);
        num_u(&b, "bytes", r->big_size);
        num_u(&b, "seq", r->big_seq);
        num_u(&b, "stack_id", r->big_stack);
        item_end(&b);
        return;
    }
    if (!r->have_best || r->best_delta <= 0)
        return;
    if (!item_begin(&b, w, "largest_rise"))
        return;
    fprintf(b.f, "The largest rise in live bytes on device %" PRId64 " between markers before %s: +%s (%s allocation%s, %s free%s) from ",
            r->dev, what, bytes(b1, (uint64_t)r->best_delta), ot_fmt_count(b2, r->best_allocs), r->best_allocs == 1 ? "" : "s",
            ot_fmt_count(b3, r->best_frees), r->best_frees == 1 ? "" : "s");
    uint64_t from_seq, to_seq;
    if (r->best_from == NO_MARK) {
        from_seq = r->ring_first_seq;
        fprintf(b.f, "the start of the event ring (seq %" PRIu64 ")", from_seq);
    } else {
        from_seq = r->mseq[r->best_from];
        put_marker(b.f, s, from_seq);
    }
    fputs(" to ", b.f);
    if (r->best_to == NO_MARK) {
        to_seq = r->target == UINT64_MAX ? r->last_seq : r->target;
        fprintf(b.f, "%s (seq %" PRIu64 ")", what, to_seq);
    } else {
        to_seq = r->mseq[r->best_to];
        put_marker(b.f, s, to_seq);
    }
    if (r->big_size)
        fprintf(b.f, "; the largest single allocation in the ring was %s at seq %" PRIu64, bytes(b1, r->big_size), r->big_seq);
    fputc('.', b.f);
    num_i(&b, "device", r->dev);
    num_i(&b, "rise_bytes", r->best_delta);
    num_u(&b, "from_seq", from_seq);
    num_u(&b, "to_seq", to_seq);
    num_u(&b, "allocations", r->best_allocs);
    num_u(&b, "frees", r->best_frees);
    if (r->big_size) {
        num_u(&b, "largest_allocation_bytes", r->big_size);
        num_u(&b, "largest_allocation_seq", r->big_seq);
    }
    item_end(&b);
}

static void why_ring(struct ot_why *w, const struct ot_analysis *a, int64_t dev)
{
    const struct ot_snapshot *s = a->s;
    if (!(s->seen & (1u << OT_SEC_EVENTS)) || !a->ev.decoded)
        return;
    struct replay r = {.a = a, .dev = dev, .target = UINT64_MAX};
    const char *what = "the snapshot";
    if (s->has_failure) {
        r.target = s->failure.seq;
        what = "the failure";
    } else if (a->peak && a->peak->device == dev) {
        r.target = a->peak->seq;
        what = "the peak";
    }
    if (replay_ring(&r) == 0) {
        why_growth(w, &r);
        why_rise(w, &r, what);
    }
    free(r.mseq);
    free(r.sites);
    free(r.dirty);
    amap_free(&r.live);
    ot_u64map_free(&r.site_idx);
}

struct ot_why *ot_why_new(const struct ot_analysis *a)
{
    struct ot_why *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    const struct ot_snapshot *s = a->s;
    if (s->has_failure) {
        w->device = s->failure.device;
        w->has_device = true;
    } else if (a->peak) {
        w->device = a->peak->device;
        w->has_device = true;
    }
    why_request(w, a);
    if (w->has_device && w->device >= 0) {
        why_others(w, a, w->device);
        why_pools(w, a, w->device);
    }
    why_peak_site(w, a);
    why_peak_phase(w, a);
    if (w->has_device && w->device >= 0)
        why_ring(w, a, w->device);
    return w;
}

void ot_why_free(struct ot_why *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++)
        free(w->v[i].text);
    free(w);
}

void ot_why_text(FILE *f, const struct ot_why *w)
{
    if (!w || !w->n)
        return;
    fputs("\nWhy (each statement from numbers in this snapshot):\n", f);
    for (size_t i = 0; i < w->n; i++)
        fprintf(f, "  - %s\n", w->v[i].text);
}

void ot_why_json(struct ot_json *j, const struct ot_why *w)
{
    if (!w) {
        ot_json_null(j, "why");
        return;
    }
    ot_json_arr(j, "why");
    for (size_t i = 0; i < w->n; i++) {
        const struct ot_why_item *it = &w->v[i];
        ot_json_obj(j, NULL);
        ot_json_cstr(j, "kind", it->kind);
        ot_json_cstr(j, "text", it->text);
        ot_json_obj(j, "numbers");
        for (size_t k = 0; k < it->nnum; k++) {
            const struct ot_why_number *n = &it->num[k];
            if (n->kind == OT_WHY_U64)
                ot_json_u64(j, n->key, n->u);
            else if (n->kind == OT_WHY_I64)
                ot_json_i64(j, n->key, n->i);
            else
                ot_json_f64(j, n->key, n->f);
        }
        ot_json_obj_end(j);
        ot_json_obj_end(j);
    }
    ot_json_arr_end(j);
}
