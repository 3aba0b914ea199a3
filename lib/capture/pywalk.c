/* The calling thread's own Python frame chain, read in each version's layout (pyprobe.c).
 *
 * The layout is checked before it is trusted: until one walk has validated every code object's type,
 * reads go through process_vm_readv, which fails instead of faulting; after that they are plain loads (the
 * hot path: a handful per frame). A per-thread cache makes repeated call sites cost a few loads each. */
#include <pthread.h>
#include <string.h>

#include "capture/pyframes.h"
#include "common/defs.h"
#include "common/stage.h"
#include "common/log.h"
#include "common/pages.h"
#include "common/tables.h"

static int validated; /* one walk has confirmed the layout: plain loads from now on */
uint64_t ot_py_stamp;
int ot_py_lending;

static inline int rd_u8(const void *base, unsigned off, char *out)
{
    if (OT_LIKELY(__atomic_load_n(&validated, __ATOMIC_RELAXED))) {
        *out = *((const char *)base + off);
        return 0;
    }
    return ot_py_checked_read((const char *)base + off, out, 1);
}

static inline void *rd_ptr(const void *base, unsigned off)
{
    if (OT_LIKELY(__atomic_load_n(&validated, __ATOMIC_RELAXED)))
        return *(void *const *)((const char *)base + off);
    void *p = NULL;
    return ot_py_checked_read((const char *)base + off, &p, sizeof p) == 0 ? p : NULL;
}

/* ---- the thread's cache (struct py_thread) ---- */

__thread struct py_thread *ot_py_tls __attribute__((tls_model("initial-exec")));
static pthread_key_t py_key;
static int py_key_ok;
static pthread_once_t py_key_once = PTHREAD_ONCE_INIT;

/* At thread exit. Destructors that run after this one may still allocate: they walk uncached. */
static void py_thread_free(void *p)
{
    ot_py_tls = PY_THREAD_NONE;
    ot_stack_hint = NULL; /* (it may name an entry unmapped below) */
    ot_table_unmap(p, PY_TABLE); /* (the merged stacks with it: MSETS x 2 entries of ~4.5 KB) */
}

static void py_key_make(void)
{
    py_key_ok = pthread_key_create(&py_key, py_thread_free) == 0;
}

struct py_thread *ot_py_thread_get(void)
{
    struct py_thread *t = ot_py_tls;
    if (OT_LIKELY(t != NULL))
        return t == PY_THREAD_NONE ? NULL : t;
    ot_py_tls = PY_THREAD_NONE;
    pthread_once(&py_key_once, py_key_make);
    t = py_key_ok ? ot_table_map(PY_TABLE) : NULL;
    if (!t)
        return NULL;
    pthread_setspecific(py_key, t);
    ot_py_tls = t;
    return t;
}

/* ---- the chain, per version ---- */

/* The chain as plain loads; called once the layout is validated. */
static int gather_fast(void *frame, struct chain *c, struct py_thread *t)
{
    uint32_t npf = 0;
    const struct layout *L = ot_py.L;
    const unsigned o_owner = L->fr_owner, o_prev = L->fr_previous, o_code = L->fr_code, o_instr = L->fr_instr;
    const int cstack = L->owner_cstack;
    /* Versions without is_entry read a byte that is there (the owner) and mask it off: no branch a frame. */
    const unsigned o_entry = L->fr_is_entry >= 0 ? (unsigned)L->fr_is_entry : o_owner;
    const char entry_mask = L->fr_is_entry >= 0 ? (char)0xff : 0;
    int n = 0, whole = 1;
    for (int guard = 0; frame && n < MAXPY && guard < 4 * MAXPY; guard++) {
        const char *f = frame;
        if (t && npf < MRAW)
            t->pf[npf++] = f;
        else
            whole = 0;
        frame = *(void *const *)(f + o_prev);
        if (f[o_owner] == cstack) {
            if (n)
                c->entry[n - 1] = 1;
            continue;
        }
        const void *code = *(void *const *)(f + o_code);
        if (!code)
            return -1;
        c->code[n] = code;
        c->instr[n] = *(const char *const *)(f + o_instr);
        c->entry[n] = (f[o_entry] & entry_mask) != 0;
        n++;
    }
    if (t) {
        t->npf = npf;
        t->pf_whole = whole && !frame;
    }
    if (OT_UNLIKELY(frame != NULL && n == MAXPY))
        return ot_py_walk_deep(frame, c, 0);
    return n;
}

