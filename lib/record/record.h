/* The recorder: the one owner of the tracer's state (the live set, each device's peak, markers, the last
 * failure, pools) and of its lock. Hooks write to it through the event calls; the snapshot writer reads
 * it through the view below, while it holds the recorder still. */
#ifndef OOMTRACE_RECORD_H
#define OOMTRACE_RECORD_H
#include "common/defs.h"
#include "record/liveset.h"
#include "record/peak.h"
#include "record/rec.h"

#define OT_MAX_MARKERS 1024
#define OT_MAX_POOLS 256
#define OT_PEAK_MARKERS 8

struct trace_marker {
    uint64_t seq, time_ns;
    uint32_t tid;
    char label[OT_LABEL_MAX];
};

struct trace_failure {
    int valid;
    struct ot_alloc_req req;
    int result;
    uint64_t time_ns, seq;
    uint32_t tid, stack;
};

/* What one context's end freed, kept beside the ring (its one event says how much; this says which, for a
 * reader's replay). The allocations' list is cut at OT_CTX_FREED_KEEP entries (nkept < nfreed). */
#define OT_MAX_CTX_ENDS 64
#define OT_CTX_FREED_KEEP (1u << 20)
struct ot_ctx_freed {
    uint64_t key, size;
    int16_t device;
    uint8_t cat, ns;
};
struct ot_ctx_end {
    uint64_t seq; /* the event's */
    uint64_t nfreed, nkept, cap;
    struct ot_ctx_freed *v;
};

struct trace_pool {
    uint64_t handle;
    int device;
};

/* What a free recorded before its real call changed, step by step, so that a call the driver refuses
 * changes nothing (intercept/hook_call.h). */
enum { OT_UNDO_CLOSED = 1, OT_UNDO_REF, OT_UNDO_MAP, OT_UNDO_MAPREF };
struct ot_undo_step {
    uint8_t kind; /* CLOSED: rec was closed; REF, MAPREF: VMM handle rec.key lost a reference, a mapping;
                   * MAP: mapping rec was removed */
    struct ot_rec rec;
};
struct ot_undo {
    unsigned n, cap;
    int lost; /* a step could not be noted (no memory): the undo is partial */
    struct ot_undo_step *steps;
    struct ot_undo_step inline_steps[3]; /* enough for one free, one release or one mapping's unmap */
};
static inline void ot_undo_init(struct ot_undo *u)
{
    u->n = 0;
    u->cap = 3;
    u->lost = 0;
    u->steps = u->inline_steps;
}

/* ---- events (record.c), each called after (a free: before) the real driver call ---- */
uint64_t ot_record_alloc(const struct ot_alloc_req *a); /* the event's time (tracer's clock, ns) */
void ot_record_free(uint8_t ns, uint64_t key, uint16_t api, struct ot_undo *u); /* u may be NULL */
void ot_record_undo(struct ot_undo *u); /* the driver refused: undo u's steps, latest first */
void ot_undo_free(struct ot_undo *u); /* steps that outgrew the inline room */
static inline void ot_undo_done(struct ot_undo *u)
{
    if (OT_UNLIKELY(u->steps != u->inline_steps))
        ot_undo_free(u);
}
/* The event only; no snapshot. Returns the failure as recorded: the snapshot that follows reports that one, not
 * the process's latest, which in a burst of failures may be another thread's. */
struct trace_failure ot_record_failure(const struct ot_alloc_req *a, int result);
void ot_record_marker(const char *label);
void ot_record_marker_n(const char *label, size_t n); /* n: label's length, cut at OT_LABEL_MAX - 1 */
void ot_vmm_retain(uint64_t handle);
void ot_vmm_release(uint64_t handle, struct ot_undo *u);
void ot_vmm_map(uint64_t va, uint64_t size, uint64_t offset, uint64_t handle);
void ot_vmm_unmap(uint64_t va, uint64_t size, struct ot_undo *u);
void ot_pool_seen(uint64_t pool, int device);
/* Context ctx ended (destroyed, its primary context reset or released for the last time): every
 * allocation made in it leaves the live set, as one event of kind context_end. device: ctx's, or -1
 * when unknown (then the freed allocations' device). Called after the driver's call succeeded. */
void ot_record_ctx_end(uint64_t ctx, int device, uint16_t api);
/* A device's used memory before its first tracked allocation: claim (1 for the one caller that should
 * ask the driver, once per device), then set what the driver said (known = 0: it could not say). */
int ot_record_baseline_claim(int device);
/* Bit d: device d's baseline has been claimed; every allocation reads it, without the lock. */
extern uint64_t ot_baseline_claimed;
/* 1 when ot_record_baseline_claim may still have something to claim for device. */
static inline int ot_record_baseline_open(int device)
{
    return device >= 0 &&
           (device >= 64 || !((__atomic_load_n(&ot_baseline_claimed, __ATOMIC_RELAXED) >> device) & 1));
}
void ot_record_baseline_set(int device, int known, uint64_t used);
void ot_record_reset(int forked);
void ot_record_fork_prepare(void); /* the lock is held across fork() */
void ot_record_fork_parent(void);

/* ---- the view (view.c): what a snapshot reads ---- */

/* Where a snapshot's driver queries should look, taken in one short look under the lock. */
struct trace_sources {
    uint64_t devices;       /* bit d: device d had tracked memory, a peak, imports or the last failure */
    uint64_t async_devices; /* bit d: device d had stream-ordered allocations */
    int npools;
    struct trace_pool pools[OT_MAX_POOLS];
};
int ot_record_sources(struct trace_sources *out, int bounded); /* bounded: as ot_record_hold */

/* Holds the recorder still while a snapshot reads it; 0 when held. bounded: wait at most a second (the
 * last flush after a fatal signal must not wait forever on a lock the crashing thread may hold). */
int ot_record_hold(int bounded);
void ot_record_release(void);

/* While held: */
uint64_t ot_record_events(void); /* events recorded (kept in the ring or dropped from it) */
const struct ot_liveset *ot_record_live(void);
const struct ot_liveset *ot_record_mappings(void); /* key = va, size, seq = handle, time_ns = offset */
const struct trace_device *ot_record_device(int ordinal); /* outside 0..OT_MAX_DEVICES-1: the host */
#define OT_MARKERS_VIEW (OT_MAX_MARKERS + OT_MAX_DEVICES * OT_PEAK_MARKERS)
/* The recent markers and those pinned at each device's peak, by seq, each once, into v (room for
 * OT_MARKERS_VIEW). */
size_t ot_record_markers(const struct trace_marker **v);

/* The most recent context ends (at most OT_MAX_CTX_ENDS), oldest first, into v (room for OT_MAX_CTX_ENDS). */
size_t ot_record_ctx_ends(const struct ot_ctx_end **v);

/* Any time, without the lock: the seq of the last event (a flush skips an unchanged state). */
uint64_t ot_record_last_seq(void);
#endif
