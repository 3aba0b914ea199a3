/* Phrases every report format says the same way: the title of a trigger, who made the failed request and
 * what it returned, the heading of a site table and its rows' numbers. Plain text, no untrusted bytes: each
 * format adds its own markup around them. */
#ifndef OT_READ_WORDING_H
#define OT_READ_WORDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/analysis.h"
#include "analyze/moment.h"
#include "render/report.h"

/* "CUDA out of memory", "snapshot at process exit" ...; shout: the text report's capitals for an OOM.
 * NULL for a trigger the format does not define. */
const char *ot_trigger_title(uint64_t trigger, bool shout);

/* The title of this snapshot: ot_trigger_title's, except for a crash-surviving flush, whose title says
 * whether a crash wrote it ("state at the crash") or it is the last periodic one ("last flush"). */
const char *ot_snapshot_title(const struct ot_snapshot *s, bool shout);

/* For a last flush that a request to end wrote (SIGTERM, SIGINT, SIGHUP, SIGQUIT), that signal's name
 * ("SIGTERM"), which titles say instead of a crash; NULL otherwise (a crash, a timed flush, no flush). */
const char *ot_flush_stopped_by(const struct ot_snapshot *s);

/* For a last flush that a crash wrote (a fatal signal that is not a request to end): the signal's name
 * ("SIGABRT"), found from the words the writer stored ("Aborted"); "" when they name no signal this reader
 * knows; NULL for any other snapshot (a stop, a timed flush, no flush). */
const char *ot_flush_crash_signal(const struct ot_snapshot *s);

/* Why a snapshot is unfinished, in the user's words ("the process did not finish, so this is its last
 * flush"); NULL for a finished one. *by_crash: a crash wrote it, and its reason names the signal. */
const char *ot_unfinished_words(const struct ot_snapshot *s, bool *by_crash);

/* The imported memory (another process's allocations mapped here) after its lead-in: "8.00 MiB in 1
 * allocation", "2 allocations whose size is not known (...)" or both; "" when nothing was imported. */
void ot_imported_words(const struct ot_analysis *a, char *out, size_t cap);

/* An event kind's name in the ring's counts ("alloc", "free", "context end"): the format's names but for
 * context_end. NULL for a kind the format does not define. */
const char *ot_event_kind_words(int kind);

/* Who made the failed request: the driver entry point ("cuMemAlloc_v2"), or for a framework's own refusal
 * "PyTorch's allocator". */
void ot_failure_api(char *buf, size_t len, const struct ot_analysis *a);
/* The failed request's phrases; false when the snapshot has none. */
struct ot_failure_words {
    const struct snap_failure *x;
    char api[64];    /* ot_failure_api */
    char result[48]; /* "CUDA_ERROR_OUT_OF_MEMORY", else "CUresult N" */
    char where[32];  /* "device N", or "the host" */
    char bytes[32];  /* the request's size */
    /* The failing device's memory by cuMemGetInfo at the snapshot, when it was measured (meminfo). */
    bool meminfo;
    char free[32], total[32];
    char shortfall[32]; /* how much more the request asked than was free; "" when it fit */
};
bool ot_failure_words_of(const struct ot_analysis *a, struct ot_failure_words *w);

/* The site table of the --at moment (default: the peak): its heading (title "Top call sites at the peak",
 * detail "device 0: 138 GiB at +7.469 s, 156 allocations"), the note when it fell back to the live set at the
 * snapshot ("" otherwise), the rows listed (--top) and their labels. Open returns false when no live set is
 * recorded (say ot_sites_unknown), and then needs no close. */
struct ot_site_table {
    struct ot_moment mo;
    const struct ot_sites *st;
    char title[64], detail[160], note[160];
    bool grouped;         /* a row is a line of the program and its sites, as in the text report (not --split) */
    size_t rows;          /* rows in all (groups or sites) */
    size_t n;             /* rows listed (--top) */
    struct ot_site *reps; /* n: each row's bytes and count, with its largest site's stack */
    char **labels;        /* n labels: the program's line for a group of several sites (NULL when out of memory) */
};
extern const char ot_sites_unknown[];
bool ot_site_table_open(const struct ot_analysis *a, const struct ot_report_opts *o, size_t name_max,
                        struct ot_site_table *t);
void ot_site_table_close(struct ot_site_table *t);

/* Opens the table and writes its heading and note; false, with the reason in words, when there is no row to
 * list (then no close is needed). */
struct ot_doc;
bool ot_site_table_head(struct ot_doc *d, const struct ot_analysis *a, const struct ot_report_opts *o, size_t name_max,
                        struct ot_site_table *t);

/* The line under a report's title: command line, pid, host, rank, wall-clock time and time since the tracer
 * started, the reason, and whether the process finished writing the snapshot. */
void ot_doc_subtitle(struct ot_doc *d, const struct ot_snapshot *s);

/* One row's numbers: row i (< n) of the table, else (i == n) the rest of the sites after the n rows. False
 * when there is no such row. */
struct ot_site_row {
    size_t rank;                 /* 1-based; 0 for the rest */
    const struct ot_site *site;  /* NULL for the rest */
    const char *label;           /* the row's label ("?" when unknown); NULL for the rest */
    size_t nsites;               /* call sites in the row (more than one: a group under the program's line) */
    size_t nrest;                /* the rest: rows not listed */
    const char *rest_word;       /* "row" or "site" */
    char bytes[32], count[32], share[16]; /* share "" without a whole */
    char stacks[96];             /* the stack ids the row stands for, as Why cites them: "stack 5", "stacks 5, 4
                                  * and 2 more"; "" for the rest */
    double share_pct;
};
bool ot_site_table_row(const struct ot_site_table *t, size_t i, struct ot_site_row *r);

#endif
