/* The "breakdown" object of the JSON reports (docs/JSON.md, breakdown), written once for the report and for
 * each rank of a run's merged view. */
#ifndef OT_READ_RENDER_JSON_BREAKDOWN_H
#define OT_READ_RENDER_JSON_BREAKDOWN_H

#include "analyze/breakdown.h"
#include "render/json_writer.h"

/* The object under key (NULL in an array); null when b is NULL or no device is known. */
void ot_json_breakdown(struct ot_json *j, const char *key, const struct ot_breakdown *b);

#endif
