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
#include <sys/mman.h>

#include "oomtrace_format.h"
#include "capture/backtrace.h"
#include "capture/cfi.h"
#include "capture/loader.h"
#include "capture/modules.h"
#include "common/defs.h"
#include "common/stage.h"

static uintptr_t self_lo, self_hi;

#define RULE_BITS 11
#define NRULES (1u << RULE_BITS)

/* One step of a walk, the state of one frame: the address its rule is looked up by (pc), rsp and rbp
 * there, and the stack slots its rule read besides the return address at the next step's sp - 8:
 * deref_at (a CFA read through rbp) and bp_at (where the caller's rbp was saved), each valid under its
 * flag. STEP_USES: the rule uses rbp (a CFA or a slot found from it); STEP_KILLS: it replaces rbp
 * (restored from the stack, or undefined); STEP_LIVE: a later step of the walk uses this step's rbp;
 * STEP_END: the last step of a walk that reached the end of the chain. */
enum { STEP_USES = 1, STEP_KILLS = 2, STEP_LIVE = 4, STEP_DEREF = 8, STEP_BPAT = 16, STEP_END = 32 };
struct step {
    uint64_t pc, sp, bp, deref_at, bp_at, flags;
};
#define NSTEPS (OT_MAX_FRAMES + 1)

/* The thread's last WALKS walks, each in a slot of steps, and an index of their states: a training step
 * allocates from a hundred places in turn, so the previous walk is rarely the one to replay; where a walk
 * leaves its previous one (another operator's frames), the state it reaches is looked up among the walks
 * kept (the same place in the previous step, or another op sharing the outer frames) and replayed from
 * there. An index entry names a slot, a step and the slot's generation (a slot reused for a newer walk
 * drops its entries); it is only a hint: the step it names must have the state looked for. */
#define WALKS 128
#define INDEX_BITS 13
struct state_ref {
    uint64_t pc, sp;
    uint32_t gen;
    uint16_t slot, step;
};

/* A thread's rules, its stack's bounds (every read the walk makes is checked against them), and the
 * steps of its last walks (see replay in ot_native_walk). */
struct walker {
    uint64_t stack_lo, stack_hi;
    uint32_t used;
    uint32_t nprev;   /* steps of the previous walk in steps[prev]; 0: none to replay */
    uint32_t prev;
    uint64_t modgen;  /* the modules' generation the rules were read under */
    struct ot_frame_rule rules[NRULES];
    uint32_t replay_stale; /* replay_all: the first step whose kept rbp may differ from this walk's */
    uint32_t nsteps[WALKS], gen[WALKS]; /* each slot's steps, and its generation (bumped when rewritten) */
    struct state_ref index[1u << INDEX_BITS];
    struct step steps[WALKS][NSTEPS];
};

static inline uint32_t state_hash(uint64_t pc, uint64_t sp)
{
    return (uint32_t)(((pc ^ (sp << 17)) * 0x9E3779B97F4A7C15ull) >> (64 - INDEX_BITS));
}

/* The kept walk with state (pc, sp) at one of its steps: its steps at *steps, that step's index at *at, and
 * its step count; 0 when none. */
static inline uint32_t state_find(const struct walker *w, uint64_t pc, uint64_t sp, const struct step **steps,
                                  uint32_t *at)
{
    const struct state_ref *r = &w->index[state_hash(pc, sp)];
    if (r->pc != pc || r->sp != sp || r->gen != w->gen[r->slot] || r->step + 1u >= w->nsteps[r->slot])
        return 0;
    const struct step *s = w->steps[r->slot];
    if (s[r->step].pc != pc || s[r->step].sp != sp)
        return 0;
    *steps = s;
    *at = r->step;
    return w->nsteps[r->slot];
}

/* Indexes the states the walk just kept in slot looked up (at[0..n)): where it missed, the next walk
 * from this place finds this one; where it found another walk, the entry now names this newer one, so that
 * a place allocated from again and again keeps its entry while the slots turn over. Only those: a walk
 * looks up only where it left the walk it followed, which for one place is the same state each time. */
#define LOOKED 8
static void state_index(struct walker *w, uint32_t slot, const uint32_t *at, uint32_t n)
{
    const struct step *s = w->steps[slot];
    const uint32_t ns = w->nsteps[slot], g = w->gen[slot];
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = at[k];
        if (i + 1 < ns)
            w->index[state_hash(s[i].pc, s[i].sp)] = (struct state_ref){s[i].pc, s[i].sp, g, (uint16_t)slot, (uint16_t)i};
    }
}

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
    munmap(p, sizeof(struct walker));
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

