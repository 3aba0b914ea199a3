/* Python frames, read from C without the GIL, merged into a native backtrace: each native frame inside
 * the interpreter's eval loop is replaced by the Python frames that run of the loop executed. The parts:
 * capture/pyframes.h. */
#include <pthread.h>
#include <string.h>

#include "oomtrace_format.h"
#include "capture/backtrace.h"
#include "capture/pyframes.h"
#include "capture/python.h"
#include "capture/stacks.h"
#include "common/defs.h"
#include "common/stage.h"
#include "common/tables.h"

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

void ot_pyframes_forked(void)
{
    ot_py_pid_forked();
    ot_py_borrow_forked();
    if (ot_py_tls && ot_py_tls != PY_THREAD_NONE)
        ot_py_tls->lent.ts = NULL;
}

/* Puts the chain's frames where the interpreter ran them, from native (n frames) into frames: each native
 * frame inside the eval loop is replaced by the Python frames that run of the loop executed. Native frames
 * are copied a run at a time between eval frames (a frame-at-a-time loop was most of the merge). */
static int merge_into(uint64_t *frames, const uint64_t *native, int n, int max, const struct chain *c,
                      unsigned *flags)
{
    /* return addresses in (lo, hi] */
    const uintptr_t eval_first = ot_py.eval_lo + 1, eval_span = ot_py.eval_hi - ot_py.eval_lo;
    const int np = c->n;
    int out = 0, p = 0, i = 0;
    while (i < n && out < max) {
        int j = i;
        if (p < np)
            while (j < n && (uintptr_t)(native[j] >> 1) - eval_first >= eval_span)
                j++;
        else
            j = n; /* no Python frame left: an eval frame stays a native one */
        int k = j - i < max - out ? j - i : max - out;
        memcpy(frames + out, native + i, (size_t)k * sizeof *frames);
        out += k;
        i += k;
        if (i < j || j == n)
            break;
        /* native[j] runs the eval loop: its run, from p to its outermost frame (entry) or the chain's end,
         * or to the cut of a chain deeper than MAXPY when a run of the eval loop begins in what was cut */
        int q = p;
        while (q < np - 1 && !c->entry[q] && !(q + 1 == c->gap && c->gap_runs))
            q++;
        int take = q + 1 - p < max - out ? q + 1 - p : max - out;
        for (int m = 0; m < take; m++)
            frames[out + m] = ((uint64_t)c->id[p + m] << 1) | OT_FRAME_PYTHON;
        out += take;
        p += take;
        i = j + 1;
        if (OT_UNLIKELY(p == c->gap && c->gap_runs > 1)) /* the eval frames of the runs cut whole go too */
            for (int skip = c->gap_runs - 1; skip > 0 && i < n; i++)
                skip -= (uintptr_t)(native[i] >> 1) - eval_first < eval_span;
    }
    while (p < np && out < max)
        frames[out++] = ((uint64_t)c->id[p++] << 1) | OT_FRAME_PYTHON;
    if (i < n || p < np || c->cut) /* longer than a stack may be, or a chain deeper than MAXPY */
        *flags |= OT_STACK_TRUNCATED;
    return out;
}

/* ---- the merged stacks by place (struct mcache) ---- */

/* All a merged stack is made of: the native frames, and the chain's code, instruction, qualname (as the
 * interned ids are keyed: pyintern.c) and run ends. */
static inline void hash_native(uint64_t *a, uint64_t *b, const uint64_t *native, int n)
{
    const uint64_t k = 0xff51afd7ed558ccdull;
    int i = 0;
    for (; i + 2 <= n; i += 2) {
        *a = (*a ^ native[i]) * k;
        *b = (*b ^ native[i + 1]) * k;
    }
    if (i < n)
        *a = (*a ^ native[i]) * k;
}

static inline uint64_t hash_end(uint64_t a, uint64_t b)
{
    uint64_t h = (a ^ (b >> 29)) * 0xff51afd7ed558ccdull;
    return h ^ (h >> 32);
}

/* The chain's part (ca, cb) is its frames' code and instruction (pyframes.h), so that a capture can hash
 * them from the frames (pywalk.c: ot_py_walk_hash) as well as from a chain read whole (chain_hash). The
 * native part is the walk kept by place that gave the frames (gen: the same frames each time it replays),
 * not the ~40-60 frames hashed one after another; frames no such walk gave (gen 0) are hashed. Only the set
 * depends on it: an entry is found by its whole key (native_same, the chain). */
static uint64_t mkey_hash(const uint64_t *native, int n, int np, uint64_t ca, uint64_t cb, uint64_t gen)
{
    uint64_t a = ca ^ ((uint64_t)n << 32 | (uint64_t)np), b = cb;
    if (gen)
        a = (a ^ gen) * 0xff51afd7ed558ccdull;
    else
        hash_native(&a, &b, native, n);
    return hash_end(a, b);
}

