/* A breakdown row's parts (call sites, optimizer state by name, workspaces by library) at the failure and
 * at the peak, matched by label into the splits a report shows under the row; and the copy a directory's
 * report keeps of a process's breakdown after its snapshot is closed. */
#include "analyze/breakdown.h"

#include <stdlib.h>
#include <string.h>

void ot_bd_add_part(struct ot_bd_moment *m, enum ot_bd_row row, struct ot_str label, uint64_t bytes)
{
    for (size_t i = 0; i < m->nparts; i++)
        if (m->parts[i].row == row && m->parts[i].label.n == label.n &&
            (label.n == 0 || memcmp(m->parts[i].label.p, label.p, label.n) == 0)) {
            m->parts[i].bytes = ot_sat_add(m->parts[i].bytes, bytes);
            return;
        }
    if (m->nparts < OT_BD_MAX_PARTS)
        m->parts[m->nparts] = (struct ot_bd_part){row, label, bytes, (uint32_t)m->nparts, false}, m->nparts++;
}

static uint64_t split_size(const struct ot_bd_split *x)
{
    return x->now > x->peak ? x->now : x->peak;
}

static int cmp_split(const void *x, const void *y)
{
    const struct ot_bd_split *sx = x, *sy = y;
    if (sx->rest != sy->rest) /* "N more call sites" after the sites it does not name (walk 7, #1) */
        return sx->rest ? 1 : -1;
    uint64_t a = split_size(x), b = split_size(y);
    if (a != b)
        return a > b ? -1 : 1;
    /* Equal bytes: the order the sites were ranked in (as the site tables rank them), not by name. */
    if (sx->rank != sy->rank)
        return sx->rank < sy->rank ? -1 : 1;
    const struct ot_str *la = &sx->label, *lb = &sy->label;
    size_t n = la->n < lb->n ? la->n : lb->n;
    int c = n ? memcmp(la->p, lb->p, n) : 0;
    return c ? c : la->n < lb->n ? -1 : la->n > lb->n;
}

size_t ot_bd_splits(const struct ot_breakdown *b, enum ot_bd_row r, struct ot_bd_split out[OT_BD_MAX_SPLITS])
{
    size_t n = 0;
    const struct ot_bd_moment *ms[2] = {&b->now, &b->peak};
    for (int k = 0; k < 2; k++) {
        if (!ms[k]->known)
            continue;
        for (size_t i = 0; i < ms[k]->nparts; i++) {
            const struct ot_bd_part *p = &ms[k]->parts[i];
            if (p->row != r)
                continue;
            size_t j = 0;
            while (j < n && !(out[j].label.n == p->label.n && (!p->label.n || memcmp(out[j].label.p, p->label.p, p->label.n) == 0)))
                j++;
            if (j == n) {
                if (n == OT_BD_MAX_SPLITS)
                    continue;
                out[n++] = (struct ot_bd_split){.label = p->label, .rest = p->rest, .rank = p->rank};
            }
            if (k == 0) {
                out[j].now = p->bytes;
                out[j].in_now = true;
            } else {
                out[j].peak = p->bytes;
                out[j].in_peak = true;
            }
        }
    }
    qsort(out, n, sizeof(*out), cmp_split);
    return n;
}

uint64_t ot_bd_part_bytes(const struct ot_bd_moment *m, enum ot_bd_row row, const char *label)
{
    for (size_t i = 0; i < m->nparts; i++)
        if (m->parts[i].row == row && ot_str_eq(m->parts[i].label, label))
            return m->parts[i].bytes;
    return 0;
}

enum ot_bd_row ot_bd_largest(const struct ot_bd_moment *m)
{
    enum ot_bd_row best = OT_BD_NROWS;
    if (!m->known)
        return best;
    for (int r = 0; r < OT_BD_NROWS; r++)
        if (m->bytes[r] && (best == OT_BD_NROWS || m->bytes[r] > m->bytes[best]))
            best = (enum ot_bd_row)r;
    return best;
}

int ot_breakdown_copy(struct ot_breakdown *dst, const struct ot_breakdown *src)
{
    *dst = *src;
    dst->owned = NULL;
    struct ot_bd_moment *m[2] = {&dst->now, &dst->peak};
    size_t need = 0;
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < m[k]->nparts; i++)
            need += m[k]->parts[i].label.n;
    char *p = dst->owned = malloc(need ? need : 1);
    if (!p) {
        dst->now.nparts = dst->peak.nparts = 0;
        return -1;
    }
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < m[k]->nparts; i++) {
            struct ot_str *l = &m[k]->parts[i].label;
            if (l->n)
                memcpy(p, l->p, l->n);
            l->p = p;
            p += l->n;
        }
    return 0;
}

void ot_breakdown_copy_free(struct ot_breakdown *b)
{
    free(b->owned);
    b->owned = NULL;
}
