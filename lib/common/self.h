/* The calling thread's own state (self.c); the clock is clock.h's. */
#ifndef OOMTRACE_COMMON_SELF_H
#define OOMTRACE_COMMON_SELF_H
#include <stdint.h>

struct trace_thread {
    int busy;     /* reentrancy guard: set while the tracer itself runs on this thread */
    uint32_t tid; /* cached gettid() */
    uint16_t in_loader; /* inside a walk of the loaded objects (capture/loader.c): its depth */
    /* record/lock.h's: this thread's slot (0 until it first takes the lock the slow way), and how its
     * current hold of the lock was taken */
    uint8_t lock_slot, lock_mode;
    /* The device of the last context this thread allocated in, valid while ot_ctx_gen is ctx_gen: a
     * context's device never changes, and ending a context (which may let a new one take its handle)
     * moves ot_ctx_gen on. */
    int ctx_dev;
    uint64_t ctx, ctx_gen;
    /* record/record.c's hint, kept here so that reading it costs no line the event does not read already:
     * where the thread's next event will most likely write, as its last one left things under the lock */
    struct {
        uintptr_t slots, ring; /* the live set's table and the ring's next slot */
        uint64_t mask;
        int device;
    } near;
} __attribute__((aligned(64))); /* one line, which every wrapper reads (busy) */
/* Moved on by every context end the tracer sees (driver/driver.h, ot_drv_ctx_gen_next). */
extern uint64_t ot_ctx_gen;
extern __thread struct trace_thread ot_self __attribute__((tls_model("initial-exec")));
uint32_t ot_tid_slow(void);
static inline uint32_t ot_tid(void) /* this thread's id, from gettid() once */
{
    uint32_t t = ot_self.tid;
    return __builtin_expect(t != 0, 1) ? t : ot_tid_slow();
}
extern uint64_t ot_start_ns; /* CLOCK_MONOTONIC at start-up (set by runtime/init.c) */
#endif