static void chain_hash(const struct chain *c, uint64_t *ca, uint64_t *cb)
{
    uint64_t a = OT_PY_HASH_A, b = OT_PY_HASH_B;
    for (int i = 0; i < c->n; i++)
        ot_py_chain_mix(&a, &b, c->code[i], c->instr[i]);
    *ca = a;
    *cb = b;
}

/* Whether e's native frames are these n, which the walk kept by place gen gave (0: none): an entry holds
 * the number of the walk whose frames it was last found equal to (ngen), and a walk kept by place gives
 * the same frames each time, so that walk's frames need no compare (~8 lines of the entry, cold after
 * the step's own work). */
static inline int native_same(const struct mentry *e, const uint64_t *native, int n, uint64_t gen)
{
    return (gen && e->ngen == gen) || memcmp(e->native, native, (size_t)n * sizeof *native) == 0;
}

/* e was found for native frames the walk kept by place gen gave: it holds that walk's number from now on
 * (written only when it changes: the line stays clean on the common hit). */
static inline void native_seen(struct mentry *e, uint64_t gen)
{
    if (gen && e->ngen != gen)
        e->ngen = gen;
}

static int mkey_same(const struct mentry *e, uint64_t h, const uint64_t *native, int n, int max, const struct chain *c,
                     const void *const *names, uint64_t gen)
{
    size_t np = (size_t)c->n;
    return e->h == h && e->n == n && e->np == c->n && e->max == max && e->bflags == 0 && native_same(e, native, n, gen) &&
           memcmp(e->code, c->code, np * sizeof c->code[0]) == 0 && memcmp(e->instr, c->instr, np * sizeof c->instr[0]) == 0 &&
           memcmp(e->name, names, np * sizeof names[0]) == 0 && memcmp(e->entry, c->entry, np) == 0;
}

/* A borrowed stack's key: the native frames, the lender's chain as interned (the ids name code, instruction
 * and qualname: pyintern.c) with its run ends, and the lender (bflags). */
static uint64_t bkey_hash(const uint64_t *native, int n, const struct chain *c, unsigned bflags)
{
    uint64_t a = ((uint64_t)n << 32 ^ (uint64_t)c->n) + bflags, b = 0xC2B2AE3D27D4EB4Full;
    hash_native(&a, &b, native, n);
    for (int i = 0; i < c->n; i++)
        b = (b ^ c->id[i] ^ (uint64_t)c->entry[i] << 32) * 0xff51afd7ed558ccdull;
    return hash_end(a, b);
}

static int bkey_same(const struct mentry *e, uint64_t h, const uint64_t *native, int n, int max, const struct chain *c,
                     unsigned bflags, uint64_t gen)
{
    size_t np = (size_t)c->n;
    return e->h == h && e->n == n && e->np == c->n && e->max == max && e->bflags == bflags &&
           native_same(e, native, n, gen) &&
           memcmp(e->id, c->id, np * sizeof c->id[0]) == 0 && memcmp(e->entry, c->entry, np) == 0;
}

/* The thread's merged stacks by place, in use from the first miss (the thread's table holds them). */
static struct mcache *mcache_get(struct py_thread *t)
{
    if (!t->mc)
        t->mc = (struct mcache *)((char *)t + PY_MC_AT);
    return t->mc;
}

/* An entry (re)filled with a merged stack and what it was made of but the chain's code, instruction and
 * qualname (a place's key, filled by its caller); its stack id is zeroed: interned again, by the intern
 * that follows. gen: the walk kept by place that gave the native frames (0: none). */
static void entry_fill(struct mentry *e, uint64_t h, const uint64_t *native, int n, int max, const struct chain *c,
                       const uint64_t *frames, int out, unsigned added, unsigned bflags, uint64_t gen)
{
    const int np = c->n;
    e->h = h;
    e->n = (uint16_t)n;
    e->np = (uint16_t)np;
    e->out = (uint16_t)out;
    e->max = (uint16_t)max;
    e->flags = added;
    e->bflags = bflags;
    e->sid = (struct ot_stack_memo){0, 0};
    e->ngen = gen;
    e->ver++;
    e->nraw = 0;
    memcpy(e->native, native, (size_t)n * sizeof *native);
    memcpy(e->entry, c->entry, (size_t)np);
    memcpy(e->id, c->id, (size_t)np * sizeof c->id[0]);
    memcpy(e->frames, frames, (size_t)out * sizeof *frames);
}

