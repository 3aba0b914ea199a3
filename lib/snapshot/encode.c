/* Encoding: the recorder's state and the gathered facts into the sections of docs/FORMAT.md, in memory,
 * while the recorder is held still; the file is written after it is released. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "capture/modules.h"
#include "capture/python.h"
#include "capture/stacks.h"
#include "common/clock.h"
#include "common/defs.h"
#include "common/options.h"
#include "common/self.h"
#include "record/rec.h"
#include "record/ring.h"
#include "snapshot/framework.h"
#include "snapshot/writer.h"

/* ---- a set of native addresses, for dump-time names ---- */

struct addrset {
    uint64_t *slots, mask, count;
};

static void addrset_add(struct addrset *s, uint64_t a)
{
    if (!a || !s->slots)
        return;
    if ((s->count + 1) * 2 > s->mask + 1) {
        uint64_t cap = (s->mask + 1) * 2;
        uint64_t *n = calloc(cap, sizeof *n);
        if (!n)
            return;
        for (uint64_t i = 0; i <= s->mask; i++)
            if (s->slots[i]) {
                uint64_t j = (s->slots[i] * 0x9E3779B97F4A7C15ull >> 17) & (cap - 1);
                while (n[j])
                    j = (j + 1) & (cap - 1);
                n[j] = s->slots[i];
            }
        free(s->slots);
        s->slots = n;
        s->mask = cap - 1;
    }
    uint64_t j = (a * 0x9E3779B97F4A7C15ull >> 17) & s->mask;
    while (s->slots[j] && s->slots[j] != a)
        j = (j + 1) & s->mask;
    if (!s->slots[j]) {
        s->slots[j] = a;
        s->count++;
    }
}

void ot_encode_rec(struct ot_buf *b, const struct ot_rec *r)
{
    if (ot_buf_reserve(b, OT_RECORD_NFIELDS * 10) != 0)
        return;
    uint8_t *p = b->p + b->len;
#define OT_X_PUT(col, name, coding, seq_coding, doc) p = ot_put_field(p, OT_CODING_##coding, REC_##name(r), 0);
    OT_RECORD_FIELDS(OT_X_PUT)
#undef OT_X_PUT
    b->len = (size_t)(p - b->p);
}

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void put_meta(struct ot_buf *b, enum ot_trigger trigger, const char *reason, unsigned seq,
                     const struct trace_rank *rk, const struct ot_ring_stats *rs)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    ot_buf_cstr(b, OT_VERSION);
    ot_buf_uv(b, trigger);
    ot_buf_cstr(b, reason);
    ot_buf_uv(b, (uint64_t)getpid());
    ot_buf_uv(b, (uint64_t)getppid());
    ot_buf_cstr(b, host);
    ot_gather_cmdline(b);
    ot_buf_cstr(b, exe);
    ot_buf_uv(b, wall_ns());
    ot_buf_uv(b, ot_now_ns());
    ot_buf_uv(b, ot_start_ns);
    ot_buf_sv(b, rk->rank);
    ot_buf_sv(b, rk->local);
    ot_buf_sv(b, rk->world);
    ot_buf_cstr(b, rk->source);
    ot_buf_uv(b, ot_record_events());
    ot_buf_uv(b, rs->kept);
    ot_buf_uv(b, rs->dropped);
    ot_buf_uv(b, rs->chunks_dropped);
    ot_buf_uv(b, ot_opt.ring_bytes);
    ot_buf_uv(b, rs->used_bytes);
    ot_buf_uv(b, seq);
    ot_buf_cstr(b, ot_python_version());
    ot_buf_cstr(b, getenv("CUDA_VISIBLE_DEVICES"));
}

static void put_device(struct ot_buf *b, const struct trace_devinfo *di)
{
    const struct trace_device *d = ot_record_device(di->ordinal);
    ot_buf_sv(b, di->ordinal);
    ot_buf_cstr(b, di->name);
    ot_buf_str(b, (const char *)di->uuid, di->has_uuid ? 16 : 0);
    int baseline = __atomic_load_n(&d->baseline_state, __ATOMIC_ACQUIRE) == 2;
    ot_buf_uv(b, (di->mem_known ? OT_DEV_MEMINFO_KNOWN : 0) | (baseline ? OT_DEV_BASELINE_KNOWN : 0));
    ot_buf_uv(b, di->mem_known ? di->total : 0);
    ot_buf_uv(b, di->mem_known ? di->free : 0);
    ot_buf_uv(b, baseline ? d->baseline_used : 0);
    ot_buf_uv(b, d->cur);
    ot_buf_uv(b, d->peak);
    ot_buf_uv(b, d->peak_time);
    ot_buf_uv(b, d->peak_seq);
    ot_buf_uv(b, OT_CAT_COUNT);
    for (int c = 0; c < OT_CAT_COUNT; c++)
        ot_buf_uv(b, d->by_cat[c]);
}