void ot_python_prefetch(void)
{
    const struct py_thread *t = ot_py_tls;
    if (!t || t == PY_THREAD_NONE)
        return;
    /* The fields the walk reads span two lines (3.12's owner at 70). Frames next to each other in the frame
     * stack share a line: a second fetch of a line joins the fill buffer of the first (a load's "FB hit"),
     * or hits, and costs less than telling the two apart did (~12 instructions a frame). */
    const unsigned last = ot_py_frame_need() - 1;
    for (uint32_t k = 0, n = t->npf < PY_PF ? t->npf : PY_PF; k < n; k++) {
        const char *const f = t->pf[k];
        __builtin_prefetch(f, 0, 3);
        __builtin_prefetch(f + last, 0, 3);
    }
}

/* Whether the n live codes have these qualified names (struct chain's name says why). Read with plain loads:
 * each code is held by its frame, and the layout is validated. */
static inline __attribute__((always_inline)) int names_are(int n, const void *const *code, const void *const *name)
{
    const unsigned o_name = ot_py.L->co_qualname;
    for (int k = 0; k < n; k++)
        if (*(const void *const *)((const char *)code[k] + o_name) != name[k])
            return 0;
    return 1;
}

/* Whether the chain from frame is last, as gather_fast would read it, without storing it: in a loop the
 * same call sites come back, and a frame is then a few loads and compares (its code's qualified name too,
 * read once every frame's code and instruction matched: struct chain's name says why; a chain that differs,
 * most often at its innermost frames, reads no code object). 0 whenever in doubt (the caller
 * then reads the chain in full): 1 only when gather_fast would give exactly last. has_entry: the layout
 * keeps an is_entry byte (3.11); otherwise only a C-stack shim frame marks the end of a run (3.12+). */
static inline __attribute__((always_inline)) int same_as(void *frame, int want, const void *const *lcode,
                                                         const char *const *linstr, const uint8_t *lentry,
                                                         const void *const *lname, int has_entry,
                                                         struct py_thread *keep)
{
    const struct layout *L = ot_py.L;
    const unsigned o_owner = L->fr_owner, o_prev = L->fr_previous, o_code = L->fr_code, o_instr = L->fr_instr;
    const unsigned o_entry = has_entry ? (unsigned)L->fr_is_entry : 0;
    const int cstack = L->owner_cstack;
    const void *const *lc = lcode, *const *const lc_end = lcode + want;
    const char *const *li = linstr;
    const uint8_t *le = lentry;
    /* pend: the run end of the frame before so far (a C-stack shim frame after it sets it); expect: last's.
     * Both 1 before the first frame, which has no frame before it to check. */
    uint8_t pend = 1, expect = 1;
    const void **pf = keep ? keep->pf : NULL, **const pf_end = keep ? keep->pf + MRAW : NULL;
    int guard = 4 * MAXPY; /* (a loop of frames; kept frames are bounded by pf's room instead) */
    if (keep)
        keep->pf_whole = 0;
    while (frame) {
        const char *f = frame;
        if (keep) {
            if (pf == pf_end)
                return 0;
            *pf++ = f;
        } else if (--guard < 0) {
            return 0;
        }
        frame = *(void *const *)(f + o_prev);
        if (f[o_owner] == cstack) {
            pend = 1;
            continue;
        }
        if (lc == lc_end || *(void *const *)(f + o_code) != *lc || *(const char *const *)(f + o_instr) != *li ||
            pend != expect)
            return 0;
        expect = *le;
        pend = has_entry ? f[o_entry] != 0 : 0;
        lc++, li++, le++;
    }
    const int n = (int)(lc - lcode);
    /* (the outermost frame's bit is always set) */
    if (!(n == want && n > 0 && lentry[n - 1] == 1 && names_are(n, lcode, lname)))
        return 0;
    if (keep) {
        keep->npf = (uint32_t)(pf - keep->pf);
        keep->pf_whole = 1;
    }
    return 1;
}

