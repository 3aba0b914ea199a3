/* The event path: what a wrapper calls after the real driver call returned. The backtrace is taken
 * before ot_lock (no lock is ever held while unwinding); everything after it - interning, the live set,
 * the peak, the ring - is a few hundred instructions under that one lock (record/lock.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "capture/backtrace.h"
#include "capture/python.h"
#include "capture/stacks.h"
#include "common/clock.h"
#include "common/defs.h"
#include "common/log.h"
#include "common/options.h"
#include "common/stage.h"
#include "common/self.h"
#include "common/tables.h"
#include "record/rec.h"
#include "record/ring.h"
#include "record/ring_next.h"
#include "record/state.h"

struct ot_state ot_state;
/* The lock is ot_state's first member, under its own name for record/lock.h (whose users need not see the
 * state); the two names are never used for the same bytes. */
extern struct ot_lock ot_lock __attribute__((alias("ot_state")));
#define S ot_state

/* The stack's frames at *src: in frames, or in the thread's capture cache (capture/python.h) */
static int capture(uint64_t *frames, unsigned *flags, const uint64_t **src)
{
    *flags = 0;
    ot_python_prefetch(); /* the Python frames arrive while the native walk runs */
    const uint64_t *native;
    int n = OT_STAGE_CALL(OT_ST_BACKTRACE, ot_backtrace_at(frames, ot_opt.depth, flags, &native));
    return OT_STAGE_CALL(OT_ST_PYTHON, ot_python_merge(native, frames, n, OT_MAX_FRAMES, flags, src));
}

/* One event into the ring: its slot's fields, written under the lock (the encode is the compressor's). */
static inline __attribute__((always_inline)) void emit_ev(uint8_t kind, uint64_t seq, uint64_t t, const char *label,
                                                          uint64_t key, uint64_t size, uint32_t tid, uint32_t stack,
                                                          int16_t device, uint16_t api, uint8_t cat)
{
    OT_STAGE_EVENT(kind != OT_EV_FREE, tid);
    OT_STAGE_BEGIN(ring_t0);
    struct ot_ring_event *e = OT_UNLIKELY(kind == OT_EV_MARKER) ? ot_ring_marker(seq, t, label) : ot_ring_next(seq, t);
    if (OT_LIKELY(e != NULL)) {
        e->time_ns = t;
        e->addr = key;
        e->size = size;
        e->tid = tid;
        e->stack = stack;
        e->device = device;
        e->api = api;
        e->kind = kind;
        e->cat = cat;
    }
    OT_STAGE_END(OT_ST_RING, ring_t0);
}

static inline __attribute__((always_inline)) void emit(uint8_t kind, const struct ot_rec *r, uint64_t seq, uint64_t t, const char *label)
{
    emit_ev(kind, seq, t, label, r->key, r->size, r->tid,
            kind == OT_EV_ALLOC || kind == OT_EV_FAILED ? r->stack : 0, r->device, r->api, r->cat);
}

/* The next event's seq. At every OT_TABLE_HOT-th event, whatever its kind, the live set's table may move onto
 * 2 MiB pages (in place, so records already found stay where they are): the first time only. */
static inline __attribute__((always_inline)) uint64_t next_seq(void)
{
    _Static_assert((OT_TABLE_HOT & (OT_TABLE_HOT - 1)) == 0, "a power of two");
    const uint64_t seq = ++S.seq;
    if (OT_UNLIKELY((seq & (OT_TABLE_HOT - 1)) == 0))
        ot_live_hot(&S.live);
    return seq;
}

/* Closes a live record: accounting, the peak's retained set, the FREE event (its api and thread are the
 * free's), written from the live record before the delete moves records. Inline: every free does it. */
static inline __attribute__((always_inline)) void close_rec(struct ot_rec *r, uint16_t api, uint32_t tid)
{
    ot_peak_on_free(ot_devslot(r->device), r);
    emit_ev(OT_EV_FREE, next_seq(), ot_now_ns(), NULL, r->key, r->size, tid, 0, r->device, api, r->cat);
    ot_live_del(&S.live, r);
}

/* When an allocation set a new peak, keep copies of the markers before it. Copied only when markers came
 * since the last copy, so a run of new peaks costs nothing more. */