/* ---- a walk's merged stack, by the walk kept by place (backtrace.h: ot_backtrace_place) ----
 *
 * A bench build only (-DOT_PY_LINK: make bench-pylink): measured slower than without it on the 2-core
 * development machine, kept for a measurement on the H200 (docs/PERFORMANCE.md, issue 16's seventh pass).
 * After the step's own work, the chain is read cold, one frame's link after another (each frame's address
 * is in the one before), and the merged stack by place is found by a hash of 60-100 frames and compared
 * with its ~4 KB entry. A walk kept by place names the entry its frames were merged into last; the entry
 * keeps the addresses of the frames its chain was read from (fa). The chain is then checked at those
 * addresses, every read's address known at the start: each frame's link to the next (the last's to none),
 * whether it is a C-stack shim, its code, instruction, run end and code's qualname, all that the chain's
 * read (pywalk.c: gather_fast) and the entry's key (mkey_same) take; the native frames are the entry's
 * because the walk kept by place gave them and the entry was named at its version. */
#ifdef OT_PY_LINK

/* Whether entry r's chain is the thread's (frame: its innermost frame), read at r's frames' addresses. A
 * frame is read only once the frame before it named it (the innermost: the thread state), and a code
 * object's qualname only once a live frame holds that code: a chunk of frames the interpreter freed, or a
 * code object, is never touched. Each frame's address is the memo's, not the value just read, so the
 * reads of one frame do not wait for the frame before (the check of its link is a branch predicted to
 * hold): a chain read cold waits for its frames together rather than one after another. The run ends
 * (entry) are taken as the chain's read takes them (pywalk.c: gather_fast). */
static int chain_at(const struct mentry *r, const void *frame)
{
    const struct layout *L = ot_py.L;
    const void *const *const fa = r->fa;
    const void *const *const rcode = r->code, *const *const rname = r->name;
    const char *const *const rinstr = r->instr;
    const uint8_t *const rentry = r->entry;
    if (frame != fa[0])
        return 0;
    const unsigned o_owner = L->fr_owner, o_prev = L->fr_previous, o_code = L->fr_code, o_instr = L->fr_instr;
    const unsigned o_entry = L->fr_is_entry >= 0 ? (unsigned)L->fr_is_entry : o_owner, o_name = L->co_qualname;
    const char entry_mask = L->fr_is_entry >= 0 ? (char)0xff : 0;
    const int cstack = L->owner_cstack, nraw = r->nraw, np = r->np;
    int k = 0;
    unsigned pend = 0; /* frame k - 1's run end so far: a C-stack shim frame after it sets it */
    for (int i = 0; i < nraw; i++) {
        const char *const f = fa[i];
        if (*(const void *const *)(f + o_prev) != (i + 1 < nraw ? fa[i + 1] : NULL))
            return 0;
        if (f[o_owner] == cstack) {
            pend = 1;
            continue;
        }
        if (k == np || (k && pend != rentry[k - 1]))
            return 0;
        const void *const code = *(const void *const *)(f + o_code);
        if (code != rcode[k] || *(const char *const *)(f + o_instr) != rinstr[k] ||
            *(const void *const *)((const char *)code + o_name) != rname[k])
            return 0;
        pend = (f[o_entry] & entry_mask) != 0;
        k++;
    }
    return k == np && np > 0; /* (the outermost frame's run end is always set: rentry[np - 1]) */
}

static inline struct plink *plink_set(struct mcache *mc, uint64_t gen, const void *f0, const void *i0)
{
    uint64_t h = (gen * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)f0) * 0xff51afd7ed558ccdull ^ (uint64_t)(uintptr_t)i0;
    h = (h ^ h >> 31) * 0xC2B2AE3D27D4EB4Full;
    return mc->pl[(h >> 40) & (PLSETS - 1)];
}

/* The entry that the walk kept by place gen, this innermost frame and instruction name, when the thread's
 * chain is the one it was made of: frames filled, its length; -1 otherwise (the capture goes the usual
 * way). */
