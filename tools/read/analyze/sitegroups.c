/* Near-identical call sites grouped under the line that made them. A model's forward pass reaches the
 * allocator through a dozen library lines and native paths, so one line of the program ("train.py:23 in
 * train_step") splits into many sites of a few percent each, and the second real holder falls off the
 * table. Grouping them by the program's own line gives that line its whole share, with the split below. */
#include "analyze/sites.h"

#include <stdlib.h>
#include <string.h>

#include "analyze/stackview.h"
#include "analyze/userline.h"

/* What a site is grouped by. A user line is the program's innermost frame with every Python frame that
 * called it: sites differing only below the line (library frames, native paths) share it, sites that
 * reach one helper line from different callers do not. */
struct keyed {
    enum ot_group_key key;
    const struct ot_frame *line;
    size_t nchain;
    const struct ot_frame **chain; /* USER_LINE: line, then its Python callers outward */
};

static int key_of(struct ot_resolver *res, const struct ot_snapshot *s, uint64_t stack_id, struct keyed *k)
{
    *k = (struct keyed){OT_GROUP_SITE, NULL, 0, NULL};
    struct ot_stack_info si;
    ot_stack_info(res, s, stack_id, &si);
    const struct ot_stack *st = ot_snapshot_stack(s, stack_id);
    if (si.user && st) {
        if (!(k->chain = malloc(si.npy * sizeof(*k->chain))))
            return -1;
        struct ot_frame_walk w;
        for (ot_walk_begin(&w, res, st, OT_WALK_PY); ot_walk_next(&w);)
            if ((k->nchain || w.f == si.user) && k->nchain < si.npy)
                k->chain[k->nchain++] = w.f;
        k->key = OT_GROUP_USER_LINE;
        k->line = si.user;
        return 0;
    }
    /* A framework's native thread in a Python process (autograd's backward thread) has no line of the
     * program: its sites group by their headline. A native program's sites stay apart, since its callers
     * are the program's own code. */
    if ((si.flags & OT_STACK_NO_PYTHON) && si.head && si.head->function.p && si.head->function.n)
        *k = (struct keyed){OT_GROUP_NATIVE_FRAME, si.head, 0, NULL};
    return 0;
}

static bool str_same(struct ot_str a, struct ot_str b)
{
    if (!a.p || !b.p)
        return a.p == b.p;
    return a.n == b.n && memcmp(a.p, b.p, a.n) == 0;
}

static bool same_key(const struct keyed *a, const struct keyed *b)
{
    if (a->key != b->key || a->key == OT_GROUP_SITE)
        return false;
    if (a->key == OT_GROUP_NATIVE_FRAME)
        return ot_frame_same_line(a->line, b->line) && str_same(ot_base_name(a->line->module), ot_base_name(b->line->module));
    if (a->nchain != b->nchain)
        return false;
    for (size_t i = 0; i < a->nchain; i++)
        if (!ot_frame_same_line(a->chain[i], b->chain[i]))
            return false;
    return true;
}

/* A hash of the key's strings, so that matching is one probe per site, not a scan of the groups. */
static uint64_t key_hash(const struct keyed *k)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)k->key;
    size_t n = k->nchain ? k->nchain : 1;
    for (size_t c = 0; c < n; c++) {
        const struct ot_frame *f = k->nchain ? k->chain[c] : k->line;
        const struct ot_str parts[] = {f->file, f->function};
        for (size_t i = 0; i < 2; i++)
            for (size_t j = 0; parts[i].p && j < parts[i].n; j++)
                h = (h ^ (unsigned char)parts[i].p[j]) * 1099511628211ull;
        h = (h ^ f->line) * 1099511628211ull;
    }
    return h;
}

static int cmp_group(const void *a, const void *b, void *ctx)
{
    const struct ot_site_group *x = a, *y = b;
    const size_t *sort_member = ctx;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    size_t i = sort_member[x->first], j = sort_member[y->first];
    return i < j ? -1 : i > j;
}

static void free_keys(struct keyed *keys, size_t n)
{
    for (size_t i = 0; keys && i < n; i++)
        free(keys[i].chain);
    free(keys);
}

int ot_sites_group(struct ot_sites *t, struct ot_resolver *res, const struct ot_snapshot *s)
{
    free(t->groups);
    free(t->member);
    t->groups = NULL;
    t->member = NULL;
    t->ngroups = 0;
    if (!t->n)
        return 0;
    size_t *gof = malloc(t->n * sizeof(*gof));           /* site -> group */
    struct keyed *keys = malloc(t->n * sizeof(*keys));   /* group -> key */
    size_t *bucket = malloc(2 * t->n * sizeof(*bucket)); /* open addressing over group indexes */
    size_t *fill = NULL, ng = 0;
    t->groups = calloc(t->n, sizeof(*t->groups));
    t->member = malloc(t->n * sizeof(*t->member));
    if (!gof || !keys || !bucket || !t->groups || !t->member)
        goto oom;
    size_t nb = 2 * t->n;
    for (size_t i = 0; i < nb; i++)
        bucket[i] = SIZE_MAX;
    /* v is largest first, so a group is created at its largest member: groups come out in that order. */
    for (size_t i = 0; i < t->n; i++) {
        struct keyed k;
        if (key_of(res, s, t->v[i].stack_id, &k) < 0)
            goto oom;
        size_t g = SIZE_MAX;
        if (k.key != OT_GROUP_SITE) {
            size_t b = (size_t)(key_hash(&k) % nb);
            while (bucket[b] != SIZE_MAX && !same_key(&keys[bucket[b]], &k))
                b = (b + 1) % nb;
            if (bucket[b] == SIZE_MAX)
                bucket[b] = ng;
            g = bucket[b];
        }
        if (g == SIZE_MAX || g == ng) {
            g = ng++;
            keys[g] = k;
            t->groups[g] = (struct ot_site_group){.key = k.key, .line = k.line};
        } else {
            free(k.chain);
        }
        gof[i] = g;
        t->groups[g].bytes = ot_sat_add(t->groups[g].bytes, t->v[i].bytes);
        t->groups[g].count = ot_sat_add(t->groups[g].count, t->v[i].count);
        t->groups[g].n++;
    }
    if (!(fill = calloc(ng, sizeof(*fill))))
        goto oom;
    for (size_t g = 0, at = 0; g < ng; g++) {
        t->groups[g].first = at;
        at += t->groups[g].n;
    }
    for (size_t i = 0; i < t->n; i++) {
        struct ot_site_group *gr = &t->groups[gof[i]];
        t->member[gr->first + fill[gof[i]]++] = i;
    }
    /* A group of one keeps the key only when it says something a site does not: its user line. */
    for (size_t g = 0; g < ng; g++)
        if (t->groups[g].n == 1 && t->groups[g].key == OT_GROUP_NATIVE_FRAME)
            t->groups[g] = (struct ot_site_group){OT_GROUP_SITE, NULL, t->groups[g].bytes, t->groups[g].count,
                                                  t->groups[g].first, 1};
    t->ngroups = ng;
    /* Sums reorder groups: a line of many small sites can outweigh the largest single site. The largest
     * member's place breaks ties, so the order stays deterministic. */
    qsort_r(t->groups, ng, sizeof(*t->groups), cmp_group, t->member);
    free(fill);
    free(bucket);
    free_keys(keys, ng);
    free(gof);
    return 0;
oom:
    free(fill);
    free(bucket);
    free_keys(keys, ng);
    free(gof);
    free(t->groups);
    free(t->member);
    t->groups = NULL;
    t->member = NULL;
    t->ngroups = 0;
    return -1;
}
