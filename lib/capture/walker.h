/* The native walk's thread state (backtrace.c): its rules, its kept steps, its previous walk and its walks kept
 * by place, and the checks that replay a memo. Shared by backtrace.c (the walk) and walkmemo.c (keeping a walk
 * by place); nothing outside the walk includes it. */
#ifndef OOMTRACE_CAPTURE_WALKER_H
#define OOMTRACE_CAPTURE_WALKER_H
#include <stdint.h>

#include "oomtrace_format.h"
#include "capture/cfi.h"
#include "capture/stacks.h"
#include "common/defs.h"

#define RULE_BITS 11
#define NRULES (1u << RULE_BITS)

/* One step of a kept walk: the rule of the frame at addr (the walk's own pc for its first step, a return
 * address minus one for the others), packed in 16 bytes: cfa_off, and in meta the CFA's register, how rbp
 * is restored, whether the chain ends there, whether its reads need no bounds check but the stack's top
 * (META_NEAR, below), and rbp_off in the upper 24 bits. A rule depends only on the
 * address (and the modules loaded, see modgen), so a kept step whose addr is the one looked for holds the
 * right rule wherever it was found: following a kept walk, found through an index or left over from an
 * older walk, can only save the rule's lookup, never change what the walk does. */
struct step {
    uint64_t addr;
    int32_t cfa_off;
    uint32_t meta;
};
_Static_assert(sizeof(struct step) == 16, "a step is 16 bytes: four to a cache line");
enum { META_CFA = 3, META_RBP_SHIFT = 2, META_RBP = 3 << 2, META_LAST = 16, META_BIG = 32, META_NEAR = 64,
       META_OFF_SHIFT = 8 };
#define NSTEPS (OT_MAX_FRAMES + 1)
#define PF_MAX 96

/* The thread's kept walks, one after another in a ring of steps (an arena, each walk as long as it is):
 * a training step allocates from a hundred places in turn, and each place's walk differs from the one
 * before only from where the op's own frames begin. A walk follows the previous walk's steps while its
 * return addresses are theirs; where they differ, it looks the address up in the rules (each rule names
 * the last kept step for its address, rule->at) and follows the walk kept there. A hundred places of 30
 * steps fit in 48 KB, read in order: the misses, not the instructions, were a replayed frame's cost on
 * the H200 (run 19: ~40 ns a frame with 257-step slots of 48-byte steps, 1.8 MB a thread). The arena
 * holds 8,192 steps (128 KB); each walk kept is kept from its first look-up on (the frames before it are
 * the walk it followed, kept already). */
#define ARENA_BITS 13
#define ARENA (1u << ARENA_BITS)
/* A walk that had to look more than this many addresses up (or found a rule with no kept step) is kept at
 * the arena's head, from its first look-up to its last, and the rules of the addresses kept name the copy:
 * the next walk from the same place follows the walk before it up to where the op's frames begin, looks
 * that address up and follows the copy, then looks up where the copy ends and follows the walk it
 * rejoined (the shared outer frames, kept once): two look-ups, each a line or two. */
#define LOOKUPS_KEPT 2

/* The thread's previous walk, as a function of what it read: a walk is determined by its start (pc, which
 * is always the same, rsp and rbp), the rules (the same while no module is unloaded) and the stack slots
 * it reads. So where the start is the previous walk's and every slot it read holds what it held, the
 * frames are the previous walk's: a loop that allocates from one place checks each return address's slot
 * (cfa[k] - 8 holds frames[k]) and the few others read (x: rbp's saved slots where a later step used
 * that rbp, CFAs read through rbp, the slot that ended the chain), and copies the frames. */
#define NX (2 * NSTEPS + 1)
struct memo {
    uint32_t cfa[NSTEPS]; /* above the walk's rsp */
    uint64_t frames[NSTEPS]; /* each shifted left by one (replay_slots) */
    uint32_t xoff[NX];    /* the other slots: above the walk's rsp, and what they held */
    uint64_t xval[NX];
};

/* The thread's walks by place: the memo above for each of the places a step allocates from in turn. A
 * training step's hundred places each walked the kept steps (struct step) after the step's own work had
 * evicted them, and on the H200 such a walk cost 2,101 ns against 472 after a short gap (run 27). Followed
 * steps make a chain: each step's rule is read where the previous return address led, and a cold step, or a
 * branch on its rule that the predictor forgot, holds up the frames after it. A place memo is checked as
 * the memo is, every slot it read against what it held: reads whose addresses come from the memo alone,
 * none waiting on another, and branches that never go the other way until the check fails.
 * Found by its start: the walk's rsp (sp0) and, where several places start at the same rsp, the value of
 * one stack slot (disc: the first return address where two of them differed, per sp0 in dir). The key only
 * chooses which memos to check: a memo replays only when every slot it read holds what it held, rbp at the
 * start included where the walk used it (needs_bp0). A walk is kept only when its frames and the slots it
 * checks fit (PM_FRAMES, PM_X). */