static int merge_linked(struct py_thread *t, uint64_t gen, int n, int max, unsigned *flags, const uint64_t **src)
{
    struct mcache *mc = t->mc;
    const struct layout *L = ot_py.L;
    if (!mc || L->frame_objects || !ot_py.is_initialized())
        return -1;
    void *ts = ot_py.get_tstate();
    if (!ts)
        return -1;
    void *cf = *(void *const *)((const char *)ts + L->ts_cframe);
    const void *frame = L->ts_direct ? cf : cf ? *(void *const *)((const char *)cf + L->cframe_current) : NULL;
    if (!frame)
        return -1;
    /* as the chain's read counts itself (pywalk.c) */
    if (__atomic_load_n(&ot_py_lending, __ATOMIC_RELAXED))
        __atomic_add_fetch(&ot_py_stamp, 1, __ATOMIC_RELAXED);
    const void *const i0 = *(const void *const *)((const char *)frame + L->fr_instr);
    struct plink *const set = plink_set(mc, gen, frame, i0);
    struct mentry *r = NULL;
    for (int w = 0; w < PLWAYS && !r; w++) {
        struct plink *p = &set[w];
        struct mentry *q = p->r;
        if (q && p->gen == gen && p->f0 == frame && p->i0 == i0 && q->ver == p->ver && q->n == n &&
            q->max == max && !q->bflags && q->nraw && chain_at(q, frame)) {
            r = q;
            p->used = ++mc->pltick;
        }
    }
    OT_STAGE_CACHE(OT_C_PY_LINKED, r != NULL);
    if (!r)
        return -1;
    const size_t at = (size_t)(r - &mc->e[0][0]);
    mc->older[at / 2] = (uint8_t)!(at & 1);
    t->last.n = 0;           /* the chain's last read is not this one: the next capture reads it whole */
    t->last_ref = NULL;
    t->merged.ref = r;
    t->merged.valid = 1;
    *src = r->frames;
    *flags |= r->flags;
    ot_stack_hint = &r->sid;
    return r->out;
}

/* Names entry r (holding the merged stack of this capture's frames) under the walk kept by place gen and
 * the chain's innermost frame, with the addresses of the frames this capture read (only a capture that
 * read the whole chain). */
static void link_entry(struct py_thread *t, uint64_t gen, struct mentry *r)
{
    struct mcache *mc = t->mc;
    if (!gen || !t->pf_whole || !t->npf || t->npf > MRAW || !mc)
        return;
    memcpy(r->fa, t->pf, t->npf * sizeof t->pf[0]);
    r->nraw = (uint16_t)t->npf;
    const void *f0 = t->pf[0], *i0 = *(const void *const *)((const char *)f0 + ot_py.L->fr_instr);
    struct plink *const set = plink_set(mc, gen, f0, i0);
    int v = 0;
    for (int w = 0; w < PLWAYS; w++) {
        if (set[w].r == r && set[w].gen == gen && set[w].f0 == f0 && set[w].i0 == i0) {
            v = w;
            break;
        }
        if (set[w].used < set[v].used)
            v = w;
    }
    set[v] = (struct plink){gen, f0, i0, r, r->ver, ++mc->pltick};
}

#define LINK_ENTRY(t, gen, r) link_entry((t), (gen), (r))
#else
#define LINK_ENTRY(t, gen, r) ((void)(gen))
#endif

/* ---- a borrowed stack by the walk kept by place and the lender's chain kept (struct blink) ----
 * Each of a backward's ~50 allocations on autograd's thread borrows the same chain (the main thread waits in
 * backward()), and its key (bkey_hash, bkey_same) read ~40 native frames and the chain's ids and run ends
 * to find what the walk kept by place and the borrow's check had each already found unchanged. Exact: gen
 * names one fill of a walk kept by place on this thread (the same frames out), cgen one chain the thread's
 * last borrow kept (the same ids and run ends), bflags the lender, and the entry is named at its version. */
static inline struct blink *blink_of(struct mcache *mc, uint64_t gen, uint64_t cgen)
{
    uint64_t h = (gen * 0x9E3779B97F4A7C15ull ^ cgen) * 0xff51afd7ed558ccdull;
    return &mc->bl[(h ^ h >> 29) & (BLSETS - 1)];
}

/* The entry way w of set si, found for this borrowed stack (by its link, b NULL, or by its key, b the link
 * that missed): the set's other way is the older now, and the link names it. Returns the merged stack's
 * length. */
static int borrowed_hit(struct mcache *mc, size_t si, int w, struct blink *b, uint64_t gen, uint64_t cgen,
                        unsigned bflags, unsigned *flags, const uint64_t **src)
{
    struct mentry *e = &mc->e[si][w];
    mc->older[si] = (uint8_t)!w;
    if (b)
        *b = (struct blink){gen, cgen, e, e->ver, bflags};
    native_seen(e, gen);
    *src = e->frames;
    *flags |= e->flags;
    ot_stack_hint = &e->sid;
    return e->out;
}

/* A borrowed stack (the lender's chain c, interned, merged into the native frames): one of the thread's
 * merged stacks by place when the same native frames borrowed the same chain from the same lender (an
 * autograd thread's backward borrows the waiting main thread's chain for each of its ops), else merged and
 * kept there. gen: the walk kept by place that gave the native frames (0: none), cgen: the chain's number
 * (ot_py_borrow; 0: none). */
