/* The text report's call-site tables (sitetable.c): rows grouped under the program's lines (sites.h),
 * or one per site with --split, each with the stack that shows where. */
#ifndef OT_READ_SITETABLE_H
#define OT_READ_SITETABLE_H

#include <stdio.h>

#include "render/report.h"

/* share_of names what the shares are of ("peak", "live"); whole is that total (0: no shares).
 * segments_now: the table is of the moment the frameworks' view describes (the failure, the live set),
 * so a row whose driver allocations are a framework's segments says what they hold now. */
void ot_text_site_table(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *o, const struct ot_sites *st,
                        uint64_t whole, const char *share_of, bool segments_now);

/* One stack as the text report shows it: Python first (--native: every frame). */
void ot_text_stack(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *o, uint64_t stack_id,
                   const char *indent);

#endif