#define PM_FRAMES 80
#define PM_X 80 /* code with frame pointers: each frame's rbp restored and used by the next */
#define PM_SET_BITS 5
#define PM_WAYS 8
#define PM_DIR_BITS 6
struct place_memo {
    uint64_t sp0; /* 0: empty */
    uint64_t bp0;
    uint64_t dv;  /* the key: the slot at sp0 + disc held dv when the walk was kept (disc 0: none) */
    uint32_t disc;
    int32_t want;
    uint16_t n, nx;
    uint8_t needs_bp0;
    uint8_t skip; /* its first frames that are the tracer's own */
    struct ot_stack_memo stack;
    uint64_t gen; /* its fill's number (ot_backtrace_place) */
    uint32_t cfa[PM_FRAMES]; /* above sp0 */
    uint32_t xoff[PM_X];
    uint64_t frames[PM_FRAMES]; /* each shifted left by one (replay_slots) */
    uint64_t xval[PM_X];
} __attribute__((aligned(64)));
struct pm_dir {
    uint64_t sp0;
    uint32_t disc;
};
/* A set's ways by their key's upper bits (never 0 once kept), and when each was last replayed or kept (the
 * oldest is replaced): one line read to choose which memos to check. */
struct pm_set {
    uint32_t tag[PM_WAYS];
    uint32_t used[PM_WAYS];
};

/* A thread's rules, its stack's bounds (every read the walk makes is checked against them), its kept
 * walks and its previous walk. */
struct walker {
    /* What every walk reads, in one line: the stack's top, the rules' generation, the previous walk's
     * start, want, frames and slots besides (struct memo), where the walk starts following, its
     * look-ups so far, and whether the previous walk went where the one before it did (path). */
    uint64_t stack_hi;
    uint64_t modgen;  /* the modules' generation the rules (and the memo) were read under */
    uint64_t sp0, bp0;
    int32_t want, n;  /* n < 0: no memo kept */
    uint32_t nx;
    uint32_t skip;    /* the memo's first frames that are the tracer's own (backtrace.c drops them) */
    uint32_t start;   /* the arena position of the previous walk's first step */
    uint32_t lookups;
    int32_t again;
    uint64_t path, prev_path; /* where this walk's and the previous walk's look-ups went, hashed */
    uint64_t stack_lo;
    uint32_t used;
    uint32_t head;    /* where the next kept walk goes */
    /* this walk's look-ups (walk_lookup): the first and last step looked up, whether one found no kept
     * step, where to follow on, and a rule's rbp_off too far for a step (META_BIG) */
    uint32_t first_lk, last_lk, fresh, next;
    int32_t big_off;
    /* The stack the memo's frames were interned as (capture/stacks.h: a hint), zeroed whenever the memo
     * changes; replayed: the last ot_native_walk returned a memo's frames (this one's or a place memo's),
     * and hint names that memo's stack. */
    struct ot_stack_memo stack;
    int replayed;
    uint32_t walks; /* so far: at OT_TABLE_HOT the table moves onto 2 MiB pages (common/tables.h) */
    struct ot_stack_memo *hint;
    struct place_memo *last; /* the place memo last replayed or kept: checked first */
    uint32_t *last_used;     /* its set's used[way] */
    uint64_t gen;   /* the place memo this walk replayed or kept: its fill's number; else 0 */
    uint32_t kept_skip; /* the replayed memo's skip (a walk that replayed one) */
    uint64_t fills; /* the memos filled so far */
    uint32_t pm_tick;
    struct step fresh_step; /* a rule with no kept step, as a step */
    struct ot_frame_rule rules[NRULES];
    struct step arena[ARENA];
    struct memo memo;
    /* The stack slots the previous walk read its return addresses from, as distances below the stack's top
     * (frames from PF_MAX on are not kept): fetched at the start of a walk that will not replay the memo.
     * In a training step the thread's earlier frames (the interpreter's, the framework's dispatcher) stay
     * where they were between its allocations, but their lines go cold in the step's work between them, and
     * the walk reads one slot after another: each slot a miss of its own. Fetched first, they arrive
     * together. Only a hint: a slot that moved is fetched for nothing and read as before. */
    uint32_t npf;
    uint32_t pf[PF_MAX];
    struct pm_dir dir[1u << PM_DIR_BITS];
    struct pm_set pmset[1u << PM_SET_BITS];
    struct place_memo pm[1u << PM_SET_BITS][PM_WAYS];
};

