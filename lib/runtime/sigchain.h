/* OOMTRACE_SIGNAL beside the program's own use of that signal (sigchain.c): the tracer's handler wakes its
 * snapshot thread, then does what the program asked for that signal (its handler, or the default action once
 * the snapshot is written), whether the program set it before the tracer took the signal or after. */
#ifndef OOMTRACE_RUNTIME_SIGCHAIN_H
#define OOMTRACE_RUNTIME_SIGCHAIN_H
#include <signal.h>

/* The C library's sigaction, never the exported one below. */
int ot_sig_real(int sig, const struct sigaction *act, struct sigaction *old);
/* Takes SIG for OOMTRACE_SIGNAL, keeping the program's disposition; wake(sig) is called first in the handler,
 * and the handler waits for done() to pass its ticket (bounded) before running the program's disposition.
 * -1 (errno set) when it could not. */
int ot_sigchain_install(int sig, void (*wake)(int));
/* The snapshot thread, once the snapshot asked for by tickets up to TICKET is written. */
void ot_sigchain_done(unsigned ticket);
unsigned ot_sigchain_requested(void);
/* With exit snapshots asked for: takes SIGTERM and SIGINT (but EXCEPT) whenever the program has them at their
 * default, now or once it sets it again, so that a process ended by one writes its exit snapshot first.
 * wake(sig) asks the snapshot thread for it (0: none runs in this process), which calls ot_sigend_written(sig)
 * once done; the process then ends by the signal. 1 when either is watched (the snapshot thread must run). */
int ot_sigend_install(int (*wake)(int), int except);
void ot_sigend_written(int sig);
/* The exported sigaction and signal: for the chained signal, the program reads and sets its own disposition
 * (the one the tracer's handler goes on to); any other signal is the C library's call. */
int ot_sigchain_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
__sighandler_t ot_sigchain_signal(int sig, __sighandler_t handler);
/* Whether the exit snapshot may be written on this thread now: 0 when exit() was called from a signal handler
 * that interrupted the tracer, the C library, the loader or the driver, whose locks (the recorder's, malloc's)
 * the interrupted code may hold: the snapshot would hang or corrupt the heap. *why: the words for the line. */
int ot_exit_here_safe(const char **why);
#endif
