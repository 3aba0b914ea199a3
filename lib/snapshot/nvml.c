/* Who else is on the card: NVML, loaded at snapshot time with dlopen, so a machine without it (or a
 * process that never fails) pays nothing. Devices are matched by UUID, never by index: CUDA's ordinals
 * follow CUDA_VISIBLE_DEVICES, NVML's do not. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "driver/real.h"
#include "snapshot/nvml.h"

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
struct nvml_proc_v3 { /* nvmlProcessInfo_t (v2/v3 layout) */
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
};
struct nvml_memory {
    unsigned long long total, free, used;
};

#define NVML_VALUE_NOT_AVAILABLE (~0ull)

static void uuid_string(const unsigned char u[16], char out[48])
{
    snprintf(out, 48, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3],
             u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

static void proc_name(unsigned pid, char *out, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/comm", pid);
    out[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, cap - 1);
    close(fd);
    if (n < 0)
        n = 0;
    out[n] = 0;
    char *nl = strchr(out, '\n');
    if (nl)
        *nl = 0;
}

void ot_nvml_query(struct ot_nvml *out, const struct ot_nvml_device *devs, int ndevs)
{
    memset(out, 0, sizeof *out);
    void *h = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        snprintf(out->note, sizeof out->note, "libnvidia-ml.so.1 not found");
        return;
    }
    void *(*sym)(void *, const char *) = (void *(*)(void *, const char *))ot_real_dlsym_fn();
    nvmlReturn_t (*init)(void) = sym ? (nvmlReturn_t(*)(void))sym(h, "nvmlInit_v2") : NULL;
    nvmlReturn_t (*shutdown)(void) = sym ? (nvmlReturn_t(*)(void))sym(h, "nvmlShutdown") : NULL;
    nvmlReturn_t (*by_uuid)(const char *, nvmlDevice_t *) =
        sym ? (nvmlReturn_t(*)(const char *, nvmlDevice_t *))sym(h, "nvmlDeviceGetHandleByUUID") : NULL;
    nvmlReturn_t (*procs)(nvmlDevice_t, unsigned *, struct nvml_proc_v3 *) =
        sym ? (nvmlReturn_t(*)(nvmlDevice_t, unsigned *, struct nvml_proc_v3 *))sym(
                  h, "nvmlDeviceGetComputeRunningProcesses_v3")
            : NULL;
    nvmlReturn_t (*meminfo)(nvmlDevice_t, struct nvml_memory *) =
        sym ? (nvmlReturn_t(*)(nvmlDevice_t, struct nvml_memory *))sym(h, "nvmlDeviceGetMemoryInfo") : NULL;
    if (!init || !by_uuid || !procs) {
        snprintf(out->note, sizeof out->note, "libnvidia-ml.so.1 lacks the calls needed");
        dlclose(h);
        return;
    }
    int rc = init();
    if (rc != 0) {
        snprintf(out->note, sizeof out->note, "nvmlInit failed (NVML error %d)", rc);
        dlclose(h);
        return;
    }
    out->source = OT_PROCESSES_NVML;
    for (int i = 0; i < ndevs; i++) {
        if (!devs[i].has_uuid)
            continue;
        char uuid[48];
        uuid_string(devs[i].uuid, uuid);
        nvmlDevice_t d;
        if (by_uuid(uuid, &d) != 0) {
            snprintf(out->note, sizeof out->note, "NVML does not know device %d (%s)", devs[i].ordinal, uuid);
            continue;
        }
        struct nvml_memory m;
        if (meminfo && meminfo(d, &m) == 0) {
            out->mem[i].known = 1;
            out->mem[i].total = m.total;
            out->mem[i].free = m.free;
        }
        struct nvml_proc_v3 p[OT_NVML_MAX_PROCS];
        unsigned n = OT_NVML_MAX_PROCS;
        rc = procs(d, &n, p);
        if (rc != 0) {
            snprintf(out->note, sizeof out->note, "nvmlDeviceGetComputeRunningProcesses_v3 failed on device %d "
                     "(NVML error %d)", devs[i].ordinal, rc);
            continue;
        }
        for (unsigned k = 0; k < n && out->nprocs < OT_NVML_MAX_PROCS; k++) {
            struct ot_nvml_proc *o = &out->procs[out->nprocs++];
            o->device = devs[i].ordinal;
            o->pid = p[k].pid;
            o->used = p[k].usedGpuMemory == NVML_VALUE_NOT_AVAILABLE ? 0 : p[k].usedGpuMemory;
            o->used_known = p[k].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE;
            proc_name(p[k].pid, o->name, sizeof o->name);
        }
    }
    if (shutdown)
        shutdown();
    dlclose(h);
}