/* Once per thread: the table (mmap, out of the program's heap) and the stack's bounds. */
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
    w = mmap(NULL, sizeof *w, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (w == MAP_FAILED)
        return NULL;
    w->stack_lo = (uint64_t)(uintptr_t)addr;
    w->stack_hi = w->stack_lo + size;
    if (walker_key_ok)
        pthread_setspecific(walker_key, w);
    walker_failed = 0;
    walker_tls = w;
    return w;
}

static const struct ot_frame_rule *rule_for(struct walker *w, uint64_t pc)
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

static inline int on_stack(const struct walker *w, uint64_t lo, uint64_t a)
{
    return a - lo <= w->stack_hi - 8 - lo && !(a & 7);
}

/* Marks the steps whose rbp a later step uses. The last step's rbp counts as used when the walk stopped
 * at want (a later walk may go on from there), not when the chain ended there. */
static void mark_live(struct step *st, uint32_t nsteps)
{
    uint64_t live = !(st[nsteps - 1].flags & STEP_END);
    st[nsteps - 1].flags = (st[nsteps - 1].flags & ~(uint64_t)STEP_LIVE) | live << 2;
    for (uint32_t k = nsteps - 1; k-- > 0;) {
        uint64_t f = st[k].flags;
        live = (f | (~(f >> 1) & live)) & 1; /* STEP_USES, or passed on (not STEP_KILLS) to a live one */
        st[k].flags = (f & ~(uint64_t)STEP_LIVE) | live << 2;
    }
}

/* The same for steps [0, upto) of a walk whose steps from upto on are a kept walk's, replayed to its end:
 * their marks are that walk's, and stand (each depends only on the steps after it). */
static void mark_live_upto(struct step *st, uint32_t upto)
{
    uint64_t live = (st[upto].flags >> 2) & 1;
    for (uint32_t k = upto; k-- > 0;) {
        uint64_t f = st[k].flags;
        live = (f | (~(f >> 1) & live)) & 1;
        st[k].flags = (f & ~(uint64_t)STEP_LIVE) | live << 2;
    }
}

/* Replays the previous walk's steps from prev[0] (whose state is the walk's current one: pc, *sp, *bp),
 * up to prev[stop], while the stack slots they read hold what they held. Returns how many steps it took;
 * their frames go to frames[0..], the steps to cur[0..] with rbp as it really was at each, and the state
 * reached to *sp and *bp (its pc is prev[taken].pc). A slot that a step read only to find an rbp that no
 * later step uses may differ: rbp is then followed from the slot itself. */
static inline uint32_t replay(const struct step *prev, uint32_t stop, uint64_t lo, uint64_t *frames,
                              struct step *cur, uint64_t *sp, uint64_t *bp)
{
    uint64_t b = *bp;
    const struct step *s = prev, *const last = prev + stop;
    for (; s != last; s++, cur++, frames++) {
        const struct step *nx = s + 1;
        const uint64_t flags = s->flags, nsp = nx->sp, ra = nx->pc;
        uint64_t nb = b;
        if (OT_UNLIKELY(flags & (STEP_DEREF | STEP_BPAT | STEP_KILLS))) {
            if ((flags & STEP_DEREF) && (s->deref_at < lo || *(const uint64_t *)(uintptr_t)s->deref_at != nsp))
                break;
            if (flags & STEP_BPAT) {
                if (s->bp_at < lo)
                    break;
                nb = *(const uint64_t *)(uintptr_t)s->bp_at;
                if ((nx->flags & STEP_LIVE) && nb != nx->bp)
                    break;
            } else {
                nb = 0;
            }
        }
        if (*(const uint64_t *)(uintptr_t)(nsp - 8) != ra)
            break;
        *cur = *s;
        cur->bp = b;
        b = nb;
        *frames = ra;
    }
    *sp = s->sp;
    *bp = b;
    return (uint32_t)(s - prev);
}

/* A walk that replays the whole previous one (a loop allocating from one place: the common case) ends
 * with the same steps, so they are kept as they are, not copied (a copy was half of a replayed frame's
 * cost). Each step is checked as replay checks it. The steps kept then hold an rbp that may differ from
 * this walk's only where no later step uses it, which nothing reads but the hand-over below. Returns the
 * frames; or -1, with the steps that matched in *matched (their frames written) and rbp at the step after
 * them in *bp_next: the walk goes on from there. */
