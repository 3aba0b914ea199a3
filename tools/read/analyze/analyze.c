/* The analysis in its two steps: the tables (analysis.c), then the statements built from them (why/). */
#include "analyze/analysis.h"

#include <stdlib.h>
#include <string.h>

#include "analyze/breakdown.h"
#include "analyze/why.h"

int ot_analyze(struct ot_analysis *a, const struct ot_snapshot *s, struct ot_resolver *res,
               const struct ot_symbolizer_info *sym, char errbuf[OT_ERRBUF])
{
    if (ot_analysis_build(a, s, res, sym, errbuf) < 0)
        return -1;
    a->breakdown = calloc(1, sizeof(*a->breakdown));
    if (a->breakdown && ot_breakdown_build(a, a->breakdown) < 0) {
        free(a->breakdown);
        a->breakdown = NULL;
    }
    a->why = ot_why_new(a);
    return 0;
}

void ot_analysis_free(struct ot_analysis *a)
{
    ot_why_free(a->why);
    a->why = NULL;
    free(a->breakdown);
    a->breakdown = NULL;
    ot_analysis_release(a);
}
