/* The exported sigaction and signal: a program that sets or reads the disposition of a signal the tracer
 * took (for OOMTRACE_SIGNAL, or SIGTERM for the exit snapshot) sets and reads its own, which the tracer's
 * handler goes on to (runtime/sigchain.c). Every other call is the C library's, unchanged. */
#include <signal.h>

#include "common/defs.h"
#include "runtime/sigchain.h"

OT_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    return ot_sigchain_sigaction(sig, act, old);
}

OT_EXPORT __sighandler_t signal(int sig, __sighandler_t handler)
{
    return ot_sigchain_signal(sig, handler);
}
