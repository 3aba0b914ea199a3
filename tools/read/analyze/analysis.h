/* What the reports show, computed once from a parsed snapshot: the peak to lead with, site tables for
 * each moment, host and imported memory kept apart from device memory, ring statistics, and notes on
 * inconsistencies. Text and JSON render the same analysis, so they cannot disagree. */
#ifndef OT_READ_ANALYSIS_H
#define OT_READ_ANALYSIS_H

#include "model/events.h"
#include "symbols/resolve.h"
#include "analyze/allocview.h"
#include "analyze/sites.h"
#include "model/snapshot.h"
#include "symbols/symbolize.h"

/* One device's high-water mark. bytes/time/seq come from its PEAK section when there is one, else
 * from DEVICES; the site table exists only with a PEAK section. */
struct ot_peak_view {
    int64_t device;
    const struct snap_device *dev;   /* NULL when DEVICES does not list it */
    const struct ot_peak *section; /* NULL when no PEAK section for it */
    uint64_t bytes, time_ns, seq;
    bool has_sites;
    struct ot_sites sites; /* the device's own records (categories 1-5 on that device) */
};

struct ot_pool_totals {
    size_t count;
    uint64_t reserved_bytes, used_bytes;
};

/* The labels of the ring's markers that MARKERS does not list (marker_labels.c), by seq. */
struct ot_marker_labels {
    size_t n;
    uint64_t *seq;
    uint32_t *off; /* each label's start in buf; it ends where the next one starts */
    char *buf;
    size_t buf_len;
};

struct ot_analysis {
    const struct ot_snapshot *s;
    struct ot_resolver *res;
    struct ot_symbolizer_info sym;
    struct ot_event_stats ev;
    struct ot_marker_labels marker_labels;

    size_t npeaks;
    struct ot_peak_view *peaks; /* one per device known from DEVICES or PEAK, in DEVICES order */
    struct ot_peak_view *peak;  /* the one to lead with, or NULL */

    bool has_at_failure; /* an oom snapshot with a LIVE section */
    int64_t failure_device;
    struct ot_sites at_failure; /* LIVE, device memory on the failing device */
    struct ot_sites live;       /* LIVE, device memory on every device */
    uint64_t host_pinned_bytes, host_pinned_count;
    uint64_t imported_bytes, imported_count; /* bytes: the imports whose size is known */
    uint64_t imported_unsized;                 /* imports whose size is not known (ot_size_unknown) */
    uint64_t other_bytes, other_count; /* unknown categories */

    struct ot_allocview *fw; /* allocview.h: the frameworks' segments joined to the driver's records */
    struct ot_allocview *fw_earlier; /* a view older than the snapshot's moment, shown as such; NULL when none */

    struct ot_notes notes;
    struct ot_why *why; /* why.h: statements explaining the failure or the peak; NULL when out of memory */
    struct ot_breakdown *breakdown; /* breakdown.h: what held the memory; NULL when out of memory */
    struct ot_why *remedies; /* why.h: what to try; NULL when out of memory */
};

/* Decodes the ring and builds the tables. -1 with errbuf when the ring is malformed (bad input) or
 * memory runs out. */
int ot_analyze(struct ot_analysis *a, const struct ot_snapshot *s, struct ot_resolver *res,
               const struct ot_symbolizer_info *sym, char errbuf[OT_ERRBUF]);
void ot_analysis_free(struct ot_analysis *a);

/* ot_analyze's first half (analysis.c: everything but the statements, which are built from it) and what
 * frees it. */
int ot_analysis_build(struct ot_analysis *a, const struct ot_snapshot *s, struct ot_resolver *res,
                      const struct ot_symbolizer_info *sym, char errbuf[OT_ERRBUF]);
void ot_analysis_release(struct ot_analysis *a);

/* A marker's label: from MARKERS, else from its event in the ring. false when neither holds it (the ring
 * dropped it, or a bound on the labels kept was reached). */
bool ot_marker_label(const struct ot_analysis *a, uint64_t seq, struct ot_str *label);
void ot_marker_labels_build(struct ot_marker_labels *t, const struct ot_snapshot *s, const struct ot_event_stats *ev);
void ot_marker_labels_free(struct ot_marker_labels *t);

/* Pools of one device. */
struct ot_pool_totals ot_pools_of(const struct ot_snapshot *s, int64_t device);

/* An imported record whose size the tracer could not learn: an IPC mapping the driver would not size
 * (cuMemGetAddressRange failed), a VMM import not mapped yet. The tracer records one byte flagged as
 * estimated in its place, a stand-in that no report may show as a measured size. */
static inline bool ot_size_unknown(const struct ot_record *r)
{
    return r->category == OT_CAT_IMPORTED && (r->flags & OT_REC_SIZE_ESTIMATED) && r->size <= 1;
}

/* Imported memory on one device as a report states it: the device's imported bytes less the stand-ins
 * of the imports whose size is not known (unsized of them). With no live set the stand-ins cannot be
 * told apart: unsized is 0 and bytes the device's count. */
struct ot_imported {
    uint64_t bytes, unsized;
};
struct ot_imported ot_imported_on(const struct ot_snapshot *s, const struct snap_device *d);

/* Device memory this process's allocation calls do not explain, one formula for every report:
 * used (cuMemGetInfo: total - free) - baseline (used before the first allocation, when measured) -
 * tracked (DEVICES) - other processes (NVML) - what the stream-ordered pools reserve beyond their
 * allocations (POOLS: freed into a pool, kept from the device, and seen). known: cuMemGetInfo was available.
 * bytes may be below zero (the baseline overlaps the other processes' usage, or was partly released since). */
struct ot_untracked {
    bool known, has_baseline;
    uint64_t used, baseline, tracked, others, pooled;
    size_t nothers;
    uint64_t explained; /* baseline + tracked + others + pooled */
    int64_t bytes;
};
void ot_untracked_of(const struct ot_snapshot *s, const struct snap_device *d, struct ot_untracked *u);

/* Why a device's total and free memory are unknown (the snapshot lacks them): cuMemGetInfo reads only the
 * device current at the snapshot, and NVML, which reads any device, was loaded but gave no figure, could not be
 * used (note: why, as the tracer wrote it; untrusted), or was not asked (a crash-surviving flush).
 * current: the device cuMemGetInfo read, known when NVML gave no device's figure (else -1). */
enum ot_meminfo_nvml { OT_MEMINFO_NVML_NO_FIGURE, OT_MEMINFO_NVML_NOT_LOADED, OT_MEMINFO_NVML_NOT_ASKED };
struct ot_meminfo_gap {
    enum ot_meminfo_nvml nvml;
    struct ot_str note;
    int64_t current;
};
void ot_meminfo_gap_of(const struct ot_snapshot *s, const struct snap_device *d, struct ot_meminfo_gap *g);

/* Bytes used by other processes on a device (PROCESSES), and how many. */
uint64_t ot_other_process_bytes(const struct ot_snapshot *s, int64_t device, size_t *count);

#endif
