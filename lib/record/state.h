/* The tracer's state and its lock: private to record/. Other rooms write through record.h's event calls
 * and read through its view (record/view.c), never the state itself. */
#ifndef OOMTRACE_RECORD_STATE_H
#define OOMTRACE_RECORD_STATE_H
#include "common/defs.h"
#include "record/lock.h"
#include "record/record.h"

/* Everything the recorder keeps. */
struct ot_state {
    struct ot_liveset live;         /* every allocation not yet freed */
    struct ot_liveset maps;         /* VMM mappings: key = va, size, seq = handle, time_ns = offset */
    struct trace_device dev[OT_MAX_DEVICES];
    struct trace_device host;       /* device -1: pinned host memory, VMM memory located on the host */
    uint64_t seq;                   /* events so far; an event's seq is its index from 1 */
    uint64_t recorded;              /* events recorded (kept in the ring or dropped from it) */
    uint64_t unknown_frees;         /* frees of keys the tracer never saw allocated */
    uint64_t untracked;             /* allocations the tracer had no memory to track */
    struct trace_marker markers[OT_MAX_MARKERS]; /* the most recent, by nmarkers % OT_MAX_MARKERS */
    uint64_t nmarkers;
    /* The last markers before each device's peak, copied when the peak was set: a long run pushes them
     * out of markers[], but they are what explains the peak. */
    struct trace_marker peak_markers[OT_MAX_DEVICES][OT_PEAK_MARKERS];
    uint64_t peak_markers_at[OT_MAX_DEVICES]; /* nmarkers when they were copied */
    struct trace_failure failure;   /* the most recent failed allocation */
    uint64_t failures;
    struct trace_pool pools[OT_MAX_POOLS];
    int npools;
    uint64_t async_devices;         /* bit d: device d had stream-ordered allocations */
};
extern struct ot_state ot_state;

static inline struct trace_device *ot_devslot(int d)
{
    return d >= 0 && d < OT_MAX_DEVICES ? &ot_state.dev[d] : &ot_state.host;
}
#endif
