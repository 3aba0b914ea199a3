/* The calling thread's own state (the reentrancy guard, its cached thread id): what every room reads.
 * The tracer's clock is in clock.c. */
#include <sys/syscall.h>
#include <unistd.h>

#include "common/defs.h"
#include "common/self.h"

__thread struct trace_thread ot_self __attribute__((tls_model("initial-exec")));
uint64_t ot_start_ns;
uint64_t ot_ctx_gen = 1; /* never 0: a thread's cache starts at 0, so its first question asks */

uint32_t ot_tid_slow(void)
{
    ot_self.tid = (uint32_t)syscall(SYS_gettid);
    return ot_self.tid;
}
