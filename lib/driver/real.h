#ifndef OOMTRACE_DRIVER_REAL_H
#define OOMTRACE_DRIVER_REAL_H
/* The real driver functions, found by intercept/route.c (where a pointer from the driver becomes our
 * wrapper): the wrapped ones of hooks.def, and those the tracer asks (driver.c). */
struct ot_real {
#define OT_REAL_FIELD(name) void *name;
#include "driver/hooks.def"
#undef OT_REAL_FIELD
    /* Driver functions called but not wrapped. */
    void *cuCtxGetDevice;
    void *cuMemGetInfo_v2;
    void *cuDeviceGetCount;
    void *cuDeviceGetName;
    void *cuDeviceGetUuid_v2;
    void *cuDeviceGetUuid;
    void *cuDeviceTotalMem_v2;
    void *cuMemPoolGetAttribute;
    void *cuDeviceGetDefaultMemPool;
    void *cuDeviceGet;
    void *cuArrayGetDescriptor_v2;
};
extern struct ot_real ot_real;
int ot_resolve(void);          /* fills ot_real from the loaded libcuda; 0 on success */
void *ot_route(void *real_fn); /* the wrapper for a real driver function, or real_fn itself */
void *ot_real_dlsym_fn(void);
#endif
