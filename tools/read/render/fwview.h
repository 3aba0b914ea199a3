/* The allocator's view (analyze/allocview.h) in each report format: what the frameworks' allocators held
 * (allocated against reserved, free inside segments and the largest free block, graph pools, other
 * frameworks' pools, segments by the call site that created them), and for a framework OOM its message
 * and the driver-level snapshots before it. Nothing is written when the snapshot has no framework view. */
#ifndef OT_READ_FWVIEW_H
#define OT_READ_FWVIEW_H

#include <stdio.h>

#include "analyze/analysis.h"
#include "render/json_writer.h"

/* "Framework OOM" lines under the failed request: who refused it, its message, the probes before it. */
void ot_fwview_failure_text(FILE *f, const struct ot_analysis *a);
/* The "Allocator's view" block; top bounds the creator rows. */
void ot_fwview_text(FILE *f, const struct ot_analysis *a, size_t top);
void ot_fwview_markdown(FILE *f, const struct ot_analysis *a, size_t top);
/* The "frameworks" member of the report (docs/JSON.md); null without a framework view. */
void ot_fwview_json(struct ot_json *j, const struct ot_analysis *a);

#endif