int ot_py_walk_is(void *frame, int np, const void *const *code, const char *const *instr, const void *const *name,
                  const uint8_t *entry)
{
    return ot_py.L->fr_is_entry >= 0 ? same_as(frame, np, code, instr, entry, name, 1, NULL)
                                     : same_as(frame, np, code, instr, entry, name, 0, NULL);
}

int ot_py_walk_is_kept(void *frame, int np, const void *const *code, const char *const *instr,
                       const void *const *name, const uint8_t *entry)
{
    struct py_thread *t = ot_py_tls;
    return ot_py.L->fr_is_entry >= 0 ? same_as(frame, np, code, instr, entry, name, 1, t)
                                     : same_as(frame, np, code, instr, entry, name, 0, t);
}

/* The chain from frame as gather_fast reads it, hashed as a merged stack's key takes it (pyframes.h:
 * ot_py_chain_mix of each frame's code and instruction): nothing is stored but the frames' addresses for
 * the next capture's prefetch (as gather_fast keeps them). Returns its length, or -1 for a chain that
 * gather_fast would not give whole within MPY frames (a frame without code, deeper, a loop). */
int ot_py_walk_hash(void *frame, uint64_t *ca, uint64_t *cb)
{
    struct py_thread *t = ot_py_tls;
    const struct layout *L = ot_py.L;
    const unsigned o_owner = L->fr_owner, o_prev = L->fr_previous, o_code = L->fr_code, o_instr = L->fr_instr;
    const int cstack = L->owner_cstack;
    uint64_t a = OT_PY_HASH_A, b = OT_PY_HASH_B;
    uint32_t npf = 0;
    int n = 0, whole = 1;
    for (int guard = 0; frame; guard++) {
        if (guard == 4 * MAXPY)
            return -1;
        const char *f = frame;
        if (npf < MRAW)
            t->pf[npf++] = f;
        else
            whole = 0;
        frame = *(void *const *)(f + o_prev);
        if (f[o_owner] == cstack)
            continue;
        const void *code = *(void *const *)(f + o_code);
        if (!code || n == MPY)
            return -1;
        ot_py_chain_mix(&a, &b, code, *(const char *const *)(f + o_instr));
        n++;
    }
    t->npf = npf;
    t->pf_whole = whole;
    *ca = a;
    *cb = b;
    return n;
}

/* The same through checked reads, until one walk has validated the layout. */
static int gather_checked(void *frame, struct chain *c)
{
    const struct layout *L = ot_py.L;
    int n = 0;
    for (int guard = 0; frame && n < MAXPY && guard < 4 * MAXPY; guard++) {
        char owner = 0, e = 0;
        if (rd_u8(frame, L->fr_owner, &owner))
            return -1;
        void *prev = rd_ptr(frame, L->fr_previous);
        if (L->owner_cstack >= 0 && owner == L->owner_cstack) {
            if (n)
                c->entry[n - 1] = 1;
            frame = prev;
            continue;
        }
        c->code[n] = rd_ptr(frame, L->fr_code);
        c->instr[n] = rd_ptr(frame, L->fr_instr);
        if (!c->code[n])
            return -1;
        if (L->fr_is_entry >= 0)
            rd_u8(frame, (unsigned)L->fr_is_entry, &e);
        c->entry[n] = e != 0;
        n++;
        frame = prev;
    }
    if (frame && n == MAXPY)
        return ot_py_walk_deep(frame, c, 1);
    return n;
}

