/* ot_lock's slow path (record/lock.h): spin a little, then sleep on the futex until it is given back. */
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/tsan.h"
#include "record/lock.h"

/* ot_lock itself is the first bytes of ot_state (record/state.h, record.c): the line every event writes. */

#define SPINS 64
#define SLEEP_NS 1000000 /* one sleep at most: a wake-up missed in the store's window costs no more */

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int lock_wait(uint64_t deadline_ns);

/* errno is the program's: the futex calls below must not change it. */
int ot_lock_wait(uint64_t deadline_ns)
{
    int err = errno, r = lock_wait(deadline_ns);
    errno = err;
    return r;
}

static int lock_wait(uint64_t deadline_ns)
{
    for (unsigned spins = 0;; spins++) {
        if (__atomic_load_n(&ot_lock.held, __ATOMIC_RELAXED) == 0 &&
            __atomic_exchange_n(&ot_lock.held, 1, __ATOMIC_ACQUIRE) == 0)
            return 0;
        if (spins < SPINS) {
            relax();
            continue;
        }
        uint64_t sleep_ns = SLEEP_NS;
        if (deadline_ns) {
            uint64_t now = ot_mono_ns();
            if (now >= deadline_ns)
                return -1;
            if (deadline_ns - now < sleep_ns)
                sleep_ns = deadline_ns - now;
        }
        /* Counted before the last look at the word: a giver that stores after it sees the count. */
        __atomic_fetch_add(&ot_lock.sleepers, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&ot_lock.held, __ATOMIC_SEQ_CST) != 0) {
            struct timespec ts = {0, (long)sleep_ns};
            syscall(SYS_futex, &ot_lock.held, FUTEX_WAIT_PRIVATE, 1, &ts, NULL, 0);
        }
        __atomic_fetch_sub(&ot_lock.sleepers, 1, __ATOMIC_RELAXED);
    }
}

void ot_lock_wake(void)
{
    if (!(__atomic_load_n(&ot_lock.sleepers, __ATOMIC_RELAXED) & ~OT_LOCK_TSAN))
        return; /* only ThreadSanitizer's bit */
    int err = errno;
    syscall(SYS_futex, &ot_lock.held, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    errno = err;
}

void ot_lock_forked(void)
{
    __atomic_store_n(&ot_lock.held, 0, __ATOMIC_RELAXED);
    __atomic_and_fetch(&ot_lock.sleepers, OT_LOCK_TSAN, __ATOMIC_RELAXED);
}

void ot_lock_tsan_init(void)
{
    if (ot_tsan_present())
        __atomic_or_fetch(&ot_lock.sleepers, OT_LOCK_TSAN, __ATOMIC_RELAXED);
}

void ot_lock_tsan_acquire(void)
{
    ot_tsan_acquire(&ot_lock);
}

void ot_lock_tsan_release(void)
{
    ot_tsan_release(&ot_lock);
}
