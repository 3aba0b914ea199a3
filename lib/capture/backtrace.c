/* Native backtraces. The walk follows each frame's rule from the modules' call-frame information
 * (cfi.c), kept per thread by return address, so a repeated call site costs a few loads per frame and
 * never takes a lock, masks signals or walks the list of loaded objects. A stack it cannot follow (a
 * frame without unwind information, a signal frame, a stack outside the thread's own) is handed whole
 * to libunwind's unw_backtrace, as before. The tracer's own frames are dropped by address range, so the
 * first frame kept is the caller of the driver entry point (cudart, c10, the program). */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "oomtrace_format.h"
#include "capture/backtrace.h"
#include "capture/cfi.h"
#include "capture/loader.h"
#include "capture/modules.h"
#include "capture/stacks.h"
#include "capture/walker.h"
#include "common/defs.h"
#include "common/pages.h"
#include "common/stage.h"
#include "common/tables.h"

static uintptr_t self_lo, self_hi;

static __thread struct walker *walker_tls __attribute__((tls_model("initial-exec")));
static __thread int walker_failed __attribute__((tls_model("initial-exec")));
/* A thread whose stacks keep crossing a frame the rules cannot follow (code without unwind information)
 * would pay for a partial walk and then libunwind's on every event: after WALK_FAILS failures in a row it
 * goes straight to libunwind for the next WALK_REST backtraces, then tries again. */
#define WALK_FAILS 4
#define WALK_REST 256
static __thread unsigned walk_fails __attribute__((tls_model("initial-exec")));
static __thread unsigned walk_rest __attribute__((tls_model("initial-exec")));
static pthread_key_t walker_key;
static int walker_key_ok;

/* At thread exit. Destructors that run after this one may still allocate: they get libunwind. */
static void walker_free(void *p)
{
    walker_tls = NULL;
    walker_failed = 1;
    ot_table_unmap(p, sizeof(struct walker));
}

static int find_self(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t probe = (uintptr_t)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (probe >= lo && probe < hi) {
            self_lo = lo;
            self_hi = hi;
            return 1;
        }
    }
    return 0;
}

void ot_backtrace_init(void)
{
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
    ot_loader_enter();
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&ot_backtrace_init);
    ot_loader_leave();
    walker_key_ok = pthread_key_create(&walker_key, walker_free) == 0;
}

/* Once per thread: the table (common/tables.h) and the stack's bounds. */
static struct walker *walker_get(void)
{
    struct walker *w = walker_tls;
    if (OT_LIKELY(w != NULL) || walker_failed)
        return w;
    walker_failed = 1;
    pthread_attr_t attr;
    void *addr;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return NULL;
    int ok = pthread_attr_getstack(&attr, &addr, &size) == 0;
    pthread_attr_destroy(&attr);
    if (!ok)
        return NULL;
    w = ot_table_map(sizeof *w);
    if (!w)
        return NULL;
    w->stack_lo = (uint64_t)(uintptr_t)addr;
    w->stack_hi = w->stack_lo + size;
    if (walker_key_ok)
        pthread_setspecific(walker_key, w);
    walker_failed = 0;
    walker_tls = w;
    return w;
}

static struct ot_frame_rule *rule_for(struct walker *w, uint64_t pc)
{
    uint32_t i = (uint32_t)((pc * 0x9E3779B97F4A7C15ull) >> (64 - RULE_BITS));
    struct ot_frame_rule *r;
    for (;; i = (i + 1) & (NRULES - 1)) {
        r = &w->rules[i];
        if (r->pc == pc && r->kind != OT_RULE_EMPTY)
            return r;
        if (r->kind == OT_RULE_EMPTY)
            break;
    }
    if (w->used >= NRULES / 4 * 3) { /* full: start over rather than probe long chains */
        memset(w->rules, 0, sizeof w->rules);
        w->used = 0;
        r = &w->rules[(uint32_t)((pc * 0x9E3779B97F4A7C15ull) >> (64 - RULE_BITS))];
    }
    ot_cfi_rule(pc, r);
    r->pc = pc;
    w->used++;
    return r;
}

/* A rule as a step. 0 when it does not fit one (rbp saved further than 8 MB away): the step is then
 * walked with META_BIG (the rule's rbp_off in w->big_off) and never kept. */