/* Whether the previous walk's frames hold again (its start is this one's: the caller checked): every slot
 * it read still holds what it read. Returns the number of frames; -1 otherwise. Kept frames are as the
 * capture returns them (each return address shifted left by one: backtrace.c), so a replay hands them out
 * where they lie; a return address is below 2^63, so the shift loses nothing. (The slots' offsets fit 32
 * bits: a thread's stack is smaller than 4 GiB, and the walk reads only within it.) */
static inline OT_STACK_READS int replay_slots(uint64_t sp, int n, const uint32_t *cfa, const uint64_t *kept, uint32_t nx,
                                              const uint32_t *xoff, const uint64_t *xval)
{
    /* Four slots a branch: a memo that stops holding mostly stops at its first frames, and the loop's
     * compares and branches were a third of a replay's instructions. (A slot read past the one that
     * differs is within the stack still: the memo's offsets are, from the same start.) */
    int k = 0;
    for (; k + 4 <= n; k += 4) {
        const uint64_t d = (*(const uint64_t *)(uintptr_t)(sp + cfa[k] - 8) ^ kept[k] >> 1) |
                           (*(const uint64_t *)(uintptr_t)(sp + cfa[k + 1] - 8) ^ kept[k + 1] >> 1) |
                           (*(const uint64_t *)(uintptr_t)(sp + cfa[k + 2] - 8) ^ kept[k + 2] >> 1) |
                           (*(const uint64_t *)(uintptr_t)(sp + cfa[k + 3] - 8) ^ kept[k + 3] >> 1);
        if (d)
            return -1;
    }
    for (; k < n; k++)
        if (*(const uint64_t *)(uintptr_t)(sp + cfa[k] - 8) != kept[k] >> 1)
            return -1;
    for (uint32_t j = 0; j < nx; j++)
        if (*(const uint64_t *)(uintptr_t)(sp + xoff[j]) != xval[j])
            return -1;
    return n;
}

static inline int replay_memo(const struct walker *w, uint64_t sp, int want)
{
    const struct memo *m = &w->memo;
    if (w->n < 0 || w->want != want)
        return -1;
    return replay_slots(sp, w->n, m->cfa, m->frames, w->nx, m->xoff, m->xval);
}

/* A place memo's frames, when it starts here and every slot it read holds what it held; -1 otherwise. */
static inline int replay_place(const struct place_memo *e, uint64_t sp, uint64_t bp, int want)
{
    if (e->sp0 != sp || e->want != want || (e->needs_bp0 && e->bp0 != bp))
        return -1;
    return replay_slots(sp, e->n, e->cfa, e->frames, e->nx, e->xoff, e->xval);
}

/* By the address's low bits: the places' starts differ by their frames' sizes, a few hundred bytes, and
 * two of them meet here only a multiple of 1 KB apart. */
static inline uint32_t pm_dir_of(uint64_t sp)
{
    return (uint32_t)(sp >> 4) & ((1u << PM_DIR_BITS) - 1);
}

/* The key's hash: its low bits the set, its upper half the tag. */
static inline uint64_t pm_key(uint64_t sp, uint32_t disc, uint64_t dv)
{
    uint64_t h = (sp ^ disc) * 0x9E3779B97F4A7C15ull ^ dv * 0xC2B2AE3D27D4EB4Full;
    return h ^ h >> 29;
}
#define PM_SET(h) ((uint32_t)(h) & ((1u << PM_SET_BITS) - 1))
#define PM_TAG(h) ((uint32_t)((h) >> 32) | 1u)

/* The slot at sp + disc (the key's), within the stack; 0 for none. */
static inline OT_STACK_READS uint64_t pm_key_slot(const struct walker *w, uint64_t sp, uint32_t disc)
{
    return disc && sp + disc <= w->stack_hi - 8 ? *(const uint64_t *)(uintptr_t)(sp + disc) : 0;
}

void ot_walk_keep_place(struct walker *w, uint64_t sp, uint64_t bp, int want, const uint64_t *frames, int n,
                        uint32_t nx, int needs_bp0, uint32_t disc, struct place_memo *clash, uint32_t skip);
#endif