/* The live set at one device's peak (record/peak.c says why it is exact), by reference: the records it
 * shares with the live set are those of LIVE on this device, in device categories, with seq <= peak_seq;
 * only the records freed since the peak are written. */
static void put_peak(struct ot_buf *b, int ordinal, uint64_t shared)
{
    const struct trace_device *d = ot_record_device(ordinal);
    ot_buf_sv(b, ordinal);
    ot_buf_uv(b, d->peak);
    ot_buf_uv(b, d->peak_time);
    ot_buf_uv(b, d->peak_seq);
    ot_buf_uv(b, shared + d->nretained);
    ot_buf_uv(b, d->lost);
    ot_buf_uv(b, d->nretained);
    for (uint64_t i = 0; i < d->nretained; i++)
        ot_encode_rec(b, &d->retained[i]);
}

static void put_stacks(struct ot_buf *b, struct addrset *addrs)
{
    uint32_t n = ot_stack_count();
    ot_buf_uv(b, n ? n - 1 : 0);
    for (uint32_t id = 1; id < n; id++) {
        struct ot_stack_view v;
        if (ot_stack_get(id, &v) != 0) {
            ot_buf_uv(b, id);
            ot_buf_uv(b, 0);
            ot_buf_uv(b, 0);
            continue;
        }
        if (ot_buf_reserve(b, ((size_t)v.n + 3) * 10) != 0)
            return;
        uint8_t *p = ot_put_uvarint(b->p + b->len, id);
        p = ot_put_uvarint(p, v.flags & ((1u << OT_STACK_LENDER_SHIFT) - 1));
        p = ot_put_uvarint(p, v.n);
        for (uint32_t i = 0; i < v.n; i++) {
            p = ot_put_uvarint(p, v.frames[i]);
            if (!(v.frames[i] & OT_FRAME_PYTHON))
                addrset_add(addrs, v.frames[i] >> 1);
        }
        b->len = (size_t)(p - b->p);
    }
}

/* The lender of each borrowed stack (capture/stacks.h: it rides in the stack's flags); false when none is. */
static int put_borrowed(struct ot_buf *b)
{
    uint32_t n = ot_stack_count(), count = 0;
    struct ot_stack_view v;
    for (uint32_t id = 1; id < n; id++)
        count += ot_stack_get(id, &v) == 0 && (v.flags & OT_STACK_BORROWED);
    if (!count)
        return 0;
    ot_buf_uv(b, count);
    for (uint32_t id = 1; id < n; id++) {
        if (ot_stack_get(id, &v) != 0 || !(v.flags & OT_STACK_BORROWED))
            continue;
        ot_buf_uv(b, id);
        ot_buf_uv(b, v.flags >> OT_STACK_LENDER_SHIFT);
    }
    return 1;
}

/* The recent markers and those pinned at each device's peak, by seq, each once. */
static void put_markers(struct ot_buf *b)
{
    const struct trace_marker **v = malloc(OT_MARKERS_VIEW * sizeof *v);
    if (!v) {
        b->oom = 1;
        return;
    }
    size_t k = ot_record_markers(v);
    ot_buf_uv(b, k);
    for (size_t i = 0; i < k; i++) {
        ot_buf_uv(b, v[i]->seq);
        ot_buf_uv(b, v[i]->time_ns);
        ot_buf_uv(b, v[i]->tid);
        ot_buf_cstr(b, v[i]->label);
    }
    free(v);
}

static void put_mappings(struct ot_buf *b)
{
    const struct ot_liveset *m = ot_record_mappings();
    ot_buf_uv(b, m->count);
    for (uint64_t i = 0; m->slots && i <= m->mask; i++) {
        const struct ot_rec *r = &m->slots[i];
        if (!r->size)
            continue;
        ot_buf_uv(b, r->key);
        ot_buf_uv(b, r->size);
        ot_buf_uv(b, r->seq);     /* handle */
        ot_buf_uv(b, r->time_ns); /* offset */
    }
}