static inline int pack(const struct ot_frame_rule *r, uint64_t addr, struct step *s)
{
    s->addr = addr;
    s->cfa_off = r->cfa_off;
    if (r->kind == OT_RULE_LAST) {
        s->meta = META_LAST;
        return 1;
    }
    s->meta = (uint32_t)r->cfa_reg | (uint32_t)r->rbp_how << META_RBP_SHIFT;
    if (r->rbp_off < -(1 << 23) || r->rbp_off >= 1 << 23)
        return 0;
    s->meta |= (uint32_t)r->rbp_off << META_OFF_SHIFT;
    /* META_NEAR: CFA = rsp + a positive multiple of 8, rbp kept, undefined or saved inside the frame
     * (CFA - cfa_off <= CFA + rbp_off <= CFA - 8). rsp is 8-aligned and on the stack (by induction from
     * the walk's own), so every slot such a step reads is 8-aligned and above rsp: only the stack's top
     * bounds it, checked once (CFA <= the top). The same reads pass or fail as with the full checks. */
    if (r->cfa_reg == OT_CFA_RSP && r->cfa_off >= 8 && !(r->cfa_off & 7) &&
        (r->rbp_how == OT_RBP_SAME || r->rbp_how == OT_RBP_UNDEF ||
         (r->rbp_how == OT_RBP_AT_CFA && !(r->rbp_off & 7) && r->rbp_off <= -8 && r->rbp_off >= -r->cfa_off)))
        s->meta |= META_NEAR;
    return 1;
}

static inline int on_stack(const struct walker *w, uint64_t lo, uint64_t a)
{
    return a - lo <= w->stack_hi - 8 - lo && !(a & 7);
}

/* The step for addr where the kept walk followed has another: the rule's kept step (rule->at) when it is
 * still there, or the rule itself as a step (w->fresh_step); NULL when the frame has no rule the walk can
 * follow. w->next: where to follow from. Step at is the walk's nst-th. */
static __attribute__((noinline)) const struct step *walk_lookup(struct walker *w, uint64_t addr, uint32_t nst)
{
    OT_STAGE_CACHE(OT_C_WALK_STEP, 0);
    struct ot_frame_rule *r = rule_for(w, addr);
    if (r->kind != OT_RULE_OK && r->kind != OT_RULE_LAST)
        return NULL;
    if (w->lookups++ == 0)
        w->first_lk = nst;
    w->last_lk = nst;
    w->path = (w->path ^ addr ^ (uint64_t)nst << 48) * 0x9E3779B97F4A7C15ull;
    const uint32_t at = r->at & (ARENA - 1);
    OT_STAGE_CACHE(OT_C_WALK_INDEX, w->arena[at].addr == addr);
    if (w->arena[at].addr == addr) {
        w->next = (at + 1) & (ARENA - 1);
        return &w->arena[at];
    }
    w->fresh = 1; /* no kept step for it */
    w->next = at; /* (not addr's: the next step looks up too) */
    struct step *s = &w->fresh_step;
    if (!pack(r, addr, s)) {
        s->meta |= META_BIG;
        w->big_off = r->rbp_off;
    }
    return s;
}

/* Keeps the walk just taken from its first look-up to its last (steps from first_lk to last_lk: addresses
 * from the frames) at the arena's head, and names the copy in their rules. The rules are looked up again
 * (a walk is kept only where it found no kept step, or several); nothing is kept if one does not fit. */
static void keep_walk(struct walker *w, const uint64_t *frames, uint64_t pc0)
{
    const uint32_t from = w->first_lk, to = w->last_lk + 1, h = w->head;
    struct step *A = w->arena;
    for (uint32_t k = from; k < to; k++) {
        const uint64_t addr = k == 0 ? pc0 : frames[k - 1] - 1;
        struct ot_frame_rule *r = rule_for(w, addr);
        const uint32_t at = (h + k - from) & (ARENA - 1);
        if ((r->kind != OT_RULE_OK && r->kind != OT_RULE_LAST) || !pack(r, addr, &A[at])) {
            for (uint32_t q = from; q <= k; q++) /* what it wrote is forgotten: no walk follows it */
                A[(h + q - from) & (ARENA - 1)].addr = 0;
            return;
        }
        r->at = at;
    }
    if (from == 0)
        w->start = h;
    w->head = (h + to - from) & (ARENA - 1);
}

