/* ot_lock's slow paths (record/lock.h): the exchange's wait, the revocation of an owner, the runs that
 * make one. */
#include <errno.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/tsan.h"
#include "record/lock.h"

/* ot_lock itself is the first bytes of ot_state (record/state.h, record.c): the line every event writes. */

struct ot_lock_slot ot_lock_slots[OT_LOCK_SLOTS] __attribute__((aligned(64)));

#define SPINS 64
#define SLEEP_NS 1000000 /* one sleep at most: a wake-up missed in the store's window costs no more */

/* The run of shared takes that makes an owner. A revocation costs ~0.5 us and an owned take saves ~10 ns
 * on the H200's host, so an ownership should earn a few hundred takes: one revoked with fewer than EARNED
 * makes the next run twice as long (up to RUN_MAX, where threads that take turns in short runs never own
 * the lock again); one that earned more brings it back to RUN_MIN. Not halved: the ring's compressor
 * takes the lock twice a block, a compression apart, so a lone recording thread's ownerships alternate
 * long and short (H200 run 87), and halving after each long one let the run needed climb. */
#define RUN_MIN 64
#define RUN_MAX (1u << 20)
#define EARNED 512

/* Under the shared lock (never read by the owned path): its own line, which moves with the lock. */
static struct {
    int on;            /* ownership allowed: membarrier registered, option on, no ThreadSanitizer */
    unsigned nslots;   /* slots handed out */
    unsigned run_slot; /* the thread of the current run of shared takes */
    unsigned run, need; /* its length; the length that makes it the owner */
    unsigned pending;  /* a revoked owner whose flag was not yet seen down */
    uint32_t takes_then; /* the owner's takes when it became the owner */
    uint64_t owned, revoked, owned_takes;
} B __attribute__((aligned(64)));

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

/* Waits for slot o's flag to drop: the owner's hold is a few hundred instructions, unless it was
 * preempted inside it, or holds the lock for a snapshot. 0 when dropped, -1 at the deadline (0: none). */
