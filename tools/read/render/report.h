/* The two renderings of an analysis: text for people (leads with the answer), JSON for tools
 * (docs/JSON.md). Both return 0, or -1 when writing failed. */
#ifndef OT_READ_REPORT_H
#define OT_READ_REPORT_H

#include <stdio.h>

#include "analyze/moment.h"

struct ot_report_opts {
    size_t top;     /* site rows in text; in JSON only when top_given */
    bool top_given;
    enum ot_at at;  /* which moments the text site tables describe */
    size_t frames;  /* frames per stack in text */
    bool native;    /* text: every frame of a Python stack (--native), not the Python-first view */
    bool split;     /* text, markdown: one row per call site, not grouped under the program's line (--split) */
    const char *path; /* the snapshot file as named on the command line */
    /* HTML: a card written at the top of the page's main part (the directory view's run summary). */
    void (*prelude)(FILE *f, const void *ctx);
    const void *prelude_ctx;
};

int ot_report_text(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *o);
int ot_report_json(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *o);
/* More renderings (docs/FORMATS.md): folded stacks for flame graphs, a markdown summary for CI, one
 * self-contained HTML page, and a pickle for PyTorch's memory_viz. Same return convention. */
int ot_report_folded(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *o);
int ot_report_markdown(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *o);
int ot_report_html(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *o);
int ot_report_memviz(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *o);

/* Shared by both: phrases for ids. */
const char *ot_result_name(uint64_t cuda_result); /* "CUDA_ERROR_OUT_OF_MEMORY" or NULL */
/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" for a 16-byte uuid, else plain hex; buf needs 80 bytes.
 * NULL when empty. */
const char *ot_fmt_uuid(char *buf, struct ot_str uuid);

#endif
