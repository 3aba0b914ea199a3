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
 * The wait skips the calling thread's own read (a signal handler that unmaps while its thread reads would
 * otherwise wait for itself): the read it interrupted is a handful of loads of another thread's frames, which
 * such a handler has no reason to unmap. */
#include "common/unmaps.h"

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/defs.h"

/* One line: a reader writes readers and reads the rest; an unmapper writes all three. */
static struct {
    uint64_t count;
    uint32_t readers, inflight;
} U __attribute__((aligned(64)));

static __thread int reading __attribute__((tls_model("initial-exec")));
static __thread int probing __attribute__((tls_model("initial-exec"))); /* 1 while ot_unmaps_seen tries, 2 once reached */

uint64_t ot_unmaps_enter(void)
{
    __atomic_add_fetch(&U.readers, 1, __ATOMIC_SEQ_CST);
    reading = 1;
    if (__atomic_load_n(&U.inflight, __ATOMIC_SEQ_CST))
        return OT_UNMAPS_UNSURE;
    return __atomic_load_n(&U.count, __ATOMIC_SEQ_CST);
}

void ot_unmaps_leave(void)
{
    reading = 0;
    __atomic_sub_fetch(&U.readers, 1, __ATOMIC_SEQ_CST);
}

void ot_unmaps_begin(void)
{
    __atomic_add_fetch(&U.inflight, 1, __ATOMIC_SEQ_CST);
    if (probing)
        probing = 2;
    if (reading)
        return;
    /* A read is a few hundred ns of loads, or one process_vm_readv; a reader descheduled inside one is
     * given the CPU back. */
    for (unsigned spins = 0; __atomic_load_n(&U.readers, __ATOMIC_SEQ_CST); spins++) {
        if (spins < 256)
            __builtin_ia32_pause();
        else
            sched_yield();
    }
}

void ot_unmaps_end(void)
{
    __atomic_add_fetch(&U.count, 1, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&U.inflight, 1, __ATOMIC_SEQ_CST);
}

/* 1 seen, -1 not, 0 not tried */
static int seen;

int ot_unmaps_seen(void *munmap_fn)
{
    int s = __atomic_load_n(&seen, __ATOMIC_ACQUIRE);
    if (s)
        return s > 0;
    int (*fn)(void *, size_t) = (int (*)(void *, size_t))munmap_fn;
    long page = sysconf(_SC_PAGESIZE);
    void *p = fn && page > 0 ? mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    s = -1;
    if (p != MAP_FAILED) {
        probing = 1;
        if (fn(p, (size_t)page) == 0 && probing == 2)
            s = 1;
        probing = 0;
    }
    __atomic_store_n(&seen, s, __ATOMIC_RELEASE);
    return s > 0;
}

void ot_unmaps_forked(void)
{
    __atomic_store_n(&U.readers, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&U.inflight, 0, __ATOMIC_RELAXED);
    reading = 0;
}
