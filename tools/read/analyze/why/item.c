/* Building one statement: its sentence, written as it goes, and its numbers. */
#include "analyze/why/item.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/stackview.h"

bool why_item_begin(struct why_item_b *b, struct ot_why *w, const char *kind)
{
    memset(b, 0, sizeof(*b));
    if (w->n >= OT_WHY_MAX_ITEMS)
        return false;
    b->w = w;
    b->it = &w->v[w->n];
    memset(b->it, 0, sizeof(*b->it));
    b->it->kind = kind;
    b->f = open_memstream(&b->buf, &b->len);
    return b->f != NULL;
}

bool why_item_say(struct why_item_b *b, struct ot_why *w, const char *kind, const char *fmt, ...)
{
    if (!why_item_begin(b, w, kind))
        return false;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(b->f, fmt, ap);
    va_end(ap);
    return true;
}

void why_item_end(struct why_item_b *b)
{
    if (!b->f)
        return;
    if (fclose(b->f) != 0 || !b->buf) {
        free(b->buf);
        return;
    }
    b->it->text = b->buf;
    b->w->n++;
}

static struct ot_why_number *num(struct why_item_b *b, const char *key)
{
    if (b->it->nnum >= OT_WHY_MAX_NUMBERS)
        return NULL;
    struct ot_why_number *n = &b->it->num[b->it->nnum++];
    n->key = key;
    return n;
}

void why_num_u(struct why_item_b *b, const char *key, uint64_t v)
{
    struct ot_why_number *n = num(b, key);
    if (n) {
        n->kind = OT_WHY_U64;
        n->u = v;
    }
}

void why_nums_u(struct why_item_b *b, const struct why_kv *kv, size_t n)
{
    for (size_t i = 0; i < n; i++)
        why_num_u(b, kv[i].key, kv[i].v);
}

void why_num_i(struct why_item_b *b, const char *key, int64_t v)
{
    struct ot_why_number *n = num(b, key);
    if (n) {
        n->kind = OT_WHY_I64;
        n->i = v;
    }
}

void why_num_f(struct why_item_b *b, const char *key, double v)
{
    struct ot_why_number *n = num(b, key);
    if (n) {
        n->kind = OT_WHY_F64;
        n->f = v;
    }
}

const struct ot_fw_devview *why_fw_dev_next(const struct ot_analysis *a, int64_t dev, size_t *i)
{
    const struct ot_allocview *v = a->fw;
    if (!v || dev < 0)
        return NULL;
    while (*i < v->ndevs) {
        const struct ot_fw_devview *d = &v->devs[(*i)++];
        if (d->device == (uint64_t)dev)
            return d;
    }
    return NULL;
}

/* How many of the peak's leading sites a statement's site is told apart from, as the site table's rows are. */
#define PARTING_AMONG 16

const char *why_span(char *buf, size_t n, uint64_t ns)
{
    if (ns < 1000000000ull)
        snprintf(buf, n, "%.3g ms", (double)ns / 1e6);
    else
        snprintf(buf, n, "%.3g s", (double)ns / 1e9);
    return buf;
}

void why_put_headline(FILE *f, const struct ot_analysis *a, uint64_t stack_id)
{
    struct ot_stack_info si;
    ot_stack_info(a->res, a->s, stack_id, &si);
    ot_put_headline(f, &si, true);
    /* Two sites reaching the allocation through one helper read the same: the caller that tells this one
     * from the peak's other leading sites, as in the site table ("grab (my_prog.c:7) ← main (my_prog.c:21)"). */
    struct ot_stack_ref refs[PARTING_AMONG + 1];
    struct ot_parting parts[PARTING_AMONG + 1];
    size_t n = 0;
    refs[n++] = (struct ot_stack_ref){a->res, a->s, stack_id};
    const struct ot_peak_view *p = a->peak;
    for (size_t i = 0; p && p->has_sites && i < p->sites.n && n <= PARTING_AMONG; i++)
        if (p->sites.v[i].stack_id != stack_id)
            refs[n++] = (struct ot_stack_ref){a->res, a->s, p->sites.v[i].stack_id};
    /* A Python headline names its caller already ("called from ..."): only a frame past it adds anything;
     * and a caller that reads as the headline itself (a function calling itself) tells nothing apart. */
    if (n > 1 && ot_headline_partings(refs, n, parts) == 0 && parts[0].frame && !(si.caller && parts[0].depth <= 1)) {
        char *head = NULL, *part = ot_parting_str(&parts[0]);
        size_t len = 0;
        FILE *hf = open_memstream(&head, &len);
        if (hf) {
            fputs(" ← ", hf);
            ot_put_headline(hf, &si, false);
            fclose(hf);
        }
        if (part && head && strcmp(part, head) != 0)
            fputs(part, f);
        free(part);
        free(head);
    }
    fprintf(f, " (stack %" PRIu64 ")", stack_id);
}

void why_put_marker(FILE *f, const struct ot_analysis *a, uint64_t seq)
{
    struct ot_str label;
    if (ot_marker_label(a, seq, &label)) {
        fputs("marker \"", f);
        ot_fput_safe_max(f, label, 120);
        fprintf(f, "\" (seq %" PRIu64 ")", seq);
    } else {
        fprintf(f, "the marker at seq %" PRIu64 " (its label was not kept)", seq);
    }
}

size_t why_label_kind(struct ot_str l)
{
    size_t i = 0;
    while (i < l.n && !(l.p[i] >= '0' && l.p[i] <= '9'))
        i++;
    return i;
}

bool why_put_kind(FILE *f, const struct ot_analysis *a, uint64_t seq)
{
    struct ot_str l;
    if (!ot_marker_label(a, seq, &l))
        return false;
    size_t n = why_label_kind(l);
    fputc('"', f);
    ot_fput_safe_max(f, (struct ot_str){l.p, n}, 60);
    fputs(n < l.n ? "N\"" : "\"", f);
    return true;
}

bool why_same_kind(const struct ot_analysis *a, uint64_t x, uint64_t y)
{
    struct ot_str lx, ly;
    if (!ot_marker_label(a, x, &lx) || !ot_marker_label(a, y, &ly))
        return false;
    size_t n = why_label_kind(lx);
    return n == why_label_kind(ly) && memcmp(lx.p, ly.p, n) == 0;
}

bool why_peak_long_before(const struct ot_analysis *a, uint64_t *live)
{
    const struct ot_snapshot *s = a->s;
    const struct ot_peak_view *p = a->peak;
    if (!p || !s->has_failure || s->failure.device != p->device || p->seq >= s->failure.seq ||
        (s->meta.trigger != OT_TRIGGER_OOM && s->meta.trigger != OT_TRIGGER_FRAMEWORK_OOM))
        return false;
    const struct snap_device *d = ot_snapshot_device(s, p->device);
    if (!d || d->tracked_bytes * 2 > p->bytes)
        return false;
    *live = d->tracked_bytes;
    return true;
}

uint64_t why_site_live(const struct ot_snapshot *s, int64_t dev, uint64_t stack_id)
{
    uint64_t v = 0;
    for (size_t i = 0; s->has_live && i < s->nlive; i++)
        if (s->live[i].device == dev && s->live[i].stack_id == stack_id && ot_category_is_device64(s->live[i].category))
            v = ot_sat_add(v, s->live[i].size);
    return v;
}