static int merge_borrowed(const uint64_t *native_in, uint64_t *frames, int n, int max, const struct chain *c,
                          unsigned bflags, unsigned *flags, const uint64_t **src, uint64_t gen, uint64_t cgen)
{
    struct py_thread *t = ot_py_tls;
    struct mcache *mc = NULL;
    struct mentry *e = NULL;
    struct blink *b = NULL;
    uint64_t h = 0;
    if (t && t != PY_THREAD_NONE && n <= MNATIVE && c->n <= MPY && (mc = mcache_get(t)) != NULL) {
        if (gen && cgen) {
            b = blink_of(mc, gen, cgen);
            struct mentry *r = b->r;
            const int linked = r && b->gen == gen && b->cgen == cgen && b->bflags == bflags && r->ver == b->ver &&
                               r->bflags == bflags && r->n == n && r->max == max;
            OT_STAGE_CACHE(OT_C_PY_BLINKED, linked);
            if (linked) {
                const size_t at = (size_t)(r - &mc->e[0][0]);
                return borrowed_hit(mc, at / 2, (int)(at & 1), NULL, gen, cgen, bflags, flags, src);
            }
        }
        h = bkey_hash(native_in, n, c, bflags);
        struct mentry *set = mc->e[h & (MSETS - 1)];
        for (int w = 0; w < 2; w++)
            if (bkey_same(&set[w], h, native_in, n, max, c, bflags, gen)) {
                OT_STAGE_CACHE(OT_C_PY_BORROWED, 1);
                return borrowed_hit(mc, h & (MSETS - 1), w, b, gen, cgen, bflags, flags, src);
            }
        OT_STAGE_CACHE(OT_C_PY_BORROWED, 0);
        e = &mc->e[h & (MSETS - 1)][mc->older[h & (MSETS - 1)]];
    }
    uint64_t native[OT_MAX_FRAMES];
    memcpy(native, native_in, (size_t)n * sizeof *native); /* (native_in may be frames, written below) */
    unsigned added = 0;
    const int out = merge_into(frames, native, n, max, c, &added);
    *src = frames;
    *flags |= added;
    if (!e || out > MNATIVE + MPY)
        return out;
    if (t->merged.ref == e) /* the thread's last merged stack was this entry's: no longer */
        t->merged.valid = 0;
    if (t->last_ref == e) { /* nor its last chain */
        t->last_ref = NULL;
        t->last.n = 0;
    }
    entry_fill(e, h, native, n, max, c, frames, out, added, bflags, gen);
    mc->older[h & (MSETS - 1)] ^= 1;
    if (b)
        *b = (struct blink){gen, cgen, e, e->ver, bflags};
    ot_stack_hint = &e->sid;
    return out;
}

/* The thread's chain, from its innermost frame, found among its merged stacks by place without reading it
 * into a struct chain: its frames hashed as they are read (ot_py_walk_hash: np frames, ca and cb), then
 * the entry compared with the frames where they lie (ot_py_walk_is: warm by then), every field the
 * entry's key holds.
 * After the step's own work the chain's copy and its qualnames' lines on this thread's stack were as cold
 * as the frames (~10 lines written a capture), and compared with the entry after. place_cache: the cache,
 * when the way can be tried (the layout validated, no frame objects). merge_place returns the merged
 * stack's length, or -1: the caller reads the chain and goes the usual way (a miss). */
static struct mcache *place_cache(const void *frame, int fast, int n)
{
    struct py_thread *t = ot_py_tls;
    struct mcache *mc;
    if (!fast || !frame || ot_py.L->frame_objects || !t || t == PY_THREAD_NONE || (mc = t->mc) == NULL ||
        n > MNATIVE)
        return NULL;
    return mc;
}

/* A merged stack found by place (way w of the set of key h): the set's other way is the older now, the entry is
 * the thread's last merged stack (for a loop from here) and, when chain_is_entry, its last chain too. Returns
 * the merged stack's length. */
static int place_hit(struct py_thread *t, struct mcache *mc, uint64_t h, int w, int chain_is_entry, uint64_t gen,
                     unsigned *flags, const uint64_t **src)
{
    struct mentry *e = &mc->e[h & (MSETS - 1)][w];
    OT_STAGE_CACHE(OT_C_PY_PLACES, 1);
    mc->older[h & (MSETS - 1)] = (uint8_t)!w;
    t->merged.ref = e;
    t->merged.valid = 1;
    if (chain_is_entry)
        ot_py_walk_last_is_ref(t, e);
    native_seen(e, gen);
    *src = e->frames;
    *flags |= e->flags;
    ot_stack_hint = &e->sid;
    LINK_ENTRY(t, gen, e);
    return e->out;
}

