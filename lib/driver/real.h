#ifndef OOMTRACE_DRIVER_REAL_H
#define OOMTRACE_DRIVER_REAL_H
#include <stddef.h>

/* The real functions behind the wrappers, found by driver/real.c: the driver's (the wrapped ones of
 * hooks.def, and those the tracer asks, driver.c), and the C library's exec family. */
struct ot_real {
#define OT_REAL_FIELD(name) void *name;
#include "driver/hooks.def"
#undef OT_REAL_FIELD
    /* Driver functions called but not wrapped. */
    void *cuCtxGetDevice;
    void *cuCtxGetCurrent;
    void *cuDevicePrimaryCtxGetState;
    void *cuDevicePrimaryCtxRetain;
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
    void *cuMemGetAddressRange_v2;
};
extern struct ot_real ot_real;
int ot_resolve(void);          /* fills ot_real from the loaded libcuda; 0 on success */
void *ot_real_dlsym_fn(void);  /* the C library's dlsym, not ours */
/* The next definition of name after the tracer's own (the C library's, or a preload's after ours), looked up
 * once through the real dlsym and kept in *slot; NULL while it cannot be found. */
void *ot_real_next(void **slot, const char *name);

/* The field at offset off of ot_real. */
static inline void **ot_real_slot(size_t off)
{
    return (void **)((char *)&ot_real + off);
}

struct ot_real_exec {
    int (*execve)(const char *, char *const[], char *const[]);
    int (*execvpe)(const char *, char *const[], char *const[]);
    int (*execveat)(int, const char *, char *const[], char *const[], int);
    int (*fexecve)(int, char *const[], char *const[]);
};
extern struct ot_real_exec ot_real_exec;
void ot_exec_resolve(void); /* the real exec functions, looked up at start-up or at first use */
#endif
