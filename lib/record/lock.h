/* ot_lock: the recorder's lock. It guards ot_state, the stack table and the ring; every allocation and
 * every free takes it once, for a few hundred instructions.
 *
 * Taking it is one exchange; giving it back is a plain store (a release: on x86 every store is), where
 * pthread_mutex_unlock pays a second locked instruction, and both pay a call and the mutex type's checks
 * (about 60 instructions a lock and unlock, and ~7 ns for the second locked instruction, per event).
 *
 * A thread that finds it taken spins a little, then sleeps on a futex, counted in sleepers; the thread
 * giving it back wakes one when that count is not zero. The count is read just after the store, with no
 * fence between them, so a sleeper can in principle check the lock in the nanoseconds before the store is
 * visible and miss its wake-up: each sleep is bounded (1 ms) for that case. Never held while unwinding;
 * taken in signal context only through ot_lock_take_within, which gives up.
 *
 * In a program built with ThreadSanitizer, its runtime cannot see this lock (our code is not instrumented),
 * but it sees the C library calls made under it (memcmp, mmap): it reported the recorder's own data as
 * races, and the program exited 66 (walk 8, #25). There each take and give is told to it (__tsan_acquire,
 * __tsan_release). Whether it is there is the sign bit of sleepers (OT_LOCK_TSAN), so that the check reads
 * the line the lock already brought, and costs a program without it one load and a branch. */
#ifndef OOMTRACE_RECORD_LOCK_H
#define OOMTRACE_RECORD_LOCK_H
#include <stdint.h>

#include "common/clock.h"
#include "common/defs.h"

struct ot_lock {
    int held;     /* 0 free, 1 held: the futex word */
    int sleepers; /* threads asleep (or about to be) on held; OT_LOCK_TSAN: ThreadSanitizer is there */
};
extern struct ot_lock ot_lock;
#define OT_LOCK_TSAN ((int)0x80000000u)

int ot_lock_wait(uint64_t deadline_ns); /* the slow path: 0 when taken, -1 at the deadline (0: none) */
void ot_lock_wake(void);
void ot_lock_forked(void); /* in a forked child, the only thread: free, whoever held it in the parent */
void ot_lock_tsan_init(void); /* sets OT_LOCK_TSAN when ThreadSanitizer's runtime is in the process */
void ot_lock_tsan_acquire(void);
void ot_lock_tsan_release(void);

static inline int ot_lock_tsan(void)
{
    return OT_UNLIKELY(__atomic_load_n(&ot_lock.sleepers, __ATOMIC_RELAXED) < 0);
}

static inline void ot_lock_take(void)
{
    if (OT_UNLIKELY(__atomic_exchange_n(&ot_lock.held, 1, __ATOMIC_ACQUIRE) != 0))
        ot_lock_wait(0);
    if (ot_lock_tsan())
        ot_lock_tsan_acquire();
}

/* Waits at most ns; 0 when taken, -1 when not. */
static inline int ot_lock_take_within(uint64_t ns)
{
    int r = OT_LIKELY(__atomic_exchange_n(&ot_lock.held, 1, __ATOMIC_ACQUIRE) == 0) ? 0 : ot_lock_wait(ot_mono_ns() + ns);
    if (r == 0 && ot_lock_tsan())
        ot_lock_tsan_acquire();
    return r;
}

static inline void ot_lock_give(void)
{
    if (ot_lock_tsan())
        ot_lock_tsan_release(); /* before the store: the next taker's acquire must follow it */
    __atomic_store_n(&ot_lock.held, 0, __ATOMIC_RELEASE);
    if (OT_UNLIKELY(__atomic_load_n(&ot_lock.sleepers, __ATOMIC_RELAXED) != 0))
        ot_lock_wake();
}
#endif
