/* ot_lock: the recorder's lock. It guards ot_state, the stack table and the ring; every allocation and
 * every free takes it once, for a few hundred instructions.
 *
 * Shared, it is one exchange to take; giving it back is a plain store (a release: on x86 every store is),
 * where pthread_mutex_unlock pays a second locked instruction, and both pay a call and the mutex type's
 * checks. A thread that finds it taken spins a little, then sleeps on a futex, counted in sleepers; the
 * thread giving it back wakes one when that count is not zero. The count is read just after the store,
 * with no fence between them, so a sleeper can in principle check the lock in the nanoseconds before the
 * store is visible and miss its wake-up: each sleep is bounded (1 ms) for that case.
 *
 * Owned: most processes record from one thread at a time, for long runs (a C loop, a forward pass, an
 * evaluation). There the exchange, a locked instruction, must also wait for the stores before it (the driver
 * call's) to drain: on the H200's host a C program's allocation-and-free pair cost 19-26 ns less owned than
 * shared (docs/PERFORMANCE.md, nineteenth pass), though an exchange alone costs ~5 ns. A thread that took the
 * shared lock a run of times in a row (lock.c), no other thread between, becomes its owner (ot_lock.owner:
 * its slot). The owner takes the lock by raising its own flag (ot_lock_slots[slot].busy) and then reading
 * that it is still the owner, and gives it back by lowering the flag: plain stores and loads, no fence. Any
 * other thread takes the exchange as before, then takes the ownership back (lock.c, disown and settle): it
 * clears the owner, asks the kernel for a barrier on every running thread of the process (membarrier,
 * MEMBARRIER_CMD_PRIVATE_EXPEDITED), and waits for the owner's flag to drop. The barrier is the fence the
 * owner's store and load lack: if the owner read itself as owner before the clear, its raised flag is visible
 * once the barrier returns; if after, it reads the clear and takes the shared way. A revocation costs a
 * system call (~0.5 us); an ownership that earned few takes before it was revoked makes the next one wait for
 * a longer run (lock.c), so threads taking turns in short runs stay on the shared lock.
 * OOMTRACE_LOCK_OWNER=0, a kernel without membarrier (or a sandbox that refuses it) and ThreadSanitizer leave
 * every take shared.
 *
 * Never held while unwinding. In signal context only through ot_lock_take_within, which gives up: at
 * once when the interrupted code is this thread's own owned hold (its flag is up), as it could never
 * be given back. A handler's take that interrupts the owner's take between raising its flag and entering
 * its hold (an unbounded one: a fork from a handler, whose prepare takes the lock) goes on without waiting
 * for the flag; the interrupted take resumes only after the handler gave the lock back, with its mode as it
 * left it. Left, each a window of a few instructions: an unbounded take in a handler there while another
 * thread holds the exchange to take the ownership back (it waits for the flag, the handler for the exchange:
 * lowering the flag for it let two in, once the take had read itself the owner); and a second handler in
 * the same window after a first that took the lock owned before the flag went up (the mode then reads
 * OWNED). An unbounded take in a handler inside the thread's own hold waits forever, owned as shared (a
 * second exchange).
 *
 * In a program built with ThreadSanitizer, its runtime cannot see this lock (our code is not instrumented),
 * but it sees the C library calls made under it (memcmp, mmap): it reported the recorder's own data as
 * races, and the program exited 66 (walk 8, #25). There each take and give is told to it (__tsan_acquire,
 * __tsan_release). Whether it is there is ot_lock.tsan, on the line the lock already brought. */
#ifndef OOMTRACE_RECORD_LOCK_H
#define OOMTRACE_RECORD_LOCK_H
#include <stdint.h>

#include "common/clock.h"
#include "common/defs.h"
#include "common/self.h"

struct ot_lock {
    int held;          /* 0 free, 1 held: the futex word of the shared lock */
    uint16_t sleepers; /* threads asleep (or about to be) on held */
    uint8_t owner;     /* the slot of the thread that owns the lock; 0: none */
    uint8_t tsan;      /* ThreadSanitizer is in the process */
};
extern struct ot_lock ot_lock;

/* A thread's slot: its flag and its count of owned takes, written by that thread alone (a thread that
 * reads itself as no longer the owner lowers only its own flag). Slots are never reused: the 255th
 * thread to take the lock and every later one share OT_LOCK_NO_SLOT, which never owns it. */
#define OT_LOCK_SLOTS 256
#define OT_LOCK_NO_SLOT (OT_LOCK_SLOTS - 1)
struct ot_lock_slot {
    uint32_t busy;  /* 1 from the owned take to its give */
    uint32_t takes; /* owned takes so far (wraps) */
};
extern struct ot_lock_slot ot_lock_slots[OT_LOCK_SLOTS];

/* ot_self.lock_mode: how the current hold was taken. TAKING: an owned take under way (its flag may be up, its
 * hold not begun): a signal handler's take there must not wait for that flag (lock.c), as the take resumes only
 * after the handler. IN_TAKE: that handler's hold, shared and never made an owner; its give puts TAKING back
 * as the interrupted take left it. */