/* 3.9 and 3.10: frame objects, each its own run of the eval loop. instr holds f_lasti as a number. */
static int gather_objects(void *frame, struct chain *c, int fast)
{
    const struct layout *L = ot_py.L;
    int n = 0;
    for (int guard = 0; frame && n < MAXPY && guard < 4 * MAXPY; guard++) {
        const void *code = rd_ptr(frame, L->fr_code);
        void *prev = rd_ptr(frame, L->fr_previous);
        int lasti = 0;
        if (fast)
            lasti = *(const int *)((const char *)frame + L->fr_instr);
        else if (ot_py_checked_read((const char *)frame + L->fr_instr, &lasti, sizeof lasti))
            return -1;
        if (!code)
            return -1;
        c->code[n] = code;
        c->instr[n] = (const char *)(uintptr_t)(lasti < 0 ? 0 : lasti);
        c->entry[n] = 1;
        n++;
        frame = prev;
    }
    if (OT_UNLIKELY(frame != NULL && n == MAXPY))
        return ot_py_walk_deep(frame, c, !fast);
    return n;
}

int ot_py_walk_deep(void *frame, struct chain *c, int checked)
{
    const struct layout *L = ot_py.L;
    const unsigned need = ot_py_frame_need();
    const int keep = MAXPY - PY_OUTER;
    /* The outermost PY_OUTER frames so far, a ring from oldest (innermost); a frame that leaves it is cut.
     * Its run-end bit is final by then: a C-stack shim frame sets the bit of the frame before it. */
    const void *code[PY_OUTER];
    const char *instr[PY_OUTER];
    uint8_t entry[PY_OUTER];
    memcpy(code, c->code + keep, sizeof code);
    memcpy(instr, c->instr + keep, sizeof instr);
    memcpy(entry, c->entry + keep, sizeof entry);
    int oldest = 0, runs = c->entry[keep - 1], cut = 0;
    for (int guard = 0; frame; guard++) {
        if (guard == PY_DEEP) { /* deeper than that, or a loop: the innermost frames alone, said cut */
            c->cut = 1;
            c->gap = c->gap_runs = 0;
            return MAXPY;
        }
        char buf[128];
        const char *f = frame;
        if (checked) {
            if (need > sizeof buf || ot_py_checked_read(frame, buf, need))
                return -1;
            f = buf;
        }
        const void *fc;
        const char *fi;
        uint8_t fe = 1;
        memcpy(&fc, f + L->fr_code, sizeof fc);
        memcpy(&frame, f + L->fr_previous, sizeof frame);
        if (L->frame_objects) {
            int lasti;
            memcpy(&lasti, f + L->fr_instr, sizeof lasti);
            fi = (const char *)(uintptr_t)(lasti < 0 ? 0 : lasti);
        } else {
            if (L->owner_cstack >= 0 && f[L->fr_owner] == L->owner_cstack) {
                entry[(oldest + PY_OUTER - 1) % PY_OUTER] = 1;
                continue;
            }
            memcpy(&fi, f + L->fr_instr, sizeof fi);
            fe = L->fr_is_entry >= 0 && f[L->fr_is_entry] != 0;
        }
        if (!fc)
            return -1;
        runs += entry[oldest];
        cut++;
        code[oldest] = fc;
        instr[oldest] = fi;
        entry[oldest] = fe;
        oldest = (oldest + 1) % PY_OUTER;
    }
    for (int k = 0; k < PY_OUTER; k++) {
        const int r = (oldest + k) % PY_OUTER;
        c->code[keep + k] = code[r];
        c->instr[keep + k] = instr[r];
        c->entry[keep + k] = entry[r];
    }
    c->cut = cut > 0;
    c->gap = cut ? keep : 0;
    c->gap_runs = cut ? runs : 0;
    return MAXPY;
}

/* Frame i's instruction, counted in code units from the start of its code object. */
uint64_t ot_py_instr_index(const struct chain *c, int i)
{
    const struct layout *L = ot_py.L;
    if (L->frame_objects)
        return (uint64_t)(uintptr_t)c->instr[i] >> (L->lasti_bytes ? 1 : 0);
    const char *begin = (const char *)c->code[i] + L->co_code;
    return c->instr[i] >= begin ? (uint64_t)(c->instr[i] - begin) / 2 : 0;
}

unsigned ot_py_frame_need(void)
{
    const struct layout *L = ot_py.L;
    unsigned need = L->fr_code + 8;
    need = need > L->fr_previous + 8 ? need : L->fr_previous + 8;
    unsigned instr_end = L->fr_instr + (L->frame_objects ? 4 : 8); /* f_lasti is an int */
    need = need > instr_end ? need : instr_end;
    if (!L->frame_objects)
        need = need > L->fr_owner + 1 ? need : L->fr_owner + 1;
    return need;
}

