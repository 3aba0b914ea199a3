/* Start-up, fork and exec (init.c): what the wrappers and the API ask of them. */
#ifndef OOMTRACE_RUNTIME_INIT_H
#define OOMTRACE_RUNTIME_INIT_H

#include "common/defs.h"

int ot_ready(void); /* 1 when the tracer is initialised and enabled */
/* 1 while ot_ready has nothing to do but say yes: initialised, enabled, and the helper threads (if any)
 * started in this process. Cleared in a forked child, whose threads must start again. */
extern int ot_ready_now;
/* ot_ready as every wrapper asks it: one load when there is nothing to do. */
static inline int ot_ready_fast(void)
{
    return OT_LIKELY(__atomic_load_n(&ot_ready_now, __ATOMIC_ACQUIRE)) || ot_ready();
}
void ot_after_first_alloc(void);
extern int ot_exit_registered; /* 1 once ot_after_first_alloc has run */
int ot_exec_begin(void);   /* before an exec: 1 when the crash-surviving file was taken away */
void ot_exec_failed(void); /* after one that returned, when ot_exec_begin said 1 */
#endif
