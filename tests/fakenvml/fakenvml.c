/* A stand-in libnvidia-ml.so.1 for tests: it reports the compute processes named in FAKENVML_PROCS
 * ("pid:bytes,pid:bytes"; "children:bytes" stands for each child process of the caller, as DataLoader
 * workers that opened CUDA contexts would be), on every device, plus the calling process itself with the
 * bytes the stand-in driver says it holds. nvmlSystemGetProcessName answers from FAKENVML_NAMES
 * ("pid:name,..."), else NVML_ERROR_NOT_FOUND. FAKENVML_FAIL=N makes nvmlInit_v2 return NVML error N. */
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
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

/* The caller's children, from /proc/PID/stat's parent field. */
static unsigned add_children(struct proc *infos, unsigned n, unsigned cap, unsigned long long bytes)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && n < cap && (e = readdir(d))) {
        char path[300], st[512];
        unsigned long pid = strtoul(e->d_name, NULL, 10);
        if (!pid)
            continue;
        snprintf(path, sizeof path, "/proc/%lu/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t k = fread(st, 1, sizeof st - 1, f);
        fclose(f);
        st[k] = 0;
        char *paren = strrchr(st, ')');
        unsigned long pp = 0;
        if (paren && sscanf(paren + 1, " %*c %lu", &pp) == 1 && pp == (unsigned long)getpid())
            infos[n++] = (struct proc){(unsigned)pid, bytes, 0, 0};
    }
    if (d)
        closedir(d);
    return n;
}

EXPORT int nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length)
{
    const char *s = getenv("FAKENVML_NAMES");
    while (s && *s) {
        char *end;
        unsigned long p = strtoul(s, &end, 10);
        if (*end != ':')
            break;
        const char *v = end + 1, *comma = strchr(v, ',');
        size_t len = comma ? (size_t)(comma - v) : strlen(v);
        if (p == pid) {
            if (!length || len >= length)
                return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
            memcpy(name, v, len);
            name[len] = 0;
            return 0;
        }
        s = comma ? comma + 1 : v + len;
    }
    return 6; /* NVML_ERROR_NOT_FOUND */
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
        if (strncmp(s, "children:", 9) == 0) {
            unsigned long long bytes = strtoull(s + 9, &end, 10);
            n = add_children(infos, n, cap, bytes);
            s = *end == ',' ? end + 1 : end;
            continue;
        }
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
