/* The reader's modes beyond one snapshot: --diff BASE NEW, a directory of snapshots (one job, many
 * processes), and the CI gates. Each returns the process exit status: 0 ok, 1 a gate failed, 2 bad
 * input (one line on stderr per problem, prefixed "oomtrace-read: "). */
#ifndef OT_READ_RUN_H
#define OT_READ_RUN_H

#include "modes/gate.h"
#include "modes/load.h"
#include "render/doc.h"
#include "render/report.h"

struct ot_run_opts {
    struct ot_report_opts ro;
    bool json;
    bool as_doc;            /* markdown or HTML (doc), not text or JSON */
    enum ot_doc_kind doc;
    const char *out_path; /* NULL: standard output */
    struct ot_load_opts lo;
    struct ot_gate gate;
};

int ot_run_diff(const char *base, const char *cur, const struct ot_run_opts *r);
int ot_run_dir(const char *dir, const struct ot_run_opts *r);

/* The gates for one analysed snapshot: loads the baseline when there is one. 0 with *res filled (print
 * it with ot_gate_report after the report), or -1 after printing why the baseline could not be read. */
int ot_run_gate(const struct ot_run_opts *r, const struct ot_analysis *a, const char *path, struct ot_gate_result *res);

/* Ends a report's output: flushes out, and closes it unless it is standard output. 0, or -1 after one line
 * naming where the report went and why its write failed ("standard output: write failed: No space left on
 * device"), the same line in every mode. The caller sets errno to 0 before writing the report. */
int ot_output_end(FILE *out, const char *out_path);

/* Schema "oomtrace-run/1" for a directory (docs/JSON.md). */
#define OT_RUN_SCHEMA "oomtrace-run/1"

#endif