/* The thread's last chain set to n frames (only those: the whole struct is ~3 KB), last_ref cleared. */
static struct chain *set_last(struct py_thread *t, int n, const void *const *code, const char *const *instr,
                              const uint8_t *entry, const uint32_t *id, const void *const *name)
{
    struct chain *last = &t->last;
    t->last_ref = NULL;
    last->n = n;
    memcpy(last->code, code, (size_t)n * sizeof last->code[0]);
    memcpy(last->instr, instr, (size_t)n * sizeof last->instr[0]);
    memcpy(last->entry, entry, (size_t)n);
    memcpy(last->id, id, (size_t)n * sizeof last->id[0]);
    memcpy(last->name, name, (size_t)n * sizeof last->name[0]);
    return last;
}

/* A chain kept as the thread's last. */
static void keep_last(struct py_thread *t, const struct chain *c)
{
    struct chain *last = set_last(t, c->n, c->code, c->instr, c->entry, c->id, c->name);
    last->cut = c->cut;
    last->gap = c->gap;
    last->gap_runs = c->gap_runs;
}

/* last is left as it was (its line is cold): every reader looks at last_ref first, and whoever clears
 * last_ref fills last or empties it. */
void ot_py_walk_last_is_ref(struct py_thread *t, const struct mentry *r)
{
    t->last_ref = r;
    t->last_np = r->np;
}

const struct chain *ot_py_walk_last(void)
{
    struct py_thread *t = ot_py_tls;
    const struct mentry *r = t->last_ref;
    struct chain *last = set_last(t, r->np, r->code, r->instr, r->entry, r->id, r->name);
    last->cut = last->gap = last->gap_runs = 0; /* (an entry holds at most MPY frames: never a cut chain) */
    return last;
}

int ot_py_walk(struct chain *c, const struct chain **got, int *same)
{
    int fast, n = ot_py_walk_gather(c, got, same, &fast);
    if (*same == 2) {
        *got = ot_py_walk_last();
        *same = 1;
    }
    return n && !*same ? ot_py_walk_ids(c, n, fast) : n;
}

/* Whether chain c, read whole, has these n frames: codes, instructions, entry bits and qualified names. */
static int chain_is(const struct chain *c, int n, const void *const *code, const char *const *instr,
                    const uint8_t *entry, const void *const *name)
{
    return c->n == n && memcmp(c->code, code, (size_t)n * sizeof c->code[0]) == 0 &&
           memcmp(c->instr, instr, (size_t)n * sizeof c->instr[0]) == 0 && memcmp(c->entry, entry, (size_t)n) == 0 &&
           names_are(n, c->code, name);
}

int ot_py_walk_gather(struct chain *c, const struct chain **got, int *same, int *fast_out)
{
    void *frame;
    const int n = ot_py_walk_begin(c, got, same, fast_out, &frame, 1);
    return n == OT_PY_WALK_MORE ? ot_py_walk_rest(frame, c, got, same, *fast_out) : n;
}

