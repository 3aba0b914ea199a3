/* The EVENTS ring, decoded one chunk at a time. Chunks stay compressed in the model; a reader walks
 * them in order, reusing its decompression buffers (two when a second thread decompresses ahead) and
 * one event array, so memory stays at a couple of chunks whatever the number of events. */
#ifndef OT_READ_EVENTS_H
#define OT_READ_EVENTS_H

#include "model/snapshot.h"
#include "model/zstd.h"

struct snap_event {
    uint64_t seq, time_ns;
    uint64_t kind, api, category;
    int64_t device;
    uint64_t tid, addr, size, stack_id;
    struct ot_str label; /* markers only; points into the reader's buffer, valid until the next chunk */
};

struct ot_prefetch;
struct ot_scan_shared;

/* Events come out in batches of at most OT_EVENT_BATCH, never more than one chunk per batch, so the
 * event array stays small however many events a (possibly hostile) chunk claims. */
#define OT_EVENT_BATCH 8192

struct ot_event_reader {
    const struct ot_snapshot *snap;
    size_t next_chunk;
    bool failed;
    struct ot_zbuf z;             /* decompression in line */
    struct ot_prefetch *prefetch; /* or by a second thread, one chunk ahead */
    struct ot_scan_shared *shared; /* set by ot_events_scan: chunks come from a counter shared by threads */
    struct snap_event *ev;          /* OT_EVENT_BATCH entries */
    /* Position in the current chunk. */
    size_t chunk;
    const uint8_t *raw;
    struct ot_cursor c;
    uint64_t t, addr, index, left;
};

void ot_event_reader_init(struct ot_event_reader *r, const struct ot_snapshot *s);
/* Decodes the next batch: 1 with events in *evs[0..*n) (consecutive, all from one chunk, valid until
 * the next call), 0 after the last chunk, -1 with one line in errbuf when a chunk is malformed. */
int ot_event_reader_next(struct ot_event_reader *r, const struct snap_event **evs, size_t *n, char errbuf[OT_ERRBUF]);
void ot_event_reader_free(struct ot_event_reader *r);

/* What a full pass over the ring tells the report. */
#define OT_EV_KIND_MAX 7
#define OT_EV_CTX_ENDS_KEPT 8
struct ot_event_stats {
    uint64_t decoded;
    uint64_t by_kind[OT_EV_KIND_MAX + 1]; /* [0]: kinds this reader does not know */
    uint64_t alloc_bytes, free_bytes;
    uint64_t first_seq, last_seq, first_time_ns, last_time_ns; /* valid when decoded > 0 */
    /* The latest context ends in the ring (at most OT_EV_CTX_ENDS_KEPT), by seq: each freed every
     * allocation made in its context (size: their device bytes). */
    size_t nctx_ends;
    struct snap_event ctx_ends[OT_EV_CTX_ENDS_KEPT]; /* label unset */
};

/* Decodes every chunk (validating all of them, on several threads where available) and fills *st. On a
 * malformed ring, the error is that of the first bad chunk, as a sequential pass would report it. */
int ot_events_scan(const struct ot_snapshot *s, struct ot_event_stats *st, char errbuf[OT_ERRBUF]);

#endif
