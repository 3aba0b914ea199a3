/* The "What held the memory" table, the same in markdown and HTML: per category (with its colour in HTML),
 * bytes and share at the failure (or the snapshot) and at the peak; under optimizer state and workspaces their
 * split, at the first known moment. */
#ifndef OT_READ_BDCELL_H
#define OT_READ_BDCELL_H

#include "analyze/breakdown.h"
#include "render/doc.h"

void ot_bd_table(struct ot_doc *d, const struct ot_breakdown *b);

#endif
