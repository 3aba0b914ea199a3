/* The stand-in driver's smoke test: virtual memory management (cuMemCreate, reservations, mappings,
 * shareable handles). */
#include "smoke.h"

#include <unistd.h>

void test_vmm(void)
{
    CUmemAllocationProp prop;
    CUmemGenericAllocationHandle h, h2, imp, hh;
    CUdeviceptr va, va2;
    size_t gran;

    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    OK(f_cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK(gran == 2 * MiB);

    ERR(f_cuMemCreate(&h, MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    ERR(f_cuMemCreate(&h, 0, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuMemCreate(&h, 4 * MiB, &prop, 0));
    CHECK(h != 0 && used(0) == 4 * MiB && live(0) == 1);

    /* Reserving address space takes no capacity. */
    OK(f_cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0));
    CHECK(va % gran == 0 && used(0) == 4 * MiB);
    ERR(f_cuMemMap(va + 6 * MiB, 4 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* runs past the range */
    OK(f_cuMemMap(va, 4 * MiB, 0, h, 0));
    ERR(f_cuMemMap(va + 2 * MiB, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* overlaps */
    CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    OK(f_cuMemSetAccess(va, 4 * MiB, &acc, 1));
    OK(f_cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(va + 100)));
    CHECK(h2 == h);
    CUmemAllocationProp got;
    OK(f_cuMemGetAllocationPropertiesFromHandle(&got, h));
    CHECK(got.location.type == CU_MEM_LOCATION_TYPE_DEVICE && got.location.id == 0);

    /* Released twice (create + retain) but still mapped: the memory stays. */
    OK(f_cuMemRelease(h));
    OK(f_cuMemRelease(h));
    ERR(f_cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    CHECK(used(0) == 4 * MiB && live(0) == 1);
    ERR(f_cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE); /* still mapped */
    ERR(f_cuMemUnmap(va, 2 * MiB), CUDA_ERROR_INVALID_VALUE);        /* half a mapping */
    OK(f_cuMemUnmap(va, 4 * MiB));
    CHECK(used(0) == 0 && live(0) == 0);
    ERR(f_cuMemUnmap(va, 4 * MiB), CUDA_ERROR_INVALID_VALUE);

    /* Export and import: the import charges nothing, and outlives the exporter's handle. */
    OK(f_cuMemCreate(&h, 2 * MiB, &prop, 0));
    int fd = -1;
    OK(f_cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CHECK(fd >= 0);
    OK(f_cuMemImportFromShareableHandle(&imp, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    close(fd);
    CHECK(imp != h && used(0) == 2 * MiB && live(0) == 1);
    OK(f_cuMemGetAllocationPropertiesFromHandle(&got, imp));
    CHECK(got.location.id == 0 && got.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    OK(f_cuMemRelease(h));
    CHECK(used(0) == 0 && live(0) == 0);
    OK(f_cuMemMap(va + 2 * MiB, 2 * MiB, 0, imp, 0));
    OK(f_cuMemRelease(imp));
    OK(f_cuMemUnmap(va + 2 * MiB, 2 * MiB));
    CHECK(used(0) == 0);

    /* Export needs the handle type to have been requested. */
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    OK(f_cuMemCreate(&h, 2 * MiB, &prop, 0));
    ERR(f_cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuMemRelease(h));

    /* Host-located physical memory takes no device capacity. */
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
    prop.location.id = 0;
    size_t host0 = host_used();
    OK(f_cuMemCreate(&hh, 2 * MiB, &prop, 0));
    CHECK(used(0) == 0 && used(1) == 0 && host_used() == host0 + 2 * MiB && live(0) == 0);
    OK(f_cuMemRelease(hh));
    CHECK(host_used() == host0);

    /* Device 1, and OOM. */
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 1;
    hh = 42;
    ERR(f_cuMemCreate(&hh, 64 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(hh == 42);
    OK(f_cuMemCreate(&hh, 2 * MiB, &prop, 0));
    CHECK(used(1) == 2 * MiB && live(1) == 1);
    OK(f_cuMemRelease(hh));
    CHECK(used(1) == 0 && live(1) == 0);
    prop.location.id = 9;
    ERR(f_cuMemCreate(&hh, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_DEVICE);

    OK(f_cuMemAddressFree(va, 8 * MiB));
    ERR(f_cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE);
    OK(f_cuMemAddressReserve(&va2, 2 * MiB, 0, 0, 0));
    CHECK(va2 != va);
    OK(f_cuMemAddressFree(va2, 2 * MiB));
}