/* ---- a merged stack predicted by place (struct ppset) ----
 * A step's main thread allocates from a hundred places in turn. Each capture found its merged stack by
 * place by hashing its chain (ot_py_walk_hash: every frame read) and then comparing the entry with it
 * (ot_py_walk_is: every frame read again). The walk kept by place that gave the native frames and the
 * chain's innermost frame and instruction mostly name one entry, or a few: compared with the chain at
 * once, they spare the first read. Only guesses: an entry is taken when its whole key holds (what
 * merge_place checks, its hash aside, which is the key's), else the capture goes the usual way. */
static inline struct ppset *pred_set(struct mcache *mc, uint64_t gen, const void *frame, uint32_t *tag)
{
    const void *const i0 = *(const void *const *)((const char *)frame + ot_py.L->fr_instr);
    uint64_t h = (gen * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)frame) * 0xff51afd7ed558ccdull ^
                 (uint64_t)(uintptr_t)i0;
    h = (h ^ h >> 31) * 0xC2B2AE3D27D4EB4Full;
    *tag = (uint32_t)(h >> 32) | 1u; /* (never 0: an empty way's) */
    return &mc->pp[(h >> 16) & (PPSETS - 1)];
}

/* Way w of set ps was found or noted now: the way after the last one (its successor), and the last. */
static inline void pred_seen(struct ppset *ps, uint32_t w)
{
    if (ps->succ[ps->last] != w) /* (last and succ hold ways only: written here, zero when mapped) */
        ps->succ[ps->last] = (uint8_t)w;
    if (ps->last != w)
        ps->last = (uint8_t)w;
}

/* e is the merged stack of this capture's native frames and chain: a guess for the next capture whose
 * walk kept by place and innermost frame and instruction are this one's (ps NULL: none to be made). Kept
 * in the way that names it already, else in an empty way, else in the victim's. */
static inline void pred_note(struct mcache *mc, struct ppset *ps, uint32_t tag, const struct mentry *e)
{
    if (!ps)
        return;
    const uint16_t at = (uint16_t)(e - &mc->e[0][0]);
    uint32_t w = 0, empty = PPWAYS;
    for (; w < PPWAYS && !(ps->w[w].tag == tag && ps->w[w].at == at); w++)
        if (!ps->w[w].tag && empty == PPWAYS)
            empty = w;
    if (w == PPWAYS) {
        w = empty;
        if (w == PPWAYS) {
            w = ps->victim;
            ps->victim = (uint8_t)(w + 1 < PPWAYS ? w + 1 : 0);
        }
    }
    ps->w[w] = (struct ppred){tag, (uint16_t)e->ver, at};
    pred_seen(ps, w);
}

/* Whether way w of set ps names the merged stack of this capture (its whole key checked). */
static inline int pred_is(const struct mcache *mc, const struct ppset *ps, uint32_t w, uint32_t tag, void *frame,
                          const uint64_t *frames, int n, int max, uint64_t gen)
{
    const struct ppred *const p = &ps->w[w];
    if (p->tag != tag)
        return 0;
    const struct mentry *const q = &mc->e[0][0] + p->at;
    return (uint16_t)q->ver == p->ver && q->n == n && q->max == max && !q->bflags && native_same(q, frames, n, gen) &&
           ot_py_walk_is_kept(frame, q->np, q->code, q->instr, q->name, q->entry);
}

static int merge_predicted(struct py_thread *t, struct mcache *mc, void *frame, struct ppset *ps, uint32_t tag,
                           const uint64_t *frames, int n, int max, uint64_t gen, unsigned *flags,
                           const uint64_t **src)
{
    const uint32_t first = ps->succ[ps->last];
    uint32_t w = first;
    if (!pred_is(mc, ps, w, tag, frame, frames, n, max, gen))
        for (w = 0; w < PPWAYS; w++)
            if (w != first && pred_is(mc, ps, w, tag, frame, frames, n, max, gen))
                break;
    OT_STAGE_CACHE(OT_C_PY_PREDICTED, w < PPWAYS);
    if (w == PPWAYS)
        return -1;
    pred_seen(ps, w);
    const size_t at = ps->w[w].at;
    return place_hit(t, mc, at / 2, (int)(at & 1), 1, gen, flags, src);
}

static int merge_place(struct mcache *mc, void *frame, int np, uint64_t ca, uint64_t cb, const uint64_t *frames, int n,
                       int max, unsigned *flags, const uint64_t **src, uint64_t gen, struct ppset *pred, uint32_t tag)
{
    const uint64_t h = mkey_hash(frames, n, np, ca, cb, gen);
    struct mentry *set = mc->e[h & (MSETS - 1)];
    for (int w = 0; w < 2; w++) {
        struct mentry *e = &set[w];
        if (e->h != h || e->n != n || e->np != np || e->max != max || e->bflags ||
            !native_same(e, frames, n, gen) ||
            !ot_py_walk_is(frame, np, e->code, e->instr, e->name, e->entry))
            continue;
        OT_STAGE_CACHE(OT_C_PY_MERGED, 0);
        pred_note(mc, pred, tag, e);
        return place_hit(ot_py_tls, mc, h, w, 1, gen, flags, src);
    }
    return -1;
}