enum {
    OT_LOCK_SHARED,
    OT_LOCK_OWNED,
    OT_LOCK_SHARED_THEN_OWN, /* shared; owner from its give on */
    OT_LOCK_TAKING,
    OT_LOCK_IN_TAKE,
};

int ot_lock_wait(uint64_t deadline_ns); /* the exchange's slow path: 0 when taken, -1 at the deadline (0: none) */
int ot_lock_taken(uint64_t deadline_ns); /* after the exchange: revocation, runs; -1: given up, given back */
void ot_lock_give_and_own(void); /* a hold of mode OT_LOCK_SHARED_THEN_OWN */
void ot_lock_wake(void);
void ot_lock_forked(void); /* in a forked child, the only thread: free, whoever held it in the parent */
void ot_lock_tsan_init(void); /* sets ot_lock.tsan when ThreadSanitizer's runtime is in the process */
void ot_lock_owner_init(int on); /* after ot_lock_tsan_init: ownership allowed where membarrier is there */
void ot_lock_tsan_acquire(void);
void ot_lock_tsan_release(void);

/* What the lock did so far (tests, benches) */
struct ot_lock_counts {
    int ownership;     /* 1: a thread may own the lock (membarrier registered, not turned off) */
    uint64_t owned;    /* times a thread became the owner */
    uint64_t revoked;  /* times another thread took the ownership back */
    uint64_t owned_takes; /* takes by owners whose ownership was revoked or is current */
    unsigned run;      /* the run of shared takes the next owner needs */
};
void ot_lock_counts(struct ot_lock_counts *out);

static inline int ot_lock_tsan(void)
{
    return OT_UNLIKELY(__atomic_load_n(&ot_lock.tsan, __ATOMIC_RELAXED) != 0);
}

/* 1 when this thread owns the lock and has taken it so. The flag is checked first: up, this is a signal
 * handler inside the thread's own owned hold, which must take the shared way (and give up there). */
static inline int ot_lock_take_owned(void)
{
    unsigned s = ot_self.lock_slot;
    if (OT_LIKELY(s != 0 && __atomic_load_n(&ot_lock.owner, __ATOMIC_RELAXED) == s)) {
        struct ot_lock_slot *f = &ot_lock_slots[s];
        if (OT_LIKELY(__atomic_load_n(&f->busy, __ATOMIC_RELAXED) == 0)) {
            ot_self.lock_mode = OT_LOCK_TAKING; /* before the flag, for a handler that interrupts this take */
            __atomic_signal_fence(__ATOMIC_SEQ_CST);
            __atomic_store_n(&f->busy, 1, __ATOMIC_RELAXED);
            /* The compiler keeps the store before the load; the CPU may not, and the revoker's barrier
             * covers that (above). */
            __atomic_signal_fence(__ATOMIC_SEQ_CST);
            if (OT_LIKELY(__atomic_load_n(&ot_lock.owner, __ATOMIC_ACQUIRE) == s)) {
                __atomic_store_n(&f->takes, f->takes + 1, __ATOMIC_RELAXED);
                ot_self.lock_mode = OT_LOCK_OWNED;
                /* before anything inside: a handler that finds the flag up must read OWNED there, not TAKING */
                __atomic_signal_fence(__ATOMIC_SEQ_CST);
                return 1;
            }
            __atomic_store_n(&f->busy, 0, __ATOMIC_RELEASE);
        }
    }
    return 0;
}

static inline void ot_lock_take(void)
{
    if (OT_LIKELY(ot_lock_take_owned()))
        return;
    if (OT_UNLIKELY(__atomic_exchange_n(&ot_lock.held, 1, __ATOMIC_ACQUIRE) != 0))
        ot_lock_wait(0);
    ot_lock_taken(0);
}

/* Waits at most about ns; 0 when taken, -1 when not. */
static inline int ot_lock_take_within(uint64_t ns)
{
    if (ot_lock_take_owned())
        return 0;
    uint64_t deadline = ot_mono_ns() + ns;
    if (OT_UNLIKELY(__atomic_exchange_n(&ot_lock.held, 1, __ATOMIC_ACQUIRE) != 0) && ot_lock_wait(deadline) != 0)
        return -1;
    return ot_lock_taken(deadline);
}

/* Gives back the exchange's hold (lock.c's give-up paths too). */
static inline void ot_lock_give_held(void)
{
    if (ot_lock_tsan())
        ot_lock_tsan_release(); /* before the store: the next taker's acquire must follow it */
    __atomic_store_n(&ot_lock.held, 0, __ATOMIC_RELEASE);
    if (OT_UNLIKELY(__atomic_load_n(&ot_lock.sleepers, __ATOMIC_RELAXED) != 0))
        ot_lock_wake();
}

static inline void ot_lock_give(void)
{
    if (OT_LIKELY(ot_self.lock_mode == OT_LOCK_OWNED)) {
        __atomic_store_n(&ot_lock_slots[ot_self.lock_slot].busy, 0, __ATOMIC_RELEASE);
        return;
    }
    if (OT_UNLIKELY(ot_self.lock_mode != OT_LOCK_SHARED)) {
        ot_lock_give_and_own(); /* becomes the owner */
        return;
    }
    ot_lock_give_held();
}
#endif
