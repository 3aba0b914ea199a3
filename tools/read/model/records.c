/* The sections made of allocation records: LIVE, LIVE_SEQ, PEAK, and PEAK_REF, whose peak set is
 * rebuilt from the live set once every section is read. */
#include "model/section.h"

#include <inttypes.h>
#include <stdlib.h>

#define OT_RECORD_MIN_BYTES 10u

/* A list of records starts with its count: checked against the bytes left, then the array. */
static struct ot_record *records_begin(struct sec_ctx *x, uint64_t *count)
{
    return sec_list(x, OT_RECORD_MIN_BYTES, sizeof(struct ot_record), "record", count);
}

static int parse_records(struct sec_ctx *x, size_t *nout, struct ot_record **out)
{
    uint64_t count;
    struct ot_record *r = records_begin(x, &count);
    if (!r)
        return -1;
    for (size_t i = 0; i < count; i++) {
#define OT_X_READ(col, name, coding, seq_coding, doc)                                                  \
    r[i].name = (__typeof__(r[i].name))ot_get_field(&x->c, OT_CODING_##coding, 0);
        OT_RECORD_FIELDS(OT_X_READ)
#undef OT_X_READ
        if (x->c.err)
            return sec_item_err(x, "record", i);
    }
    *nout = (size_t)count;
    *out = r;
    return 0;
}

int parse_live(struct sec_ctx *x)
{
    if (x->snap->has_live)
        return sec_err(x, "a second live set (the file has both LIVE and LIVE_SEQ)");
    if (parse_records(x, &x->snap->nlive, &x->snap->live) < 0)
        return -1;
    x->snap->has_live = true;
    return 0;
}

/* LIVE_SEQ: the records of LIVE in seq order, stored column by column: all addresses, then all sizes,
 * and so on in record order. address and time_ns are signed deltas and seq an unsigned delta from the
 * record before (the first from zero). */
int parse_live_seq(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    if (s->has_live)
        return sec_err(x, "a second live set (the file has both LIVE and LIVE_SEQ)");
    uint64_t count;
    struct ot_record *r = records_begin(x, &count);
    if (!r)
        return -1;
    static const char *const column[] = {
#define OT_X_NAME(col, name, coding, seq_coding, doc) #name,
        OT_RECORD_FIELDS(OT_X_NAME)
#undef OT_X_NAME
    };
#define OT_X_COLUMN(col, name, coding, seq_coding, doc)                                                \
    for (uint64_t i = 0, prev = 0; i < count; i++) {                                                   \
        uint64_t v = ot_get_field(&x->c, OT_CODING_##seq_coding, prev);                                \
        if (x->c.err)                                                                                  \
            return sec_err(x, "the %s column ends at record %zu of %" PRIu64 " (byte %zu of the payload)", \
                           column[col], (size_t)i, count, sec_pos(x));                                 \
        if (OT_CODING_##seq_coding == OT_CODING_DU && v < prev)                                        \
            return sec_err(x, "record %zu: seq overflows 64 bits", (size_t)i);                          \
        r[i].name = (__typeof__(r[i].name))(prev = v);                                                 \
    }
    OT_RECORD_FIELDS(OT_X_COLUMN)
#undef OT_X_COLUMN
    s->nlive = (size_t)count;
    s->live = r;
    s->has_live = true;
    return 0;
}

/* Appends to an arena array of n items, growing it to the next power of two when n is one, so that many
 * sections cost linear time and at most twice the final size (the arena frees nothing on its own). */
static void *grow(struct sec_ctx *x, void *arr, size_t n, size_t size)
{
    if (n && (n & (n - 1)))
        return arr;
    void *na = sec_alloc(x, n ? 2 * n : 1, size);
    if (na && n)
        memcpy(na, arr, n * size);
    return na;
}

/* Peaks are one per device: more than OT_READ_MAX_PEAKS sections of them is no snapshot the writer made. */
static int peak_room(struct sec_ctx *x)
{
    if (x->snap->npeaks + x->snap->npeak_refs >= OT_READ_MAX_PEAKS)
        return sec_err(x, "more than %u peaks (one per device)", OT_READ_MAX_PEAKS);
    return 0;
}

static int add_peak(struct sec_ctx *x, const struct ot_peak *p)
{
    struct ot_snapshot *s = x->snap;
    for (size_t i = 0; i < s->npeaks; i++)
        if (s->peaks[i].device == p->device)
            return sec_err(x, "a second peak for device %" PRId64, p->device);
    struct ot_peak *np = grow(x, s->peaks, s->npeaks, sizeof(*np));
    if (!np)
        return -1;
    np[s->npeaks++] = *p;
    s->peaks = np;
    return 0;
}

static const struct ot_field peak_fields[] = {OT_PEAK_FIELDS(OT_FIELD_OF, struct ot_peak)};
struct peak_ref_head {
    uint64_t count, lost;
};
static const struct ot_field peak_ref_fields[] = {OT_PEAK_REF_FIELDS(OT_FIELD_OF, struct peak_ref_head)};

static int parse_peak_head(struct sec_ctx *x, struct ot_peak *p)
{
    return sec_fields(x, p, peak_fields, OT_NFIELDS(peak_fields), "PEAK field");
}

int parse_peak(struct sec_ctx *x)
{
    struct ot_peak p = {0};
    if (peak_room(x) < 0 || parse_peak_head(x, &p) < 0 || parse_records(x, &p.count, &p.recs) < 0)
        return -1;
    return add_peak(x, &p);
}

/* PEAK_REF: resolved once the live set is known (ot_snapshot_parse, sec_resolve_peak_refs). */
int parse_peak_ref(struct sec_ctx *x)
{
    struct ot_snapshot *s = x->snap;
    struct ot_peak_ref r = {.hdr_off = x->hdr_off};
    if (peak_room(x) < 0 || parse_peak_head(x, &r.peak) < 0)
        return -1;
    struct peak_ref_head h;
    if (sec_fields(x, &h, peak_ref_fields, OT_NFIELDS(peak_ref_fields), "PEAK_REF field") < 0)
        return -1;
    r.count = h.count;
    r.peak.lost = h.lost;
    if (parse_records(x, &r.peak.count, &r.peak.recs) < 0)
        return -1;
    if (r.peak.count > r.count)
        return sec_err(x, "%zu records freed since the peak, more than the %" PRIu64 " of the peak set",
                    r.peak.count, r.count);
    struct ot_peak_ref *n = grow(x, s->peak_refs, s->npeak_refs, sizeof(*n));
    if (!n)
        return -1;
    n[s->npeak_refs++] = r;
    s->peak_refs = n;
    return 0;
}

static bool shared_with_peak(const struct ot_record *l, const struct ot_peak *p)
{
    return ot_peak_ref_shares(l->device, l->category, l->seq, p->device, p->peak_seq);
}

static int cmp_ref_device(const void *a, const void *b)
{
    const struct ot_peak_ref *x = *(const struct ot_peak_ref *const *)a, *y = *(const struct ot_peak_ref *const *)b;
    return (x->peak.device > y->peak.device) - (x->peak.device < y->peak.device);
}

/* The reference for a device among refs sorted by device, or NULL. */
static struct ot_peak_ref *ref_for(struct ot_peak_ref **by_dev, size_t n, int64_t device)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (by_dev[mid]->peak.device < device)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && by_dev[lo]->peak.device == device ? by_dev[lo] : NULL;
}

/* The peak set of a PEAK_REF: the live records on its device, in device categories, made at or before
 * the peak (seq <= peak_seq), then the retained ones. Their number must be the one the writer counted.
 * One pass over the live set counts for every reference and one fills them (refs found by device), so
 * the time is the live set's size times log(references), not their product. */
int sec_resolve_peak_refs(struct ot_snapshot *s, char *errbuf)
{
    size_t nref = s->npeak_refs;
    if (!nref)
        return 0;
    struct sec_ctx x0 = {.snap = s, .type = OT_SEC_PEAK_REF, .hdr_off = s->peak_refs[0].hdr_off, .err = errbuf};
    if (!s->has_live)
        return sec_err(&x0, "refers to the live set, but the file has no LIVE or LIVE_SEQ section");
    struct ot_peak_ref **by_dev = sec_alloc(&x0, nref, sizeof(*by_dev));
    uint64_t *shared = sec_alloc(&x0, nref, sizeof(*shared));
    size_t *filled = sec_alloc(&x0, nref, sizeof(*filled));
    struct ot_record **recs = sec_alloc(&x0, nref, sizeof(*recs));
    if (!by_dev || !shared || !filled || !recs)
        return -1;
    for (size_t k = 0; k < nref; k++)
        by_dev[k] = &s->peak_refs[k];
    qsort(by_dev, nref, sizeof(*by_dev), cmp_ref_device);
    for (size_t k = 1; k < nref; k++)
        if (by_dev[k]->peak.device == by_dev[k - 1]->peak.device) {
            struct sec_ctx x = {.snap = s, .type = OT_SEC_PEAK_REF, .hdr_off = by_dev[k]->hdr_off, .err = errbuf};
            return sec_err(&x, "a second peak for device %" PRId64, by_dev[k]->peak.device);
        }
    for (size_t i = 0; i < s->nlive; i++) {
        struct ot_peak_ref *r = ref_for(by_dev, nref, s->live[i].device);
        if (r && shared_with_peak(&s->live[i], &r->peak))
            shared[r - s->peak_refs]++;
    }
    for (size_t k = 0; k < nref; k++) {
        struct ot_peak_ref *r = &s->peak_refs[k];
        struct sec_ctx x = {.snap = s, .type = OT_SEC_PEAK_REF, .hdr_off = r->hdr_off, .err = errbuf};
        if (shared[k] + r->peak.count != r->count)
            return sec_err(&x, "device %" PRId64 ": the live set gives %" PRIu64 " records at the peak and %zu were"
                        " freed since, but the section counts %" PRIu64, r->peak.device, shared[k], r->peak.count,
                        r->count);
        if (!(recs[k] = sec_alloc(&x, (size_t)r->count, sizeof(**recs))))
            return -1;
    }
    for (size_t i = 0; i < s->nlive; i++) {
        struct ot_peak_ref *r = ref_for(by_dev, nref, s->live[i].device);
        if (r && shared_with_peak(&s->live[i], &r->peak)) {
            size_t k = (size_t)(r - s->peak_refs);
            recs[k][filled[k]++] = s->live[i];
        }
    }
    for (size_t k = 0; k < nref; k++) {
        struct ot_peak_ref *r = &s->peak_refs[k];
        struct sec_ctx x = {.snap = s, .type = OT_SEC_PEAK_REF, .hdr_off = r->hdr_off, .err = errbuf};
        struct ot_peak p = r->peak;
        if (r->peak.count)
            memcpy(recs[k] + filled[k], r->peak.recs, r->peak.count * sizeof(**recs));
        p.recs = recs[k];
        p.count = (size_t)r->count;
        if (add_peak(&x, &p) < 0)
            return -1;
    }
    s->npeak_refs = 0;
    s->peak_refs = NULL;
    return 0;
}
