/* Cycles per stage of the event path, for a bench-only build (make bench-stages:
 * build/bench/liboomtrace-stages.so, compiled with -DOT_STAGE_CYCLES). The normal build compiles every
 * macro here to nothing; the pass-through build (-DOT_STAGE_PASS_ONLY, at the end) keeps the switch only.
 *
 * Each stage adds its rdtsc cycles and one call to the calling thread's own counters (plain adds into a
 * per-thread block, summed at exit: process-wide atomics would bounce their lines between the threads
 * that allocate, a cost of the probes and not of the tracer); stages nest (a hook holds the capture, the
 * capture the walks), so each figure is inclusive of the stages inside it and of their probes
 * (probe_cycles in the output: what one empty begin/end pair adds to the stage around it). Caches count
 * their hits and misses. At exit one line of JSON goes to stderr (stage.c): per stage calls, cycles and
 * ns (at the TSC rate the clock calibrated), the tracer's own cycles per event, and the split stages by
 * thread (main or other, and whether the previous event was another thread's) and by the time since the
 * thread's previous hook. Why not wall clock: on the H200 the step's speed moves by +-10% between
 * processes, more than the 2% the tracer is allowed; cycles spent inside the tracer are counted, not
 * inferred from a difference.
 *
 * Settings, read at start (bench only; the normal build has neither):
 *   OOMTRACE_STAGE_PROBES=outer  only the wrappers' own probes and the driver calls inside them: a C pair
 *       has 14 nested probes of ~160 cycles each on the H200 in the full mode, about 20 times the
 *       tracer's code they surround, so its own time there is a small difference of large numbers; here
 *       one probe (the allocation's driver call) is subtracted.
 *   OOMTRACE_STAGE_RING=drop     full blocks of events are emptied in place instead of compressed (their
 *       events counted as dropped): no compressor thread, no zstd, no block handed to another core. */
#ifndef OOMTRACE_COMMON_STAGE_H
#define OOMTRACE_COMMON_STAGE_H
#include <stdint.h>

enum ot_stage {
    OT_ST_HOOK,         /* a wrapper but a free's, tracer entered to left (an allocation's holds the driver call) */
    OT_ST_DRIVER_ALLOC, /* the real allocation call, inside the hook */
    OT_ST_DRIVER_FREE,  /* the real free call, after the hook left */
    OT_ST_PRE_ALLOC,    /* the device and its baseline, before the driver call */
    OT_ST_AFTER_ALLOC,  /* everything after the driver call: record, companion poke */
    OT_ST_CAPTURE,      /* the backtrace and the Python merge */
    OT_ST_BACKTRACE,    /* the native walk, own frames dropped */
    OT_ST_UNWIND,       /* libunwind's backtrace, where the walk could not follow a frame */
    OT_ST_PYTHON,       /* the Python part: walk of the chain, borrow, merge */
    OT_ST_PYWALK,       /* the calling thread's own chain */
    OT_ST_BORROW,       /* a waiting thread's chain */
    OT_ST_LOCK,         /* taking ot_lock */
    OT_ST_RECORD_ALLOC, /* under the lock: live set, peak, stack table, ring, clock */
    OT_ST_INTERN,       /* the stack table */
    OT_ST_RECORD_FREE,  /* a free's record, lock included */
    OT_ST_RING,         /* one event into the ring (its encode is the compressor thread's) */
    OT_ST_CLOCK,        /* one read of the tracer's clock */
    OT_ST_HOOK_FREE,    /* a free's wrapper, entered to left (its driver call comes after) */
    OT_ST_FREE_CROSS,   /* of record_free: the frees of records another thread allocated (not a probe) */
    OT_ST_BORROW_READ,  /* of borrow: the check's one system call that reads the lender's chain (not the walk's) */
    OT_ST_BORROW_WALK,  /* of borrow: a walk of the lender's chain, read by a call a frame, its new frames interned */
    OT_ST_N
};

enum ot_cache {
    OT_C_WALK_REPLAY,   /* the previous walk's frames, every slot it read unchanged (backtrace.c: struct memo) */
    OT_C_WALK_PLACE,    /* else: a walk kept by place, every slot it read unchanged (backtrace.c: struct place_memo) */
    OT_C_WALK_INDEX,    /* an address the kept walk followed lacked: its rule names a kept step (hit) or none */
    OT_C_WALK_STEP,     /* a step found where the kept walk followed goes on (hit) or looked up (miss) */
    OT_C_PY_SAME,       /* the chain is the thread's last one */
    OT_C_PY_MERGED,     /* the merged stack is the thread's last one */
    OT_C_PY_PLACES,     /* else: one of the thread's merged stacks by place */
    OT_C_STACK_LAST,    /* the stack is the one the thread interned last */
    OT_C_STACK_HINT,    /* a capture cache entry named the stack's id (capture/stacks.h: ot_stack_hint) */
    OT_C_BORROW_QUICK,  /* a borrow that read nothing */
    OT_C_PY_BORROWED,   /* a borrowed stack: one of the thread's merged stacks by place */
    OT_C_PY_LINKED,     /* the merged stack named by the walk kept by place, its chain checked at its frames */
    OT_C_BORROW_WHOLE,  /* a borrow that read: the lender's chain checked whole in one read (hit) or walked */
    OT_C_BORROW_PLAIN,  /* a borrow's check read the lender's frames with plain loads (hit) or a system call */
    OT_C_PY_BLINKED,    /* a borrowed stack named by the walk kept by place and the lender's chain kept (hit) */
    OT_C_PY_PREDICTED,  /* the merged stack by place that the walk kept by place and innermost frame last named */
    OT_C_N
};

