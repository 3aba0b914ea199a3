/* The ring's fast path (ring.c has the rest): the recorder's event path takes a slot here under ot_lock. */
#ifndef OOMTRACE_RING_NEXT_H
#define OOMTRACE_RING_NEXT_H
#include "common/defs.h"
#include "record/ring.h"
#include "record/state.h"

struct ot_ring_event *ot_ring_next_slow(uint64_t seq, uint64_t time_ns);

/* The slot for the event with this seq (one more than the last one's), to be filled by the caller (every
 * field but the label's); NULL when the tracer has no memory for it (counted as dropped). A marker takes
 * its slot from ot_ring_marker. The caller holds ot_lock.
 * The fast path reads and moves only a slot pointer in the line every event writes (record/state.h); the
 * block's count is brought up to date from it wherever ring.c reads the count. An empty block, a full one
 * and none leave the pointers equal, so the block's first event (its first_seq and t0) takes the slow path.
 * The line a few slots on is fetched for writing now: the blocks' lines were last read by the compressor's
 * core, and a store that must first take its line back otherwise waits at the next locked instruction (the
 * lock's exchange, or the driver's own), which drains the store buffer. */
static inline struct ot_ring_event *ot_ring_next(uint64_t seq, uint64_t time_ns)
{
    struct ot_ring_event *e = ot_state.ring_next;
    if (OT_LIKELY(e < ot_state.ring_end)) {
        ot_state.ring_next = e + 1;
        ot_prefetch_w(e + 4);
        return e;
    }
    return ot_ring_next_slow(seq, time_ns);
}
#endif
