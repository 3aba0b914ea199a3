/* Live allocations by address while the ring is replayed: address -> what the replay keeps of the
 * allocation (an id of its choosing: a stack id, a series, a site; and the allocation's size), with
 * overwrite and delete (util.h's map only inserts), so memory follows the number of live allocations,
 * not the number of addresses ever seen. */
#ifndef OT_READ_ADDRMAP_H
#define OT_READ_ADDRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ot_addrval {
    uint64_t id, size;
};

struct ot_addrmap {
    uint64_t *keys;
    struct ot_addrval *vals;
    uint8_t *used;
    size_t cap, count; /* cap: a power of two, or 0 */
    bool oom;          /* a set was dropped for lack of memory */
};

void ot_addrmap_set(struct ot_addrmap *m, uint64_t key, struct ot_addrval val);
bool ot_addrmap_get(const struct ot_addrmap *m, uint64_t key, struct ot_addrval *val);
/* Removes key; true (with its value) when it was there. */
bool ot_addrmap_take(struct ot_addrmap *m, uint64_t key, struct ot_addrval *val);
void ot_addrmap_free(struct ot_addrmap *m);

#endif
