/* The analysis in its two steps: the tables (analysis.c), then the statements built from them (why/). */
#include "analyze/analysis.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/breakdown.h"
#include "analyze/why.h"

int ot_analyze(struct ot_analysis *a, const struct ot_snapshot *s, struct ot_resolver *res,
               const struct ot_symbolizer_info *sym, char errbuf[OT_ERRBUF])
{
    if (ot_analysis_build(a, s, res, sym, errbuf) < 0)
        return -1;
    /* The frameworks' view first: the breakdown and the statements may read it. */
    if (!(a->fw = ot_allocview_new(s))) {
        snprintf(errbuf, OT_ERRBUF, "out of memory");
        ot_analysis_release(a);
        return -1;
    }
    a->fw_earlier = ot_allocview_earlier(s); /* for the reports only: NULL leaves it unshown */
    a->breakdown = calloc(1, sizeof(*a->breakdown));
    if (a->breakdown && ot_breakdown_build(a, a->breakdown) < 0) {
        free(a->breakdown);
        a->breakdown = NULL;
    }
    a->why = ot_why_new(a);
    a->remedies = ot_remedies_new(a);
    if (a->fw_earlier)
        a->fw_earlier->start_read = (a->why && a->why->earlier_read) || (a->remedies && a->remedies->earlier_read);
    return 0;
}

void ot_analysis_free(struct ot_analysis *a)
{
    ot_why_free(a->why);
    a->why = NULL;
    ot_why_free(a->remedies);
    a->remedies = NULL;
    free(a->breakdown);
    a->breakdown = NULL;
    ot_allocview_free(a->fw);
    a->fw = NULL;
    ot_allocview_free(a->fw_earlier);
    a->fw_earlier = NULL;
    ot_analysis_release(a);
}
