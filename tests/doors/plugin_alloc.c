/* A plugin that keeps device memory after it is unloaded (walk 7, #27), for hostile dlclosed: its
 * allocations' stacks hold its code addresses, which must still name it once dlclose has unloaded it. */
#include <cuda.h>

CUdeviceptr plugin_cache[4];

void plugin_warm(void)
{
    for (int i = 0; i < 4; i++)
        cuMemAlloc_v2(&plugin_cache[i], 128u << 20);
}
