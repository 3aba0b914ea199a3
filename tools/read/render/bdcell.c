#include "render/bdcell.h"

#include <stdio.h>

void ot_bd_cell_text(const struct ot_bd_moment *m, enum ot_bd_row r, uint64_t bytes, char bytes_out[32], char share_out[16])
{
    bytes_out[0] = share_out[0] = 0;
    if (!m->known)
        return;
    if (!m->measured[r]) {
        snprintf(bytes_out, 32, "not measured");
        return;
    }
    ot_fmt_bytes(bytes_out, bytes);
    if (m->whole)
        snprintf(share_out, 16, "%.1f%%", 100.0 * (double)bytes / (double)m->whole);
}