/* Return addresses from this function's caller outwards, as unw_backtrace gives them; -1 when the stack
 * has a frame the rules cannot follow.
 *
 * Each step applies its frame's rule, every read checked against the stack's bounds, whether the rule came
 * from a kept step or from the table: what the walk returns is what a walk by the table alone returns
 * (tests/unit/test_walk.c checks it against libunwind). The kept steps only spare the table's look-up,
 * one random line a frame, for a kept walk's next step, read in order. */
/* How many of the n raw frames, from the first, are the tracer's own (dropped from every stack). */
static inline int own_frames(const uint64_t *frames, int n)
{
    int k = 0;
    while (k < n && frames[k] - self_lo < self_hi - self_lo)
        k++;
    return k;
}

/* Place memo e replayed its n frames: the walk hands them out where e keeps them. */
static inline int place_replayed(struct walker *w, struct place_memo *e, int n, const uint64_t **kept)
{
    w->replayed = 1;
    w->hint = &e->stack;
    w->gen = e->gen;
    w->kept_skip = e->skip;
    *kept = e->frames;
    return n;
}

/* The walk: raw return addresses in frames, or (*kept not NULL) a memo's frames replayed where they lie, as
 * the capture returns them (walker.h: replay_slots). */
static __attribute__((noinline)) int walk(uint64_t *frames, int want, const uint64_t **kept)
{
    struct walker *w = walker_get();
    if (!w)
        return -1;
    uint64_t pc, sp, bp;
    __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(sp), "=r"(bp));
    const uint64_t lo = sp, hi8 = w->stack_hi - 8, span = hi8 - lo, pc0 = pc, bp_in = bp;
    if (!on_stack(w, lo, sp))
        return -1; /* running on another stack (sigaltstack, a coroutine's) */
    uint64_t gen = ot_modules_generation();
    w->replayed = 0;
    w->gen = 0;
    if (OT_UNLIKELY(++w->walks == OT_TABLE_HOT))
        ot_table_hot(w, sizeof *w);
    if (OT_UNLIKELY(gen != w->modgen)) { /* a library was unloaded: its rules may now be another's */
        memset(w->rules, 0, sizeof w->rules);
        w->used = 0;
        memset(w->arena, 0, sizeof w->arena); /* and the steps kept from them */
        w->n = -1;
        w->stack.id = 0;
        memset(w->pm, 0, sizeof w->pm); /* and the walks kept by place (their stack ids with them) */
        memset(w->pmset, 0, sizeof w->pmset);
        memset(w->dir, 0, sizeof w->dir);
        w->last = NULL;
        w->modgen = gen;
    }
    /* The walk is kept (struct memo) only when it starts where the previous one did and that one went
     * where the one before it went (the same look-ups, the same number of frames): a loop allocating from
     * one place. A step's hundred places in turn go elsewhere each time, and would only pay for lines
     * written and not read again. (Only the choice to keep it: a kept walk is checked slot by slot.) */
    struct memo *const m = &w->memo;
    const int single = w->sp0 == sp && w->bp0 == bp && w->again;
    int again = single ? replay_memo(w, sp, want) : -1;
    OT_STAGE_CACHE(OT_C_WALK_REPLAY, again >= 0);
    *kept = NULL;
    if (again >= 0) {
        w->replayed = 1;
        w->hint = &w->stack;
        w->kept_skip = w->skip;
        *kept = m->frames;
        return again;
    }
    /* The place memos: the one last used, then the key's set. */
    struct place_memo *e = w->last, *clash = NULL;
    if (e && (again = replay_place(e, sp, bp, want)) >= 0) { /* (a loop: already the newest) */
        OT_STAGE_CACHE(OT_C_WALK_PLACE, 1);
        return place_replayed(w, e, again, kept);
    }
    const struct pm_dir *const d = &w->dir[pm_dir_of(sp)];
    const uint32_t disc = d->sp0 == sp ? d->disc : 0;
    /* Under the slot's value first (the memos that read a return address there), then under none (the
     * others): a memo that would replay is under one of the two. */
    for (int pass = disc ? 0 : 1; pass < 2; pass++) {
        const uint32_t kd = pass ? 0 : disc;
        const uint64_t kv = pass ? 0 : pm_key_slot(w, sp, disc), h = pm_key(sp, kd, kv);
        struct pm_set *const ps = &w->pmset[PM_SET(h)];
        for (int way = 0; way < PM_WAYS; way++) {
            if (ps->tag[way] != PM_TAG(h))
                continue;
            e = &w->pm[PM_SET(h)][way];
            if (e == w->last || e->sp0 != sp || e->disc != kd || e->dv != kv || e->want != want)
                continue;
            if ((again = replay_place(e, sp, bp, want)) >= 0) {
                w->last_used = &ps->used[way];
                goto place_hit;
            }
            clash = e;
        }
    }
    OT_STAGE_CACHE(OT_C_WALK_PLACE, 0);
    {
        const uint64_t top = w->stack_hi - 8;
        for (uint32_t k = 0, npf = w->npf; k < npf; k++)
            __builtin_prefetch((const void *)(uintptr_t)(top - w->pf[k]), 0, 3);
        const struct step *const A0 = w->arena; /* and the steps the walk follows first */
        for (uint32_t k = 0; k < 4; k++)
            __builtin_prefetch(&A0[(w->start + 4 * k) & (ARENA - 1)], 0, 3);
    }
    w->n = -1;
    w->stack.id = 0; /* the memo's frames will be another walk's, or none */
    w->sp0 = sp;
    w->bp0 = bp;
    w->want = want;
    uint32_t nx = 0;
    /* The slot rbp was last restored from (0: none since): it matters to the frames only if a later step
     * uses rbp (a CFA from rbp, rbp restored through rbp), and only then joins the slots checked; a
     * caller's rbp that holds a counter changes every call and must not stop the replay. */
    uint64_t pend_at = 0, pend_val = 0;
    /* rbp still the one the walk started with (none restored yet): a step that uses it makes the walk
     * depend on it, and a place memo then checks it (needs_bp0) */
    int bp_start = 1, needs_bp0 = 0;
    /* every walk's slots are noted (m: cfa, xoff, xval) for its place memo, as offsets above rsp: a stack
     * that reaches more than 4 GiB above it keeps nothing */
    int rec = span <= 0xffffffffu;
    const struct step *const A = w->arena;
    w->lookups = w->fresh = 0;
    w->path = 0;
    uint32_t j = w->start;
    uint64_t adj = 0; /* the first step's rule is its pc's, the others' their return address's minus one */
    int n = 0;
    for (;;) {
        if (n >= want)
            break;
        const uint64_t addr = pc - adj;
        const struct step *s = &A[j];
        if (OT_LIKELY(s->addr == addr)) {
            OT_STAGE_CACHE(OT_C_WALK_STEP, 1);
            j = (j + 1) & (ARENA - 1);
        } else {
            if (!(s = walk_lookup(w, addr, (uint32_t)n)))
                return -1;
            j = w->next;
            if (n == 0)
                w->start = (j - 1) & (ARENA - 1); /* where the next walk starts following */
        }
        adj = 1;
        const uint32_t meta = s->meta;
        const int64_t cfa_off = s->cfa_off;
        if (meta & META_LAST)
            break;
        const uint32_t rhow = (meta & META_RBP) >> META_RBP_SHIFT;
        uint64_t cfa, ra;
        if (OT_LIKELY(meta & META_NEAR)) {
            cfa = sp + (uint64_t)cfa_off;
            if (cfa > hi8 + 8)
                return -1;
            ra = *(const uint64_t *)(uintptr_t)(cfa - 8);
            if (rhow == OT_RBP_AT_CFA) {
                const uint64_t at = cfa + (uint64_t)(int64_t)((int32_t)meta >> META_OFF_SHIFT);
                bp = *(const uint64_t *)(uintptr_t)at;
                pend_at = at; /* (the rbp read before, if unused, mattered to nothing) */
                pend_val = bp;
                bp_start = 0;
            } else if (rhow == OT_RBP_UNDEF) {
                bp = 0;
                pend_at = 0;
                bp_start = 0;
            }
            goto stepped;
        }
        const uint32_t creg = meta & META_CFA;
        if (creg != OT_CFA_RSP || rhow == OT_RBP_AT_RBP) { /* this step uses rbp */
            needs_bp0 |= bp_start;
            if (rec && pend_at) {
                m->xoff[nx] = (uint32_t)(pend_at - lo);
                m->xval[nx++] = pend_val;
                pend_at = 0;
            }
        }
        if (creg == OT_CFA_RSP) {
            cfa = sp + (uint64_t)cfa_off;
        } else if (creg == OT_CFA_RBP) {
            cfa = bp + (uint64_t)cfa_off;
        } else {
            uint64_t at = bp + (uint64_t)cfa_off;
            if (at - lo > span || (at & 7))
                return -1;
            cfa = *(const uint64_t *)(uintptr_t)at;
            if (rec) {
                m->xoff[nx] = (uint32_t)(at - lo);
                m->xval[nx++] = cfa;
            }
        }
        /* cfa above sp (by 8 at least: the slot of the return address) and its slot within the stack */
        if (cfa - 8 - sp > hi8 - sp || (cfa & 7))
            return -1;
        ra = *(const uint64_t *)(uintptr_t)(cfa - 8);
        if (rhow == OT_RBP_AT_CFA || rhow == OT_RBP_AT_RBP) {
            const int64_t off = OT_UNLIKELY(meta & META_BIG) ? w->big_off : (int32_t)meta >> META_OFF_SHIFT;
            uint64_t at = (rhow == OT_RBP_AT_CFA ? cfa : bp) + (uint64_t)off;
            if (at - lo > span || (at & 7))
                return -1;
            bp = *(const uint64_t *)(uintptr_t)at;
            pend_at = at;
            pend_val = bp;
            bp_start = 0;
        } else if (rhow == OT_RBP_UNDEF) {
            bp = 0;
            pend_at = 0;
            bp_start = 0;
        }
    stepped:
        sp = cfa;
        pc = ra;
        if (ra < 0x4000) { /* the end of the chain, as libunwind reads it: no frame for it */
            if (rec) {
                m->xoff[nx] = (uint32_t)(cfa - 8 - lo);
                m->xval[nx++] = ra;
            }
            break;
        }
        if (rec)
            m->cfa[n] = (uint32_t)(cfa - lo);
        if (n < PF_MAX)
            w->pf[n] = (uint32_t)(hi8 + 8 - cfa); /* the slot at cfa - 8, below the top (within the stack) */
        frames[n++] = ra;
    }
    w->npf = n < PF_MAX ? (uint32_t)n : PF_MAX;
    w->path ^= (uint64_t)n;
    w->again = w->path == w->prev_path;
    w->prev_path = w->path;
    const uint32_t skip = (uint32_t)own_frames(frames, n); /* (kept with the memos: a replay hands them out) */
    if (rec && single) {
        for (int k = 0; k < n; k++)
            m->frames[k] = frames[k] << 1;
        w->nx = nx;
        w->skip = skip;
        w->n = n;
    }
    if (rec)
        ot_walk_keep_place(w, lo, bp_in, want, frames, n, nx, needs_bp0, disc, clash, skip);
    if (w->fresh || w->lookups > LOOKUPS_KEPT)
        keep_walk(w, frames, pc0);
    return n;
