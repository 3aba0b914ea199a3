#ifndef OOMTRACE_LOADER_H
#define OOMTRACE_LOADER_H
/* The tracer's walks of the loaded objects (dl_iterate_phdr, dladdr, libunwind's fallback) run inside
 * ot_loader_enter/leave, and fork waits until none is inside (capture/loader.c says why). */
void ot_loader_enter(void);
void ot_loader_leave(void);
void ot_loader_fork_prepare(void);
void ot_loader_fork_parent(void);
void ot_loader_fork_child(void);
#endif