static inline int replay_all(struct walker *w, uint64_t pc, uint64_t sp, uint64_t bp, uint64_t *frames, int want,
                             uint32_t *matched, uint64_t *bp_next)
{
    const struct step *P = w->steps[w->prev];
    const uint32_t nprev = w->nprev;
    *matched = 0;
    if (nprev < 2 || nprev - 1 > (uint32_t)want || P[0].sp != sp || P[0].pc != pc ||
        ((P[0].flags & STEP_LIVE) && P[0].bp != bp))
        return -1;
    const struct step *s = P, *const last = P + nprev - 1;
    uint64_t b = bp;
    w->replay_stale = NSTEPS;
    for (; s != last; s++, frames++) {
        const struct step *nx = s + 1;
        const uint64_t flags = s->flags, nsp = nx->sp, ra = nx->pc;
        uint64_t nb = b;
        /* (No bound checks: the walk that made these steps started at this sp, so at this lo, and checked
         * every slot it read against it.) */
        if (OT_UNLIKELY(flags & (STEP_DEREF | STEP_BPAT | STEP_KILLS))) {
            if ((flags & STEP_DEREF) && *(const uint64_t *)(uintptr_t)s->deref_at != nsp)
                break;
            if (flags & STEP_BPAT) {
                nb = *(const uint64_t *)(uintptr_t)s->bp_at;
                if (nb != nx->bp) {
                    if (nx->flags & STEP_LIVE)
                        break;
                    if (w->replay_stale == NSTEPS)
                        w->replay_stale = (uint32_t)(s - P) + 1;
                }
            } else if (flags & STEP_KILLS) {
                nb = 0;
            }
        }
        if (*(const uint64_t *)(uintptr_t)(nsp - 8) != ra)
            break;
        b = nb;
        *frames = ra;
    }
    *matched = (uint32_t)(s - P);
    *bp_next = b;
    if (s != last)
        return -1;
    if (last->pc < 0x4000) /* the chain ended at a return address below 0x4000: no frame for it */
        return (int)nprev - 2;
    if ((last->flags & STEP_END) || nprev - 1 == (uint32_t)want)
        return (int)nprev - 1; /* where its chain ended, or at want */
    return -1; /* the previous walk stopped at a smaller want: this one goes further */
}

/* Return addresses from this function's caller outwards, as unw_backtrace gives them; -1 when the stack
 * has a frame the rules cannot follow.
 *
 * Replay: a walk is a function of its state (pc, rsp, rbp) and of the stack slots it reads. So when a step
 * reaches a state that a step of the thread's previous walk had (same pc and rsp, and the same rbp where
 * a later step uses it), and the slots that step read hold the same values now, its result is the
 * previous one: the previous walk's next step, taken without a rule lookup. That covers the tracer's own
 * frames and a caller's unchanged outer frames (a loop that allocates from the same place), at a few
 * loads and compares a frame. A slot that differs ends the replay at that step, which is then walked by
 * its rule; rbp is followed exactly all along, and the steps kept for the next walk are this walk's, so
 * what it returns is what a walk without replay returns (tests/unit/test_walk.c checks it). */