static void pin_peak_markers(int device, uint64_t seq)
{
    if (device < 0 || device >= OT_MAX_DEVICES || S.dev[device].peak_seq != seq ||
        S.peak_markers_at[device] == S.nmarkers)
        return;
    uint64_t n = S.nmarkers < OT_PEAK_MARKERS ? S.nmarkers : OT_PEAK_MARKERS;
    for (uint64_t i = 0; i < OT_PEAK_MARKERS; i++)
        S.peak_markers[device][i].seq = 0;
    for (uint64_t i = 0; i < n; i++)
        S.peak_markers[device][i] = S.markers[(S.nmarkers - n + i) % OT_MAX_MARKERS];
    S.peak_markers_at[device] = S.nmarkers;
}

/* Where the thread's next event will most likely write (common/self.h), under the lock: the next free of
 * its allocation finds its slot there, and while no other thread records, the ring's next slot. */
static inline __attribute__((always_inline)) void near_note(int device)
{
    ot_self.near.slots = (uintptr_t)S.live.slots;
    ot_self.near.mask = S.live.mask;
    ot_self.near.ring = (uintptr_t)S.ring_next;
    ot_self.near.device = device;
}

/* The lines an event will touch under the lock, fetched before it: after the step's own work they are all
 * cold (issue 16: record_alloc ~400 ns and record_free ~380 ns after a long gap on the H200), and under the
 * lock the misses waited for the lock's exchange, which lets no later load start early, and then for each
 * other (a free's slot names its device). From the thread's hint (common/self.h) they are fetched at once, so
 * that their misses overlap each other and the exchange's own. A prefetch never faults, and nothing is read
 * from these addresses here.
 * The lines only this event will write, and the clock's, which no event writes: the key's live-set slot (a
 * free's delete reads the next one too, ot_live_del). An allocation fetches them before its capture. */
static inline __attribute__((always_inline)) void prefetch_own(uint8_t ns, uint64_t key, int is_free)
{
    if (OT_LIKELY(ot_self.near.slots != 0)) {
        const struct ot_liveset l = {.mask = ot_self.near.mask};
        const uint64_t i = ot_live_slot_of(&l, ns, key);
        ot_prefetch_w((const void *)(ot_self.near.slots + i * sizeof(struct ot_rec)));
        if (is_free) /* the last slot's next is the first */
            __builtin_prefetch((const void *)(ot_self.near.slots + (i == l.mask ? 0 : i + 1) * sizeof(struct ot_rec)),
                               0, 3);
    }
    __builtin_prefetch(&ot_clock_line, 0, 3);
}

/* The lines every event writes under the lock (the ring's next slot, both lines of its 48 bytes, and the
 * device's counters; a free's device is its record's, not read yet: the thread's last is the guess), fetched
 * just before taking it: fetched earlier, while another thread holds the lock, they would be taken from it
 * mid-event. (The lock's own line is the exchange's to fetch.) */
static inline __attribute__((always_inline)) void prefetch_shared(int device)
{
    if (OT_LIKELY(ot_self.near.ring != 0)) {
        ot_prefetch_w((const void *)ot_self.near.ring);
        ot_prefetch_w((const void *)(ot_self.near.ring + sizeof(struct ot_ring_event) - 1));
    }
    ot_prefetch_w(ot_devslot(device));
}

/* The allocation's stale record (the driver reused a key we still hold: its free went through a door we do
 * not see) is closed; the slot for the new one, probed again (the close moved records). */
static __attribute__((noinline)) struct ot_rec *close_stale(struct ot_rec *stale, const struct ot_alloc_req *a,
                                                            uint32_t tid, int *found)
{
    close_rec(stale, OT_API_NONE, tid);
    return ot_live_probe(&S.live, a->ns, a->key, found);
}

