/* One cell of the "What held the memory" table, as markdown and HTML print it: the row's bytes at a moment
 * and its share of the moment's whole, as text. */
#ifndef OT_READ_BDCELL_H
#define OT_READ_BDCELL_H

#include "analyze/breakdown.h"

/* bytes: "" when the moment is unknown, "not measured" when the moment has no measure of the row, else
 * the size ("40.0 GiB"); share: "28.8%" when there is a whole to share, else "". */
void ot_bd_cell_text(const struct ot_bd_moment *m, enum ot_bd_row r, uint64_t bytes, char bytes_out[32], char share_out[16]);

#endif