int ot_py_walk_begin(struct chain *c, const struct chain **got, int *same, int *fast_out, void **frame_out,
                     int check_last)
{
    *got = c;
    *same = 0;
    *fast_out = 0;
    c->cut = c->gap = c->gap_runs = 0;
    const struct layout *L = ot_py.L;
    if (!ot_py.is_initialized())
        return 0;
    void *ts = ot_py.get_tstate();
    if (!ts)
        return 0;
    /* validated as this thread last saw it (its own line), read again until it saw it set */
    struct py_thread *t = ot_py_thread_get();
    int fast = t && t->fast;
    if (!fast && (fast = __atomic_load_n(&validated, __ATOMIC_ACQUIRE)) != 0 && t)
        t->fast = 1;
    void *cf, *frame;
    if (OT_LIKELY(fast)) {
        cf = *(void *const *)((const char *)ts + L->ts_cframe);
        frame = L->ts_direct ? cf : cf ? *(void *const *)((const char *)cf + L->cframe_current) : NULL;
    } else {
        cf = rd_ptr(ts, L->ts_cframe);
        frame = L->ts_direct ? cf : cf ? rd_ptr(cf, L->cframe_current) : NULL;
    }
    *fast_out = fast;
    struct chain *last = t ? &t->last : NULL;
    if (t)
        t->pf_whole = 0;
    /* Only a thread with Python frames can be a lender that moved: a thread state without a frame (autograd's
     * threads, registered and never running Python) is the borrower itself, and counting its walks made
     * every borrow of a backward read the lender again. */
    if (frame && __atomic_load_n(&ot_py_lending, __ATOMIC_RELAXED))
        __atomic_add_fetch(&ot_py_stamp, 1, __ATOMIC_RELAXED);
    int hit = 0;
    if (check_last && fast && last && !L->frame_objects) {
        const struct mentry *r = t->last_ref;
        if (r || !last->cut)
            hit = ot_py_walk_is(frame, r ? (int)t->last_np : last->n, r ? r->code : last->code,
                                r ? r->instr : last->instr, r ? r->name : last->name, r ? r->entry : last->entry)
                      ? 1 + (r != NULL)
                      : 0;
    }
    OT_STAGE_CACHE(OT_C_PY_SAME, hit != 0);
    if (hit) {
        *got = hit == 1 ? last : NULL;
        *same = hit;
        return hit == 1 ? last->n : (int)t->last_np;
    }
    *frame_out = frame;
    return OT_PY_WALK_MORE;
}

int ot_py_walk_rest(void *frame, struct chain *c, const struct chain **got, int *same, int fast)
{
    const struct layout *L = ot_py.L;
    struct py_thread *t = ot_py_thread_get();
    struct chain *last = t ? &t->last : NULL;
    int n = L->frame_objects ? gather_objects(frame, c, fast)
            : fast             ? gather_fast(frame, c, t && t != PY_THREAD_NONE ? t : NULL)
                               : gather_checked(frame, c);
    int bad = n < 0;
    if (n > 0)
        c->entry[n - 1] = 1;
    c->n = n < 0 ? 0 : n;
    if (bad || !fast || !last)
        return bad ? -1 : n;
    const struct mentry *r = t->last_ref;
    /* r: checked in ot_py_walk_begin where its caller asked (check_last), unless the layout has frame objects
     * (3.9, 3.10), which that check does not read. Unchecked, the chain is said not the same: the merge then
     * finds its stack by its key, as a new place's. */
    if (r) {
        if (L->frame_objects && chain_is(c, (int)t->last_np, r->code, r->instr, r->entry, r->name)) {
            *got = NULL;
            *same = 2;
        }
        return n;
    }
    if (chain_is(c, last->n, last->code, last->instr, last->entry, last->name) && c->cut == last->cut &&
        c->gap == last->gap && c->gap_runs == last->gap_runs) {
        *got = last;
        *same = n > 0;
    }
    return n;
}

int ot_py_walk_ids(struct chain *c, int n, int fast)
{
    const struct layout *L = ot_py.L;
    struct py_thread *t = ot_py_thread_get();
    struct chain *last = t ? &t->last : NULL;
    int bad = n < 0;
    for (int i = 0; i < n && !bad; i++) {
        uint64_t lasti = ot_py_instr_index(c, i);
        c->name[i] = rd_ptr(c->code[i], L->co_qualname);
        c->id[i] = ot_py_frame_id(t ? t->cache : NULL, c->code[i], lasti, c->name[i]);
        bad |= c->id[i] == 0;
    }
    if (bad) {
        if (last) {
            last->n = 0;
            t->last_ref = NULL;
        }
        if (!fast) {
            ot_log("Python %s: frame layout check failed; stacks stay native", ot_py.version);
            ot_py_publish(PY_OFF);
        }
        return 0;
    }
    if (n && !fast)
        __atomic_store_n(&validated, 1, __ATOMIC_RELEASE);
    if (n && last)
        keep_last(t, c);
    return n;
}