/* The merged stack's last copy (struct merged), kept for the thread's next allocation from here. */
static void keep_merged(struct merged *m, const uint64_t *native, int n, int max, const uint64_t *frames, int out,
                        unsigned added)
{
    memcpy(m->native, native, (size_t)n * sizeof *native);
    memcpy(m->frames, frames, (size_t)out * sizeof *frames);
    m->n = n;
    m->max = max;
    m->out = out;
    m->flags = added;
    m->ref = NULL;
    m->valid = 1;
}

/* Apart from ot_python_merge, so that a program without Python never reserves its stack buffers (threads
 * with 16 KiB stacks allocate too).
 *
 * A thread that allocates again from where it allocated last (a loop) has the same native frames and the
 * same chain: the merged stack is then the thread's last one, copied (struct merged), where the merge
 * read every native frame. Any difference in either, a Python frame's instruction included, merges
 * again. */
static __attribute__((noinline)) int merge(const uint64_t *native, uint64_t *frames, int n, int max, unsigned *flags,
                                            const uint64_t **src)
{
    const uint64_t gen = ot_backtrace_place();
#ifdef OT_PY_LINK
    if (gen && ot_py_tls && ot_py_tls != PY_THREAD_NONE) {
        const int out = merge_linked(ot_py_tls, gen, n, max, flags, src);
        if (out >= 0)
            return out;
    }
#endif
    struct chain c;
    const struct chain *got;
    int same, fast;
    void *frame = NULL;
    struct mcache *pmc = NULL;
    uint64_t ca = 0, cb = 0;
    int k = -1;
    struct ppset *pred = NULL;
    uint32_t tag = 0;
    OT_STAGE_BEGIN(tw);
    /* The check against the thread's last chain (a loop's) where the native frames are the last capture's
     * too, or no guess will be tried: in a step's mix the check failed, and read another place's entry, as
     * the merged stack it leads to needs the last capture's native frames. */
    struct py_thread *const t0 = ot_py_tls;
    const int cached = t0 && t0 != PY_THREAD_NONE;
    if (cached && OT_UNLIKELY(++t0->captures == OT_TABLE_HOT))
        ot_table_hot(t0, PY_TABLE);
    const int guess = gen && cached && t0->mc;
    const int check_last = !guess || gen == t0->last_gen;
    if (guess)
        t0->last_gen = gen;
    int np = ot_py_walk_begin(&c, &got, &same, &fast, &frame, check_last);
    if (np == OT_PY_WALK_MORE && (pmc = place_cache(frame, fast, n)) != NULL) {
        if (gen) {
            pred = pred_set(pmc, gen, frame, &tag);
            const int out = merge_predicted(ot_py_tls, pmc, frame, pred, tag, native, n, max, gen, flags, src);
            if (out >= 0) {
                OT_STAGE_END(OT_ST_PYWALK, tw);
                return out;
            }
        }
        k = ot_py_walk_hash(frame, &ca, &cb);
    }
    if (np == OT_PY_WALK_MORE && !frame) /* no Python frame on this thread (autograd's): nothing to read */
        np = 0;
    if (k > 0) {
        OT_STAGE_END(OT_ST_PYWALK, tw); /* (the chain read again after a miss below is not counted) */
        const int out = merge_place(pmc, frame, k, ca, cb, native, n, max, flags, src, gen, pred, tag);
        if (out >= 0)
            return out;
        np = ot_py_walk_rest(frame, &c, &got, &same, fast);
    } else {
        if (np == OT_PY_WALK_MORE)
            np = ot_py_walk_rest(frame, &c, &got, &same, fast);
        OT_STAGE_END(OT_ST_PYWALK, tw);
    }
    if (np < 0) /* refused by a check: said, and off, there */
        np = ot_py_walk_ids(&c, np, fast);
    if (np == 0) {
        if (__atomic_load_n(&ot_py.state, __ATOMIC_ACQUIRE) != PY_ON)
            return n;
        uint32_t lender = 0;
        uint64_t cgen = 0;
        const struct chain *lent = &c;
        if (!ot_py.is_initialized() || (np = OT_STAGE_CALL(OT_ST_BORROW, ot_py_borrow(&c, &lender, &cgen, &lent))) == 0) {
            *flags |= OT_STACK_NO_PYTHON; /* a native thread of a Python process, no thread waiting */
            return n;
        }
        const unsigned bflags = OT_STACK_BORROWED | (lender & OT_STACK_LENDER_MAX) << OT_STACK_LENDER_SHIFT;
        *flags |= bflags;
        return merge_borrowed(native, frames, n, max, lent, bflags, flags, src, gen, cgen);
    }
    struct py_thread *t = ot_py_tls;
    if (t == NULL || t == PY_THREAD_NONE) { /* no thread cache (ot_py_walk found none to be had) */
        if (!same && (np = ot_py_walk_ids(&c, np, fast)) == 0)
            return n;
        uint64_t copy[OT_MAX_FRAMES];
        memcpy(copy, native, (size_t)n * sizeof *native); /* (native may be frames, written below) */
        *src = frames;
        return merge_into(frames, copy, n, max, got, flags);
    }
    struct merged *m = &t->merged;
    if (same && m->valid) {
        struct mentry *r = m->ref; /* the merged stack by place it was, or its copy in m */
        if (r ? r->n == n && r->max == max && native_same(r, native, n, gen)
              : m->n == n && m->max == max && memcmp(m->native, native, (size_t)n * sizeof *native) == 0) {
            OT_STAGE_CACHE(OT_C_PY_MERGED, 1);
            const int out = r ? r->out : m->out;
            *src = r ? r->frames : m->frames;
            *flags |= r ? r->flags : m->flags;
            if (r) {
                native_seen(r, gen);
                ot_stack_hint = &r->sid;
                LINK_ENTRY(t, gen, r);
            }
            return out;
        }
    }
    OT_STAGE_CACHE(OT_C_PY_MERGED, 0);
    if (same == 2) { /* the chain is the last merged stack's entry's: wanted whole now */
        got = ot_py_walk_last();
        same = 1;
    }
    /* The merged stacks by place: keyed by all they were made of, so a hit is the stack a merge would
     * make, and the chain's ids come with it (no interning). Only with the layout validated (plain loads
     * of each code object's qualname) and within the entries' bounds. */
    struct mcache *mc = t->mc;
    const void *names[MPY];
    struct mentry *e = NULL;
    uint64_t h = 0;
    if (fast && n <= MNATIVE && np <= MPY) {
        const unsigned o_name = ot_py.L->co_qualname;
        for (int i = 0; i < np; i++)
            names[i] = *(const void *const *)((const char *)got->code[i] + o_name);
        chain_hash(got, &ca, &cb);
        h = mkey_hash(native, n, np, ca, cb, gen);
        if (mc) {
            struct mentry *set = mc->e[h & (MSETS - 1)];
            for (int w = 0; w < 2; w++)
                if (mkey_same(&set[w], h, native, n, max, got, names, gen)) {
                    pred_note(mc, pred, tag, &set[w]);
                    return place_hit(t, mc, h, w, !same, gen, flags, src); /* !same: the chain's ids are the entry's */
                }
        }
        OT_STAGE_CACHE(OT_C_PY_PLACES, 0);
        if ((mc = mcache_get(t)) != NULL)
            e = &mc->e[h & (MSETS - 1)][mc->older[h & (MSETS - 1)]];
    }
    if (!same && (np = ot_py_walk_ids(&c, np, fast)) == 0)
        return n;
    if (!same)
        got = &c;
    memcpy(m->native, native, (size_t)n * sizeof *native); /* (native may be frames, written below) */
    unsigned added = 0;
    int out = merge_into(frames, m->native, n, max, got, &added);
    *src = frames;
    *flags |= added;
    if (!e || out > MNATIVE + MPY) {
        keep_merged(m, m->native, n, max, frames, out, added);
        return out;
    }
    entry_fill(e, h, m->native, n, max, got, frames, out, added, 0, gen);
    memcpy(e->code, got->code, (size_t)np * sizeof got->code[0]);
    memcpy(e->instr, got->instr, (size_t)np * sizeof got->instr[0]);
    memcpy(e->name, names, (size_t)np * sizeof names[0]);
    mc->older[h & (MSETS - 1)] ^= 1;
    pred_note(mc, pred, tag, e);
    m->ref = e;
    m->valid = 1;
    ot_stack_hint = &e->sid;
    LINK_ENTRY(t, gen, e);
    return out;
}

int ot_python_merge(const uint64_t *native, uint64_t *frames, int n, int max, unsigned *flags, const uint64_t **src)
{
    *src = native;
    int state = __atomic_load_n(&ot_py.state, __ATOMIC_ACQUIRE);
    if (OT_UNLIKELY(state == PY_UNPROBED)) {
        pthread_once(&probe_once, ot_py_probe);
        state = __atomic_load_n(&ot_py.state, __ATOMIC_ACQUIRE);
    }
    if (state != PY_ON)
        return n;
    ot_stack_hint = NULL; /* the native walk's (backtrace.c) names the frames before the Python ones */
    return merge(native, frames, n, max, flags, src);
}

