/* fakecuda: the records' hash map: one record per live object, keyed by its address or handle. */
#include "fakecuda.h"

/* ---------------------------------------------------------------------------------------------- */
/* Hash map of records                                                                              */

static size_t map_slot(const struct map *m, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - m->bits));
}

static int map_grow(struct map *m)
{
    unsigned bits = m->bits ? m->bits + 1 : 8;
    size_t nb = (size_t)1 << bits;
    struct rec **b = calloc(nb, sizeof *b);
    if (!b)
        return -1;
    struct map nm = {b, bits, m->n};
    for (size_t i = 0; m->b && i < ((size_t)1 << m->bits); i++) {
        struct rec *r = m->b[i], *nx;
        for (; r; r = nx) {
            nx = r->next;
            size_t s = map_slot(&nm, r->key);
            r->next = b[s];
            b[s] = r;
        }
    }
    free(m->b);
    *m = nm;
    return 0;
}

int map_put(struct map *m, struct rec *r)
{
    /* A failed grow is fine while a table exists: chains just get longer. */
    if ((!m->b || m->n >= ((size_t)1 << m->bits)) && map_grow(m) && !m->b)
        return -1;
    size_t s = map_slot(m, r->key);
    r->next = m->b[s];
    m->b[s] = r;
    m->n++;
    return 0;
}

struct rec *map_get(const struct map *m, uint64_t key)
{
    if (!m->b)
        return NULL;
    for (struct rec *r = m->b[map_slot(m, key)]; r; r = r->next)
        if (r->key == key)
            return r;
    return NULL;
}

void map_del(struct map *m, struct rec *r)
{
    struct rec **pp = &m->b[map_slot(m, r->key)];
    while (*pp != r)
        pp = &(*pp)->next;
    *pp = r->next;
    m->n--;
}

/* Calls fn on every record until it returns nonzero; returns that record. */
struct rec *map_find(const struct map *m, int (*fn)(const struct rec *, const void *), const void *arg)
{
    for (size_t i = 0; m->b && i < ((size_t)1 << m->bits); i++)
        for (struct rec *r = m->b[i]; r; r = r->next)
            if (fn(r, arg))
                return r;
    return NULL;
}

/* Unlinks every record fn accepts; returns them chained by next. */
struct rec *map_take_all(struct map *m, int (*fn)(const struct rec *, const void *), const void *arg)
{
    struct rec *taken = NULL;
    for (size_t i = 0; m->b && i < ((size_t)1 << m->bits); i++)
        for (struct rec **pp = &m->b[i]; *pp;) {
            struct rec *r = *pp;
            if (!fn(r, arg)) {
                pp = &r->next;
                continue;
            }
            *pp = r->next;
            m->n--;
            r->next = taken;
            taken = r;
        }
    return taken;
}

struct rec *rec_new(enum rec_kind kind, uint64_t key, int dev, size_t size)
{
    struct rec *r = calloc(1, sizeof *r);
    if (r) {
        r->kind = kind;
        r->key = key;
        r->dev = dev;
        r->size = size;
        /* Pool memory and cuMemCreate's belong to no context: a context's end leaves them (the driver's
         * cuCtxDestroy documentation says so). */
        if (kind != R_POOLMEM && kind != R_PHYS)
            r->ctx = cur_ctx();
    }
    return r;
}

