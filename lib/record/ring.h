/* The event ring (ring.c): recorded events, kept as compressed chunks under a byte budget. */
#ifndef OOMTRACE_RING_H
#define OOMTRACE_RING_H
#include "common/buf.h"
#include "common/defs.h"

/* One event as recorded, before it is encoded: its seq is its block's first_seq + its index. */
struct ot_ring_event {
    uint64_t time_ns, addr, size;
    uint32_t tid, stack;
    int32_t device;
    uint16_t api;
    uint8_t kind, cat;
    uint32_t label_off; /* a marker's label: the block's labels + label_off, label_len bytes */
    uint32_t label_len;
};

/* Events not yet compressed: the block being filled, those waiting for the compressor, the one it works on. */
struct ot_ring_block {
    struct ot_ring_block *next;
    uint64_t first_seq, nevents, t0, cap;
    size_t labels_len;
    char *labels;
    struct ot_ring_event ev[];
};
/* The next event's slot: ot_ring_next (record/ring_next.h, for the recorder's event path). A marker's slot,
 * with its label (up to OT_LABEL_MAX - 1 bytes) copied in. */
struct ot_ring_event *ot_ring_marker(uint64_t seq, uint64_t time_ns, const char *label);

struct ot_ring_stats {
    uint64_t kept, dropped, chunks_dropped, used_bytes;
    uint64_t queued; /* blocks waiting for the compressor or being compressed */
};

void ot_ring_serialize(struct ot_buf *b);      /* the EVENTS payload; caller holds ot_lock */
void ot_ring_stats(struct ot_ring_stats *st);
void ot_ring_reset(int forked);
/* Tests: while on, the compressor thread takes no work, so that its queue fills and the allocating thread
 * compresses inline. Caller holds ot_lock. */
void ot_ring_pause(int on);
#endif