/* What each recent context end freed, by its event's seq (docs/FORMAT.md, CTX_FREED). */
static void put_ctx_freed(struct ot_buf *b, const struct ot_ctx_end *const *v, size_t n)
{
    ot_buf_uv(b, n);
    for (size_t i = 0; i < n; i++) {
        const struct ot_ctx_end *e = v[i];
        ot_buf_uv(b, e->seq);
        ot_buf_uv(b, e->nfreed);
        ot_buf_uv(b, e->nkept);
        uint64_t prev = 0;
        for (uint64_t k = 0; k < e->nkept; k++) {
            const struct ot_ctx_freed *f = &e->v[k];
            ot_buf_sv(b, (int64_t)(f->key - prev));
            prev = f->key;
            ot_buf_uv(b, f->size);
            ot_buf_sv(b, f->device);
            ot_buf_uv(b, f->cat);
        }
    }
}

static void put_failure(struct ot_buf *b, const struct trace_failure *f)
{
    ot_buf_uv(b, f->req.api);
    ot_buf_uv(b, f->req.cat);
    ot_buf_sv(b, f->req.device);
    ot_buf_uv(b, f->req.size);
    ot_buf_uv(b, (uint64_t)f->result);
    ot_buf_uv(b, f->time_ns);
    ot_buf_uv(b, f->tid);
    ot_buf_uv(b, f->stack);
    ot_buf_uv(b, f->seq);
}

static void put_pools(struct ot_buf *b, const struct trace_facts *f)
{
    ot_buf_uv(b, (uint64_t)f->npools);
    for (int i = 0; i < f->npools; i++) {
        ot_buf_uv(b, f->pools[i].handle);
        ot_buf_sv(b, f->pools[i].device);
        ot_buf_uv(b, f->pools[i].flags);
        ot_buf_uv(b, f->pools[i].reserved);
        ot_buf_uv(b, f->pools[i].used);
    }
}

static void put_processes(struct ot_buf *b, const struct ot_nvml *nv)
{
    ot_buf_uv(b, (uint64_t)nv->source);
    ot_buf_cstr(b, nv->note);
    ot_buf_uv(b, (uint64_t)nv->nprocs);
    for (int i = 0; i < nv->nprocs; i++) {
        ot_buf_sv(b, nv->procs[i].device);
        ot_buf_uv(b, nv->procs[i].pid);
        ot_buf_uv(b, nv->procs[i].used);
        ot_buf_cstr(b, nv->procs[i].name);
    }
    /* Appended (1.3): a reader of 1.2 stops before it. */
    ot_buf_uv(b, (uint64_t)nv->nprocs);
    for (int i = 0; i < nv->nprocs; i++) {
        ot_buf_uv(b, (uint64_t)nv->procs[i].relation);
        ot_buf_uv(b, (uint64_t)nv->procs[i].name_source);
        ot_buf_cstr(b, nv->procs[i].command);
    }
}

/* The names of the process's threads as the kernel has them (pthread_setname_np, prctl: PyTorch's pt_autograd_N,
 * NCCL's, a DataLoader's pin-memory thread), for a report that would otherwise say "thread 25507". Threads that
 * already ended are not there. At most OT_MAX_THREAD_NAMES, read after the recorder is released. */
