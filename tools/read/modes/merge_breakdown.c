/* Each process's "what held the memory" in the merged view of a run: the rows analyze/breakdown.c built
 * for its kept snapshot (at the failure, else at the snapshot), so ranks compare in the guides' terms
 * (parameters, gradients, optimizer state, activations ...), not only in peak bytes. */
#include <inttypes.h>

#include "modes/merge.h"

static bool known(const struct ot_breakdown *b)
{
    return b->has_device && b->now.known;
}

void merge_text_breakdowns(FILE *f, const struct run *u)
{
    bool any = false;
    for (size_t i = 0; i < u->nprocs && !any; i++)
        any = known(&u->infos[u->procs[i].kept].bd);
    if (!any)
        return;
    char b1[32];
    fputs("\nWhat held the memory, per process (each one's breakdown of its device's used memory, at the failure for a "
          "failed process, else at its snapshot; shares of that device's used memory):\n", f);
    for (size_t i = 0; i < u->nprocs; i++) {
        const struct snapinfo *x = &u->infos[u->procs[i].kept];
        const struct ot_breakdown *bd = &x->bd;
        const struct ot_bd_moment *b = &bd->now;
        fputs("  ", f);
        if (x->rank >= 0)
            fprintf(f, "rank %" PRId64 " (pid %" PRIu64 ")", x->rank, x->pid);
        else
            fprintf(f, "pid %" PRIu64, x->pid);
        if (!known(bd)) {
            fputs(": unknown (its snapshot has no device breakdown)\n", f);
            continue;
        }
        fprintf(f, ", device %" PRId64 " at the %s:", bd->device, bd->at_failure ? "failure" : "snapshot");
        const char *sep = " ";
        uint64_t own = 0;
        for (int r = 0; r < OT_BD_NROWS; r++) {
            if (!b->measured[r] || !b->bytes[r])
                continue;
            if (r <= OT_BD_WORKSPACES)
                own += b->bytes[r];
            fprintf(f, "%s%s%s %s", sep, ot_bd_row_name(bd, (enum ot_bd_row)r), b->inferred[r] ? " (inferred)" : "",
                    ot_fmt_bytes(b1, b->bytes[r]));
            if (b->whole)
                fprintf(f, " %.1f%%", 100.0 * (double)b->bytes[r] / (double)b->whole);
            sep = ", ";
        }
        /* A process that had freed everything (or only held memory outside its allocations) still had a
         * peak: say both rather than end the line at the colon. */
        if (!own) {
            fputs(*sep == ' ' ? " nothing live (0 B)" : "; none of its allocations live", f);
            if (bd->peak.known && bd->peak.whole)
                fprintf(f, "; its peak was %s", ot_fmt_bytes(b1, bd->peak.whole));
        }
        fputc('\n', f);
    }
}
