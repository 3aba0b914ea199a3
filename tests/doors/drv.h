/* Shared by the family and pitfall programs (tests/doors/families.c, pitfalls*.c; drv.c defines it): reaching the stand-in
 * driver the way cudart does. libcuda.so.1 is dlopened RTLD_LOCAL, cuGetProcAddress_v2 is the only name
 * taken with dlsym, and everything else is asked of it (flags 0, or 2 for the _ptsz twins). The fake's
 * test hooks (fakecuda_*) are not driver functions, so they come from dlsym on the same handle. */
#ifndef DOORS_DRV_H
#define DOORS_DRV_H
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oomtrace.h"

#undef cuGetProcAddress /* cuda.h renames it to the 5-argument ABI; both are named exactly here */

#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)

/* A failed check names its line and ends the program with status 1: the e2e test then fails on the
 * status and shows the line on stderr. */
#define CHECK(c)                                                                                     \
    do {                                                                                             \
        if (!(c)) {                                                                                  \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                   \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)
#define OK(call) CHECK((call) == CUDA_SUCCESS)

typedef CUresult (*gpa5_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa4_fn)(const char *, void **, int, cuuint64_t);

extern void *drv;       /* the libcuda.so.1 handle (drv_open) */
extern gpa5_fn drv_gpa; /* what dlsym(drv, "cuGetProcAddress_v2") returned */

void drv_open(void);
/* (name, version, flags) through cuGetProcAddress_v2, exiting if the driver does not have it. */
void *drv_get(const char *name, int version, cuuint64_t flags);
/* A name that is not a driver function (the fake's test hooks). */
void *drv_sym(const char *name);
/* Writes a snapshot labelled `label` when the tracer is preloaded and enabled; nothing otherwise. The
 * result is not checked here: the tests look each label up, so a snapshot that was not written fails
 * there, by name. */
void dump(const char *label);

/* Declares `var`, typed as cuda.h types `fn`: from cuGetProcAddress_v2(name, version, flags), or (SYM)
 * from dlsym on the handle by the exact name of `fn`. */
#define GET(var, fn, name, version, flags) __typeof__(&fn) var = (__typeof__(&fn))drv_get(name, version, flags)
#define SYM(var, fn) __typeof__(&fn) var = (__typeof__(&fn))drv_sym(#fn)
#define PTDS CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM

#endif
