/* The unmaps' count (unmaps.h). Why it is safe, with every operation below sequentially consistent:
 *
 *   unmapper:  inflight++   wait until readers == 0   munmap   count++   inflight--
 *   reader:    readers++    f = inflight   c = count   [reads]   readers--
 *
 * A reader takes its count c as valid only when f was 0. Say a reader saw (f = 0, c) when it read its
 * addresses through the kernel, and a later reader sees (f = 0, c) again and reads them with plain loads.
 * Any unmap U whose munmap came after the first read: the first reader saw inflight 0, so U's inflight++
 * came after the first reader's readers++, and U waited for the first reader to leave; U's count++ comes
 * after its munmap. The later reader saw the same count, so its c came before U's count++; if its f came
 * after U's inflight++ it would not be 0; so its readers++ came before U's wait, which waited for it to
 * leave: its plain loads ran before U's munmap. Hence no unmap lands between the checked read and the
 * plain loads of the same addresses.
 *
 * An unmap from a signal handler that interrupted its own thread's read cannot wait for it, and one reader
 * may never leave (a handler that longjmps out of the read), which a wait bounded at WAIT_MAX_NS finds: in
 * both cases no reader is sure from then on (lost), and the process's reads go through the kernel. */
#include "common/unmaps.h"

#include <sched.h>
#include <time.h>

#include "common/defs.h"

/* One line: a reader writes readers and reads the rest; an unmapper writes all of it. lost: a reader may
 * never leave (a program's signal handler that longjmps out of the read, an unmap from a handler of a
 * reading thread): from then on no reader is sure, and no unmap waits. */
static struct {
    uint64_t count;
    uint32_t readers, inflight;
    int lost;
} U __attribute__((aligned(64)));

/* Set before this thread's reader count goes up and cleared after it goes down, so a signal handler on this
 * thread never waits for its own read. */
static __thread volatile int reading __attribute__((tls_model("initial-exec")));
static __thread int probing __attribute__((tls_model("initial-exec"))); /* 1 while ot_unmaps_reached calls, 2 once reached */

/* An unmap waits at most this long for the readers (a read is a few hundred ns of loads or one system call):
 * past it a reader is taken as lost rather than the program's munmap left hanging. Long, so that a reader
 * descheduled with its whole process (a cgroup's CPU quota spent) is not taken for lost. */
#define WAIT_MAX_NS 2000000000ll

uint64_t ot_unmaps_enter(void)
{
    reading = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_add_fetch(&U.readers, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&U.inflight, __ATOMIC_SEQ_CST) || __atomic_load_n(&U.lost, __ATOMIC_RELAXED))
        return OT_UNMAPS_UNSURE;
    return __atomic_load_n(&U.count, __ATOMIC_SEQ_CST);
}

void ot_unmaps_leave(void)
{
    __atomic_sub_fetch(&U.readers, 1, __ATOMIC_SEQ_CST);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    reading = 0;
}

static long long mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000ll + t.tv_nsec;
}

void ot_unmaps_begin(void)
{
    __atomic_add_fetch(&U.inflight, 1, __ATOMIC_SEQ_CST);
    if (probing)
        probing = 2;
    if (reading) { /* a handler that interrupted this thread's read: it cannot wait for it */
        __atomic_store_n(&U.lost, 1, __ATOMIC_SEQ_CST);
        return;
    }
    long long since = 0;
    for (unsigned spins = 0; __atomic_load_n(&U.readers, __ATOMIC_SEQ_CST) && !__atomic_load_n(&U.lost, __ATOMIC_RELAXED);
         spins++) {
        if (spins < 256) {
            __builtin_ia32_pause();
            continue;
        }
        sched_yield(); /* a reader descheduled inside a read is given the CPU back */
        if (!since)
            since = mono_ns();
        else if (mono_ns() - since > WAIT_MAX_NS)
            __atomic_store_n(&U.lost, 1, __ATOMIC_SEQ_CST);
    }
}

void ot_unmaps_end(void)
{
    __atomic_add_fetch(&U.count, 1, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&U.inflight, 1, __ATOMIC_SEQ_CST);
}

int ot_unmaps_reached(void (*call)(void *), void *arg)
{
    probing = 1;
    call(arg);
    const int reached = probing == 2;
    probing = 0;
    return reached;
}

/* The child has one thread: this one, which may be inside a read (a fork from a signal handler). An unmap
 * that another thread had under way may have unmapped without counting: the count moves on. */
void ot_unmaps_forked(void)
{
    __atomic_store_n(&U.readers, reading ? 1 : 0, __ATOMIC_RELAXED);
    __atomic_store_n(&U.inflight, 0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&U.count, 1, __ATOMIC_RELAXED);
}
