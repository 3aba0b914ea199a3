/* Reaching the stand-in driver the way cudart does (drv.h says how), for the family and pitfall programs. */
#include "drv.h"

void *drv;
gpa5_fn drv_gpa;

void drv_open(void)
{
    drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(drv != NULL);
    drv_gpa = (gpa5_fn)dlsym(drv, "cuGetProcAddress_v2");
    CHECK(drv_gpa != NULL);
}

void *drv_get(const char *name, int version, cuuint64_t flags)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (drv_gpa(name, &p, version, flags, &st) != CUDA_SUCCESS || !p || st != CU_GET_PROC_ADDRESS_SUCCESS) {
        fprintf(stderr, "cuGetProcAddress_v2(%s, %d, %llu) failed\n", name, version, (unsigned long long)flags);
        exit(1);
    }
    return p;
}

void *drv_sym(const char *name)
{
    void *p = dlsym(drv, name);
    if (!p) {
        fprintf(stderr, "dlsym(libcuda, %s) failed\n", name);
        exit(1);
    }
    return p;
}

void dump(const char *label)
{
    (void)oomtrace_dump_if_loaded(label);
}
