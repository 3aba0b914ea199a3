/* The calling thread's own state (the reentrancy guard, its cached thread id) and the tracer's clock:
 * what every room reads. */
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

__thread struct trace_thread ot_self __attribute__((tls_model("initial-exec")));
uint64_t ot_start_ns;

uint32_t ot_tid(void)
{
    if (OT_UNLIKELY(!ot_self.tid))
        ot_self.tid = (uint32_t)syscall(SYS_gettid);
    return ot_self.tid;
}

uint64_t ot_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