uint64_t ot_record_alloc(const struct ot_alloc_req *a)
{
    uint64_t frames[OT_MAX_FRAMES];
    const uint64_t *src;
    unsigned sflags;
    prefetch_own(a->ns, a->key, 0); /* they arrive while the capture runs */
    int n = OT_STAGE_CALL(OT_ST_CAPTURE, capture(frames, &sflags, &src));
    uint32_t tid = ot_tid();
    prefetch_shared(a->device);

    OT_STAGE_BEGIN(tl);
    ot_lock_take();
    OT_STAGE_END(OT_ST_LOCK, tl);
    OT_STAGE_BEGIN(tr);
    int found;
    struct ot_rec *at = ot_live_probe(&S.live, a->ns, a->key, &found);
    if (OT_UNLIKELY(found))
        at = close_stale(at, a, tid, &found);
    /* Written straight into its live-set slot (into a local one when there is no memory for the slot). */
    struct ot_rec untracked, *r = OT_LIKELY(at != NULL) ? at : &untracked;
    uint64_t seq = next_seq(), t = ot_now_ns();
    /* Every field: an empty slot holds a freed record's stale ones. */
    r->key = a->key;
    r->size = a->size;
    r->seq = seq;
    r->time_ns = t;
    r->stack = OT_STAGE_CALL(OT_ST_INTERN, ot_stack_intern(src, n, sflags));
    r->tid = tid;
    r->device = (int16_t)a->device;
    r->cat = a->cat;
    r->ns = a->ns;
    r->api = a->api;
    r->flags = a->flags;
    r->refs = a->ns == OT_NS_VMM ? 1 : 0;
    r->maps = 0;
    r->ctx = a->ctx;
    if (OT_LIKELY(at != NULL)) {
        S.live.count++;
        struct trace_device *d = ot_devslot(a->device);
        /* Device memory (of a nonzero size) makes the peak nonzero, which says the device was seen
         * (record/view.c): only the other allocations read seen's line, which is not the counters'. */
        if (OT_UNLIKELY(!ot_category_is_device(a->cat) || !a->size) && !d->seen)
            d->seen = 1;
        if (OT_UNLIKELY(ot_peak_on_alloc(d, r)))
            pin_peak_markers(a->device, seq);
        if (a->cat == OT_CAT_ASYNC && a->device >= 0 && a->device < 64 && !(S.async_devices >> a->device & 1))
            S.async_devices |= 1ull << a->device;
    } else {
        S.untracked++;
    }
    emit(OT_EV_ALLOC, r, seq, t, NULL);
    near_note(a->device);
    OT_STAGE_END(OT_ST_RECORD_ALLOC, tr);
    ot_lock_give();
    return t;
}

/* ---- undo: frees are recorded before the real call (lib/intercept/hook_call.h says why) ---- */

/* Notes one change in u when its room is full; without memory for it, u says so and its undo will be
 * partial. */
static __attribute__((noinline)) void undo_grow_push(struct ot_undo *u, uint8_t kind, const struct ot_rec *r)
{
    unsigned cap = u->cap * 4;
    struct ot_undo_step *n = malloc(cap * sizeof *n);
    if (!n) {
        u->lost = 1;
        return;
    }
    memcpy(n, u->steps, u->n * sizeof *n);
    if (u->steps != u->inline_steps)
        free(u->steps);
    u->steps = n;
    u->cap = cap;
    u->steps[u->n++] = (struct ot_undo_step){kind, *r};
}

/* Notes one change in u (inline: every free notes one). */
static inline __attribute__((always_inline)) void undo_push(struct ot_undo *u, uint8_t kind, const struct ot_rec *r)
{
    if (!u)
        return;
    if (OT_UNLIKELY(u->n == u->cap)) {
        undo_grow_push(u, kind, r);
        return;
    }
    struct ot_undo_step *st = &u->steps[u->n++];
    st->kind = kind;
    st->rec = *r;
}

/* Closes r and notes it in u. */
static inline __attribute__((always_inline)) void close_undoable(struct ot_rec *r, uint16_t api, uint32_t tid,
                                                                 struct ot_undo *u)
{
    undo_push(u, OT_UNDO_CLOSED, r);
    close_rec(r, api, tid);
}

