// What the CUDA programs of tests/gpu share: a failed call is printed ("FAIL call: NAME") and counted, and
// the program goes on, so that one run says every call that failed.
#ifndef OOMTRACE_GPU_CHECK_H
#define OOMTRACE_GPU_CHECK_H
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>

static int failures;

#define RT(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            printf("FAIL %s: %s\n", #call, cudaGetErrorName(e_));                                  \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#define DRV(call)                                                                                  \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            const char *n_ = 0;                                                                    \
            cuGetErrorName(r_, &n_);                                                               \
            printf("FAIL %s: %s\n", #call, n_ ? n_ : "?");                                         \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#endif
