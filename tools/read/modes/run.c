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

int ot_run_diff(const char *base, const char *cur, const struct ot_run_opts *r)
{
    struct ot_loaded lb, ln;
    char err[OT_ERRBUF];
    if (ot_load(&lb, base, &r->lo, err) < 0) {
        fprintf(stderr, "oomtrace-read: %s: %s\n", base, err);
        return 2;
    }
    if (ot_load(&ln, cur, &r->lo, err) < 0) {
        fprintf(stderr, "oomtrace-read: %s: %s\n", cur, err);
        ot_loaded_free(&lb);
        return 2;
    }
    /* Gates: --max-peak on NEW; --max-growth against --baseline when given, else against BASE. */
    struct ot_gate_result gr = {0};
    if (ot_gate_active(&r->gate)) {
        struct ot_gate_peak peak, bp;
        ot_gate_peak_of_analysis(&ln.an, cur, &peak);
        if (r->gate.growth_set) {
            if (r->gate.baseline) {
                if (ot_gate_peak_of_path(r->gate.baseline, &r->lo, &bp, err) < 0) {
                    fprintf(stderr, "oomtrace-read: %s: %s\n", r->gate.baseline, err);
                    ot_loaded_free(&lb);
                    ot_loaded_free(&ln);
                    return 2;
                }
            } else {
                ot_gate_peak_of_analysis(&lb.an, base, &bp);
            }
        }
        ot_gate_eval(&r->gate, &peak, r->gate.growth_set ? &bp : NULL, &gr);
    }
    FILE *out = stdout;
    if (r->out_path && !(out = fopen(r->out_path, "w"))) {
        fprintf(stderr, "oomtrace-read: %s: %s\n", r->out_path, strerror(errno));
        ot_loaded_free(&lb);
        ot_loaded_free(&ln);
        return 2;
    }
    int rc = r->as_doc ? ot_diff_doc(out, &lb, &ln, &r->ro, r->doc)
             : r->json ? ot_diff_json(out, &lb, &ln, &r->ro)
                       : ot_diff_text(out, &lb, &ln, &r->ro);
    bool bad = fflush(out) != 0 || ferror(out);
    if (out != stdout && fclose(out) != 0)
        bad = true;
    ot_loaded_free(&lb);
    ot_loaded_free(&ln);
    if (bad || rc < 0) {
        fprintf(stderr, "oomtrace-read: %s\n", bad ? "write failed" : "out of memory");
        return 2;
    }
    return ot_gate_report(&gr);
}
