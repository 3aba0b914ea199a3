/* Call sites: allocation records merged by stack, largest first. This is the table that answers
 * "who holds the memory". */
#ifndef OT_READ_SITES_H
#define OT_READ_SITES_H

#include "model/snapshot.h"

struct ot_site {
    uint64_t stack_id;
    uint64_t bytes, count;
};

/* Sites that read as one row (sitegroups.c): those whose innermost frame of the program's own code
 * (userline.h) is the same line, whatever library lines and native paths lie below it; without a user
 * frame, those whose headline is the same named native frame. A site with neither is a group alone. */
enum ot_group_key { OT_GROUP_SITE, OT_GROUP_USER_LINE, OT_GROUP_NATIVE_FRAME };

struct ot_site_group {
    enum ot_group_key key;
    const struct ot_frame *line; /* the shared frame (the resolver's); NULL for OT_GROUP_SITE */
    uint64_t bytes, count;       /* sums over the members */
    size_t first, n;             /* members: ot_sites.member[first .. first + n), largest first */
};

struct ot_sites {
    struct ot_site *v; /* sorted: bytes desc, then count desc, then stack_id asc (deterministic) */
    size_t n;
    uint64_t bytes, count; /* totals over the records kept */
    /* After ot_sites_group: groups sorted as v is (bytes, count, then their largest member's place). */
    size_t ngroups;
    struct ot_site_group *groups;
    size_t *member; /* indexes into v, n of them */
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

struct ot_resolver;
/* Fills groups and member (sitegroups.c). -1 only when out of memory (the table is then ungrouped:
 * ngroups 0). */
int ot_sites_group(struct ot_sites *t, struct ot_resolver *res, const struct ot_snapshot *s);

#endif
