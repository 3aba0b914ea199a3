/* The allocator's view (analyze/allocview.h) in each report format: what the frameworks' allocators held
 * (allocated against reserved, free inside segments and the largest free block, graph pools, other
 * frameworks' pools, segments by the call site that created them), and for a framework OOM its message
 * and the driver-level snapshots before it. Nothing is written when the snapshot has no framework view. */
#ifndef OT_READ_FWVIEW_H
#define OT_READ_FWVIEW_H

#include <stdio.h>

#include "analyze/analysis.h"
#include "render/json_writer.h"

/* The view the reports show: the one of the snapshot's moment, else an earlier one (v->earlier), said as
 * such; NULL when neither. */
const struct ot_allocview *ot_fwview_shown(const struct ot_analysis *a);
/* Why an earlier view is not the snapshot's: when it was taken against the snapshot's moment, at what, and the
 * device allocations and frees between ("taken 12.3 s before the failure, at PyTorch's own out-of-memory
 * error; 1,204 device allocations and 1,100 frees came between: not the state at the failure, and no share,
 * statement or remedy above uses it", or "... but for JAX's preallocation and pool limit" where those are read
 * from it: allocview's start_read); empty without an earlier view. */
void ot_fwview_earlier_words(char *out, size_t len, const struct ot_analysis *a);
struct ot_doc;
/* Who reported the view, in the order the companion collected them: each framework's name and version ("CuPy
 * 14.2.0 and PyTorch 2.11.0"), written to d; returns the collections' time in all, ns. */
uint64_t ot_fwview_reporters(struct ot_doc *d, const struct ot_allocview *v);
/* "Framework OOM" lines under the failed request: who refused it, its message, the probes before it. */
void ot_fwview_failure_text(FILE *f, const struct ot_analysis *a);
void ot_fwview_failure_doc(struct ot_doc *d, const struct ot_analysis *a); /* the same, as markdown or HTML */
/* The "Allocator's view" block; top bounds the creator rows. */
void ot_fwview_text(FILE *f, const struct ot_analysis *a, size_t top);
void ot_fwview_markdown(FILE *f, const struct ot_analysis *a, size_t top);
/* The block's lines besides PyTorch's table, as list items of d (HTML's section writes its table itself):
 * settings, PyTorch's moment, CuPy's pool, JAX's devices, live arrays by shape, segments by call site. */
void ot_fwview_items_doc(struct ot_doc *d, const struct ot_analysis *a, size_t top);
/* Whether the view has such lines: a view with none and no table reported no device memory of its own. */
bool ot_fwview_says_more(const struct ot_analysis *a, const struct ot_allocview *v);
/* The allocator table of markdown and HTML: its columns, one row's cells per framework and device (plain
 * text, safe in markdown and HTML: the framework's name keeps only letters, digits, '_', '-' and '.'), the
 * note on the largest free block, and for each view of the failing device the sentence setting the request
 * against its largest free block. */
#define OT_FWVIEW_NCOLS 8
#define OT_FWVIEW_CELL 96
extern const char *const ot_fwview_columns[OT_FWVIEW_NCOLS];
extern const char ot_fwview_largest_note[];
/* A framework's display name ("PyTorch"), else its own name with only letters, digits, '_', '-' and '.'. */
void ot_fw_safe_name(char *out, size_t len, struct ot_str fw);
void ot_fwview_cells(const struct ot_fw_devview *d, char cells[OT_FWVIEW_NCOLS][OT_FWVIEW_CELL]);
/* The next framework view (from *i on) of the failing device; NULL when none is left. */
const struct ot_fw_devview *ot_fwview_failing(const struct ot_analysis *a, size_t *i);
void ot_fwview_request_sentence(char *out, size_t len, const struct ot_analysis *a, const struct ot_fw_devview *d);
/* The "frameworks" member of the report (docs/JSON.md); null without a framework view. */
void ot_fwview_json(struct ot_json *j, const struct ot_analysis *a);

#endif
