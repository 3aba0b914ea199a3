#ifndef OOMTRACE_PEAK_H
#define OOMTRACE_PEAK_H
#include "common/defs.h"
#include "oomtrace_format.h"
#include "record/rec.h"

/* Per-device accounting and the exact live set at the device's high-water mark. What every event reads and
 * writes first: the current and peak bytes and the categories of device memory (1-4) share a cache line. */
struct trace_device {
    uint64_t cur;                    /* live bytes in device categories */
    uint64_t peak, peak_seq;
    uint64_t by_cat[OT_CAT_COUNT];   /* live bytes per category (host and imported included) */
    uint64_t peak_time;
    struct ot_rec *retained;         /* freed since the peak, but live at it */
    uint64_t nretained, capretained;
    uint64_t lost;                   /* peak records the tracer had no memory to keep */
    int seen;                        /* has had a tracked allocation */
    int baseline_state;              /* 0 not taken, 1 taking, 2 known, 3 failed */
    uint64_t baseline_used;          /* total - free before the first tracked allocation */
} __attribute__((aligned(64)));

/* Inline: every event does one; only keeping a freed record for the peak set (peak.c) is out of line. */
void ot_peak_retain(struct trace_device *d, const struct ot_rec *r);

/* Counts r in; 1 when it set a new peak. */
static inline int ot_peak_on_alloc(struct trace_device *d, const struct ot_rec *r)
{
    d->by_cat[r->cat < OT_CAT_COUNT ? r->cat : 0] += r->size;
    if (!ot_category_is_device(r->cat))
        return 0;
    d->cur += r->size;
    if (OT_LIKELY(d->cur <= d->peak))
        return 0;
    d->peak = d->cur;
    d->peak_seq = r->seq;
    d->peak_time = r->time_ns;
    d->nretained = 0;
    return 1;
}

static inline void ot_peak_on_free(struct trace_device *d, const struct ot_rec *r)
{
    d->by_cat[r->cat < OT_CAT_COUNT ? r->cat : 0] -= r->size;
    if (!ot_category_is_device(r->cat))
        return;
    d->cur -= r->size;
    if (r->seq <= d->peak_seq)
        ot_peak_retain(d, r);
}
void ot_peak_reset(struct trace_device *d);
#endif