static int wait_flag(unsigned o, uint64_t deadline_ns)
{
    for (unsigned spins = 0; __atomic_load_n(&ot_lock_slots[o].busy, __ATOMIC_ACQUIRE) != 0; spins++) {
        if (spins < SPINS * 4) {
            relax();
            continue;
        }
        if (deadline_ns && ot_mono_ns() >= deadline_ns)
            return -1;
        struct timespec ts = {0, spins < SPINS * 4 + 100 ? 0 : 50000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* The ownership is taken back in two steps: the owner is cleared and the barrier asked (disown), then the
 * owner's flag must drop (settle). A bounded take that gives up between them leaves the flag to the next
 * taker (B.pending): the old owner may still be inside. */
static void disown(unsigned o)
{
    __atomic_store_n(&ot_lock.owner, 0, __ATOMIC_RELAXED);
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
        /* Refused after it was registered (not seen: a seccomp filter installed later, the kernel short of
         * memory): the global barrier, slower; no owner from now on. Where that is refused too (nohz_full,
         * the same filter), a sleep: no barrier then, but a store waits in a store buffer for nanoseconds,
         * not a millisecond. */
        B.on = 0;
        if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    B.pending = o;
}

static int settle(uint64_t deadline_ns)
{
    unsigned o = B.pending;
    if (wait_flag(o, deadline_ns) != 0)
        return -1;
    uint32_t earned = __atomic_load_n(&ot_lock_slots[o].takes, __ATOMIC_RELAXED) - B.takes_then;
    B.pending = 0;
    B.revoked++;
    B.owned_takes += earned;
    B.need = earned >= EARNED ? RUN_MIN : B.need >= RUN_MAX / 2 ? RUN_MAX : B.need * 2;
    return 0;
}

/* The hold begins, taken as mode (ot_self.lock_mode). */
static int hold(int mode)
{
    ot_self.lock_mode = (uint8_t)mode;
    if (ot_lock_tsan())
        ot_lock_tsan_acquire();
    return 0;
}

int ot_lock_taken(uint64_t deadline_ns)
{
    unsigned s = ot_self.lock_slot;
    if (OT_UNLIKELY(s == 0))
        s = ot_self.lock_slot = (uint8_t)(B.nslots < OT_LOCK_NO_SLOT - 1 ? ++B.nslots : OT_LOCK_NO_SLOT);
    /* A signal handler inside this thread's own owned take, its flag up before the take's hold began: its hold
     * is IN_TAKE (lock.h). The flag stays up: once the take read itself the owner, it is inside for the others. */
    const int in_take = OT_UNLIKELY(ot_self.lock_mode == OT_LOCK_TAKING) &&
                        __atomic_load_n(&ot_lock_slots[s].busy, __ATOMIC_RELAXED);
    unsigned o = __atomic_load_n(&ot_lock.owner, __ATOMIC_RELAXED);
    if (OT_UNLIKELY(o != 0 || B.pending != 0)) {
        /* This thread's own flag up: a signal handler inside the thread's owned hold, which is never given
         * back while the handler waits. An unbounded take there waits forever, as a second exchange would. */
        int mine = (o ? o : B.pending) == s && __atomic_load_n(&ot_lock_slots[s].busy, __ATOMIC_RELAXED);
        /* Its flag up before its hold began (a handler inside the thread's own owned take): that take resumes
         * only after this hold ends, and then reads who owns the lock; nothing to wait for, nothing to take
         * back. (Waiting for its flag here was waiting forever.) */
        if (mine && in_take)
            return hold(OT_LOCK_IN_TAKE);
        if (mine && deadline_ns) {
            ot_lock_give_held();
            return -1;
        }
        int err = errno; /* the program's: the system calls below must not change it */
        if (o)
            disown(o);
        int r = settle(deadline_ns);
        errno = err;
        if (r != 0) {
            ot_lock_give_held();
            return -1;
        }
    }
    if (OT_UNLIKELY(in_take)) /* shared, never the owner: the take resumes as it left itself */
        return hold(OT_LOCK_IN_TAKE);
    int mode = OT_LOCK_SHARED;
    if (B.on) {
        if (s == B.run_slot) {
            if (++B.run >= B.need && s != OT_LOCK_NO_SLOT)
                mode = OT_LOCK_SHARED_THEN_OWN;
        } else {
            B.run_slot = s;
            B.run = 1;
        }
    }
    return hold(mode);
}

void ot_lock_give_and_own(void)
{
    if (ot_self.lock_mode == OT_LOCK_IN_TAKE) {
        /* the interrupted take's mode again (its flag stayed up: only this thread writes it), for a second
         * handler in the same window */
        ot_lock_give_held();
        ot_self.lock_mode = OT_LOCK_TAKING;
        return;
    }
    if (ot_self.lock_mode == OT_LOCK_SHARED_THEN_OWN && B.on) {
        unsigned s = ot_self.lock_slot;
        B.takes_then = __atomic_load_n(&ot_lock_slots[s].takes, __ATOMIC_RELAXED);
        B.owned++;
        B.run = 0;
        __atomic_store_n(&ot_lock.owner, (uint8_t)s, __ATOMIC_RELAXED); /* published by the release below */
    }
    ot_self.lock_mode = OT_LOCK_SHARED;
    ot_lock_give_held();
}

void ot_lock_wake(void)
{
    if (!__atomic_load_n(&ot_lock.sleepers, __ATOMIC_RELAXED))
        return;
    int err = errno;
    syscall(SYS_futex, &ot_lock.held, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    errno = err;
}

static int register_barrier(void)
{
    int err = errno;
    long q = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    int ok = q > 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
             syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    errno = err;
    return ok;
}

void ot_lock_owner_init(int on)
{
    B.need = RUN_MIN;
    B.on = on && !ot_lock_tsan() && register_barrier();
}

/* The child's one thread may have been the owner, inside its hold (the fork's prepare takes the lock);
 * the registration is asked again, as the child is a new address space. Called on that thread. */
void ot_lock_forked(void)
{
    __atomic_store_n(&ot_lock.held, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&ot_lock.sleepers, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&ot_lock.owner, 0, __ATOMIC_RELAXED);
    memset(ot_lock_slots, 0, sizeof ot_lock_slots);
    ot_self.lock_mode = OT_LOCK_SHARED;
    ot_self.lock_slot = 0; /* the slots start again: the parent's other threads are not the child's */
    B.nslots = B.run_slot = B.run = B.pending = 0;
    B.need = RUN_MIN;
    if (B.on)
        B.on = register_barrier();
}

/* Read without the lock, so that asking does not revoke an owner: exact while no thread takes it. */
void ot_lock_counts(struct ot_lock_counts *out)
{
    *out = (struct ot_lock_counts){.ownership = B.on, .owned = B.owned, .revoked = B.revoked,
                                   .owned_takes = B.owned_takes, .run = B.need};
    unsigned o = __atomic_load_n(&ot_lock.owner, __ATOMIC_RELAXED);
    if (o)
        out->owned_takes += (uint32_t)(__atomic_load_n(&ot_lock_slots[o].takes, __ATOMIC_RELAXED) - B.takes_then);
}

void ot_lock_tsan_init(void)
{
    if (ot_tsan_present())
        __atomic_store_n(&ot_lock.tsan, 1, __ATOMIC_RELAXED);
}

void ot_lock_tsan_acquire(void)
{
    ot_tsan_acquire(&ot_lock);
}

void ot_lock_tsan_release(void)
{
    ot_tsan_release(&ot_lock);
}

#if defined(OT_STAGE_PASS_ONLY) || defined(OT_STAGE_CYCLES)
#include <stdio.h>
/* The bench builds' exit line: whether, and how often, the lock changed owners in this process. */
__attribute__((destructor)) static void lock_report(void)
{
    struct ot_lock_counts c;
    ot_lock_counts(&c);
    char line[160];
    int n = c.owned ? snprintf(line, sizeof line,
                               "OOMTRACE_LOCK {\"pid\": %d, \"owned\": %llu, \"revoked\": %llu, \"owned_takes\": %llu, "
                               "\"run\": %u}\n",
                               (int)getpid(), (unsigned long long)c.owned, (unsigned long long)c.revoked,
                               (unsigned long long)c.owned_takes, c.run)
                    : 0;
    if (n > 0 && (size_t)n < sizeof line) {
        ssize_t w = write(2, line, (size_t)n);
        (void)w;
    }
}
#endif
