#include "render/bdcell.h"

#include <stdio.h>

/* A row's bytes and share at a moment: blank when the moment is unknown, "not measured" when the moment has no
 * measure of the row, the share only when there is a whole. */
static void cells(struct ot_doc *d, const struct ot_bd_moment *m, enum ot_bd_row r, uint64_t bytes)
{
    char by[32] = "", sh[16] = "";
    if (m && m->known && !m->measured[r])
        snprintf(by, sizeof(by), "not measured");
    else if (m && m->known) {
        ot_fmt_bytes(by, bytes);
        if (m->whole)
            snprintf(sh, sizeof(sh), "%.1f%%", 100.0 * (double)bytes / (double)m->whole);
    }
    ot_doc_cell(d);
    ot_doc_printf(d, "%s", by);
    ot_doc_cell_end(d);
    ot_doc_cell(d);
    ot_doc_printf(d, "%s", sh);
    ot_doc_cell_end(d);
}

void ot_bd_table(struct ot_doc *d, const struct ot_breakdown *b)
{
    const char *heads[] = {"Category", b->at_failure ? "At the failure" : "At the snapshot", "Share", "At the peak",
                           "Share"};
    ot_doc_table(d, heads, "lrrrr");
    for (int r = 0; r < OT_BD_NROWS; r++) {
        if (!b->now.bytes[r] && !b->peak.bytes[r])
            continue;
        char sw[16];
        snprintf(sw, sizeof(sw), "bd%d", r);
        ot_doc_row(d);
        ot_doc_cell(d);
        ot_doc_swatch(d, sw);
        ot_doc_printf(d, "%s%s", ot_bd_row_name(b, (enum ot_bd_row)r),
                      b->now.inferred[r] || b->peak.inferred[r] ? " (inferred)" : "");
        ot_doc_cell_end(d);
        cells(d, &b->now, (enum ot_bd_row)r, b->now.bytes[r]);
        cells(d, &b->peak, (enum ot_bd_row)r, b->peak.bytes[r]);
        ot_doc_row_end(d);
        struct ot_bd_split sp[OT_BD_MAX_SPLITS];
        size_t nsp = ot_bd_splits(b, (enum ot_bd_row)r, sp);
        for (size_t i = 0; i < nsp; i++) {
            ot_doc_row(d);
            ot_doc_cell(d);
            /* An arrow says the part belongs to the row above: renderers may trim a cell's leading spaces. */
            ot_doc_printf(d, "\xe2\x80\x83\xe2\x86\xb3 ");
            ot_doc_text(d, sp[i].label, 80);
            ot_doc_cell_end(d);
            cells(d, sp[i].in_now ? &b->now : NULL, (enum ot_bd_row)r, sp[i].now);
            cells(d, sp[i].in_peak ? &b->peak : NULL, (enum ot_bd_row)r, sp[i].peak);
            ot_doc_row_end(d);
        }
    }
    ot_doc_table_end(d);
}

void ot_bd_wholes(char *buf, size_t len, const struct ot_breakdown *b)
{
    char b1[32], b2[32];
    const char *now = b->at_failure ? "the failure" : "the snapshot";
    size_t n = 0;
    buf[0] = 0;
    if (b->now.known && b->now.whole)
        n = (size_t)snprintf(buf, len, "shares at %s of %s %s %s", now, b->now.whole_is_used ? "the device's" : "the",
                             ot_fmt_bytes(b1, b->now.whole), b->now.whole_is_used ? "used" : "counted");
    if (n >= len || !b->peak.known || !b->peak.whole)
        return;
    /* Memory outside the allocations (context, other processes, a pool's cache) is measured only when
     * the snapshot is written: the peak's whole is what was counted then. */
    bool partial = false;
    for (int r = 0; r < OT_BD_NROWS; r++)
        if (b->now.known && b->now.bytes[r] && !b->peak.measured[r])
            partial = true;
    snprintf(buf + n, len - n, "%sat the peak of the %s counted then%s", n ? "; " : "shares ", ot_fmt_bytes(b2, b->peak.whole),
             partial ? ", as the device's other memory was not measured at the peak" : "");
}
