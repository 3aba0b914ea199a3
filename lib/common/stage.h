/* Cycles per stage of the event path, for a bench-only build (make bench-stages:
 * build/bench/liboomtrace-stages.so, compiled with -DOT_STAGE_CYCLES). The normal build compiles every
 * macro here to nothing.
 *
 * Each stage adds its rdtsc cycles and one call to process-wide counters (relaxed atomic adds); stages
 * nest (a hook holds the capture, the capture the walks), so each figure is inclusive of the stages inside
 * it and of their probes (probe_cycles in the output: what one empty begin/end pair adds to the stage
 * around it). Caches count their hits and misses. At exit one line of JSON goes to stderr (stage.c): per
 * stage calls, cycles and ns (at the TSC rate the clock calibrated), and the tracer's own cycles per
 * event. Why not wall clock: on the H200 the step's speed moves by +-10% between processes, more than the
 * 2% the tracer is allowed; cycles spent inside the tracer are counted, not inferred from a difference. */
#ifndef OOMTRACE_COMMON_STAGE_H
#define OOMTRACE_COMMON_STAGE_H
#include <stdint.h>

enum ot_stage {
    OT_ST_HOOK,         /* a wrapper, tracer entered to left (an allocation's holds the driver call) */
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
    OT_ST_N
};

enum ot_cache {
    OT_C_WALK_REPLAY,   /* the previous walk's frames, every slot it read unchanged (backtrace.c: struct memo) */
    OT_C_WALK_INDEX,    /* an address the kept walk followed lacked: its rule names a kept step (hit) or none */
    OT_C_WALK_STEP,     /* a step found where the kept walk followed goes on (hit) or looked up (miss) */
    OT_C_PY_SAME,       /* the chain is the thread's last one */
    OT_C_PY_MERGED,     /* the merged stack is the thread's last one */
    OT_C_PY_PLACES,     /* else: one of the thread's merged stacks by place */
    OT_C_STACK_LAST,    /* the stack is the one the thread interned last */
    OT_C_STACK_HINT,    /* a capture cache entry named the stack's id (capture/stacks.h: ot_stack_hint) */
    OT_C_BORROW_QUICK,  /* a borrow that read nothing */
    OT_C_PY_BORROWED,   /* a borrowed stack: one of the thread's merged stacks by place */
    OT_C_N
};

#ifdef OT_STAGE_CYCLES
static inline uint64_t ot_stage_tsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return (uint64_t)hi << 32 | lo;
}
void ot_stage_add(enum ot_stage s, uint64_t cycles);
void ot_stage_cache(enum ot_cache c, int hit);
void ot_stage_events(int alloc); /* one event recorded: an allocation (1) or a free (0) */
void ot_stage_stacks(uint32_t n); /* the stack table now holds n distinct stacks */
extern __thread uint64_t ot_stage_hook_t0;
#define OT_STAGE_BEGIN(v) const uint64_t v = ot_stage_tsc()
#define OT_STAGE_END(s, v) ot_stage_add((s), ot_stage_tsc() - (v))
#define OT_STAGE_CACHE(c, hit) ot_stage_cache((c), (hit))
#define OT_STAGE_EVENT(alloc) ot_stage_events(alloc)
#define OT_STAGE_STACKS(n) ot_stage_stacks(n)
#define OT_STAGE_HOOK_IN() (ot_stage_hook_t0 = ot_stage_tsc())
#define OT_STAGE_HOOK_OUT() ot_stage_add(OT_ST_HOOK, ot_stage_tsc() - ot_stage_hook_t0)
/* expr's value, with its cycles counted under stage s */
#define OT_STAGE_CALL(s, expr)                                                                         \
    __extension__({                                                                                    \
        OT_STAGE_BEGIN(ot_stage_t_);                                                                   \
        __typeof__(expr) ot_stage_r_ = (expr);                                                         \
        OT_STAGE_END((s), ot_stage_t_);                                                                \
        ot_stage_r_;                                                                                   \
    })
#else
#define OT_STAGE_BEGIN(v) ((void)0)
#define OT_STAGE_END(s, v) ((void)0)
#define OT_STAGE_CACHE(c, hit) ((void)0)
#define OT_STAGE_EVENT(alloc) ((void)0)
#define OT_STAGE_STACKS(n) ((void)0)
#define OT_STAGE_HOOK_IN() ((void)0)
#define OT_STAGE_HOOK_OUT() ((void)0)
#define OT_STAGE_CALL(s, expr) (expr)
#endif
#endif
