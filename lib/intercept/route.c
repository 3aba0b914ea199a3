/* Routing: where a pointer from the driver becomes our wrapper.
 *
 * Programs reach the driver three ways: a link-time reference (-lcuda; our exported names win),
 * dlsym on a libcuda handle, and cuGetProcAddress. For the last two we call the real lookup unchanged
 * and then replace the pointer it returns. The replacement is chosen by the pointer's identity, not by
 * the name asked for: on the real driver the address that ("cuMemAlloc", 3020) returns is exactly the
 * address of cuMemAlloc_v2, so one table built from the exact names covers every name, version and
 * flag (../shared/notes/cuda-doors.md). Unknown pointers pass through untouched. */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "capture/modules.h"
#include "common/options.h"
#include "driver/real.h"
#include "intercept/route.h"

/* Declared with a dummy type: only their addresses are taken here. The definitions, with their real
 * prototypes, are in hooks_*.c. */
#define OT_REAL_FIELD(name) extern void name(void);
#include "driver/hooks.def"
#undef OT_REAL_FIELD

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

typedef void *(*dlsym_fn)(void *, const char *);

void *ot_route(void *real_fn)
{
    if (!real_fn || ot_resolve() != 0)
        return real_fn;
    for (size_t i = 0; i < NHOOKS; i++)
        if (*ot_real_slot(hooks[i].real_off) == real_fn)
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
    ot_modules_used(handle); /* NVML, opened by the tracer first, is the program's too (snapshot/nvml.c) */
    void *p = real(handle, name);
    if (!p || ot_opt.disabled || !name || name[0] != 'c' || name[1] != 'u' || name[2] < 'A' ||
        name[2] > 'Z' || !is_hooked_name(name))
        return p;
    return ot_route(p);
}
