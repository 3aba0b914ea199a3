/* The breakdown's program row split by call site (breakdown.c counts the bytes; this names the sites).
 * Inside analyze/ only. */
#ifndef OT_READ_BREAKDOWN_SITES_H
#define OT_READ_BREAKDOWN_SITES_H

#include "analyze/analysis.h"
#include "analyze/breakdown.h"

/* The program row's bytes per stack, indexed as breakdown.c's cache of stack guesses. */
struct ot_bd_site_bytes {
    uint64_t *v;
    size_t cap;
};

int ot_bd_site_add(struct ot_bd_site_bytes *sb, size_t k, uint64_t bytes); /* -1: out of memory */
/* Splits m's program row by the call sites of sb (ids[k]: the stack of sb->v[k]), naming each site as it is
 * told apart from the sites of sb and of other (the other moment's, or NULL); -1: out of memory. */
int ot_bd_site_parts(const struct ot_analysis *a, const uint64_t *ids, size_t nids, struct ot_bd_moment *m,
                     const struct ot_bd_site_bytes *sb, const struct ot_bd_site_bytes *other);
/* Adds bytes to m's part (row, label), or a new part; label must outlive m. */
void ot_bd_add_part(struct ot_bd_moment *m, enum ot_bd_row row, struct ot_str label, uint64_t bytes);

#endif
