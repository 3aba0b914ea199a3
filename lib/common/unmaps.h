/* The process's unmaps, counted, so that memory another thread owns can be read with plain loads while
 * nothing has been unmapped since it was last read and found mapped (unmaps.c says how).
 *
 * Readers (capture/pyborrow.c) bracket their reads with ot_unmaps_enter and ot_unmaps_leave. Every munmap
 * the program makes through the dynamic symbol (intercept/munmap.c) waits for the readers inside, then
 * unmaps, then counts. A reader compares the count it entered with against the one it saw the last time its
 * addresses were read through the kernel (process_vm_readv: it fails where a plain load would fault); the
 * same count, no unmap came between, and the addresses are still mapped. */
#ifndef OOMTRACE_COMMON_UNMAPS_H
#define OOMTRACE_COMMON_UNMAPS_H
#include <stdint.h>

/* Not a count: an unmap is under way, or a reader was lost (unmaps.c). */
#define OT_UNMAPS_UNSURE UINT64_MAX

/* Enter a read: the unmaps counted so far, or OT_UNMAPS_UNSURE. Leave it before any call that may block. */
uint64_t ot_unmaps_enter(void);
void ot_unmaps_leave(void);

/* Around the real munmap (intercept/munmap.c). */
void ot_unmaps_begin(void);
void ot_unmaps_end(void);

/* Whether call(arg) unmaps through the counted munmap (ot_unmaps_begin on this thread): the process's
 * munmap, or CPython's arena allocator's free, tried on a page of the tracer's own. */
int ot_unmaps_reached(void (*call)(void *), void *arg);

/* In a forked child: the other threads, readers or unmappers, are gone. */
void ot_unmaps_forked(void);
#endif