place_hit:
    OT_STAGE_CACHE(OT_C_WALK_PLACE, 1);
    w->last = e;
    *w->last_used = ++w->pm_tick;
    return place_replayed(w, e, again, kept);
}

int ot_native_walk(uint64_t *frames, int want)
{
    uint64_t raw[NSTEPS];
    const uint64_t *kept;
    if (want > NSTEPS - 1) /* (the memo holds NSTEPS frames, this function's own among them) */
        want = NSTEPS - 1;
    const int n = walk(raw, want + 1, &kept); /* (its first frame returns here: not the caller's) */
    for (int k = 1; k < n; k++)
        frames[k - 1] = kept ? kept[k] >> 1 : raw[k];
    return n > 0 ? n - 1 : n;
}

size_t ot_stack_room(void)
{
    struct walker *w = walker_get();
    uint64_t sp = (uint64_t)(uintptr_t)__builtin_frame_address(0);
    if (!w || sp < w->stack_lo || sp >= w->stack_hi)
        return SIZE_MAX;
    return (size_t)(sp - w->stack_lo);
}

uint64_t ot_stack_top(void)
{
    const struct walker *w = walker_tls; /* never made here: this is asked from exit, maybe in a handler */
    return w ? w->stack_hi : 0;
}

/* Return addresses, innermost first, each shifted left by one (the low bit tags Python frames, see
 * OT_FRAME_PYTHON), at *out: in frames (room for OT_MAX_FRAMES: unwound straight into it and compacted in
 * place), or where a replayed memo keeps them, until the thread's next walk (nothing copied: most captures
 * of a step never read them, pyframes.c). Returns how many, at most max; sets OT_STACK_TRUNCATED in *flags
 * when the stack went deeper. */
