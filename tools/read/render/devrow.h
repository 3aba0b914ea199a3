/* The device table, the same numbers in markdown and HTML: one row per device, each cell as both print it.
 * The text report lays its devices out in blocks of its own (report_text.c). */
#ifndef OT_READ_DEVROW_H
#define OT_READ_DEVROW_H

#include "analyze/analysis.h"

/* The columns after the device's ordinal and name, in the tables' order. Markdown stops after
 * OT_DEVROW_OTHERS; HTML adds the pools. */
enum ot_devrow_col {
    OT_DEVROW_TOTAL,    /* cuMemGetInfo's total at the snapshot; "?" when it was not measured */
    OT_DEVROW_FREE,     /* cuMemGetInfo's free at the snapshot; "?" likewise */
    OT_DEVROW_TRACKED,  /* this process's live device allocations counted by oomtrace */
    OT_DEVROW_PEAK,     /* the device's recorded peak of tracked bytes */
    OT_DEVROW_BASELINE, /* used before the process's first allocation; "?" when not measured */
    OT_DEVROW_OTHERS,   /* other processes' bytes and how many ("1.00 GiB in 2"); "" when none is listed */
    OT_DEVROW_POOLS,    /* what the device's memory pools reserve; "" when it has none */
    OT_DEVROW_NCOLS
};

struct ot_devrow {
    char cell[OT_DEVROW_NCOLS][48]; /* "": nothing to count there (each table prints its dash) */
};

void ot_devrow_of(const struct ot_snapshot *s, const struct snap_device *d, struct ot_devrow *r);

#endif