#ifdef OT_STAGE_CYCLES
#include <stddef.h>

#include "common/self.h"

static inline uint64_t ot_stage_tsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return (uint64_t)hi << 32 | lo;
}

/* The split stages: each also counted by the class of the hook it ran in (bit 0: a thread other than the
 * main one; bit 1: the previous event recorded was another thread's) and by the time since the thread
 * entered its previous hook (OT_STAGE_GAPS buckets). */
#define OT_STAGE_SPLIT_N 14
#define OT_STAGE_GAPS 3
static const signed char ot_stage_split_of[OT_ST_N] = {
    [OT_ST_HOOK] = 1, [OT_ST_HOOK_FREE] = 2, [OT_ST_DRIVER_ALLOC] = 3, [OT_ST_DRIVER_FREE] = 4,
    [OT_ST_CAPTURE] = 5, [OT_ST_LOCK] = 6, [OT_ST_RECORD_ALLOC] = 7, [OT_ST_RECORD_FREE] = 8,
    [OT_ST_BACKTRACE] = 9, [OT_ST_PYTHON] = 10, [OT_ST_PYWALK] = 11, [OT_ST_BORROW] = 12, [OT_ST_BORROW_READ] = 13,
    [OT_ST_BORROW_WALK] = 14,
};

/* One thread's counters: its own block, never freed (a thread that ended still counts at exit). */
struct ot_stage_thread {
    uint64_t calls[OT_ST_N], cycles[OT_ST_N];
    uint64_t hits[OT_C_N], misses[OT_C_N], events[2];
    uint64_t split_calls[OT_STAGE_SPLIT_N][4], split_cycles[OT_STAGE_SPLIT_N][4];
    uint64_t gap_calls[OT_STAGE_SPLIT_N][OT_STAGE_GAPS], gap_cycles[OT_STAGE_SPLIT_N][OT_STAGE_GAPS];
    uint64_t hook_t0, last_hook;
    int cls, gap;
    struct ot_stage_thread *next;
};
extern __thread struct ot_stage_thread *ot_stage_me __attribute__((tls_model("initial-exec")));
struct ot_stage_thread *ot_stage_thread_new(void);
static inline struct ot_stage_thread *ot_stage_self(void)
{
    struct ot_stage_thread *t = ot_stage_me;
    return __builtin_expect(t != NULL, 1) ? t : ot_stage_thread_new();
}

extern int ot_stage_fine;      /* 0 under OOMTRACE_STAGE_PROBES=outer */
extern int ot_stage_ring_drop; /* OOMTRACE_STAGE_RING=drop */
extern uint32_t ot_stage_last_tid; /* the thread of the last event recorded (read without the lock) */
extern uint32_t ot_stage_pid;

/* The outer stages are counted in both modes */
#define OT_STAGE_ON(s) ((s) == OT_ST_HOOK || (s) == OT_ST_HOOK_FREE || (s) == OT_ST_DRIVER_ALLOC || \
                        (s) == OT_ST_DRIVER_FREE || ot_stage_fine)

static inline void ot_stage_add(enum ot_stage s, uint64_t c)
{
    struct ot_stage_thread *t = ot_stage_self();
    t->calls[s]++;
    t->cycles[s] += c;
    int k = ot_stage_split_of[s] - 1;
    if (k >= 0) {
        t->split_calls[k][t->cls]++;
        t->split_cycles[k][t->cls] += c;
        t->gap_calls[k][t->gap]++;
        t->gap_cycles[k][t->gap] += c;
    }
}

static inline void ot_stage_cache(enum ot_cache c, int hit)
{
    if (ot_stage_fine) {
        struct ot_stage_thread *t = ot_stage_self();
        (hit ? t->hits : t->misses)[c]++;
    }
}

/* One event recorded (an allocation: alloc = 1, or a free), by thread tid; under ot_lock. */
static inline void ot_stage_events(int alloc, uint32_t tid)
{
    ot_stage_self()->events[alloc != 0]++;
    __atomic_store_n(&ot_stage_last_tid, tid, __ATOMIC_RELAXED);
}
void ot_stage_stacks(uint32_t n); /* the stack table now holds n distinct stacks */

