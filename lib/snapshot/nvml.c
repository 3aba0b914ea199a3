/* Who else is on the card: NVML, loaded at snapshot time with dlopen, so a machine without it (or a
 * process that never fails) pays nothing. Devices are matched by UUID, never by index: CUDA's ordinals
 * follow CUDA_VISIBLE_DEVICES, NVML's do not. */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "oomtrace_format.h"
#include "capture/modules.h"
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

/* Reads /proc/PID/<what> into out (NUL-terminated); the byte count, -1 when it cannot be read. */
static ssize_t proc_read(unsigned pid, const char *what, char *out, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/%s", pid, what);
    out[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, out, cap - 1);
    close(fd);
    if (n < 0)
        return -1;
    out[n] = 0;
    return n;
}

/* The parent of pid from /proc/PID/stat (the field after the command's closing parenthesis and the
 * state); 0 when unreadable. */
static unsigned proc_parent(unsigned pid)
{
    char st[512];
    if (proc_read(pid, "stat", st, sizeof st) <= 0)
        return 0;
    char *paren = strrchr(st, ')');
    unsigned long pp = 0;
    if (!paren || sscanf(paren + 1, " %*c %lu", &pp) != 1)
        return 0;
    return (unsigned)pp;
}

/* How pid is related to this process: a descendant when its parents, walked up, reach us; an ancestor
 * when ours reach it. Unknown when /proc does not show it (another PID namespace: NVML's pids are the
 * host's). */
static int relation_of(unsigned pid)
{
    unsigned self = (unsigned)getpid();
    if (pid == self)
        return OT_PROCESS_RELATION_SELF;
    unsigned p = proc_parent(pid);
    if (!p)
        return OT_PROCESS_RELATION_UNKNOWN;
    for (int hops = 0; p > 1 && hops < 64; hops++, p = proc_parent(p))
        if (p == self)
            return OT_PROCESS_RELATION_CHILD;
    for (unsigned q = proc_parent(self), hops = 0; q > 1 && hops < 64; hops++, q = proc_parent(q))
        if (q == pid)
            return OT_PROCESS_RELATION_PARENT;
    return OT_PROCESS_RELATION_NONE;
}

static const char *base(const char *path)
{
    const char *sl = strrchr(path, '/');
    return sl ? sl + 1 : path;
}

/* The process's name and command line: /proc where it shows the process, else NVML's name for it. In
 * another PID namespace /proc may show nothing under NVML's pid, or another process: when NVML's name
 * (its executable) is neither the program /proc's command line starts with nor begins with /proc's comm
 * (15 characters; a program may rename its main thread), NVML's is kept. */
static void proc_name(unsigned pid, struct ot_nvml_proc *o, nvmlReturn_t (*nvml_name)(unsigned, char *, unsigned))
{
    char nv[160] = "";
    if (nvml_name && nvml_name(pid, nv, sizeof nv) != 0)
        nv[0] = 0;
    nv[sizeof nv - 1] = 0;
    char comm[64];
    ssize_t n = proc_read(pid, "comm", comm, sizeof comm);
    char *nl = n > 0 ? strchr(comm, '\n') : NULL;
    if (nl)
        *nl = 0;
    ssize_t c = n > 0 ? proc_read(pid, "cmdline", o->command, sizeof o->command) : -1;
    bool proc_ok = n > 0 && comm[0] &&
                   (!nv[0] || strncmp(base(nv), comm, strlen(comm)) == 0 || (c > 0 && strcmp(base(nv), base(o->command)) == 0));
    if (proc_ok) {
        snprintf(o->name, sizeof o->name, "%s", comm);
        o->name_source = OT_PROCESS_NAME_PROC;
        for (ssize_t i = 0; i + 1 < c; i++) /* arguments are NUL-separated */
            if (!o->command[i])
                o->command[i] = ' ';
        return;
    }
    o->command[0] = 0;
    if (nv[0]) {
        snprintf(o->name, sizeof o->name, "%s", base(nv));
        snprintf(o->command, sizeof o->command, "%s", nv);
        o->name_source = OT_PROCESS_NAME_NVML;
        o->relation = OT_PROCESS_RELATION_UNKNOWN; /* /proc's pid is not this one */
        o->relation_fixed = 1;
    }
}