__attribute__((noinline)) int ot_native_walk(uint64_t *frames, int want)
{
    struct walker *w = walker_get();
    if (!w)
        return -1;
    uint64_t pc, sp, bp;
    __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(sp), "=r"(bp));
    const uint64_t lo = sp;
    if (!on_stack(w, lo, sp))
        return -1; /* running on another stack (sigaltstack, a coroutine's) */
    uint64_t gen = ot_modules_generation();
    if (OT_UNLIKELY(gen != w->modgen)) { /* a library was unloaded: its rules may now be another's */
        memset(w->rules, 0, sizeof w->rules);
        w->used = 0;
        w->nprev = 0;
        memset(w->nsteps, 0, sizeof w->nsteps); /* and its walks: none is replayed from now on */
        w->modgen = gen;
    }
    uint32_t matched;
    uint64_t bp_next;
    int all = replay_all(w, pc, sp, bp, frames, want, &matched, &bp_next);
    OT_STAGE_CACHE(OT_C_WALK_REPLAY, all >= 0);
    if (OT_LIKELY(all >= 0))
        return all;
    const struct step *P = w->steps[w->prev];
    /* This walk's slot: the next one, its old walk dropped (its index entries no longer match its gen) */
    const uint32_t cur = (w->prev + 1) & (WALKS - 1);
    struct step *C = w->steps[cur];
    w->gen[cur]++;
    w->nsteps[cur] = 0;
    uint32_t nprev = w->nprev;
    uint32_t j = 0;   /* the first step of P whose sp is not below ours */
    int n = 0;        /* frames so far; the current step is step n */
    int walked = 0;   /* steps taken by their rules */
    uint32_t looked[LOOKED], nlooked = 0; /* the steps whose state was looked up in the index */
    uint32_t tail = NSTEPS; /* the step from which the walk replayed a kept walk to its end */
    uint64_t end = 0; /* STEP_END when the chain ended */
    w->nprev = 0;     /* until this walk completes */
    if (matched) {
        /* The steps replay_all matched (a stack that differs further out: another call site) are this
         * walk's first steps, with rbp as it really was at each (the steps kept may hold an older one
         * where no later step used it: replay_all says from where). The walk goes on from the next one. */
        memcpy(C, P, matched * sizeof *C);
        for (uint32_t i = 0; i < matched; i++) { /* the entry's rbp, up to the first step that changes it */
            C[i].bp = bp;
            if (P[i].flags & STEP_KILLS)
                break;
        }
        if (w->replay_stale < matched) { /* a saved rbp changed: followed again from the entry */
            uint64_t b = bp;
            for (uint32_t i = 0; i < matched; i++) {
                if (i >= w->replay_stale)
                    C[i].bp = b;
                b = P[i].flags & STEP_BPAT ? *(const uint64_t *)(uintptr_t)P[i].bp_at
                    : P[i].flags & STEP_KILLS ? 0 : b;
            }
        }
        n = (int)matched;
        j = matched;
        pc = P[matched].pc;
        sp = P[matched].sp;
        bp = bp_next;
    }
    for (;;) {
        /* Replay while the state is one the previous walk had. j == 0 only at n == 0 (the first step's
         * pc is looked up as is, the others' minus one). */
        while (j < nprev && P[j].sp < sp)
            j++;
        if (!(j + 1 < nprev && P[j].sp == sp && P[j].pc == pc) && n > 0) {
            /* Not a state of the walk followed so far: one of another kept walk? (n > 0: a first step is
             * only ever the previous walk's, replay_all's.) */
            const struct step *Q;
            uint32_t at, nq = state_find(w, pc, sp, &Q, &at);
            OT_STAGE_CACHE(OT_C_WALK_INDEX, nq && at > 0);
            if (nlooked < LOOKED)
                looked[nlooked++] = (uint32_t)n;
            if (nq && at > 0) {
                P = Q;
                nprev = nq;
                j = at;
            }
        }
        if (j + 1 < nprev && P[j].sp == sp && P[j].pc == pc && (j == 0) == (n == 0) &&
            (!(P[j].flags & STEP_LIVE) || P[j].bp == bp)) {
            uint32_t stop = nprev - 1 - j;
            if (stop > (uint32_t)(want - n))
                stop = (uint32_t)(want - n);
            uint32_t k = replay(&P[j], stop, lo, frames + n, &C[n], &sp, &bp);
#ifdef OT_STAGE_CYCLES
            for (uint32_t q = 0; q < k; q++)
                OT_STAGE_CACHE(OT_C_WALK_STEP, 1);
#endif
            tail = (uint32_t)n;
            n += (int)k;
            j += k;
            pc = P[j].pc;
            if (OT_UNLIKELY(pc < 0x4000)) { /* the end of the chain, as the previous walk found it */
                end = STEP_END;
                n--; /* the step that read it emitted no frame */
                goto finish_at;
            }
            if (j == nprev - 1 && (P[j].flags & STEP_END)) {
                end = STEP_END; /* the previous walk's last step, where its chain ended */
                goto finish;
            }
            tail = NSTEPS;
            j++; /* a mismatch at this state (or want): walked by its rule, and not matched again */
        }
        if (n >= want)
            break;
        const struct ot_frame_rule *r = rule_for(w, n == 0 ? pc : pc - 1);
        if (r->kind == OT_RULE_LAST) {
            end = STEP_END;
            break;
        }
        if (r->kind != OT_RULE_OK)
            return -1;
        struct step *st = &C[n];
        uint64_t f = 0, cfa;
        if (r->cfa_reg == OT_CFA_RSP) {
            cfa = sp + (uint64_t)(int64_t)r->cfa_off;
        } else if (r->cfa_reg == OT_CFA_RBP) {
            f = STEP_USES;
            cfa = bp + (uint64_t)(int64_t)r->cfa_off;
        } else {
            uint64_t at = bp + (uint64_t)(int64_t)r->cfa_off;
            if (!on_stack(w, lo, at))
                return -1;
            f = STEP_USES | STEP_DEREF;
            st->deref_at = at;
            cfa = *(const uint64_t *)(uintptr_t)at;
        }
        if (cfa <= sp || !on_stack(w, lo, cfa - 8))
            return -1;
        uint64_t ra = *(const uint64_t *)(uintptr_t)(cfa - 8);
        st->pc = pc;
        st->sp = sp;
        st->bp = bp;
        if (r->rbp_how == OT_RBP_AT_CFA || r->rbp_how == OT_RBP_AT_RBP) {
            uint64_t at = (r->rbp_how == OT_RBP_AT_CFA ? cfa : bp) + (uint64_t)(int64_t)r->rbp_off;
            if (!on_stack(w, lo, at))
                return -1;
            f |= r->rbp_how == OT_RBP_AT_RBP ? STEP_USES | STEP_KILLS | STEP_BPAT : STEP_KILLS | STEP_BPAT;
            st->bp_at = at;
            bp = *(const uint64_t *)(uintptr_t)at;
        } else if (r->rbp_how == OT_RBP_UNDEF) {
            f |= STEP_KILLS;
            bp = 0;
        }
        st->flags = f;
        walked++;
        OT_STAGE_CACHE(OT_C_WALK_STEP, 0);
        sp = cfa;
        pc = ra;
        if (ra < 0x4000) { /* the end of the chain, as libunwind reads it */
            end = STEP_END;
            goto finish_at;
        }
        frames[n++] = ra;
    }
