/* The real functions behind the tracer's wrappers, found once: the real dlsym (read by
 * intercept/dlsym.S), the driver's functions (wrapped ones and those the tracer asks, driver.c), and the
 * C library's exec family. Here, below every room that calls them; intercept/route.c only swaps a found
 * pointer for its wrapper. */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include "driver/real.h"

struct ot_real ot_real;
struct ot_real_exec ot_real_exec;

/* Every field of struct ot_real and its exact driver name. */
static const struct {
    const char *name;
    size_t off;
} names[] = {
#define OT_REAL_FIELD(name) {#name, offsetof(struct ot_real, name)},
#include "driver/hooks.def"
#undef OT_REAL_FIELD
    {"cuCtxGetDevice", offsetof(struct ot_real, cuCtxGetDevice)},
    {"cuCtxGetCurrent", offsetof(struct ot_real, cuCtxGetCurrent)},
    {"cuDevicePrimaryCtxGetState", offsetof(struct ot_real, cuDevicePrimaryCtxGetState)},
    {"cuDevicePrimaryCtxRetain", offsetof(struct ot_real, cuDevicePrimaryCtxRetain)},
    {"cuMemGetInfo_v2", offsetof(struct ot_real, cuMemGetInfo_v2)},
    {"cuDeviceGetCount", offsetof(struct ot_real, cuDeviceGetCount)},
    {"cuDeviceGetName", offsetof(struct ot_real, cuDeviceGetName)},
    {"cuDeviceGetUuid_v2", offsetof(struct ot_real, cuDeviceGetUuid_v2)},
    {"cuDeviceGetUuid", offsetof(struct ot_real, cuDeviceGetUuid)},
    {"cuDeviceTotalMem_v2", offsetof(struct ot_real, cuDeviceTotalMem_v2)},
    {"cuMemPoolGetAttribute", offsetof(struct ot_real, cuMemPoolGetAttribute)},
    {"cuDeviceGetDefaultMemPool", offsetof(struct ot_real, cuDeviceGetDefaultMemPool)},
    {"cuDeviceGet", offsetof(struct ot_real, cuDeviceGet)},
    {"cuArrayGetDescriptor_v2", offsetof(struct ot_real, cuArrayGetDescriptor_v2)},
    {"cuMemGetAddressRange_v2", offsetof(struct ot_real, cuMemGetAddressRange_v2)},
};

typedef void *(*dlsym_fn)(void *, const char *);
/* Read by intercept/dlsym.S. */
__attribute__((visibility("hidden"))) dlsym_fn ot_real_dlsym;

__attribute__((visibility("hidden"))) void *ot_resolve_real_dlsym(void)
{
    if (!ot_real_dlsym) {
        void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!p)
            p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        __atomic_store_n(&ot_real_dlsym, (dlsym_fn)p, __ATOMIC_RELEASE);
    }
    return (void *)ot_real_dlsym;
}

void *ot_real_dlsym_fn(void)
{
    return ot_real_dlsym ? (void *)ot_real_dlsym : ot_resolve_real_dlsym();
}

void *ot_real_next(void **slot, const char *name)
{
    void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!fn) {
        dlsym_fn real = (dlsym_fn)ot_real_dlsym_fn();
        fn = real ? real(RTLD_NEXT, name) : NULL;
        if (fn)
            __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;
static int resolved;

static void *lookup_real(dlsym_fn real, void *handle, const char *name)
{
    void *p = handle ? real(handle, name) : NULL;
    /* A program linked with -lcuda has libcuda in the global scope; RTLD_NEXT from here skips our own
     * definitions of the same names. */
    if (!p)
        p = real(RTLD_NEXT, name);
    return p;
}

/* Fills ot_real from the libcuda already in the process. Cheap enough to run inside a dlsym call:
 * about forty lookups, once. Not marked done while libcuda is absent, so a later load is seen. */
int ot_resolve(void)
{
    if (__atomic_load_n(&resolved, __ATOMIC_ACQUIRE))
        return 0;
    dlsym_fn real = (dlsym_fn)ot_real_dlsym_fn();
    if (!real)
        return -1;
    pthread_mutex_lock(&resolve_lock);
    if (!resolved) {
        void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (!*ot_real_slot(names[i].off))
                *ot_real_slot(names[i].off) = lookup_real(real, h, names[i].name);
        if (ot_real.cuGetProcAddress_v2 || ot_real.cuMemAlloc_v2)
            __atomic_store_n(&resolved, 1, __ATOMIC_RELEASE);
        if (h)
            dlclose(h); /* drops the reference NOLOAD took; libcuda stays loaded */
    }
    pthread_mutex_unlock(&resolve_lock);
    return resolved ? 0 : -1;
}

/* At start-up (ot_ready), so that a call between fork and exec finds them (dlsym is not
 * async-signal-safe there); and at a call that comes first, from a library's constructor that runs
 * before ours. */
void ot_exec_resolve(void)
{
    static const char *const exec_names[] = {"execve", "execvpe", "execveat", "fexecve"};
    void **slots[] = {(void **)&ot_real_exec.execve, (void **)&ot_real_exec.execvpe, (void **)&ot_real_exec.execveat,
                      (void **)&ot_real_exec.fexecve};
    for (size_t i = 0; i < sizeof exec_names / sizeof exec_names[0]; i++)
        if (!__atomic_load_n(slots[i], __ATOMIC_ACQUIRE))
            __atomic_store_n(slots[i], dlsym(RTLD_NEXT, exec_names[i]), __ATOMIC_RELEASE);
}
