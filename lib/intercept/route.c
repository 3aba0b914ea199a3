/* Routing: where a pointer from the driver becomes our wrapper.
 *
 * Programs reach the driver three ways: a link-time reference (-lcuda; our exported names win),
 * dlsym on a libcuda handle, and cuGetProcAddress. For the last two we call the real lookup unchanged
 * and then replace the pointer it returns. The replacement is chosen by the pointer's identity, not by
 * the name asked for: on the real driver the address that ("cuMemAlloc", 3020) returns is exactly the
 * address of cuMemAlloc_v2, so one table built from the exact names covers every name, version and
 * flag (../shared/notes/cuda-doors.md). Unknown pointers pass through untouched. */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "driver/real.h"
#include "internal.h"

/* Declared with a dummy type: only their addresses are taken here. The definitions, with their real
 * prototypes, are in hooks_*.c. */
#define OT_REAL_FIELD(name) extern void name(void);
#include "driver/hooks.def"
#undef OT_REAL_FIELD

struct ot_real ot_real;

struct hook {
    const char *name;
    size_t real_off; /* offset of the real pointer in struct ot_real */
    void *wrapper;
};

static const struct hook hooks[] = {
#define OT_REAL_FIELD(name) {#name, offsetof(struct ot_real, name), (void *)name},
#include "driver/hooks.def"
#undef OT_REAL_FIELD
};
#define NHOOKS (sizeof hooks / sizeof hooks[0])

static const struct { const char *name; size_t off; } helpers[] = {
    {"cuCtxGetDevice", offsetof(struct ot_real, cuCtxGetDevice)},
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
};

typedef void *(*dlsym_fn)(void *, const char *);
/* Read by lib/dlsym.S. */
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

static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;
static int resolved;

static void **slot(size_t off)
{
    return (void **)((char *)&ot_real + off);
}

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
        for (size_t i = 0; i < NHOOKS; i++)
            if (!*slot(hooks[i].real_off))
                *slot(hooks[i].real_off) = lookup_real(real, h, hooks[i].name);
        for (size_t i = 0; i < sizeof helpers / sizeof helpers[0]; i++)
            if (!*slot(helpers[i].off))
                *slot(helpers[i].off) = lookup_real(real, h, helpers[i].name);
        if (ot_real.cuGetProcAddress_v2 || ot_real.cuMemAlloc_v2)
            __atomic_store_n(&resolved, 1, __ATOMIC_RELEASE);
        if (h)
            dlclose(h); /* drops the reference NOLOAD took; libcuda stays loaded */
    }
    pthread_mutex_unlock(&resolve_lock);
    return resolved ? 0 : -1;
}

void *ot_route(void *real_fn)
{
    if (!real_fn || ot_resolve() != 0)
        return real_fn;
    for (size_t i = 0; i < NHOOKS; i++)
        if (*slot(hooks[i].real_off) == real_fn)
            return hooks[i].wrapper;
    return real_fn;
}

static int is_hooked_name(const char *name)
{
    for (size_t i = 0; i < NHOOKS; i++)
        if (strcmp(hooks[i].name, name) == 0)
            return 1;
    return 0;
}

/* dlsym on a real handle (lib/dlsym.S handles RTLD_NEXT and RTLD_DEFAULT). Only exact driver names
 * that we wrap can route, so other names (cuGetExportTable, cudnn*, cublas*) never trigger any work
 * beyond the real lookup. */
__attribute__((visibility("hidden"))) void *ot_dlsym_handle(void *handle, const char *name)
{
    dlsym_fn real = (dlsym_fn)ot_real_dlsym_fn();
    if (!real)
        return NULL;
    void *p = real(handle, name);
    if (!p || ot_opt.disabled || !name || name[0] != 'c' || name[1] != 'u' || name[2] < 'A' ||
        name[2] > 'Z' || !is_hooked_name(name))
        return p;
    return ot_route(p);
}
