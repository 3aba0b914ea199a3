/* cuGetProcAddress, both ABIs. cudart and static-cudart programs reach every driver function through
 * these, after obtaining them with dlsym or from themselves: ("cuGetProcAddress", 11030) is the
 * 4-argument form and ("cuGetProcAddress", 12000) the 5-argument one. Each wrapper calls the real lookup
 * with the caller's exact arguments and then routes the pointer it returned (lib/route.c); a lookup that
 * fails is returned untouched. */
#include "common/defs.h"
#include "common/options.h"
#include "intercept/hook_call.h"
#include "intercept/route.h"
#include "runtime/companion.h"

#undef cuGetProcAddress
OT_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

OT_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    typedef CUresult (*fn)(const char *, void **, int, cuuint64_t);
    fn real = OT_REAL(cuGetProcAddress, fn);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS && pfn && *pfn && !ot_opt.disabled)
        *pfn = ot_route(*pfn);
    if (ot_opt.frameworks)
        ot_companion_poke(OT_POKE_LOOKUP);
    return r;
}

OT_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus)
{
    typedef CUresult (*fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
    fn real = OT_REAL(cuGetProcAddress_v2, fn);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS && pfn && *pfn && !ot_opt.disabled)
        *pfn = ot_route(*pfn);
    if (ot_opt.frameworks)
        ot_companion_poke(OT_POKE_LOOKUP);
    return r;
}
