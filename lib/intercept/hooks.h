/* Shared by the wrappers in hooks_*.c. A wrapper calls the real driver function with the caller's exact
 * arguments and returns its exact result; recording happens beside the call, never instead of it. */
#ifndef OOMTRACE_HOOKS_H
#define OOMTRACE_HOOKS_H
#include "intercept/cuda_api.h"
#include <errno.h>
#include <stddef.h>

#include "internal.h"

void *ot_real_slow(size_t off);

/* The real function: resolved on first use, for programs that call our exported names directly. */
#define OT_REAL(name, type) \
    ((type)(OT_LIKELY(ot_real.name != NULL) ? ot_real.name : ot_real_slow(offsetof(struct ot_real, name))))

/* Enters the tracer on this thread; 0 when it must not record (disabled, or already inside it). */
static inline int ot_enter(void)
{
    if (ot_self.busy || !ot_ready())
        return 0;
    ot_self.busy = 1;
    return 1;
}

static inline void ot_leave(int saved_errno)
{
    ot_self.busy = 0;
    errno = saved_errno;
}

/* The device a call will allocate on, with the device's baseline taken before its first allocation. */
int ot_pre_alloc(void);

/* After an allocation call: records the success or the out-of-memory failure. */
void ot_after_alloc(CUresult r, const struct ot_alloc_req *req);
#endif
