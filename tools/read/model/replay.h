/* One replay of the event ring, shared by every reader of it that needs to know which allocation a free
 * frees (timeline, memviz trace, the Why ring statements): the events in seq order up to a moment,
 * each free matched by address to the allocation it frees, the map holding only what is live. A context's
 * end is visited, then each allocation it freed as a free of its own at that moment (kind free, the api of
 * the call that ended the context), from the snapshot's list of them.
 *
 * A free is matched first among the ring's own allocations, then among the seeded ones (allocations
 * made before the ring's first kept event, from PEAK records), else it is unmatched. An allocation at an
 * address still live replaces the allocation there (the ring lost its free) and says so. */
#ifndef OT_READ_REPLAY_H
#define OT_READ_REPLAY_H

#include "model/addrmap.h"
#include "model/events.h"

struct ot_replay_step {
    const struct snap_event *e;
    bool tracked;             /* an allocation or free the replay's track() chose */
    bool matched;             /* tracked free: its allocation was found; tracked allocation: it replaced one */
    struct ot_addrval alloc;  /* when matched: that allocation's stack id and size */
};

struct ot_replay {
    const struct ot_snapshot *s;
    uint64_t last_seq; /* the moment: later events are not visited (UINT64_MAX: the whole ring) */
    /* Which allocation and free events to match (the others are visited untracked). */
    bool (*track)(const struct snap_event *e, void *ctx);
    /* Called for every event up to the moment, in order. */
    void (*visit)(const struct ot_replay_step *st, void *ctx);
    void *ctx;
    struct ot_addrmap live, seeded; /* address -> stack id and size */
};

/* An allocation made before the ring's first kept event, live at some moment the snapshot kept. */
void ot_replay_seed(struct ot_replay *r, const struct ot_record *rec);
/* Visits the events; 0 at the moment or the ring's end, -1 with errbuf when a chunk before the moment is
 * malformed. Frees the maps either way. */
int ot_replay_run(struct ot_replay *r, char errbuf[OT_ERRBUF]);
/* Live allocations the replay holds now: the bound a visitor may check. */
static inline size_t ot_replay_live(const struct ot_replay *r)
{
    return r->live.count;
}

#endif
