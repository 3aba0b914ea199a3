/* cuda.h, minus the macros that rename entry points to their newest ABI (cuGetProcAddress ->
 * cuGetProcAddress_v2, ...). The tracer names every driver function by its exact ABI name, and must be
 * able to speak of the old ones too. */
#ifndef OOMTRACE_CUDA_API_H
#define OOMTRACE_CUDA_API_H
#include <cuda.h>
#undef cuGetProcAddress
#undef cuDeviceGetUuid
/* The pre-11.0 ABIs of a context's end: CUDA 13's static cudart still asks cuGetProcAddress for
 * ("cuDevicePrimaryCtxReset", 7000) and ("cuDevicePrimaryCtxRelease", 7000), which name these, not the _v2
 * functions (tests/gpu/ctx_reset.cu on the H200: every cudaDeviceReset went through them). */
#undef cuCtxDestroy
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
#undef cuIpcOpenMemHandle
CUresult CUDAAPI cuCtxDestroy(CUcontext ctx);
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev);
/* The same for ("cuIpcOpenMemHandle", 4010), which the dynamic cudart of PyTorch and CuPy asks for beside
 * the _v2 (run 34 on the H200). */
CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags);
#endif
