/* A stand-in libnvidia-ml.so.1 for tests: it reports the compute processes named in FAKENVML_PROCS
 * ("pid:bytes,pid:bytes"), on every device, plus the calling process itself with the bytes the stand-in
 * driver says it holds. FAKENVML_FAIL=N makes nvmlInit_v2 return NVML error N. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

struct proc {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
};

EXPORT int nvmlInit_v2(void)
{
    const char *f = getenv("FAKENVML_FAIL");
    return f && *f ? atoi(f) : 0;
}

EXPORT int nvmlShutdown(void)
{
    return 0;
}

EXPORT int nvmlDeviceGetHandleByUUID(const char *uuid, void **device)
{
    if (!uuid || strncmp(uuid, "GPU-", 4) != 0)
        return 13; /* NVML_ERROR_NOT_FOUND */
    *device = (void *)1;
    return 0;
}

EXPORT int nvmlDeviceGetMemoryInfo(void *device, void *memory)
{
    (void)device;
    (void)memory;
    return 3; /* NVML_ERROR_NOT_SUPPORTED: the stand-in driver's cuMemGetInfo is the truth in tests */
}

EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned int *count, struct proc *infos)
{
    (void)device;
    unsigned n = 0, cap = *count;
    size_t (*used)(int) = (size_t(*)(int))dlsym(RTLD_DEFAULT, "fakecuda_used_bytes");
    if (n < cap)
        infos[n++] = (struct proc){(unsigned)getpid(), used ? used(0) : 0, 0, 0};
    const char *s = getenv("FAKENVML_PROCS");
    while (s && *s && n < cap) {
        char *end;
        unsigned long pid = strtoul(s, &end, 10);
        if (*end != ':')
            break;
        unsigned long long bytes = strtoull(end + 1, &end, 10);
        infos[n++] = (struct proc){(unsigned)pid, bytes, 0, 0};
        s = *end == ',' ? end + 1 : end;
    }
    *count = n;
    return 0;
}
