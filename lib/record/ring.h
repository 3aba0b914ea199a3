#ifndef OOMTRACE_RING_H
#define OOMTRACE_RING_H
#include "common/buf.h"

struct trace_event {
    uint8_t kind;
    uint8_t cat;
    uint16_t api;
    int device;
    uint32_t tid;
    uint32_t stack;
    uint64_t seq;
    uint64_t time_ns;
    uint64_t addr;
    uint64_t size;
    const char *label; /* OT_EV_MARKER only */
};

struct ot_ring_stats {
    uint64_t kept, dropped, chunks_dropped, used_bytes;
};

void ot_ring_append(const struct trace_event *e); /* caller holds ot_lock */
void ot_ring_serialize(struct ot_buf *b);      /* the EVENTS payload; caller holds ot_lock */
void ot_ring_stats(struct ot_ring_stats *st);
void ot_ring_reset(int forked);
#endif
