/* Drivers for --diff and the single-snapshot gate (the directory view is merge.c). */
#include <errno.h>
#include <stdlib.h>

#include "modes/diff.h"
#include "modes/run.h"

int ot_run_gate(const struct ot_run_opts *r, const struct ot_analysis *a, const char *path, struct ot_gate_result *res)
{
    memset(res, 0, sizeof(*res));
    if (!ot_gate_active(&r->gate))
        return 0;
    struct ot_gate_peak peak, base;
    ot_gate_peak_of_analysis(a, path, &peak);
    char err[OT_ERRBUF];
    if (r->gate.growth_set && ot_gate_peak_of_path(r->gate.baseline, &r->lo, &base, err) < 0) {
        fprintf(stderr, "oomtrace-read: %s: %s\n", r->gate.baseline, err);
        return -1;
    }
    ot_gate_eval(&r->gate, &peak, r->gate.growth_set ? &base : NULL, res);
    return 0;
}

/* One side of a diff: a snapshot, or a directory's snapshot with the largest peak (a run directory of
 * `oomtrace run`, a job's directory): the one a gate on that directory measures. 0, or -1 after its line. */
static int load_side(struct ot_loaded *l, const char *path, const struct ot_run_opts *r)
{
    char err[OT_ERRBUF];
    struct ot_gate_peak pick;
    char *picked = NULL; /* the directory's snapshot, named for as long as l lives */
    if (ot_is_dir(path)) {
        if (ot_gate_peak_of_path(path, &r->lo, &pick, err) < 0) {
            fprintf(stderr, "oomtrace-read: %s: %s\n", path, err);
            return -1;
        }
        if (!(picked = strdup(pick.path))) {
            fprintf(stderr, "oomtrace-read: out of memory\n");
            return -1;
        }
    }
    if (ot_load(l, picked ? picked : path, &r->lo, err) < 0) {
        fprintf(stderr, "oomtrace-read: %s: %s\n", picked ? picked : path, err);
        free(picked);
        return -1;
    }
    if (picked) {
        l->picked.dir = path;
        l->picked.nfiles = pick.nfiles;
        l->picked.nprocs = pick.nprocs;
        l->picked.nbad = pick.nbad;
    }
    return 0;
}

static void free_side(struct ot_loaded *l)
{
    char *own = l->picked.dir ? (char *)l->path : NULL;
    ot_loaded_free(l);
    free(own);
}

int ot_output_end(FILE *out, const char *out_path)
{
    /* A write that failed inside the report leaves the stream's error flag, and errno as the failed write set
     * it (the callers clear errno before writing); the flush may then succeed with nothing left to write
     * (helper-92 #4: a stale errno would give another call's reason). */
    int e = 0;
    bool bad = false;
    if (fflush(out) != 0 || ferror(out)) {
        bad = true;
        e = errno;
    }
    if (out != stdout && fclose(out) != 0 && !bad) {
        bad = true;
        e = errno;
    }
    if (!bad)
        return 0;
    fprintf(stderr, "oomtrace-read: %s: write failed%s%s\n", out_path ? out_path : "standard output", e ? ": " : "",
            e ? strerror(e) : "");
    return -1;
}

int ot_run_diff(const char *base, const char *cur, const struct ot_run_opts *r)
{
    struct ot_loaded lb, ln;
    char err[OT_ERRBUF];
    if (load_side(&lb, base, r) < 0)
        return 2;
    if (load_side(&ln, cur, r) < 0) {
        free_side(&lb);
        return 2;
    }
    /* Gates: --max-peak on NEW; --max-growth against --baseline when given, else against BASE: each side's
     * snapshot, the one the diff shows (a directory's largest peak). */
    struct ot_gate_result gr = {0};
    if (ot_gate_active(&r->gate)) {
        struct ot_gate_peak peak, bp;
        ot_gate_peak_of_analysis(&ln.an, ln.path, &peak);
        if (r->gate.growth_set) {
            if (r->gate.baseline) {
                if (ot_gate_peak_of_path(r->gate.baseline, &r->lo, &bp, err) < 0) {
                    fprintf(stderr, "oomtrace-read: %s: %s\n", r->gate.baseline, err);
                    free_side(&lb);
                    free_side(&ln);
                    return 2;
                }
            } else {
                ot_gate_peak_of_analysis(&lb.an, lb.path, &bp);
            }
        }
        ot_gate_eval(&r->gate, &peak, r->gate.growth_set ? &bp : NULL, &gr);
    }
    FILE *out = stdout;
    if (r->out_path && !(out = fopen(r->out_path, "w"))) {
        fprintf(stderr, "oomtrace-read: %s: %s\n", r->out_path, strerror(errno));
        free_side(&lb);
        free_side(&ln);
        return 2;
    }
    errno = 0; /* (ot_output_end) */
    int rc = r->as_doc ? ot_diff_doc(out, &lb, &ln, &r->ro, r->doc)
             : r->json ? ot_diff_json(out, &lb, &ln, &r->ro)
                       : ot_diff_text(out, &lb, &ln, &r->ro);
    int bad = ot_output_end(out, r->out_path);
    free_side(&lb);
    free_side(&ln);
    if (bad < 0)
        return 2;
    if (rc < 0) {
        fprintf(stderr, "oomtrace-read: out of memory\n");
        return 2;
    }
    return ot_gate_report(&gr);
}
