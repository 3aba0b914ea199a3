/* Gathering: what a snapshot says besides the recorder's state - the devices (driver, NVML), the pools,
 * the rank, the command line. The driver is asked without the recorder held: a driver call under our
 * lock could wait on a thread that waits on us. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/defs.h"
#include "driver/driver.h"
#include "snapshot/writer.h"

static void query_device(struct trace_devinfo *di, int ordinal, int current)
{
    memset(di, 0, sizeof *di);
    di->ordinal = ordinal;
    ot_drv_device_name(ordinal, di->name, sizeof di->name);
    di->has_uuid = ot_drv_device_uuid(ordinal, di->uuid) == 0;
    /* cuMemGetInfo speaks for the current context's device only. */
    if (current && ot_drv_mem_info(&di->free, &di->total) == 0)
        di->mem_known = 1;
}

/* The pools the program allocated from, and the default pool of each device with stream-ordered
 * allocations (marked as such), each once. */
static void add_default_pools(struct trace_facts *f, uint64_t async)
{
    for (int d = 0; d < OT_MAX_DEVICES; d++) {
        uint64_t p;
        if (!(async & (1ull << d)) || ot_drv_default_pool(d, &p) != 0)
            continue;
        int dup = 0;
        for (int i = 0; i < f->npools; i++)
            if (f->pools[i].handle == p) {
                f->pools[i].flags |= OT_POOL_DEFAULT;
                dup = 1;
            }
        if (!dup)
            f->pools[f->npools++] = (struct trace_poolinfo){.handle = p, .device = d, .flags = OT_POOL_DEFAULT};
    }
}

/* Other processes on these devices, and the memory of devices cuMemGetInfo cannot speak for. */
static void ask_nvml(struct trace_facts *f)
{
    struct ot_nvml_device nd[OT_MAX_DEVICES];
    for (int i = 0; i < f->ndevs; i++) {
        nd[i] = (struct ot_nvml_device){f->devs[i].ordinal, f->devs[i].has_uuid, {0}};
        memcpy(nd[i].uuid, f->devs[i].uuid, 16);
    }
    ot_nvml_query(f->nv, nd, f->ndevs);
    for (int i = 0; i < f->ndevs; i++)
        if (!f->devs[i].mem_known && f->nv->mem[i].known) {
            f->devs[i].mem_known = 1;
            f->devs[i].total = f->nv->mem[i].total;
            f->devs[i].free = f->nv->mem[i].free;
        }
}

int ot_gather(struct trace_facts *f, int flush, int bounded)
{
    memset(f, 0, sizeof *f);
    /* Which devices, and which pools: a short look at the recorder, then the driver. */
    struct trace_sources *src = malloc(sizeof *src);
    if (!src || ot_record_sources(src, bounded) != 0) {
        free(src);
        return -1;
    }
    uint64_t seen = src->devices;
    for (int i = 0; i < src->npools; i++)
        f->pools[f->npools++] = (struct trace_poolinfo){.handle = src->pools[i].handle, .device = src->pools[i].device};

    int current = ot_drv_has_context_query() ? ot_drv_current_device() : -1;
    if (current >= 0 && current < OT_MAX_DEVICES)
        seen |= 1ull << current;
    f->devs = calloc(OT_MAX_DEVICES, sizeof *f->devs);
    for (int d = 0; f->devs && d < OT_MAX_DEVICES; d++)
        if (seen & (1ull << d))
            query_device(&f->devs[f->ndevs++], d, d == current);
    add_default_pools(f, src->async_devices);
    free(src);
    for (int i = 0; i < f->npools; i++)
        if (ot_drv_pool_usage(f->pools[i].handle, &f->pools[i].reserved, &f->pools[i].used) != 0)
            f->pools[i].flags |= OT_POOL_UNREADABLE;

    f->nv = !flush ? calloc(1, sizeof *f->nv) : NULL;
    if (f->nv && f->devs)
        ask_nvml(f);
    ot_gather_rank(&f->rk);
    return 0;
}

void ot_gather_free(struct trace_facts *f)
{
    free(f->devs);
    free(f->nv);
    f->devs = NULL;
    f->nv = NULL;
}

void ot_gather_cmdline(struct ot_buf *b)
{
    enum { CAP = 65536 };
    char *buf = malloc(CAP);
    ssize_t n = 0;
    int fd = buf ? open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        for (ssize_t r; n < CAP && (r = read(fd, buf + n, (size_t)(CAP - n))) != 0;) {
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                break;
            n += r;
        }
        close(fd);
    }
    uint64_t argc = 0;
    for (ssize_t i = 0; i < n; i++)
        argc += buf[i] == 0;
    if (n > 0 && buf[n - 1] != 0)
        argc++;
    ot_buf_uv(b, argc);
    for (ssize_t i = 0; i < n;) {
        size_t len = strnlen(buf + i, (size_t)(n - i));
        ot_buf_str(b, buf + i, len);
        i += (ssize_t)len + 1;
    }
    free(buf);
}

static const char *getenv_first(const char *const *names, const char **which)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v) {
            if (which)
                *which = *names;
            return v;
        }
    }
    return NULL;
}

static long env_long(const char *v)
{
    if (!v)
        return -1;
    char *end;
    long n = strtol(v, &end, 10);
    return (*v && !*end && n >= 0) ? n : -1;
}

void ot_gather_rank(struct trace_rank *r)
{
    static const char *const ranks[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", NULL};
    static const char *const locals[] = {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                         "MPI_LOCALRANKID", NULL};
    static const char *const worlds[] = {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                         NULL};
    r->source = "";
    r->rank = env_long(getenv_first(ranks, &r->source));
    if (r->rank < 0)
        r->source = "";
    r->local = env_long(getenv_first(locals, NULL));
    r->world = env_long(getenv_first(worlds, NULL));
}
