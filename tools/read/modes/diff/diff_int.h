/* Inside modes/diff/: the change in peak bytes per call site between two snapshots, built once
 * (build.c) and written as text, markdown/HTML or JSON (report.c). */
#ifndef OT_READ_MODES_DIFF_INT_H
#define OT_READ_MODES_DIFF_INT_H

#include <stdint.h>

#include "analyze/stackview.h"
#include "modes/diff.h"

struct dentry {
    char *key, *loose; /* loose: the same without Python line numbers */
    size_t keylen, looselen;
    bool lines;  /* the key has the native frames' file:line (sites that read alike by names alone) */
    int side; /* 0 base, 1 new */
    uint64_t bytes, count, stack_id;
};

struct drow {
    const char *key, *loose;
    size_t keylen, looselen;
    bool loose_match; /* matched only when Python line numbers were ignored */
    bool lines;       /* matched with the native frames' file:line too */
    bool gone;        /* merged into another row */
    bool in[2];
    uint64_t bytes[2], count[2], stack[2], top_bytes[2]; /* stack: the largest merged site's id */
    int64_t change;
};

struct dside {
    struct ot_loaded *l;
    struct ot_resolver *dump; /* dump-time names only: the same on every machine */
    const struct ot_peak_view *p;
};

struct diff {
    struct dside side[2];
    struct dentry *e;
    size_t ne;
    struct drow *rows;
    size_t nrows;
    struct ot_parting *part; /* per row: the caller that tells it from a row of the same headline */
};

/* |v| as unsigned: INT64_MIN's too. */
static inline uint64_t ot_diff_mag(int64_t v)
{
    return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

static inline int64_t ot_diff_sdiff(uint64_t b, uint64_t a)
{
    if (b >= a)
        return b - a > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)(b - a);
    return a - b > (uint64_t)INT64_MAX ? -INT64_MAX : -(int64_t)(a - b);
}

/* The side whose stack a row shows: the new snapshot when it has the site. */
static inline int ot_diff_show_side(const struct drow *r)
{
    return r->in[1] ? 1 : 0;
}

/* How a row was matched, said after its stack id: nothing for a site found on one side only, which matched
 * nothing (its key may still carry native file:line, to tell it from a site of its own snapshot). */
static inline const char *ot_diff_matched_note(const struct drow *r)
{
    if (!r->in[0] || !r->in[1])
        return "";
    return r->loose_match ? "; matched with Python line numbers ignored" : r->lines ? "; matched with native file:line" : "";
}

/* The name a native frame is matched by (see build.c). */
struct ot_str ot_diff_native_name(struct dside *d, uint64_t raw, const struct ot_frame *dumpf);
int ot_diff_build(struct diff *d, struct ot_loaded *base, struct ot_loaded *cur); /* < 0: out of memory */
void ot_diff_free(struct diff *d);

#endif