void ot_record_free(uint8_t ns, uint64_t key, uint16_t api, struct ot_undo *u)
{
    OT_STAGE_BEGIN(t);
    prefetch_own(ns, key, 1);
    prefetch_shared(ot_self.near.device);
    uint32_t tid = ot_tid();
    ot_lock_take();
    struct ot_rec *r = ot_live_find(&S.live, ns, key);
#ifdef OT_STAGE_CYCLES
    const int cross = r && r->tid != tid; /* its record's lines were last written on another core */
#endif
    if (OT_LIKELY(r != NULL)) {
        const int device = r->device;
        close_undoable(r, api, tid, u);
        near_note(device);
    } else {
        S.unknown_frees++;
    }
    ot_lock_give();
    OT_STAGE_END(OT_ST_RECORD_FREE, t);
#ifdef OT_STAGE_CYCLES
    if (cross)
        OT_STAGE_END(OT_ST_FREE_CROSS, t);
#endif
}

/* The driver refused a free recorded before the call: the memory is still allocated, and as the driver
 * still holds the address, nobody can have been given it since. The record goes back as it was (same
 * seq: in the peak set exactly when it was before), and its copy leaves the peak's retained set; an
 * ALLOC event tells the ring. */
static void unclose(const struct ot_rec *closed)
{
    if (!ot_live_find(&S.live, closed->ns, closed->key)) {
        struct trace_device *d = ot_devslot(closed->device);
        for (uint64_t i = d->nretained; i-- > 0;)
            if (d->retained[i].seq == closed->seq && d->retained[i].key == closed->key) {
                d->retained[i] = d->retained[--d->nretained];
                break;
            }
        uint64_t seq = next_seq(), now = ot_now_ns();
        if (ot_live_put(&S.live, closed)) {
            /* A new peak, if any, is set now: by this event, over everything live now. */
            struct ot_rec at = *closed;
            at.seq = seq;
            at.time_ns = now;
            ot_peak_on_alloc(d, &at);
        } else {
            S.untracked++;
        }
        emit(OT_EV_ALLOC, closed, seq, now, NULL);
    }
}

/* A removed VMM mapping goes back, with a MAP event for the ring's UNMAP. */
static void unmap_undo(const struct ot_rec *m)
{
    ot_live_put(&S.maps, m);
    struct ot_rec *r = ot_live_find(&S.live, OT_NS_VMM, m->seq);
    struct ot_rec ev = {.key = m->key, .size = m->size, .api = OT_API_cuMemMap, .cat = OT_CAT_VMM, .tid = ot_tid(),
                        .device = r ? r->device : -1};
    emit(OT_EV_MAP, &ev, next_seq(), ot_now_ns(), NULL);
}

/* Latest change first, so that a record closed by its last reference comes back before the reference. */
void ot_record_undo(struct ot_undo *u)
{
    int err = errno;
    ot_lock_take();
    for (unsigned i = u->n; i-- > 0;) {
        const struct ot_rec *r = &u->steps[i].rec;
        struct ot_rec *live = u->steps[i].kind == OT_UNDO_CLOSED || u->steps[i].kind == OT_UNDO_MAP
                                  ? NULL
                                  : ot_live_find(&S.live, OT_NS_VMM, r->key);
        switch (u->steps[i].kind) {
        case OT_UNDO_CLOSED: unclose(r); break;
        case OT_UNDO_MAP: unmap_undo(r); break;
        case OT_UNDO_REF: if (live) live->refs++; break;
        case OT_UNDO_MAPREF: if (live) live->maps++; break;
        }
    }
    ot_lock_give();
    if (u->lost)
        ot_log("no memory to undo a refused free in full; the live set may miss an allocation");
    errno = err;
}

void ot_undo_free(struct ot_undo *u)
{
    free(u->steps);
}

struct trace_failure ot_record_failure(const struct ot_alloc_req *a, int result)
{
    uint64_t frames[OT_MAX_FRAMES];
    const uint64_t *src;
    unsigned sflags;
    int n = capture(frames, &sflags, &src);
    uint32_t tid = ot_tid();

    ot_lock_take();
    struct ot_rec r = {
        .key = 0, .size = a->size, .time_ns = ot_now_ns(), .stack = ot_stack_intern(src, n, sflags),
        .tid = tid, .device = (int16_t)a->device, .cat = a->cat, .ns = a->ns, .api = a->api,
    };
    uint64_t seq = next_seq();
    emit(OT_EV_FAILED, &r, seq, r.time_ns, NULL);
    S.failure = (struct trace_failure){
        .valid = 1, .req = *a, .result = result, .time_ns = r.time_ns, .seq = seq, .tid = tid,
        .stack = r.stack,
    };
    S.failures++;
    const struct trace_failure mine = S.failure;
    ot_lock_give();
    return mine;
}

