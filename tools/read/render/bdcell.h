/* The "What held the memory" table, the same in markdown and HTML: per category (with its colour in HTML),
 * bytes and share at the failure (or the snapshot) and at the peak; under optimizer state and workspaces their
 * split, at the first known moment. */
#ifndef OT_READ_BDCELL_H
#define OT_READ_BDCELL_H

#include "analyze/breakdown.h"
#include "render/doc.h"

void ot_bd_table(struct ot_doc *d, const struct ot_breakdown *b);

/* What each column's shares are of, with the bytes: "shares at the failure of the device's 1016 MiB used;
 * at the peak of the 616 MiB counted then, as the device's other memory was not measured at the peak". A
 * share always names its whole: the two columns' wholes differ. */
void ot_bd_wholes(char *buf, size_t len, const struct ot_breakdown *b);

#endif
