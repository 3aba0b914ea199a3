/* Typed questions to the real driver, for the tracer's own use (the device a call allocates on, memory
 * totals, device names, pools). The only caller of the real driver functions outside the wrappers; each
 * answers -1 (or 0 bytes) when the driver cannot say, or has no such function. */
#ifndef OOMTRACE_DRIVER_H
#define OOMTRACE_DRIVER_H
#include <stddef.h>
#include <stdint.h>

#include "common/defs.h"
#include "driver/cuda_api.h"
#include "driver/real.h"

/* The current context's device; 0 when none. Inline: every allocation asks it. */
static inline int ot_drv_current_device(void)
{
    CUdevice d = 0;
    void *f = ot_real.cuCtxGetDevice;
    if (OT_UNLIKELY(!f) || ((__typeof__(&cuCtxGetDevice))f)(&d) != CUDA_SUCCESS)
        return 0;
    return d;
}
int ot_drv_has_context_query(void);                     /* 1 when the driver has cuCtxGetDevice */
int ot_drv_mem_info(size_t *free_bytes, size_t *total); /* the current context's device; 0 on success */
/* The device's name (NUL-terminated, "" when unknown) and uuid (16 bytes; 0 on success). */
void ot_drv_device_name(int ordinal, char *name, size_t len);
int ot_drv_device_uuid(int ordinal, unsigned char uuid[16]);
int ot_drv_default_pool(int ordinal, uint64_t *pool);   /* 0 on success */
/* A pool's reserved and used bytes; 0 when both were read. */
int ot_drv_pool_usage(uint64_t pool, uint64_t *reserved, uint64_t *used);
#endif
