/* The tracer's own unmaps, in whole pages. The kernel unmaps whole pages whatever length it is given, so for
 * the process nothing changes. ThreadSanitizer, in a program built with it, forgets a range at munmap only for
 * the whole pages of the length passed: a tail shorter than a page kept the record of the tracer's mmap (a
 * write by the thread that mapped it), and code the loader mapped there afterwards, unseen by TSan (NVML, opened
 * by another thread's snapshot), read as racing with that write. The fresh-clone CI's tsan_host failed so in 2
 * rounds of 3 at d007611: NVML's reads under its query lock against another thread's snapshot's scratch buffer
 * (live_seq.c). tests/doors/tsan_unmapped.c maps again, as the loader would, what the tracer unmapped. */
#ifndef OOMTRACE_COMMON_PAGES_H
#define OOMTRACE_COMMON_PAGES_H
#include <stddef.h>
#include <sys/mman.h>
#include <unistd.h>

static inline int ot_unmap(void *p, size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return munmap(p, (bytes + page - 1) / page * page);
}
#endif