void ot_record_marker(const char *label)
{
    ot_record_marker_n(label, strnlen(label, OT_LABEL_MAX - 1));
}

void ot_record_marker_n(const char *label, size_t n)
{
    uint32_t tid = ot_tid();
    if (n > OT_LABEL_MAX - 1)
        n = OT_LABEL_MAX - 1;
    ot_lock_take();
    struct trace_marker *m = &S.markers[S.nmarkers % OT_MAX_MARKERS];
    m->seq = next_seq();
    m->time_ns = ot_now_ns();
    m->tid = tid;
    memcpy(m->label, label, n);
    m->label[n] = 0;
    S.nmarkers++;
    struct ot_rec r = {.api = OT_API_oomtrace_mark, .device = -1, .tid = tid};
    emit(OT_EV_MARKER, &r, m->seq, m->time_ns, m->label);
    ot_lock_give();
}

/* ---- VMM: physical memory lives while it has a reference or a mapping ---- */

static void vmm_maybe_free(struct ot_rec *r, uint16_t api, uint32_t tid, struct ot_undo *u)
{
    if (r->refs == 0 && r->maps == 0)
        close_undoable(r, api, tid, u);
}

/* One reference or mapping less (count is r's refs or maps; undo kind restores it), then free r when
 * it has neither. */
static void vmm_drop(struct ot_rec *r, uint32_t *count, uint8_t kind, uint16_t api, uint32_t tid, struct ot_undo *u)
{
    if (*count) {
        (*count)--;
        undo_push(u, kind, r);
    }
    vmm_maybe_free(r, api, tid, u);
}

void ot_vmm_retain(uint64_t handle)
{
    ot_lock_take();
    struct ot_rec *r = ot_live_find(&S.live, OT_NS_VMM, handle);
    if (r)
        r->refs++;
    ot_lock_give();
}

void ot_vmm_release(uint64_t handle, struct ot_undo *u)
{
    uint32_t tid = ot_tid();
    ot_lock_take();
    struct ot_rec *r = ot_live_find(&S.live, OT_NS_VMM, handle);
    if (r) {
        vmm_drop(r, &r->refs, OT_UNDO_REF, OT_API_cuMemRelease, tid, u);
    } else {
        S.unknown_frees++;
    }
    ot_lock_give();
}

void ot_vmm_map(uint64_t va, uint64_t size, uint64_t offset, uint64_t handle)
{
    uint32_t tid = ot_tid();
    ot_lock_take();
    struct ot_rec *r = ot_live_find(&S.live, OT_NS_VMM, handle);
    if (r) {
        r->maps++;
        /* Imported memory's size is first known here, from its mapping. */
        if (r->cat == OT_CAT_IMPORTED && (r->flags & OT_REC_SIZE_ESTIMATED) && size > r->size) {
            ot_devslot(r->device)->by_cat[OT_CAT_IMPORTED] += size - r->size;
            r->size = size;
        }
    }
    struct ot_rec m = {.key = va, .size = size, .seq = handle, .time_ns = offset, .ns = OT_NS_DEVPTR};
    struct ot_rec *old = ot_live_find(&S.maps, OT_NS_DEVPTR, va);
    if (old)
        ot_live_del(&S.maps, old);
    ot_live_put(&S.maps, &m);
    struct ot_rec ev = {.key = va, .size = size, .api = OT_API_cuMemMap, .cat = OT_CAT_VMM, .tid = tid,
                        .device = r ? r->device : -1};
    emit(OT_EV_MAP, &ev, next_seq(), ot_now_ns(), NULL);
    ot_lock_give();
}

static void unmap_one(uint64_t key, uint32_t tid, struct ot_undo *u)
{
    struct ot_rec *m = ot_live_find(&S.maps, OT_NS_DEVPTR, key);
    uint64_t handle = m->seq;
    undo_push(u, OT_UNDO_MAP, m);
    ot_live_del(&S.maps, m);
    struct ot_rec *r = ot_live_find(&S.live, OT_NS_VMM, handle);
    if (r) {
        vmm_drop(r, &r->maps, OT_UNDO_MAPREF, OT_API_cuMemUnmap, tid, u);
    }
}

