/* The native walk's memos by place (walker.h: struct place_memo): a walk just taken, kept under its start so
 * that the next walk from the same place replays it (backtrace.c checks and replays them). */
#include <stdint.h>
#include <string.h>

#include "capture/walker.h"

/* Keeps the walk just taken (its slots in w->memo: cfa, x) as a place memo. clash: a memo under the same
 * key that did not replay: the places starting at sp need another slot to tell them apart, the first
 * return address where the two walks differ (by address or by where it was read). */
void ot_walk_keep_place(struct walker *w, uint64_t sp, uint64_t bp, int want, const uint64_t *frames, int n,
                        uint32_t nx, int needs_bp0, uint32_t disc, struct place_memo *clash, uint32_t skip)
{
    const struct memo *m = &w->memo;
    if (n > PM_FRAMES || nx > PM_X || skip > UINT8_MAX)
        return;
    /* The slot moves only inwards (to a lower address: a frame nearer the walk's start, whose slot holds the
     * same kind of value from one place to the next more often than a frame further out), so it settles
     * after a few clashes: a slot moved at every clash would move every memo's key. Up to PM_WAYS places
     * that share a key are told apart by their checks. */
    if (clash) {
        const int c = n < clash->n ? n : clash->n;
        int k = 0; /* the first slot where both walks read a return address, and not the same one */
        while (k < c && (frames[k] << 1 == clash->frames[k] || m->cfa[k] != clash->cfa[k]))
            k++;
        if (k < c && m->cfa[k] > 8 && (!disc || m->cfa[k] - 8 < disc)) {
            struct pm_dir *d = &w->dir[pm_dir_of(sp)];
            d->sp0 = sp;
            d->disc = disc = m->cfa[k] - 8;
        }
    }
    /* Keyed by the slot's value only where this walk read a return address there (so the value is one the
     * check requires): a slot that holds something else at this place may change between its walks. */
    uint64_t dv = 0;
    int k = 0;
    while (disc && k < n && m->cfa[k] - 8 != disc)
        k++;
    if (disc && k < n)
        dv = frames[k];
    else
        disc = 0;
    const uint64_t h = pm_key(sp, disc, dv);
    struct pm_set *const ps = &w->pmset[PM_SET(h)];
    int v = 0;
    for (int j = 1; j < PM_WAYS; j++)
        if (ps->used[j] < ps->used[v])
            v = j;
    struct place_memo *const e = &w->pm[PM_SET(h)][v];
    ps->tag[v] = PM_TAG(h);
    ps->used[v] = ++w->pm_tick;
    w->last_used = &ps->used[v];
    e->sp0 = sp;
    e->bp0 = bp;
    e->dv = dv;
    e->disc = disc;
    e->want = want;
    e->n = (uint16_t)n;
    e->nx = (uint16_t)nx;
    e->needs_bp0 = (uint8_t)needs_bp0;
    e->skip = (uint8_t)skip;
    e->stack = (struct ot_stack_memo){0, 0};
    e->gen = ++w->fills;
    w->gen = e->gen;
    memcpy(e->cfa, m->cfa, (size_t)n * sizeof *e->cfa);
    for (int j = 0; j < n; j++)
        e->frames[j] = frames[j] << 1;
    memcpy(e->xoff, m->xoff, (size_t)nx * sizeof *e->xoff);
    memcpy(e->xval, m->xval, (size_t)nx * sizeof *e->xval);
    w->last = e;
}