finish:
    /* The step reached is kept too: a replay that reaches it ends there (the chain's end) or walks it by
     * its rule. */
    C[n] = (struct step){pc, sp, bp, 0, 0, end};
    if (end && tail <= (uint32_t)n) /* replayed to a kept walk's end from tail: only the steps before */
        mark_live_upto(C, tail);
    else if (walked || !end) /* (all replayed to the same end: the same steps, marked as they were) */
        mark_live(C, (uint32_t)n + 1);
    w->nprev = w->nsteps[cur] = (uint32_t)n + 1;
    w->prev = cur;
    state_index(w, cur, looked, nlooked);
    return n;
finish_at:
    /* The chain ended at a return address below 0x4000: the step after step n holds it, and no frame. */
    C[n + 1] = (struct step){pc, sp, bp, 0, 0, end};
    if (tail <= (uint32_t)n + 1)
        mark_live_upto(C, tail);
    else if (walked)
        mark_live(C, (uint32_t)n + 2);
    w->nprev = w->nsteps[cur] = (uint32_t)n + 2;
    w->prev = cur;
    state_index(w, cur, looked, nlooked);
    return n;
}

size_t ot_stack_room(void)
{
    struct walker *w = walker_get();
    uint64_t sp = (uint64_t)(uintptr_t)__builtin_frame_address(0);
    if (!w || sp < w->stack_lo || sp >= w->stack_hi)
        return SIZE_MAX;
    return (size_t)(sp - w->stack_lo);
}

/* Fills frames (room for OT_MAX_FRAMES) with return addresses, innermost first, each shifted left by one
 * (the low bit tags Python frames, see OT_FRAME_PYTHON). Returns how many, at most max; sets
 * OT_STACK_TRUNCATED in *flags when the stack went deeper. Unwinds straight into the caller's buffer and
 * compacts it in place: no second copy. */
int ot_backtrace(uint64_t *frames, int max, unsigned *flags)
{
    _Static_assert(sizeof(void *) == sizeof(uint64_t), "frames hold pointers");
    int want = max + 8 > OT_MAX_FRAMES ? OT_MAX_FRAMES : max + 8; /* our own frames come first */
    int n = -1;
    if (OT_LIKELY(walk_rest == 0)) {
        n = ot_native_walk(frames, want);
        if (n >= 0)
            walk_fails = 0;
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
    int skip = 0;
    while (skip < n && frames[skip] - self_lo < self_hi - self_lo)
        skip++;
    int out = n - skip < max ? n - skip : max;
    /* A full buffer means the walk stopped at its end, not at the stack's. */
    if (n - skip > max || n == want)
        *flags |= OT_STACK_TRUNCATED;
    if (out <= 0)
        return 0;
    /* Moved and tagged in one pass, four at a time (at 50-60 frames a stack, a loop of one frame an
     * iteration was a tenth of the event, and memmove a call of its own): each group is read before it is
     * written, and the frames move down, so a write never reaches a frame still to be read. */
    const uint64_t *src = frames + skip;
    int i = 0;
    for (; i + 4 <= out; i += 4) {
        uint64_t a = src[i], b = src[i + 1], c = src[i + 2], d = src[i + 3];
        frames[i] = a << 1;
        frames[i + 1] = b << 1;
        frames[i + 2] = c << 1;
        frames[i + 3] = d << 1;
    }
    for (; i < out; i++)
        frames[i] = src[i] << 1;
    return out;
}
