/* Start-up, fork and exec (init.c): what the wrappers and the API ask of them. */
#ifndef OOMTRACE_RUNTIME_INIT_H
#define OOMTRACE_RUNTIME_INIT_H

int ot_ready(void); /* 1 when the tracer is initialised and enabled */
void ot_after_first_alloc(void);
int ot_exec_begin(void);   /* before an exec: 1 when the crash-surviving file was taken away */
void ot_exec_failed(void); /* after one that returned, when ot_exec_begin said 1 */
#endif