/* Recorded before the real call, like every free. The driver unmaps whole mappings only: a range that
 * cuts one, or holds none, is refused and must change nothing, so the range is checked against the
 * recorded mappings first. One call may cover several mappings. The common case - mappings laid end to
 * end from va - is walked by lookups; only a range with gaps scans the whole table. */
void ot_vmm_unmap(uint64_t va, uint64_t size, struct ot_undo *u)
{
    uint32_t tid = ot_tid();
    uint64_t end = va + size;
    if (!size || end < va)
        return;
    ot_lock_take();
    uint64_t at = va, inside = 0;
    for (const struct ot_rec *m; at < end && (m = ot_live_find(&S.maps, OT_NS_DEVPTR, at)) != NULL; at += m->size) {
        if (at + m->size > end)
            goto refused; /* cuts a mapping */
        inside++;
    }
    const struct ot_liveset *ms = &S.maps;
    if (at < end) {
        inside = 0;
        for (uint64_t i = 0; ms->slots && i <= ms->mask; i++) {
            const struct ot_rec *m = &ms->slots[i];
            if (!m->size || m->key >= end || m->key + m->size <= va)
                continue;
            if (m->key < va || m->key + m->size > end)
                goto refused;
            inside++;
        }
    }
    if (!inside)
        goto refused;
    struct ot_rec ev = {.key = va, .size = size, .api = OT_API_cuMemUnmap, .cat = OT_CAT_VMM, .tid = tid,
                        .device = -1};
    emit(OT_EV_UNMAP, &ev, next_seq(), ot_now_ns(), NULL);
    if (at >= end) {
        for (at = va; at < end;) {
            uint64_t msize = ot_live_find(&S.maps, OT_NS_DEVPTR, at)->size;
            unmap_one(at, tid, u);
            at += msize;
        }
    } else {
        /* Removing entries moves others in the table, so they are collected first, a batch at a time. */
        while (inside) {
            uint64_t keys[64];
            unsigned n = 0;
            for (uint64_t i = 0; i <= ms->mask && n < 64; i++) {
                const struct ot_rec *m = &ms->slots[i];
                if (m->size && m->key >= va && m->key < end)
                    keys[n++] = m->key;
            }
            for (unsigned k = 0; k < n; k++)
                unmap_one(keys[k], tid, u);
            inside -= n;
        }
    }
refused:
    ot_lock_give();
}

void ot_pool_seen(uint64_t pool, int device)
{
    ot_lock_take();
    int i;
    for (i = 0; i < S.npools && S.pools[i].handle != pool; i++)
        ;
    if (i == S.npools && S.npools < OT_MAX_POOLS)
        S.pools[S.npools++] = (struct trace_pool){pool, device};
    ot_lock_give();
}

/* ---- contexts: a context's end frees every allocation made in it ---- */

/* Notes one freed allocation in e's list; without memory for it, the list is cut (nkept < nfreed). */
static void ctx_freed_push(struct ot_ctx_end *e, const struct ot_rec *r)
{
    e->nfreed++;
    if (e->nkept < e->nfreed - 1 || e->nkept >= OT_CTX_FREED_KEEP)
        return;
    if (e->nkept == e->cap) {
        uint64_t cap = e->cap ? e->cap * 2 : 64;
        struct ot_ctx_freed *n = realloc(e->v, cap * sizeof *n);
        if (!n)
            return;
        e->v = n;
        e->cap = cap;
    }
    e->v[e->nkept++] = (struct ot_ctx_freed){r->key, r->size, r->device, r->cat, r->ns};
}

/* One event however many allocations go: a reset under a live set of 100k allocations must not push
 * 100k events through the ring. The records are closed in place: a backward shift only moves records
 * into the slot just emptied (checked again) or into slots already passed, which hold no record of ctx. */
