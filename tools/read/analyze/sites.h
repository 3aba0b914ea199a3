/* Call sites: allocation records merged by stack, largest first. This is the table that answers
 * "who holds the memory". */
#ifndef OT_READ_SITES_H
#define OT_READ_SITES_H

#include "model/snapshot.h"

struct ot_site {
    uint64_t stack_id;
    uint64_t bytes, count;
};

struct ot_sites {
    struct ot_site *v; /* sorted: bytes desc, then count desc, then stack_id asc (deterministic) */
    size_t n;
    uint64_t bytes, count; /* totals over the records kept */
};

/* Which records a table counts. */
struct ot_site_filter {
    bool any_device;        /* else only records on `device` */
    int64_t device;
    bool device_memory;     /* categories that count toward a device (1-5) */
    uint64_t category;      /* else: only this category */
};

int ot_sites_build(const struct ot_record *recs, size_t n, const struct ot_site_filter *f, struct ot_sites *out);
void ot_sites_free(struct ot_sites *s);

#endif