/* Gap buckets, in TSC ticks (2-3.5 GHz on the machines measured): under ~1 us, under ~20 us, more. */
#define OT_STAGE_GAP1 2500u
#define OT_STAGE_GAP2 50000u
/* Entering a hook: the thread's class and gap for the stages inside it, then the hook's start. */
static inline void ot_stage_hook_in(void)
{
    struct ot_stage_thread *t = ot_stage_self();
    uint32_t tid = ot_tid();
    t->cls = (tid != ot_stage_pid) | (__atomic_load_n(&ot_stage_last_tid, __ATOMIC_RELAXED) != tid) << 1;
    uint64_t now = ot_stage_tsc(), gap = now - t->last_hook;
    t->gap = gap < OT_STAGE_GAP1 ? 0 : gap < OT_STAGE_GAP2 ? 1 : 2;
    t->last_hook = t->hook_t0 = now;
}
static inline void ot_stage_hook_out(enum ot_stage s)
{
    uint64_t now = ot_stage_tsc();
    ot_stage_add(s, now - ot_stage_me->hook_t0);
}

#define OT_STAGE_BEGIN(v) const uint64_t v = ot_stage_fine ? ot_stage_tsc() : 0
#define OT_STAGE_END(s, v)                                                                             \
    do {                                                                                               \
        if (OT_STAGE_ON(s))                                                                            \
            ot_stage_add((s), ot_stage_tsc() - (v));                                                   \
    } while (0)
#define OT_STAGE_CACHE(c, hit) ot_stage_cache((c), (hit))
#define OT_STAGE_EVENT(alloc, tid) ot_stage_events((alloc), (tid))
#define OT_STAGE_STACKS(n) ot_stage_stacks(n)
#define OT_STAGE_HOOK_IN() ot_stage_hook_in()
#define OT_STAGE_HOOK_OUT(s) ot_stage_hook_out(s)
/* expr's value, with its cycles counted under stage s */
#define OT_STAGE_CALL(s, expr)                                                                         \
    __extension__({                                                                                    \
        const uint64_t ot_stage_t_ = OT_STAGE_ON(s) ? ot_stage_tsc() : 0;                              \
        __typeof__(expr) ot_stage_r_ = (expr);                                                         \
        if (OT_STAGE_ON(s))                                                                            \
            ot_stage_add((s), ot_stage_tsc() - ot_stage_t_);                                           \
        ot_stage_r_;                                                                                   \
    })
#else
#define OT_STAGE_BEGIN(v) ((void)0)
#define OT_STAGE_END(s, v) ((void)0)
#define OT_STAGE_CACHE(c, hit) ((void)0)
#define OT_STAGE_EVENT(alloc, tid) ((void)0)
#define OT_STAGE_STACKS(n) ((void)0)
#define OT_STAGE_HOOK_IN() ((void)0)
#define OT_STAGE_HOOK_OUT(s) ((void)0)
#define OT_STAGE_CALL(s, expr) (expr)
#endif

#if defined(OT_STAGE_CYCLES) || defined(OT_STAGE_PASS_ONLY)
/* 1 between oomtrace_mark("stage: pass-through") and oomtrace_mark("stage: traced"): every wrapper calls the
 * driver and records nothing, as when the tracer is disabled. A bench alternates blocks of steps traced and
 * passed through within one process, whose step time does not move between processes as the host's does. What
 * a block passes through is lost to the record (an allocation freed there stays live until its address comes
 * back, closed then as stale): the switch is for timing, and only the bench builds have it: the stage build, and
 * the pass-through build (make bench-stages: build/bench/liboomtrace-pass.so, -DOT_STAGE_PASS_ONLY), which is
 * the normal build's code with this switch and nothing else (exactly so without a profile; with one, up to what
 * its own training run lays out differently, as two trainings of the normal build also do). Its blocks are timed
 * without the stage build's probes, which cost ~120 cycles a pair of rdtsc on the H200 and run in traced blocks
 * only. It prints "OOMTRACE_PASS {"pid": P, "switches": N}" at exit (N: the marks that switched). */
extern int ot_stage_pass;
#define OT_STAGE_PASS() __atomic_load_n(&ot_stage_pass, __ATOMIC_RELAXED)
/* oomtrace_mark(label): two labels switch OT_STAGE_PASS; the stage build also keeps the counters so far for its
 * exit line's marks (a bench's timed loops) */
void ot_stage_mark(const char *label);
#define OT_STAGE_MARK(label) ot_stage_mark(label)
#else
#define OT_STAGE_PASS() 0
#define OT_STAGE_MARK(label) ((void)0)
#endif
#endif
