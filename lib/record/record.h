#ifndef OOMTRACE_RECORD_H
#define OOMTRACE_RECORD_H
#include "internal.h"
#include "record/liveset.h"
#include "record/peak.h"

#define OT_MAX_MARKERS 1024
#define OT_MAX_POOLS 256
#define OT_PEAK_MARKERS 8

struct ot_marker {
    uint64_t seq, time_ns;
    uint32_t tid;
    char label[OT_LABEL_MAX];
};

struct ot_failure {
    int valid;
    struct ot_alloc_req req;
    int result;
    uint64_t time_ns, seq;
    uint32_t tid, stack;
};

struct ot_pool {
    uint64_t handle;
    int device;
};

/* Everything the recorder keeps; read by the snapshot writer with ot_lock held. */
struct ot_state {
    struct ot_liveset live;         /* every allocation not yet freed */
    struct ot_liveset maps;         /* VMM mappings: key = va, size, seq = handle, time_ns = offset */
    struct ot_device dev[OT_MAX_DEVICES];
    struct ot_device host;          /* device -1: pinned host memory, VMM memory located on the host */
    uint64_t seq;                   /* events so far; an event's seq is its index from 1 */
    uint64_t recorded;              /* events recorded (kept in the ring or dropped from it) */
    uint64_t unknown_frees;         /* frees of keys the tracer never saw allocated */
    uint64_t untracked;             /* allocations the tracer had no memory to track */
    struct ot_marker markers[OT_MAX_MARKERS]; /* the most recent, by nmarkers % OT_MAX_MARKERS */
    uint64_t nmarkers;
    /* The last markers before each device's peak, copied when the peak was set: a long run pushes them
     * out of markers[], but they are what explains the peak. */
    struct ot_marker peak_markers[OT_MAX_DEVICES][OT_PEAK_MARKERS];
    uint64_t peak_markers_at[OT_MAX_DEVICES]; /* nmarkers when they were copied */
    struct ot_failure failure;      /* the most recent failed allocation */
    uint64_t failures;
    struct ot_pool pools[OT_MAX_POOLS];
    int npools;
    uint64_t async_devices;         /* bit d: device d had stream-ordered allocations */
};
extern struct ot_state ot_state;

static inline struct ot_device *ot_devslot(int d)
{
    return d >= 0 && d < OT_MAX_DEVICES ? &ot_state.dev[d] : &ot_state.host;
}
#endif
