/* --diff BASE NEW: the change in peak bytes of each call site between two snapshots. Sites are matched
 * by their symbolized stacks, never by address (addresses differ between runs): Python frames by
 * function, file and line; native frames by function name (the dump-time name, else the one debug
 * info gives) and the module's base name. Sites whose stacks read the same are merged. The peak is each
 * snapshot's leading peak (the failing device's, else the largest), and its PEAK site table. */
#ifndef OT_READ_DIFF_H
#define OT_READ_DIFF_H

#include "modes/load.h"
#include "render/doc.h"

int ot_diff_text(FILE *f, struct ot_loaded *base, struct ot_loaded *cur, const struct ot_report_opts *o);
/* The same as markdown (a CI job summary) or one HTML page: the two sides, the peak's change, a table of
 * the changed sites. */
int ot_diff_doc(FILE *f, struct ot_loaded *base, struct ot_loaded *cur, const struct ot_report_opts *o,
                enum ot_doc_kind kind);
int ot_diff_json(FILE *f, struct ot_loaded *base, struct ot_loaded *cur, const struct ot_report_opts *o);

#endif
