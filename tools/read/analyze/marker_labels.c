/* The labels of the ring's markers that the MARKERS section no longer lists. The tracer keeps the latest
 * 1,024 labels there, but every marker event in the ring carries its own: a run that marks each step for
 * more than 1,024 steps would otherwise have its statements start at markers known only by their seq
 * ("grew after each marker of the marker at seq 32", walk 11, #3). */
#include "analyze/analysis.h"

#include <stdlib.h>
#include <string.h>

/* Bounds on what a (possibly hostile) ring makes the reader hold: past them, the later markers' labels are
 * not kept, and the statements say such a marker by its seq. */
#define LABELS_MAX (1u << 22)
#define LABEL_BYTES_MAX (64u << 20)
#define LABEL_CUT 256 /* a label's bytes kept: the tracer records at most 255 */

static bool listed(const struct ot_snapshot *s, uint64_t seq)
{
    return ot_snapshot_marker(s, seq) != NULL;
}

static bool keep(struct ot_marker_labels *t, size_t *cap, size_t *bcap, const struct snap_event *e)
{
    size_t len = e->label.n < LABEL_CUT ? e->label.n : LABEL_CUT;
    if (t->n >= LABELS_MAX || t->buf_len + len > LABEL_BYTES_MAX)
        return false;
    if (t->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        uint64_t *seq = realloc(t->seq, nc * sizeof(*seq));
        if (seq)
            t->seq = seq;
        uint32_t *off = seq ? realloc(t->off, nc * sizeof(*off)) : NULL;
        if (off)
            t->off = off;
        if (!off)
            return false;
        *cap = nc;
    }
    if (t->buf_len + len > *bcap) {
        size_t nb = *bcap ? *bcap * 2 : 16384;
        while (nb < t->buf_len + len)
            nb *= 2;
        char *buf = realloc(t->buf, nb);
        if (!buf)
            return false;
        t->buf = buf;
        *bcap = nb;
    }
    if (len)
        memcpy(t->buf + t->buf_len, e->label.p, len);
    t->seq[t->n] = e->seq;
    t->off[t->n++] = (uint32_t)t->buf_len;
    t->buf_len += len;
    return true;
}

void ot_marker_labels_build(struct ot_marker_labels *t, const struct ot_snapshot *s, const struct ot_event_stats *ev)
{
    memset(t, 0, sizeof(*t));
    if (!ev->decoded || !ev->by_kind[OT_EV_MARKER])
        return;
    /* MARKERS lists the latest markers (and those pinned at each peak): those from the ring's first seq on
     * are in the ring. A pass over the ring only when it holds more markers than that. */
    size_t from = ot_snapshot_marker_from(s, ev->first_seq), to = ot_snapshot_marker_from(s, ev->last_seq + 1);
    if (ev->by_kind[OT_EV_MARKER] <= to - from)
        return;
    struct ot_event_reader rd;
    ot_event_reader_init(&rd, s);
    const struct snap_event *e;
    size_t n, cap = 0, bcap = 0;
    char err[OT_ERRBUF];
    bool full = false;
    while (!full && ot_event_reader_next(&rd, &e, &n, err) > 0)
        for (size_t i = 0; i < n && !full; i++)
            if (e[i].kind == OT_EV_MARKER && !listed(s, e[i].seq) && (t->n == 0 || e[i].seq > t->seq[t->n - 1]))
                full = !keep(t, &cap, &bcap, &e[i]);
    ot_event_reader_free(&rd);
}

void ot_marker_labels_free(struct ot_marker_labels *t)
{
    free(t->seq);
    free(t->off);
    free(t->buf);
    memset(t, 0, sizeof(*t));
}

bool ot_marker_label(const struct ot_analysis *a, uint64_t seq, struct ot_str *label)
{
    const struct snap_marker *m = ot_snapshot_marker(a->s, seq);
    if (m) {
        *label = m->label;
        return true;
    }
    const struct ot_marker_labels *t = &a->marker_labels;
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->seq[mid] < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == t->n || t->seq[lo] != seq)
        return false;
    size_t end = lo + 1 < t->n ? t->off[lo + 1] : t->buf_len;
    /* Markers with empty labels only leave buf unallocated. */
    *label = (struct ot_str){t->buf ? t->buf + t->off[lo] : "", end - t->off[lo]};
    return true;
}
