/* What the memviz report shows, decided here: the allocations live at the moment (its segments), the
 * ring's latest events up to it (its trace), and CUDA's free bytes at each failed call. At the peak, the
 * peak's device alone (its records are its own); the failure and the snapshot show every device. */
#ifndef OT_READ_ANALYZE_MEMVIZ_H
#define OT_READ_ANALYZE_MEMVIZ_H

#include "analyze/moment.h"

#define OT_MV_MAX_DEVICES 64     /* device_traces has one list per ordinal below this */
#define OT_MV_MAX_EVENTS 100000u /* ring events in the trace: the latest ones */

struct ot_mv_event {
    uint64_t kind, addr, size, stack_id, time_ns, seq; /* a free: its allocation's stack */
    int64_t device;
    uint64_t level;       /* failed: this device's net bytes since the ring's start, before the event */
    uint64_t device_free; /* failed: CUDA's free bytes then, 0 when unknown */
};

struct ot_mv_trace {
    struct ot_moment mo;
    const struct ot_record **seg; /* the segments, in (device, address) order */
    size_t nseg;
    struct ot_mv_event *ring; /* the trace: count events from head, circular, oldest first */
    size_t head, count;
    int64_t ndev; /* device_traces lists: ordinals 0 .. ndev-1 */
};

/* 0, or -1 with a line in err (OT_ERRBUF bytes); t->mo is set either way. ot_mv_trace_free after. */
int ot_mv_trace_build(const struct ot_analysis *a, enum ot_at at, struct ot_mv_trace *t, char *err);
void ot_mv_trace_free(struct ot_mv_trace *t);
static inline const struct ot_mv_event *ot_mv_event_at(const struct ot_mv_trace *t, size_t j)
{
    return &t->ring[(t->head + j) % OT_MV_MAX_EVENTS];
}

#endif
