/* cuda.h, minus the macros that rename entry points to their newest ABI (cuGetProcAddress ->
 * cuGetProcAddress_v2, ...). The tracer names every driver function by its exact ABI name, and must be
 * able to speak of the old ones too. */
#ifndef OOMTRACE_CUDA_API_H
#define OOMTRACE_CUDA_API_H
#include <cuda.h>
#undef cuGetProcAddress
#undef cuDeviceGetUuid
#endif
