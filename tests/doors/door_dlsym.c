/* Door 2: dlopen("libcuda.so.1") + dlsym(handle, exact name), as JAX does. */
#include <dlfcn.h>

#include "scenario.h"

int main(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return 30;
    int rc = make_context((init_fn)dlsym(h, "cuInit"), (ctx_retain_fn)dlsym(h, "cuDevicePrimaryCtxRetain"),
                          (ctx_set_fn)dlsym(h, "cuCtxSetCurrent"));
    return rc ? rc : run_scenario((alloc_fn)dlsym(h, "cuMemAlloc_v2"), (free_fn)dlsym(h, "cuMemFree_v2"));
}
