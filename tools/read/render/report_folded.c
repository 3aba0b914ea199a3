/* The folded-stack report: one line per call site, "outermost;...;innermost BYTES", the input of
 * flamegraph.pl (--countname bytes), inferno and speedscope. The sites are those of the --at moment
 * (default: the peak). */
#include <inttypes.h>
#include <stdlib.h>

#include "render/sitelabel.h"
#include "analyze/stackview.h"

/* Frame names may hold any byte: ';' would split a frame, a newline a line. Valid UTF-8 passes;
 * ';', '\', control characters and invalid bytes are written as \xNN (a backslash as \\). */
static void put_name(FILE *f, struct ot_str s)
{
    const unsigned char *p = (const unsigned char *)s.p;
    size_t i = 0;
    while (i < s.n) {
        unsigned c = p[i];
        if (c >= 0x20 && c < 0x7f && c != ';' && c != '\\') {
            putc_unlocked((int)c, f);
            i++;
            continue;
        }
        if (c == '\\') {
            fputs("\\\\", f);
            i++;
            continue;
        }
        size_t k = c >= 0x80 ? ot_utf8_len(p + i, s.n - i) : 0;
        if (k == 2 && c == 0xc2 && p[i + 1] < 0xa0)
            k = 0; /* a C1 control (U+0080..U+009F): U+0085 ends a line for some readers */
        if (k) {
            fwrite(p + i, 1, k, f);
            i += k;
            continue;
        }
        fprintf(f, "\\x%02x", c);
        i++;
    }
}

static void put_stack(FILE *f, const struct ot_analysis *a, uint64_t stack_id, struct ot_sb *sb)
{
    const struct ot_stack *st = ot_snapshot_stack(a->s, stack_id);
    if (!st) {
        fprintf(f, "[stack %" PRIu64 " not recorded]", stack_id);
        return;
    }
    if (st->nframes == 0) {
        fputs("[empty stack]", f);
        return;
    }
    /* A folded stack reads from the outermost frame in. */
    struct ot_frame_walk w;
    for (ot_walk_begin(&w, a->res, st, OT_WALK_ALL | OT_WALK_OUTERMOST); ot_walk_next(&w);) {
        ot_sb_reset(sb);
        ot_lbl_frame(sb, w.f);
        if (w.depth)
            putc_unlocked(';', f);
        put_name(f, ot_sb_view(sb));
    }
}

int ot_report_folded(FILE *f, const struct ot_analysis *a, const struct ot_report_opts *o)
{
    struct ot_moment m;
    ot_moment_of(a, o->at, OT_AT_PEAK, &m);
    if (m.fell_back)
        fprintf(stderr, "oomtrace-read: note: the snapshot does not record the %s's live set; the folded stacks "
                "are the live set at the snapshot\n", ot_at_name(m.asked));
    if (!m.sites) {
        fputs("oomtrace-read: note: the snapshot does not record the live set at the snapshot either: no stacks to fold\n", stderr);
        return ferror(f) ? -1 : 0;
    }
    size_t n = m.sites->n;
    if (o->top_given && o->top < n)
        n = o->top;
    struct ot_sb sb = {0};
    for (size_t i = 0; i < n; i++) {
        const struct ot_site *s = &m.sites->v[i];
        put_stack(f, a, s->stack_id, &sb);
        fprintf(f, " %" PRIu64 "\n", s->bytes);
    }
    ot_sb_free(&sb);
    return ferror(f) ? -1 : 0;
}
