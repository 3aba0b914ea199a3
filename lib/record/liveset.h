#ifndef OOMTRACE_LIVESET_H
#define OOMTRACE_LIVESET_H
#include "record/rec.h"

struct ot_liveset {
    struct ot_rec *slots; /* size == 0 marks an empty slot: the driver never hands out 0 bytes */
    uint64_t mask;
    uint64_t count;
};

struct ot_rec *ot_live_find(struct ot_liveset *s, uint8_t ns, uint64_t key);
struct ot_rec *ot_live_probe(struct ot_liveset *s, uint8_t ns, uint64_t key, int *found);
/* Fills the empty slot ot_live_probe gave (*found = 0) with r. */
static inline void ot_live_fill(struct ot_liveset *s, struct ot_rec *slot, const struct ot_rec *r)
{
    *slot = *r;
    s->count++;
}
struct ot_rec *ot_live_put(struct ot_liveset *s, const struct ot_rec *r);
void ot_live_del(struct ot_liveset *s, struct ot_rec *r);
void ot_live_clear(struct ot_liveset *s);
#endif
