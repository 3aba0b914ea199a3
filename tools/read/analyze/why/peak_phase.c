/* peak_phase: at least half of the peak was allocated after one marker label. */
#include "analyze/why/item.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The markers the tracer keeps apart from its ring (MARKERS: the latest 1,024, and 8 before each peak). */
#define MARKERS_RECENT 1024

/* A marker's place in the label order: the entry carries its label, so qsort needs no context. */
struct by_label {
    const struct snap_marker *m;
    size_t i;
};

static int cmp_marker_label(const void *x, const void *y)
{
    const struct by_label *p = x, *q = y;
    const struct snap_marker *a = p->m, *b = q->m;
    int c = ot_mem_cmp(a->label.p, a->label.n, b->label.p, b->label.n);
    if (c)
        return c;
    return p->i < q->i ? -1 : 1;
}

static bool same_label(const struct snap_marker *a, const struct snap_marker *b)
{
    return a->label.n == b->label.n && (a->label.n == 0 || memcmp(a->label.p, b->label.p, a->label.n) == 0);
}

void why_peak_phase(struct ot_why *w, const struct ot_analysis *a)
{
    const struct ot_snapshot *s = a->s;
    const struct ot_peak_view *p = a->peak;
    if (!p || !p->section || !p->bytes || !s->nmarkers)
        return;
    size_t m = s->nmarkers;
    if (s->markers[0].seq >= p->seq)
        return; /* no marker before the peak */
    struct by_label *order = malloc(m * sizeof(*order));
    size_t *group = malloc(m * sizeof(size_t)); /* marker -> its label group (the group's first marker) */
    uint64_t *gbytes = calloc(m + 1, sizeof(uint64_t)); /* [m]: before the first marker */
    uint64_t *gcount = calloc(m + 1, sizeof(uint64_t));
    uint64_t *mbytes = calloc(m, sizeof(uint64_t)); /* per marker interval */
    if (!order || !group || !gbytes || !gcount || !mbytes)
        goto out;
    for (size_t i = 0; i < m; i++)
        order[i] = (struct by_label){&s->markers[i], i};
    qsort(order, m, sizeof(*order), cmp_marker_label);
    /* A group is named by its lowest marker index: the first of its run, as ties sort by index. */
    for (size_t i = 0; i < m; i++) {
        size_t k = order[i].i;
        group[k] = (i > 0 && same_label(order[i - 1].m, order[i].m)) ? group[order[i - 1].i] : k;
    }
    const struct ot_peak *sec = p->section;
    for (size_t r = 0; r < sec->count; r++) {
        const struct ot_record *rec = &sec->recs[r];
        if (rec->device != p->device || rec->device < 0 || !ot_category_is_device64(rec->category))
            continue;
        size_t lo = ot_snapshot_marker_from(s, rec->seq);
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
    double sh = why_share(gbytes[best], p->bytes);
    if (sh < 0.5 || !gbytes[best])
        goto out;
    char b1[32], b2[32], b3[32];
    struct why_item_b b;
    if (!why_item_begin(&b, w, "peak_phase"))
        goto out;
    /* The span before the first marker is no marked phase; and the first of those MARKERS keeps is the run's
     * first unless the tracer's 1,024 recent ones wrapped, or the ring holds an older one (walk 11, #9). */
    bool dropped = s->nmarkers >= MARKERS_RECENT ||
                   (a->marker_labels.n && a->marker_labels.seq[0] < s->markers[0].seq);
    fprintf(b.f, "Most of the peak was allocated %s: %s of the %s peak on device %" PRId64 " (%.1f%%, %s allocation%s) ",
            best < m ? "in one marked phase" : dropped ? "before the first kept marker" : "before the first marker",
            why_bytes(b1, gbytes[best]), why_bytes(b2, p->bytes), p->device, 100.0 * sh, ot_fmt_count(b3, gcount[best]),
            gcount[best] == 1 ? "" : "s");
    why_num_i(&b, "device", p->device);
    WHY_NUMS_U(&b, {"peak_bytes", p->bytes}, {"phase_bytes", gbytes[best]}, {"phase_count", gcount[best]});
    why_num_f(&b, "share", sh);
    if (best == m) {
        fputs("was allocated before ", b.f);
        why_put_marker(b.f, a, s->markers[0].seq);
        if (dropped)
            fputs(", the first of the latest 1,024 markers the tracer keeps apart from its event ring", b.f);
        why_num_u(&b, "before_marker_seq", s->markers[0].seq);
        why_num_u(&b, "intervals", 0);
    } else {
        size_t intervals = 0, last = best;
        for (size_t i = 0; i < m; i++)
            if (group[i] == best && mbytes[i]) {
                intervals++;
                last = i;
            }
        if (intervals <= 1) {
            fputs("was allocated after ", b.f);
            why_put_marker(b.f, a, s->markers[last].seq);
            if (last + 1 < m && s->markers[last + 1].seq < p->seq) {
                fputs(" and before ", b.f);
                why_put_marker(b.f, a, s->markers[last + 1].seq);
            } else {
                fprintf(b.f, ", up to the peak (seq %" PRIu64 ")", p->seq);
            }
        } else {
            fprintf(b.f, "was allocated in the %zu intervals that follow markers labelled \"", intervals);
            ot_fput_safe_max(b.f, s->markers[best].label, 120);
            fprintf(b.f, "\" (the last at seq %" PRIu64 ")", s->markers[last].seq);
        }
        why_num_u(&b, "marker_seq", s->markers[last].seq);
        why_num_u(&b, "intervals", intervals);
    }
    uint64_t live;
    if (why_peak_long_before(a, &live)) {
        fprintf(b.f, "; that peak came before the failure, which found only %s live on the device", why_bytes(b1, live));
        why_num_u(&b, "failure_live_bytes", live);
    }
    fputc('.', b.f);
    why_item_end(&b);
out:
    free(order);
    free(group);
    free(gbytes);
    free(gcount);
    free(mbytes);
}
