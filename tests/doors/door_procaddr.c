/* Door 3: cuGetProcAddress, as cudart and static-cudart (plain nvcc) programs do: dlsym the 5-argument
 * cuGetProcAddress_v2, then ask it for everything, including cuGetProcAddress itself.
 *   door_procaddr v2 0    -> cuGetProcAddress_v2, flags 0 (CU_GET_PROC_ADDRESS_DEFAULT)
 *   door_procaddr v2 2    -> flags 2 (CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
 *   door_procaddr v1 0    -> the 4-argument cuGetProcAddress, obtained at version 11030 */
#include <dlfcn.h>
#include <string.h>

#include "scenario.h"

typedef CUresult (*gpa5)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa4)(const char *, void **, int, cuuint64_t);

static gpa5 v2;
static gpa4 v1;
static cuuint64_t flags;

static void *get(const char *name, int version)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = v1 ? v1(name, &p, version, flags) : v2(name, &p, version, flags, &st);
    if (r != CUDA_SUCCESS || !p) {
        fprintf(stderr, "cuGetProcAddress(%s, %d) failed: %d\n", name, version, (int)r);
        exit(40);
    }
    return p;
}

int main(int argc, char **argv)
{
    int use_v1 = argc > 1 && strcmp(argv[1], "v1") == 0;
    flags = argc > 2 ? (cuuint64_t)atoi(argv[2]) : 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return 30;
    gpa5 first = (gpa5)dlsym(h, "cuGetProcAddress_v2");
    if (!first)
        return 31;
    /* cudart's first call: the empty-name probe, which must fail exactly as untraced. */
    void *p = (void *)1;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    if (first("", &p, 0, 0, &st) == CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND)
        return 32;
    /* Then cuGetProcAddress itself, at the version that selects the ABI. */
    void *self = NULL;
    if (first("cuGetProcAddress", &self, use_v1 ? 11030 : 12000, 0, &st) != CUDA_SUCCESS || !self)
        return 33;
    if (use_v1)
        v1 = (gpa4)self;
    else
        v2 = (gpa5)self;
    int rc = make_context((init_fn)get("cuInit", 2000), (ctx_retain_fn)get("cuDevicePrimaryCtxRetain", 7000),
                          (ctx_set_fn)get("cuCtxSetCurrent", 4000));
    return rc ? rc : run_scenario((alloc_fn)get("cuMemAlloc", 3020), (free_fn)get("cuMemFree", 3020));
}
