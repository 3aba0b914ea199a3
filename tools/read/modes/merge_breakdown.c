/* Each process's "what held the memory" in the merged view of a run: the rows analyze/breakdown.c built
 * for its kept snapshot (at the failure, else at the snapshot), so ranks compare in the guides' terms
 * (parameters, gradients, optimizer state, activations ...), not only in peak bytes. */
#include <inttypes.h>

#include "modes/merge.h"

void merge_text_breakdowns(FILE *f, const struct run *u)
{
    bool any = false;
    for (size_t i = 0; i < u->nprocs && !any; i++)
        any = u->infos[u->procs[i].kept].bd.known;
    if (!any)
        return;
    char b1[32];
    fputs("\nWhat held the memory, per process (each one's breakdown of its device's used memory, at the failure for a "
          "failed process, else at its snapshot; shares of that device's used memory):\n", f);
    for (size_t i = 0; i < u->nprocs; i++) {
        const struct snapinfo *x = &u->infos[u->procs[i].kept];
        const struct mergebd *b = &x->bd;
        fputs("  ", f);
        if (x->rank >= 0)
            fprintf(f, "rank %" PRId64, x->rank);
        else
            fputs("process (rank unknown)", f);
        fprintf(f, " (pid %" PRIu64 ")", x->pid);
        if (!b->known) {
            fputs(": unknown (its snapshot has no device breakdown)\n", f);
            continue;
        }
        fprintf(f, ", device %" PRId64 " at the %s:", b->device, b->at_failure ? "failure" : "snapshot");
        const char *sep = " ";
        for (int r = 0; r < OT_BD_NROWS; r++) {
            if (!b->measured[r] || !b->bytes[r])
                continue;
            fprintf(f, "%s%s%s %s", sep, ot_bd_row_name((enum ot_bd_row)r), b->inferred[r] ? " (inferred)" : "",
                    ot_fmt_bytes(b1, b->bytes[r]));
            if (b->whole)
                fprintf(f, " %.1f%%", 100.0 * (double)b->bytes[r] / (double)b->whole);
            sep = ", ";
        }
        fputc('\n', f);
    }
}

void merge_json_breakdown(struct ot_json *j, const struct mergebd *b)
{
    if (!b->known) {
        ot_json_null(j, "breakdown");
        return;
    }
    ot_json_obj(j, "breakdown");
    ot_json_i64(j, "device", b->device);
    ot_json_cstr(j, "at", b->at_failure ? "failure" : "snapshot");
    ot_json_bool(j, "identity", b->identity);
    ot_json_u64(j, "whole_bytes", b->whole);
    ot_json_obj(j, "bytes");
    for (int r = 0; r < OT_BD_NROWS; r++)
        ot_json_u64_or_null(j, ot_bd_row_key((enum ot_bd_row)r), b->measured[r], b->bytes[r]);
    ot_json_obj_end(j);
    ot_json_obj(j, "inferred_bytes");
    for (int r = 0; r < OT_BD_NROWS; r++)
        ot_json_u64_or_null(j, ot_bd_row_key((enum ot_bd_row)r), b->measured[r], b->inferred[r]);
    ot_json_obj_end(j);
    ot_json_obj_end(j);
}