void ot_record_ctx_end(uint64_t ctx, int device, uint16_t api)
{
    uint64_t frames[OT_MAX_FRAMES];
    const uint64_t *src;
    unsigned sflags;
    int n = capture(frames, &sflags, &src);
    uint32_t tid = ot_tid();

    ot_lock_take();
    uint32_t stack = ot_stack_intern(src, n, sflags);
    struct ot_ctx_end *e = &S.ctx_ends[S.nctx_ends % OT_MAX_CTX_ENDS];
    free(e->v); /* the oldest list makes room */
    *e = (struct ot_ctx_end){0};
    uint64_t bytes = 0;
    struct ot_liveset *s = &S.live;
    for (uint64_t i = 0; ctx && s->slots && i <= s->mask;) {
        struct ot_rec *r = &s->slots[i];
        if (!r->size || r->ctx != ctx) {
            i++;
            continue;
        }
        if (device < 0 && r->device >= 0)
            device = r->device;
        if (ot_category_is_device(r->cat))
            bytes += r->size;
        ctx_freed_push(e, r);
        ot_peak_on_free(ot_devslot(r->device), r);
        ot_live_del(s, r);
    }
    e->seq = next_seq();
    S.nctx_ends++;
    emit_ev(OT_EV_CONTEXT_END, e->seq, ot_now_ns(), NULL, ctx, bytes, tid, stack, (int16_t)device, api, 0);
    ot_lock_give();
}

/* The device's used memory before this process's first tracked allocation on it: what the context,
 * modules and other processes already held. Taken once, before the real call: the first caller claims it
 * and asks the driver. */
uint64_t ot_baseline_claimed;

int ot_record_baseline_claim(int device)
{
    struct trace_device *d = ot_devslot(device);
    int expect = 0;
    /* Read before the exchange: a locked exchange on a line that all allocating threads share costs more
     * than the rest of the question. */
    int mine = device >= 0 && __atomic_load_n(&d->baseline_state, __ATOMIC_ACQUIRE) == 0 &&
               __atomic_compare_exchange_n(&d->baseline_state, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    /* Claimed now, by this thread or another: later allocations need not ask (ot_record_baseline_open). */
    if (device >= 0 && device < 64)
        __atomic_fetch_or(&ot_baseline_claimed, 1ull << device, __ATOMIC_RELAXED);
    return mine;
}

void ot_record_baseline_set(int device, int known, uint64_t used)
{
    struct trace_device *d = ot_devslot(device);
    if (known)
        d->baseline_used = used;
    __atomic_store_n(&d->baseline_state, known ? 2 : 3, __ATOMIC_RELEASE);
}

void ot_record_fork_prepare(void)
{
    ot_lock_take();
}

void ot_record_fork_parent(void)
{
    ot_lock_give();
}

/* Empties the recorder. In a forked child (forked = 1): the parent's allocations are not the child's (a
 * CUDA context does not survive fork), so the child starts empty and writes its own snapshots; it is the
 * only thread, and the lock may have been copied held. Stacks stay valid: same code. */
void ot_record_reset(int forked)
{
    if (forked)
        ot_lock_forked();
    else
        ot_lock_take();
    ot_live_clear(&S.live);
    ot_live_clear(&S.maps);
    for (int i = 0; i < OT_MAX_DEVICES; i++)
        ot_peak_reset(&S.dev[i]);
    ot_peak_reset(&S.host);
    __atomic_store_n(&ot_baseline_claimed, 0, __ATOMIC_RELAXED); /* the baselines are taken again */
    /* A forked child's contexts are new ones, which may be given the handles the parent's threads cached. */
    __atomic_fetch_add(&ot_ctx_gen, 1, __ATOMIC_RELAXED);
    ot_ring_reset(forked);
    S.seq = S.unknown_frees = S.untracked = S.nmarkers = S.failures = 0;
    memset(S.peak_markers, 0, sizeof S.peak_markers);
    memset(S.peak_markers_at, 0, sizeof S.peak_markers_at);
    S.failure.valid = 0;
    S.npools = 0;
    S.async_devices = 0;
    for (int i = 0; i < OT_MAX_CTX_ENDS; i++)
        free(S.ctx_ends[i].v);
    memset(S.ctx_ends, 0, sizeof S.ctx_ends);
    S.nctx_ends = 0;
    if (!forked)
        ot_lock_give();
}