/* NVML, once opened, stays open (nvmlShutdown after each query releases what nvmlInit took). Opened and
 * closed at each snapshot, it cost a load and an unload each time, and its unload left ThreadSanitizer, in a
 * program built with it, the record of NVML's accesses at addresses the program's own libraries may be mapped
 * at next (the loader's mmap and munmap are not intercepted): those then read as racing with NVML.
 * Whose it is: when the program already has it (torch and pynvml load it), RTLD_NOLOAD finds it, and it is the
 * program's module, listed as ever. Otherwise it is the tracer's load, left out of the snapshots' modules (with
 * what it brought in) so that they list the program's as before (capture/modules.c): kept listed, it was a
 * module of every later snapshot, and its range hid an unloaded plugin's record (walk 7, #27). A program that
 * loads it after the tracer did gets the same object, which the loader cannot tell apart; the program then
 * looks its functions up with dlsym on that handle (torch, pynvml through ctypes, NCCL do), which the exported
 * dlsym sees (ot_modules_used), and it is listed from then on. A library linked against NVML and loaded later
 * goes unnoticed: NVML stays unlisted, which no stack of the program misses (nothing it calls is traced).
 * The program's dlclose of it no longer unloads it, and its dlopen(RTLD_NOLOAD) finds it: with the result the
 * program gets either way (0, a handle), as while a snapshot held it before. No dlclose at exit either: the
 * exit snapshot may still ask it, and the loader runs its destructors after the exit handlers. Under query_mu;
 * a forked child inherits it, loaded. */
static void *nvml_handle;

static void *nvml_open(void)
{
    if (!nvml_handle)
        nvml_handle = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (!nvml_handle)
        nvml_handle = ot_modules_open_hidden("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    return nvml_handle;
}

/* One query at a time in the process. Threads that fail together (16 ranks' workers, a data-parallel step)
 * each take a snapshot, and each opened, initialized, shut down and closed NVML at once: the loader orders
 * those dlopen and dlclose calls with its own lock, which ThreadSanitizer cannot see, so a program built
 * with it reported a race inside the tracer and exited (tsan_host). A lock it sees orders them (the first open
 * now), and NVML is not initialized and shut down under itself. Reset in a forked child (its holder is not
 * there). */
static pthread_mutex_t query_mu = PTHREAD_MUTEX_INITIALIZER;

void ot_nvml_forked(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    query_mu = fresh;
}

static void query(struct ot_nvml *out, const struct ot_nvml_device *devs, int ndevs);

void ot_nvml_query(struct ot_nvml *out, const struct ot_nvml_device *devs, int ndevs)
{
    pthread_mutex_lock(&query_mu);
    query(out, devs, ndevs);
    pthread_mutex_unlock(&query_mu);
}

static void query(struct ot_nvml *out, const struct ot_nvml_device *devs, int ndevs)
{
    memset(out, 0, sizeof *out);
    void *h = nvml_open();
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
    nvmlReturn_t (*nvml_name)(unsigned, char *, unsigned) =
        sym ? (nvmlReturn_t(*)(unsigned, char *, unsigned))sym(h, "nvmlSystemGetProcessName") : NULL;
    nvmlReturn_t (*meminfo)(nvmlDevice_t, struct nvml_memory *) =
        sym ? (nvmlReturn_t(*)(nvmlDevice_t, struct nvml_memory *))sym(h, "nvmlDeviceGetMemoryInfo") : NULL;
    if (!init || !by_uuid || !procs) {
        snprintf(out->note, sizeof out->note, "libnvidia-ml.so.1 lacks the calls needed");
        return;
    }
    int rc = init();
    if (rc != 0) {
        snprintf(out->note, sizeof out->note, "nvmlInit failed (NVML error %d)", rc);
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
            proc_name(p[k].pid, o, nvml_name);
            if (!o->relation_fixed)
                o->relation = relation_of(p[k].pid);
        }
    }
    if (shutdown)
        shutdown();
}
