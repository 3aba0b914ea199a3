/* The tracer's state and its lock: private to record/. Other rooms write through record.h's event calls
 * and read through its view (record/view.c), never the state itself. */
#ifndef OOMTRACE_RECORD_STATE_H
#define OOMTRACE_RECORD_STATE_H
#include "common/defs.h"
#include "record/lock.h"
#include "record/record.h"

struct ot_ring_event;

/* Everything the recorder keeps. The first cache line is what every event reads and writes under the lock,
 * the lock included (record.c names it ot_lock): taking the lock brings the line to the taker's core and
 * the rest comes with it. In a training step the tracer's lines go cold between events (the step's work
 * evicts them) and move between the main thread's core and autograd's; each line they are spread over is
 * one more miss an event. The device's counters are the next lines (trace_device, record/peak.h). */
struct ot_state {
    struct ot_lock lock;            /* ot_lock (record/lock.h): the same bytes */
    uint64_t seq;                   /* events so far; an event's seq is its index from 1 */
    struct ot_ring_event *ring_next, *ring_end; /* the ring's current block: next slot, end (ring.h) */
    struct ot_liveset live;         /* every allocation not yet freed */
    uint64_t async_devices;         /* bit d: device d had stream-ordered allocations */
    /* -- the line every event writes ends here -- */
    struct ot_liveset maps;         /* VMM mappings: key = va, size, seq = handle, time_ns = offset */
    struct trace_device dev[OT_MAX_DEVICES];
    struct trace_device host;       /* device -1: pinned host memory, VMM memory located on the host */
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
    struct ot_ctx_end ctx_ends[OT_MAX_CTX_ENDS]; /* the most recent, by nctx_ends % OT_MAX_CTX_ENDS */
    uint64_t nctx_ends;
};
extern struct ot_state ot_state;
_Static_assert(__builtin_offsetof(struct ot_state, maps) == 64, "the line every event writes is one line");

static inline struct trace_device *ot_devslot(int d)
{
    return d >= 0 && d < OT_MAX_DEVICES ? &ot_state.dev[d] : &ot_state.host;
}
#endif
