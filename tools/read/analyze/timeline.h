/* Live device bytes over time, rebuilt from the EVENTS ring for the HTML report.
 *
 * The ring may have lost its oldest chunks, so the replay starts at the earliest kept event and is
 * anchored at the end: each series' level at the snapshot is its live bytes there (LIVE records), and
 * earlier levels are that minus the net of the kept events that came after. The level before the first
 * kept event is therefore what was live then, whatever the ring forgot.
 *
 * Series are the top call sites (by their bytes at the chosen moment, OT_TL_TOP at most) and "other",
 * always last. A free carries no stack: it is charged to the series of the allocation it frees (found
 * by address among the ring's allocations, then among the PEAK records made before the ring starts),
 * else to "other".
 *
 * A context end frees what the snapshot lists for it (CTX_FREED). One whose list is missing or short
 * freed allocations the replay cannot name: every level before it would be off by what it freed, so
 * the points start just after the last such end.
 *
 * The points are downsampled in one pass so that millions of events give at most max_points points:
 * time is cut into buckets and each bucket keeps the moments of its lowest and highest total, so the
 * peak survives. With few enough events every event is a point. */
#ifndef OT_READ_TIMELINE_H
#define OT_READ_TIMELINE_H

#include "analyze/analysis.h"

#define OT_TL_TOP 8

struct ot_timeline {
    int64_t device;
    size_t nseries;                  /* top sites, then "other" */
    uint64_t stack_id[OT_TL_TOP];    /* series i < nseries - 1 */
    uint64_t end[OT_TL_TOP + 1];     /* bytes per series at the snapshot */
    size_t npoints;
    uint64_t *t_ns;                  /* npoints times, CLOCK_MONOTONIC, not decreasing */
    uint64_t *v;                     /* npoints x nseries levels, row by row */
    uint64_t events;                 /* alloc and free events of this device replayed */
    uint64_t unmatched_frees;        /* frees whose allocation is in neither the ring nor PEAK */
    bool downsampled;
    bool negative;                   /* a level fell below zero (an inconsistent snapshot) and shows as 0 */
    bool end_from_live;              /* end[] from LIVE records, else from DEVICES tracked_bytes */
    /* A context end of this device whose frees the snapshot does not list (past the latest it keeps, or
     * more than it lists for one end): the levels before it cannot be told, so the points start at the
     * last such end (its seq and time; cut_ends: how many there were). */
    uint64_t cut_ends, cut_seq, cut_t_ns;
    uint64_t max_total, max_total_t_ns;
    const struct ot_sites *top;      /* the sites the series are the first of (ot_timeline_of), or NULL */
    struct ot_sites own;             /* top's storage when no table of the analysis serves */
};

/* top: the sites whose stacks become series (the first OT_TL_TOP), or NULL. max_points >= 8.
 * -1 with errbuf on a malformed ring or out of memory. */
int ot_timeline_build(struct ot_timeline *tl, const struct ot_analysis *a, int64_t device, const struct ot_sites *top,
                      size_t max_points, char errbuf[OT_ERRBUF]);
void ot_timeline_free(struct ot_timeline *tl);

/* The timeline a report shows: of the failing device, else the leading peak's, else the first listed;
 * its series the device's top sites at its peak, else at the failure, else live at the snapshot
 * (tl->top). Same errors as ot_timeline_build. */
int ot_timeline_of(struct ot_timeline *tl, const struct ot_analysis *a, size_t max_points, char errbuf[OT_ERRBUF]);

#endif
