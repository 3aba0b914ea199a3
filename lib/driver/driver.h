/* Typed questions to the real driver, for the tracer's own use (the device a call allocates on, memory
 * totals, device names, pools). The only caller of the real driver functions outside the wrappers; each
 * answers -1 (or 0 bytes) when the driver cannot say, or has no such function. */
#ifndef OOMTRACE_DRIVER_H
#define OOMTRACE_DRIVER_H
#include <stddef.h>
#include <stdint.h>

#include "common/defs.h"
#include "common/self.h"
#include "driver/cuda_api.h"
#include "driver/real.h"

/* How many devices the process sees (cuDeviceGetCount; the count cannot change after cuInit): asked at the
 * first question below, and again at the next one while the driver will not say (before cuInit, when allocations
 * fail anyway). With one device every context's device is 0, the answer the driver would give, so it is not
 * asked: within one process on the H200 its answer cost ~35 ns an allocation, where a loop of nothing else but
 * the query reads 11 ns (docs/PERFORMANCE.md, issue 16's eighteenth pass). */
enum { OT_DEVICES_UNKNOWN, OT_DEVICES_ONE, OT_DEVICES_SEVERAL };
extern int ot_drv_devices;
int ot_drv_devices_probe(void); /* asks and sets ot_drv_devices; 1 when the process sees one device */
/* In a forked child the count is asked again: a child that uses CUDA initialises its own (a parent's CUDA does
 * not survive fork), and may see other devices if it set CUDA_VISIBLE_DEVICES first. */
void ot_drv_forked(void);

/* The current context's device; 0 when none. Inline: every allocation asks it. */
static inline int ot_drv_current_device(void)
{
    const int devices = __atomic_load_n(&ot_drv_devices, __ATOMIC_RELAXED);
    if (OT_LIKELY(devices == OT_DEVICES_ONE) ||
        (OT_UNLIKELY(devices == OT_DEVICES_UNKNOWN) && ot_drv_devices_probe()))
        return 0;
    CUdevice d = 0;
    void *f = ot_real.cuCtxGetDevice;
    if (OT_UNLIKELY(!f) || ((__typeof__(&cuCtxGetDevice))f)(&d) != CUDA_SUCCESS)
        return 0;
    return d;
}
int ot_drv_ctx_device_slow(uint64_t ctx);

/* The calling thread's current context (*ctx, 0 when none) and its device, as ot_drv_current_device. One
 * driver call, as that one: a context's device is asked once per thread and context (common/self.h). */
static inline int ot_drv_current(uint64_t *ctx)
{
    CUcontext c = NULL;
    void *f = ot_real.cuCtxGetCurrent;
    if (OT_UNLIKELY(!f) || ((__typeof__(&cuCtxGetCurrent))f)(&c) != CUDA_SUCCESS || OT_UNLIKELY(!c)) {
        *ctx = 0;
        return ot_drv_current_device();
    }
    *ctx = (uint64_t)(uintptr_t)c;
    if (OT_LIKELY(*ctx == ot_self.ctx && ot_self.ctx_gen == __atomic_load_n(&ot_ctx_gen, __ATOMIC_RELAXED)))
        return ot_self.ctx_dev;
    return ot_drv_ctx_device_slow(*ctx);
}
/* Device dev's primary context, or 0 when it is not active (nothing can have been made in it). Asked
 * with a retain and its release, which leave the count as it was: the driver has no other question. */
uint64_t ot_drv_primary_ctx(int dev);
/* 1 when device dev's primary context is active (0: not, or unknown). */
int ot_drv_primary_active(int dev);
/* A context ends: every thread's cached device of a context is stale (its handle may come back). */
static inline void ot_drv_ctx_gen_next(void)
{
    __atomic_fetch_add(&ot_ctx_gen, 1, __ATOMIC_RELAXED);
}
int ot_drv_has_context_query(void);                     /* 1 when the driver has cuCtxGetDevice */
int ot_drv_mem_info(size_t *free_bytes, size_t *total); /* the current context's device; 0 on success */
/* The device's name (NUL-terminated, "" when unknown) and uuid (16 bytes; 0 on success). */
void ot_drv_device_name(int ordinal, char *name, size_t len);
int ot_drv_device_uuid(int ordinal, unsigned char uuid[16]);
int ot_drv_default_pool(int ordinal, uint64_t *pool);   /* 0 on success */
/* A pool's reserved and used bytes; 0 when both were read. */
int ot_drv_pool_usage(uint64_t pool, uint64_t *reserved, uint64_t *used);
/* The bytes of the allocation that holds ptr, from ptr to its end (cuMemGetAddressRange_v2); 0 on
 * success. */
int ot_drv_range_from(uint64_t ptr, uint64_t *bytes);
#endif
