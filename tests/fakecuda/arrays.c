/* fakecuda: arrays and mipmapped arrays (cuArrayCreate, cuArray3DCreate, cuMipmappedArrayCreate). */
#include "fakecuda.h"

/* ---------------------------------------------------------------------------------------------- */
/* Arrays                                                                                           */

static size_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    default: return 4; /* 32-bit formats, and a flat guess for every other format */
    }
}

/* Returns 0 with *out set, or a CUresult. */
static CUresult array_bytes(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch, size_t *out)
{
    size_t n;
    if (!w || (ch != 1 && ch != 2 && ch != 4))
        return CUDA_ERROR_INVALID_VALUE;
    if (__builtin_mul_overflow(w, h ? h : 1, &n) || __builtin_mul_overflow(n, d ? d : 1, &n) ||
        __builtin_mul_overflow(n, (size_t)ch * format_bytes(f), &n))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *out = n;
    return CUDA_SUCCESS;
}

static CUresult array_new(enum rec_kind kind, size_t bytes, uint64_t *out)
{
    int dev;
    CUresult rc;
    if ((rc = cur_dev(&dev)))
        return rc;
    lock();
    if ((rc = charge(dev, bytes))) {
        unlock();
        return rc;
    }
    uint64_t h = mk_handle(kind == R_ARRAY ? TAG_ARRAY : TAG_MIPMAP, new_serial_locked(), dev);
    struct rec *r = rec_new(kind, h, dev, bytes);
    if (!r || map_put(&array_map, r)) {
        uncharge(dev, bytes);
        unlock();
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    devs[dev].live++;
    unlock();
    *out = h;
    return CUDA_SUCCESS;
}

static CUresult array_destroy(uint64_t h, enum rec_kind kind)
{
    lock();
    struct rec *r = map_get(&array_map, h);
    if (!r || r->kind != kind) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    map_del(&array_map, r);
    uncharge(r->dev, r->size);
    devs[r->dev].live--;
    unlock();
    free(r);
    return CUDA_SUCCESS;
}

static CUresult array_create2d(CUarray *ph, const CUDA_ARRAY_DESCRIPTOR *d)
{
    size_t bytes;
    uint64_t h;
    CUresult rc;
    if (!ph || !d)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = array_bytes(d->Width, d->Height, 0, d->Format, d->NumChannels, &bytes)) ||
        (rc = array_new(R_ARRAY, bytes, &h)))
        return rc;
    *ph = (CUarray)(uintptr_t)h;
    return CUDA_SUCCESS;
}

static CUresult array_create3d(CUarray *ph, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    size_t bytes;
    uint64_t h;
    CUresult rc;
    if (!ph || !d)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels, &bytes)) ||
        (rc = array_new(R_ARRAY, bytes, &h)))
        return rc;
    *ph = (CUarray)(uintptr_t)h;
    return CUDA_SUCCESS;
}

static CUresult mipmap_create(CUmipmappedArray *ph, const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
    size_t total = 0, bytes;
    uint64_t h;
    CUresult rc;
    if (!ph || !d || !d->Width || !levels || levels > 8 * sizeof(size_t))
        return CUDA_ERROR_INVALID_VALUE;
    /* Each level halves every extent (not below 1); the layer count of a layered array stays. */
    for (unsigned l = 0; l < levels; l++) {
        size_t w = d->Width >> l, h2 = d->Height >> l, dp = d->Depth;
        if (!(d->Flags & CUDA_ARRAY3D_LAYERED))
            dp >>= l;
        if ((rc = array_bytes(w ? w : 1, d->Height ? (h2 ? h2 : 1) : 0, d->Depth ? (dp ? dp : 1) : 0,
                              d->Format, d->NumChannels, &bytes)))
            return rc;
        if (__builtin_add_overflow(total, bytes, &total))
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if ((rc = array_new(R_MIPMAP, total, &h)))
        return rc;
    *ph = (CUmipmappedArray)(uintptr_t)h;
    return CUDA_SUCCESS;
}

API CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    enter();
    return array_create2d(pHandle, pAllocateArray);
}

API CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    enter();
    return array_create3d(pHandle, pAllocateArray);
}

API CUresult cuArrayDestroy(CUarray hArray)
{
    enter();
    return array_destroy((uint64_t)(uintptr_t)hArray, R_ARRAY);
}

API CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                    unsigned int numMipmapLevels)
{
    enter();
    return mipmap_create(pHandle, pMipmappedArrayDesc, numMipmapLevels);
}

API CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    enter();
    return array_destroy((uint64_t)(uintptr_t)hMipmappedArray, R_MIPMAP);
}

