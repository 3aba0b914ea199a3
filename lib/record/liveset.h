/* The live set (liveset.c): every allocation not yet freed. The lookups and the common delete are inline:
 * every event does one of each, and a call costs about what the probe itself does. Callers hold ot_lock. */
#ifndef OOMTRACE_LIVESET_H
#define OOMTRACE_LIVESET_H
#include <stddef.h>

#include "common/defs.h"
#include "record/rec.h"

struct ot_liveset {
    struct ot_rec *slots; /* size == 0 marks an empty slot: the driver never hands out 0 bytes; an empty
                           * slot's other fields are stale, never read */
    uint64_t mask;
    uint64_t count;
};

static inline uint64_t ot_live_slot_of(const struct ot_liveset *s, uint8_t ns, uint64_t key)
{
    uint64_t h = (key ^ ((uint64_t)ns << 61)) * 0x9E3779B97F4A7C15ull;
    return (h >> 20) & s->mask;
}

static inline struct ot_rec *ot_live_find(struct ot_liveset *s, uint8_t ns, uint64_t key)
{
    if (OT_UNLIKELY(!s->slots))
        return NULL;
    for (uint64_t i = ot_live_slot_of(s, ns, key);; i = (i + 1) & s->mask) {
        struct ot_rec *r = &s->slots[i];
        if (!r->size)
            return NULL;
        if (r->key == key && r->ns == ns)
            return r;
    }
}

struct ot_rec *ot_live_probe_grow(struct ot_liveset *s, uint8_t ns, uint64_t key, int *found);
/* One probe for an allocation: the record of (ns, key) when there is one (*found = 1), else the empty slot
 * where it goes (*found = 0), with room made first; an allocation used to look the key up (a stale
 * record) and then probe again to insert. NULL when there is no memory for the room (the key was still
 * looked up: *found says whether it is there). The caller fills an empty slot and counts it (count++). */
static inline struct ot_rec *ot_live_probe(struct ot_liveset *s, uint8_t ns, uint64_t key, int *found)
{
    if (OT_UNLIKELY(!s->slots || (s->count + 1) * 4 > (s->mask + 1) * 3))
        return ot_live_probe_grow(s, ns, key, found);
    for (uint64_t i = ot_live_slot_of(s, ns, key);; i = (i + 1) & s->mask) {
        struct ot_rec *r = &s->slots[i];
        if (!r->size) {
            *found = 0;
            return r;
        }
        if (r->key == key && r->ns == ns) {
            *found = 1;
            return r;
        }
    }
}
struct ot_rec *ot_live_put(struct ot_liveset *s, const struct ot_rec *r);
void ot_live_del_shift(struct ot_liveset *s, struct ot_rec *r);
/* Removes r. When the next slot is empty nothing moves back (the common case in a sparse table); else the
 * backward shift (liveset.c). */
static inline void ot_live_del(struct ot_liveset *s, struct ot_rec *r)
{
    const struct ot_rec *next = r + 1 == s->slots + s->mask + 1 ? s->slots : r + 1;
    if (OT_LIKELY(!next->size)) {
        r->size = 0;
        s->count--;
        return;
    }
    ot_live_del_shift(s, r);
}
void ot_live_clear(struct ot_liveset *s);
/* The process records often: s's table, and every table s grows into, moves onto 2 MiB pages
 * (common/tables.h). Once for s, until ot_live_clear(s); a call after the first returns at once. */
void ot_live_hot(struct ot_liveset *s);
#endif
