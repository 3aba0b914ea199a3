#include "model/addrmap.h"

#include <stdlib.h>
#include <string.h>

static size_t slot_of(uint64_t x, size_t mask)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (size_t)x & mask;
}

static void put(struct ot_addrmap *m, uint64_t key, struct ot_addrval val)
{
    size_t mask = m->cap - 1;
    for (size_t i = slot_of(key, mask);; i = (i + 1) & mask) {
        if (!m->used[i]) {
            m->used[i] = 1;
            m->keys[i] = key;
            m->vals[i] = val;
            m->count++;
            return;
        }
        if (m->keys[i] == key) {
            m->vals[i] = val;
            return;
        }
    }
}

static bool grow(struct ot_addrmap *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    if (ncap > ((size_t)1 << 40))
        return false;
    struct ot_addrmap n = {0};
    n.keys = malloc(ncap * sizeof(*n.keys));
    n.vals = malloc(ncap * sizeof(*n.vals));
    n.used = calloc(ncap, 1);
    if (!n.keys || !n.vals || !n.used) {
        free(n.keys);
        free(n.vals);
        free(n.used);
        return false;
    }
    n.cap = ncap;
    for (size_t i = 0; i < m->cap; i++)
        if (m->used[i])
            put(&n, m->keys[i], m->vals[i]);
    n.oom = m->oom;
    ot_addrmap_free(m);
    *m = n;
    return true;
}

void ot_addrmap_set(struct ot_addrmap *m, uint64_t key, struct ot_addrval val)
{
    if ((m->count + 1) * 4 > m->cap * 3 && !grow(m)) {
        m->oom = true;
        return;
    }
    put(m, key, val);
}

static size_t find(const struct ot_addrmap *m, uint64_t key)
{
    if (!m->cap)
        return SIZE_MAX;
    size_t mask = m->cap - 1;
    for (size_t i = slot_of(key, mask);; i = (i + 1) & mask) {
        if (!m->used[i])
            return SIZE_MAX;
        if (m->keys[i] == key)
            return i;
    }
}

bool ot_addrmap_get(const struct ot_addrmap *m, uint64_t key, struct ot_addrval *val)
{
    size_t i = find(m, key);
    if (i == SIZE_MAX)
        return false;
    *val = m->vals[i];
    return true;
}

bool ot_addrmap_take(struct ot_addrmap *m, uint64_t key, struct ot_addrval *val)
{
    size_t i = find(m, key);
    if (i == SIZE_MAX)
        return false;
    *val = m->vals[i];
    /* Backward-shift deletion: move later members of the probe run into the hole, so lookups never
     * need tombstones. */
    size_t mask = m->cap - 1, hole = i;
    for (size_t j = (i + 1) & mask; m->used[j]; j = (j + 1) & mask) {
        size_t home = slot_of(m->keys[j], mask);
        /* j may move to hole when its home is not in (hole, j], cyclically. */
        bool movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
        if (movable) {
            m->keys[hole] = m->keys[j];
            m->vals[hole] = m->vals[j];
            hole = j;
        }
    }
    m->used[hole] = 0;
    m->count--;
    return true;
}

void ot_addrmap_free(struct ot_addrmap *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof(*m));
}