#define OT_MAX_THREAD_NAMES 4096
static void put_threads(struct ot_buf *b)
{
    DIR *d = opendir("/proc/self/task");
    struct ot_buf list = {0};
    uint64_t n = 0;
    for (struct dirent *e; d && n < OT_MAX_THREAD_NAMES && (e = readdir(d)) != NULL;) {
        char *end;
        unsigned long tid = strtoul(e->d_name, &end, 10);
        if (!tid || *end)
            continue;
        char path[64], name[32];
        snprintf(path, sizeof path, "/proc/self/task/%lu/comm", tid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t k = read(fd, name, sizeof name - 1);
        close(fd);
        if (k <= 0)
            continue;
        name[k] = '\0';
        name[strcspn(name, "\n")] = '\0';
        ot_buf_uv(&list, tid);
        ot_buf_cstr(&list, name);
        n++;
    }
    if (d)
        closedir(d);
    ot_buf_uv(b, n);
    if (list.len)
        ot_buf_put(b, list.p, list.len);
    if (list.oom)
        b->oom = 1;
    ot_buf_free(&list);
}

static struct ot_buf *section(struct trace_sections *secs, uint32_t type)
{
    secs->s[secs->n].type = type;
    return &secs->s[secs->n++].b;
}

int ot_encode(struct trace_sections *secs, const struct trace_facts *f, enum ot_trigger trigger, const char *reason,
              unsigned seq, int bounded, const struct trace_failure *mine, struct trace_failure *failed)
{
    memset(secs, 0, sizeof *secs);
    failed->valid = 0;
    struct addrset addrs = {calloc(1024, sizeof(uint64_t)), 1023, 0};
    if (ot_record_hold(bounded) != 0) {
        free(addrs.slots);
        return -1;
    }
    struct ot_ring_stats rs;
    ot_ring_stats(&rs);
    put_meta(section(secs, OT_SEC_META), trigger, reason, seq, &f->rk, &rs);

    struct ot_buf *b = section(secs, OT_SEC_DEVICES);
    ot_buf_uv(b, (uint64_t)f->ndevs);
    for (int i = 0; i < f->ndevs; i++)
        put_device(b, &f->devs[i]);

    /* A framework OOM's FAILURE is the framework's request (api framework_allocator). The failing thread's own:
     * in a burst, another thread may have failed since, and its snapshot reports that one. */
    if ((trigger == OT_TRIGGER_OOM || trigger == OT_TRIGGER_FRAMEWORK_OOM) && mine && mine->valid) {
        *failed = *mine;
        put_failure(section(secs, OT_SEC_FAILURE), failed);
    }

    put_stacks(section(secs, OT_SEC_STACKS), &addrs);
    secs->s[secs->n].type = OT_SEC_BORROWED;
    if (put_borrowed(&secs->s[secs->n].b))
        secs->n++;

    uint64_t peak_shared[OT_MAX_DEVICES];
    secs->s[secs->n].type = ot_encode_live(&secs->s[secs->n].b, peak_shared);
    secs->n++;

    for (int i = 0; i < f->ndevs; i++) {
        int ord = f->devs[i].ordinal;
        if (!ot_record_device(ord)->peak || ord < 0 || ord >= OT_MAX_DEVICES)
            continue;
        put_peak(section(secs, OT_SEC_PEAK_REF), ord, peak_shared[ord]);
    }

    ot_ring_serialize(section(secs, OT_SEC_EVENTS));
    put_markers(section(secs, OT_SEC_MARKERS));
    if (ot_record_mappings()->count)
        put_mappings(section(secs, OT_SEC_MAPPINGS));
    const struct ot_ctx_end *ends[OT_MAX_CTX_ENDS];
    size_t nends = ot_record_ctx_ends(ends);
    if (nends)
        put_ctx_freed(section(secs, OT_SEC_CTX_FREED), ends, nends);
    ot_record_release();

    put_pools(section(secs, OT_SEC_POOLS), f);
    put_threads(section(secs, OT_SEC_THREADS));
    if (f->nv)
        put_processes(section(secs, OT_SEC_PROCESSES), f->nv);
    secs->s[secs->n].type = OT_SEC_FRAMEWORK;
    if (ot_framework_serialize(&secs->s[secs->n].b))
        secs->n++;
    if (trigger == OT_TRIGGER_FRAMEWORK_OOM)
        ot_probes_take(section(secs, OT_SEC_PROBES));
    ot_pyframes_serialize(section(secs, OT_SEC_PYFRAMES));
    ot_modules_serialize(section(secs, OT_SEC_MODULES));
    if (addrs.slots) {
        /* Compact the set into a list for dladdr. */
        uint64_t k = 0;
        for (uint64_t i = 0; i <= addrs.mask; i++)
            if (addrs.slots[i])
                addrs.slots[k++] = addrs.slots[i];
        ot_symbols_serialize(section(secs, OT_SEC_SYMBOLS), addrs.slots, k);
    }
    free(addrs.slots);
    return 0;
}

void ot_sections_free(struct trace_sections *secs)
{
    for (int i = 0; i < secs->n; i++)
        ot_buf_free(&secs->s[i].b);
}
