#ifndef OOMTRACE_PEAK_H
#define OOMTRACE_PEAK_H
#include "oomtrace_format.h"
#include "record/rec.h"

/* Per-device accounting and the exact live set at the device's high-water mark. */
struct trace_device {
    uint64_t cur;                    /* live bytes in device categories */
    uint64_t by_cat[OT_CAT_COUNT];   /* live bytes per category (host and imported included) */
    uint64_t peak, peak_seq, peak_time;
    struct ot_rec *retained;         /* freed since the peak, but live at it */
    uint64_t nretained, capretained;
    uint64_t lost;                   /* peak records the tracer had no memory to keep */
    int seen;                        /* has had a tracked allocation */
    int baseline_state;              /* 0 not taken, 1 taking, 2 known, 3 failed */
    uint64_t baseline_used;          /* total - free before the first tracked allocation */
};

void ot_peak_on_alloc(struct trace_device *d, const struct ot_rec *r);
void ot_peak_on_free(struct trace_device *d, const struct ot_rec *r);
void ot_peak_reset(struct trace_device *d);
#endif
