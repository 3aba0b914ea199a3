/* The live set: every allocation not yet freed, keyed by (namespace, address or handle). It lives
 * outside the event ring, so it is exact however many events the ring drops. Open addressing with
 * linear probing and backward-shift deletion: no tombstones, so a long run of allocations and frees
 * never degrades lookups. Callers hold ot_lock. */
#include <string.h>

#include "common/tables.h"
#include "record/liveset.h"
#include "record/rec.h"

/* The live set that was made hot (ot_live_hot): its table is on 2 MiB pages, and each table it grows into goes
 * there at once. Only the allocations' set is made hot (not the VMM mappings'), and clearing it (a forked
 * child's reset) makes it cold again. */
static const struct ot_liveset *hot;

/* The table is probed at random (each allocation and free, and the snapshot's seq-order walk): on 4 KiB
 * pages nearly every probe is also a TLB miss once the program's own work has run (common/tables.h). */
static int resize(struct ot_liveset *s, uint64_t cap)
{
    struct ot_rec *slots = ot_table_map(cap * sizeof *slots);
    if (!slots)
        return -1;
    if (s == hot || cap * sizeof *slots >= OT_TABLE_ALIGN)
        ot_table_hot(slots, cap * sizeof *slots);
    struct ot_liveset n = {.slots = slots, .mask = cap - 1, .count = 0};
    for (uint64_t i = 0; s->slots && i <= s->mask; i++)
        if (s->slots[i].size)
            ot_live_put(&n, &s->slots[i]);
    if (s->slots)
        ot_table_unmap(s->slots, (s->mask + 1) * sizeof *s->slots);
    *s = n;
    return 0;
}

void ot_live_hot(struct ot_liveset *s)
{
    if (hot == s)
        return;
    hot = s;
    if (s->slots)
        ot_table_hot(s->slots, (s->mask + 1) * sizeof *s->slots);
}

/* ot_live_probe when the table must grow first (or has no slots yet). NULL when there is no memory for the
 * room (the key was still looked up: *found says whether it is there). */
struct ot_rec *ot_live_probe_grow(struct ot_liveset *s, uint8_t ns, uint64_t key, int *found)
{
    if (resize(s, s->slots ? (s->mask + 1) * 2 : 1024) != 0) {
        struct ot_rec *r = ot_live_find(s, ns, key);
        *found = r != NULL;
        return r;
    }
    return ot_live_probe(s, ns, key, found);
}

/* Inserts r (size must be nonzero); the caller has checked that the key is absent. */
struct ot_rec *ot_live_put(struct ot_liveset *s, const struct ot_rec *r)
{
    if (!s->slots || (s->count + 1) * 4 > (s->mask + 1) * 3) {
        if (resize(s, s->slots ? (s->mask + 1) * 2 : 1024) != 0)
            return NULL;
    }
    uint64_t i = ot_live_slot_of(s, r->ns, r->key);
    while (s->slots[i].size)
        i = (i + 1) & s->mask;
    s->slots[i] = *r;
    s->count++;
    return &s->slots[i];
}

void ot_live_del_shift(struct ot_liveset *s, struct ot_rec *r)
{
    uint64_t i = (uint64_t)(r - s->slots);
    for (uint64_t j = (i + 1) & s->mask;; j = (j + 1) & s->mask) {
        struct ot_rec *q = &s->slots[j];
        if (!q->size)
            break;
        uint64_t home = ot_live_slot_of(s, q->ns, q->key);
        /* q may move back to i when i lies cyclically in [home, j). */
        if (((j - home) & s->mask) >= ((j - i) & s->mask)) {
            s->slots[i] = *q;
            i = j;
        }
    }
    s->slots[i].size = 0; /* empty: nothing reads the rest of an empty slot */
    s->count--;
}

void ot_live_clear(struct ot_liveset *s)
{
    if (hot == s)
        hot = NULL;
    if (s->slots)
        ot_table_unmap(s->slots, (s->mask + 1) * sizeof *s->slots);
    memset(s, 0, sizeof *s);
}
