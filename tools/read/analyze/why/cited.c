/* Which markers the statements name: a report marks them (the HTML timeline always labels them). */
#include "analyze/why/item.h"

#include <string.h>

/* A statement names a marker by its seq, in a number whose key ends in "seq" (marker_seq, from_seq,
 * to_marker_seq ...). Markers and events share one seq space, so a number that equals a marker's seq is
 * that marker; other seqs (the failure's, an allocation's) match no marker. */
bool ot_why_cites_marker(const struct ot_why *w, uint64_t seq)
{
    for (size_t i = 0; w && i < w->n; i++)
        for (size_t k = 0; k < w->v[i].nnum; k++) {
            const struct ot_why_number *x = &w->v[i].num[k];
            size_t n = x->key ? strlen(x->key) : 0;
            if (x->kind == OT_WHY_U64 && x->u == seq && n >= 3 && !strcmp(x->key + n - 3, "seq"))
                return true;
        }
    return false;
}
