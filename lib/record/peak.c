/* Where the peak is kept.
 *
 * The live set at a device's high-water mark is kept exactly, at O(1) amortized cost per event, with
 * neither a replay of the history nor a copy of the live table at each new peak. An allocation was live
 * at the peak iff it was made at or before the peak's event (seq <= peak_seq) and not freed before it.
 * Allocations still live satisfy the second part by themselves, so the peak set is
 *     { live records with seq <= peak_seq }  U  retained
 * where retained holds a copy of each record freed after the peak that was live at it. A new peak makes
 * the current live set the peak set, so retained is emptied then; each record enters retained at most
 * once, which bounds the emptying by the frees that filled it. Callers hold ot_lock. */
#include <string.h>
#include <sys/mman.h>

#include "common/pages.h"
#include "record/peak.h"
#include "record/rec.h"

/* r was live at the peak and is freed after it: its copy joins the peak set. */
void ot_peak_retain(struct trace_device *d, const struct ot_rec *r)
{
    if (d->nretained == d->capretained) {
        uint64_t nc = d->capretained ? d->capretained * 2 : 256;
        struct ot_rec *n = mmap(NULL, nc * sizeof *n, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (n == MAP_FAILED) {
            /* Out of memory for the tracer: the peak set loses this record (and says so); the
             * peak's byte count stays exact. */
            d->lost++;
            return;
        }
        if (d->retained) {
            memcpy(n, d->retained, d->nretained * sizeof *n);
            ot_unmap(d->retained, d->capretained * sizeof *n);
        }
        d->retained = n;
        d->capretained = nc;
    }
    d->retained[d->nretained++] = *r;
}

void ot_peak_reset(struct trace_device *d)
{
    if (d->retained)
        ot_unmap(d->retained, d->capretained * sizeof *d->retained);
    memset(d, 0, sizeof *d);
}