static __thread uint64_t bt_place __attribute__((tls_model("initial-exec")));

uint64_t ot_backtrace_place(void)
{
    return bt_place;
}

int ot_backtrace_at(uint64_t *frames, int max, unsigned *flags, const uint64_t **out)
{
    _Static_assert(sizeof(void *) == sizeof(uint64_t), "frames hold pointers");
    int want = max + 8 > OT_MAX_FRAMES ? OT_MAX_FRAMES : max + 8; /* our own frames come first */
    int n = -1;
    int replayed = 0;
    const uint64_t *kept = NULL;
    *out = frames;
    bt_place = 0;
    if (OT_LIKELY(walk_rest == 0)) {
        n = walk(frames, want, &kept);
        if (n >= 0) {
            walk_fails = 0;
            replayed = walker_tls->replayed;
            bt_place = walker_tls->gen; /* (the same walk, max and own frames give the same frames out) */
        }
        else if (++walk_fails >= WALK_FAILS)
            walk_rest = WALK_REST;
    } else {
        walk_rest--;
    }
    if (n < 0 && ot_stack_room() < OT_UNWIND_STACK) {
        n = 0; /* a thread with a small stack (PTHREAD_STACK_MIN): no backtrace rather than a crash */
        *flags |= OT_STACK_TRUNCATED;
    }
    if (n < 0) {
        ot_loader_enter(); /* libunwind finds each frame's module with dl_iterate_phdr */
        n = OT_STAGE_CALL(OT_ST_UNWIND, unw_backtrace((void **)frames, want));
        ot_loader_leave();
    }
    const int skip = kept ? (int)walker_tls->kept_skip /* (counted when the memo was kept) */ : own_frames(frames, n);
    const int nout = n - skip < max ? n - skip : max;
    /* The previous walk's frames again (every slot it read unchanged): the stack interned from them last
     * time, named to the intern that follows (its hash and compare spared; a Python merge in between drops
     * the hint, pyframes.c). The same walk, max and own frames give the same frames out. */
    if (replayed)
        ot_stack_hint = walker_tls->hint;
    /* A full buffer means the walk stopped at its end, not at the stack's. */
    if (n - skip > max || n == want)
        *flags |= OT_STACK_TRUNCATED;
    if (nout <= 0)
        return 0;
    if (kept) { /* a memo's frames, where they lie (until the thread's next walk) */
        *out = kept + skip;
        return nout;
    }
    /* Moved and tagged in one pass, four at a time (at 50-60 frames a stack, a loop of one frame an
     * iteration was a tenth of the event, and memmove a call of its own): each group is read before it is
     * written, and the frames move down, so a write never reaches a frame still to be read. */
    const uint64_t *src = frames + skip;
    int i = 0;
    for (; i + 4 <= nout; i += 4) {
        uint64_t a = src[i], b = src[i + 1], c = src[i + 2], d = src[i + 3];
        frames[i] = a << 1;
        frames[i + 1] = b << 1;
        frames[i + 2] = c << 1;
        frames[i + 3] = d << 1;
    }
    for (; i < nout; i++)
        frames[i] = src[i] << 1;
    return nout;
}

int ot_backtrace(uint64_t *frames, int max, unsigned *flags)
{
    const uint64_t *out;
    const int n = ot_backtrace_at(frames, max, flags, &out);
    if (out != frames)
        memcpy(frames, out, (size_t)n * sizeof *frames);
    return n;
}
