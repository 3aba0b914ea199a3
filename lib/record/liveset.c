/* The live set: every allocation not yet freed, keyed by (namespace, address or handle). It lives
 * outside the event ring, so it is exact however many events the ring drops. Open addressing with
 * linear probing and backward-shift deletion: no tombstones, so a long run of allocations and frees
 * never degrades lookups. Callers hold ot_lock. */
#include <string.h>
#include <sys/mman.h>

#include "record/liveset.h"
#include "record/rec.h"

static uint64_t slot_of(const struct ot_liveset *s, uint8_t ns, uint64_t key)
{
    uint64_t h = (key ^ ((uint64_t)ns << 61)) * 0x9E3779B97F4A7C15ull;
    return (h >> 20) & s->mask;
}

static int resize(struct ot_liveset *s, uint64_t cap)
{
    struct ot_rec *slots = mmap(NULL, cap * sizeof *slots, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (slots == MAP_FAILED)
        return -1;
    /* A big table is probed at random (each free, and the snapshot's seq-order walk): on 4 KiB pages
     * nearly every probe is also a TLB miss. Only a hint; where THP is off nothing changes. */
    if (cap * sizeof *slots >= (2u << 20))
        madvise(slots, cap * sizeof *slots, MADV_HUGEPAGE);
    struct ot_liveset n = {.slots = slots, .mask = cap - 1, .count = 0};
    for (uint64_t i = 0; s->slots && i <= s->mask; i++)
        if (s->slots[i].size)
            ot_live_put(&n, &s->slots[i]);
    if (s->slots)
        munmap(s->slots, (s->mask + 1) * sizeof *s->slots);
    *s = n;
    return 0;
}

struct ot_rec *ot_live_find(struct ot_liveset *s, uint8_t ns, uint64_t key)
{
    if (!s->slots)
        return NULL;
    for (uint64_t i = slot_of(s, ns, key);; i = (i + 1) & s->mask) {
        struct ot_rec *r = &s->slots[i];
        if (!r->size)
            return NULL;
        if (r->key == key && r->ns == ns)
            return r;
    }
}

/* One probe for an allocation: the record of (ns, key) when there is one (*found = 1), else the empty slot
 * where it goes (*found = 0), with room made first; an allocation used to look the key up (a stale
 * record) and then probe again to insert. NULL when there is no memory for the room (the key was still
 * looked up: *found says whether it is there). */
struct ot_rec *ot_live_probe(struct ot_liveset *s, uint8_t ns, uint64_t key, int *found)
{
    if (!s->slots || (s->count + 1) * 4 > (s->mask + 1) * 3) {
        if (resize(s, s->slots ? (s->mask + 1) * 2 : 1024) != 0) {
            struct ot_rec *r = ot_live_find(s, ns, key);
            *found = r != NULL;
            return r;
        }
    }
    for (uint64_t i = slot_of(s, ns, key);; i = (i + 1) & s->mask) {
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

/* Inserts r (size must be nonzero); the caller has checked that the key is absent. */
struct ot_rec *ot_live_put(struct ot_liveset *s, const struct ot_rec *r)
{
    if (!s->slots || (s->count + 1) * 4 > (s->mask + 1) * 3) {
        if (resize(s, s->slots ? (s->mask + 1) * 2 : 1024) != 0)
            return NULL;
    }
    uint64_t i = slot_of(s, r->ns, r->key);
    while (s->slots[i].size)
        i = (i + 1) & s->mask;
    s->slots[i] = *r;
    s->count++;
    return &s->slots[i];
}

void ot_live_del(struct ot_liveset *s, struct ot_rec *r)
{
    uint64_t i = (uint64_t)(r - s->slots);
    for (uint64_t j = (i + 1) & s->mask;; j = (j + 1) & s->mask) {
        struct ot_rec *q = &s->slots[j];
        if (!q->size)
            break;
        uint64_t home = slot_of(s, q->ns, q->key);
        /* q may move back to i when i lies cyclically in [home, j). */
        if (((j - home) & s->mask) >= ((j - i) & s->mask)) {
            s->slots[i] = *q;
            i = j;
        }
    }
    memset(&s->slots[i], 0, sizeof s->slots[i]);
    s->count--;
}

void ot_live_clear(struct ot_liveset *s)
{
    if (s->slots)
        munmap(s->slots, (s->mask + 1) * sizeof *s->slots);
    memset(s, 0, sizeof *s);
}
