/* The tracer's own tables that every capture probes at random (a thread's native walks kept by place, its merged
 * stacks by place, the process's live set): mapped out of the program's heap, at a 2 MiB boundary and in whole
 * 2 MiB, so that once they are probed often they can be moved onto 2 MiB pages in place (ot_table_hot).
 *
 * Why: after the step's own work, a capture read about a dozen of these tables' 4 KiB pages, each a first-level
 * TLB miss (cachegrind with 4 KiB "lines", bench/step_mix.py --evict 256). On the H200's host the torch step's
 * tracer share went from a median of 2.58% to 2.38% with the tables on 2 MiB pages (docs/PERFORMANCE.md, sixteenth
 * pass).
 *
 * Until then a table keeps 4 KiB pages and no 2 MiB page (MADV_NOHUGEPAGE, also where the system's transparent
 * huge pages are "always"): a thread that allocates a few times keeps the few pages it touched. A hot thread's
 * tables then take 8 MiB (a walker's 2, its merged stacks' 6), the live set 2 MiB or its size. The move takes
 * 0.1-20 ms, once a table (the kernel copies and may compact): the live set's is made under the recorder's lock,
 * as its table may otherwise be unmapped and the range reused by the program in between. */
#ifndef OOMTRACE_COMMON_TABLES_H
#define OOMTRACE_COMMON_TABLES_H
#include <stddef.h>

#define OT_TABLE_ALIGN ((size_t)2 << 20)
/* The captures a thread makes before its tables move onto 2 MiB pages (and the events a process records before
 * its live set does): a training step's main thread makes ~50 a step, so within its first steps, before a
 * benchmark's timed loops. A power of two. */
#define OT_TABLE_HOT 256

/* bytes of zeroed memory, or NULL. Its reservation is bytes rounded up to 2 MiB. */
void *ot_table_map(size_t bytes);
void ot_table_unmap(void *p, size_t bytes);
/* Moves the table onto 2 MiB pages now (MADV_COLLAPSE, Linux 6.1 and later; it copies what was touched),
 * and asks for them for what is touched from now on (MADV_HUGEPAGE). Nothing is said where the kernel
 * cannot or will not: the table works the same on 4 KiB pages. Nothing is done under OOMTRACE_HUGE_PAGES=0. */
void ot_table_hot(void *p, size_t bytes);
#endif
