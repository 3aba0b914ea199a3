/* Snapshots: the recorder's state written to one file, in the format of docs/FORMAT.md.
 *
 * The driver is asked about devices and pools first, without ot_lock (a driver call under our lock could
 * wait on a thread that waits on us). The state is then serialized under ot_lock, in memory; names,
 * compression and the file itself come after the lock is released. */
#include "intercept/cuda_api.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "common/buf.h"
#include "capture/modules.h"
#include "snapshot/framework.h"
#include "snapshot/nvml.h"
#include "record/record.h"
#include "record/ring.h"
#include "snapshot/snapshot.h"

#define S ot_state

static unsigned snapshot_seq;
static int warned_max, warned_flush;
int ot_flush_final;

struct devinfo {
    int ordinal;
    char name[256];
    unsigned char uuid[16];
    int has_uuid;
    int mem_known;
    size_t total, free;
};

struct poolinfo {
    uint64_t handle;
    int device;
    unsigned flags;
    uint64_t reserved, used;
};

/* ---- driver queries, made without ot_lock ---- */

static void query_device(struct devinfo *di, int ordinal, int current)
{
    memset(di, 0, sizeof *di);
    di->ordinal = ordinal;
    CUdevice dev = ordinal;
    if (ot_real.cuDeviceGet)
        ((CUresult(*)(CUdevice *, int))ot_real.cuDeviceGet)(&dev, ordinal);
    if (ot_real.cuDeviceGetName &&
        ((CUresult(*)(char *, int, CUdevice))ot_real.cuDeviceGetName)(di->name, sizeof di->name - 1, dev) !=
            CUDA_SUCCESS)
        di->name[0] = 0;
    CUuuid u;
    void *getuuid = ot_real.cuDeviceGetUuid_v2 ? ot_real.cuDeviceGetUuid_v2 : ot_real.cuDeviceGetUuid;
    if (getuuid && ((CUresult(*)(CUuuid *, CUdevice))getuuid)(&u, dev) == CUDA_SUCCESS) {
        memcpy(di->uuid, u.bytes, 16);
        di->has_uuid = 1;
    }
    /* cuMemGetInfo speaks for the current context's device only. */
    if (current && ot_real.cuMemGetInfo_v2 &&
        ((CUresult(*)(size_t *, size_t *))ot_real.cuMemGetInfo_v2)(&di->free, &di->total) == CUDA_SUCCESS)
        di->mem_known = 1;
}

static void query_pool(struct poolinfo *p)
{
    cuuint64_t v;
    CUresult (*get)(CUmemoryPool, CUmemPool_attribute, void *) =
        (CUresult(*)(CUmemoryPool, CUmemPool_attribute, void *))ot_real.cuMemPoolGetAttribute;
    if (!get) {
        p->flags |= OT_POOL_UNREADABLE;
        return;
    }
    CUmemoryPool pool = (CUmemoryPool)(uintptr_t)p->handle;
    if (get(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) == CUDA_SUCCESS)
        p->reserved = v;
    else
        p->flags |= OT_POOL_UNREADABLE;
    if (get(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v) == CUDA_SUCCESS)
        p->used = v;
    else
        p->flags |= OT_POOL_UNREADABLE;
}

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

/* ---- sections ---- */

struct section {
    uint32_t type;
    struct ot_buf b;
};

#define MAX_SECTIONS (18 + OT_MAX_DEVICES)

/* The writer's record, field by field in the order of OT_RECORD_FIELDS. */
#define REC_address(r) (r)->key
#define REC_size(r) (r)->size
#define REC_device(r) (uint64_t)(int64_t)(r)->device
#define REC_category(r) (r)->cat
#define REC_api(r) (r)->api
#define REC_flags(r) (r)->flags
#define REC_stack_id(r) (r)->stack
#define REC_tid(r) (r)->tid
#define REC_time_ns(r) (r)->time_ns
#define REC_seq(r) (r)->seq

static void put_rec(struct ot_buf *b, const struct ot_rec *r)
{
    if (ot_buf_reserve(b, OT_RECORD_NFIELDS * 10) != 0)
        return;
    uint8_t *p = b->p + b->len;
#define OT_X_PUT(col, name, coding, seq_coding, doc) p = ot_put_field(p, OT_CODING_##coding, REC_##name(r), 0);
    OT_RECORD_FIELDS(OT_X_PUT)
#undef OT_X_PUT
    b->len = (size_t)(p - b->p);
}

static void put_cmdline(struct ot_buf *b)
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

struct rank {
    long rank, local, world;
    const char *source;
};

static void read_rank(struct rank *r)
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

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

extern uint64_t ot_start_ns;
const char *ot_python_version(void);
void ot_pyframes_serialize(struct ot_buf *b);

static void put_meta(struct ot_buf *b, enum ot_trigger trigger, const char *reason, unsigned seq,
                     const struct rank *rk, const struct ot_ring_stats *rs)
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
    put_cmdline(b);
    ot_buf_cstr(b, exe);
    ot_buf_uv(b, wall_ns());
    ot_buf_uv(b, ot_now_ns());
    ot_buf_uv(b, ot_start_ns);
    ot_buf_sv(b, rk->rank);
    ot_buf_sv(b, rk->local);
    ot_buf_sv(b, rk->world);
    ot_buf_cstr(b, rk->source);
    ot_buf_uv(b, S.recorded);
    ot_buf_uv(b, rs->kept);
    ot_buf_uv(b, rs->dropped);
    ot_buf_uv(b, rs->chunks_dropped);
    ot_buf_uv(b, ot_opt.ring_bytes);
    ot_buf_uv(b, rs->used_bytes);
    ot_buf_uv(b, seq);
    ot_buf_cstr(b, ot_python_version());
    ot_buf_cstr(b, getenv("CUDA_VISIBLE_DEVICES"));
}

static void put_device(struct ot_buf *b, const struct devinfo *di)
{
    const struct ot_device *d = ot_devslot(di->ordinal);
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

struct seq_slot {
    uint64_t seq;
    uint64_t slot;
};

static void *scratch(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (bytes >= (2u << 20))
        madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

/* LSD radix sort by seq, 11 bits a pass, as many passes as the largest seq needs. Returns the sorted
 * array (a or tmp). */
static struct seq_slot *sort_by_seq(struct seq_slot *a, struct seq_slot *tmp, uint64_t n, uint64_t max_seq)
{
    enum { BITS = 11, RADIX = 1 << BITS };
    static uint64_t count[RADIX]; /* under ot_lock */
    for (unsigned shift = 0; shift < 64 && (max_seq >> shift); shift += BITS) {
        memset(count, 0, sizeof count);
        for (uint64_t i = 0; i < n; i++)
            count[(a[i].seq >> shift) & (RADIX - 1)]++;
        uint64_t sum = 0;
        for (int k = 0; k < RADIX; k++) {
            uint64_t c = count[k];
            count[k] = sum;
            sum += c;
        }
        for (uint64_t i = 0; i < n; i++)
            tmp[count[(a[i].seq >> shift) & (RADIX - 1)]++] = a[i];
        struct seq_slot *t = a;
        a = tmp;
        tmp = t;
    }
    return a;
}

/* order[k] (occupied slots, table order) with seqs[k], put in seq order. When the seqs span at most a
 * few times n (a big live set made recently), one scatter into a table indexed by seq; otherwise a radix
 * sort. Returns -1 without memory, or if two records claim one seq. */
static int sort_slots_by_seq(uint32_t *order, const uint64_t *seqs, uint64_t n, uint64_t min_seq,
                             uint64_t max_seq)
{
    uint64_t range = max_seq - min_seq + 1;
    if (range / 4 <= n) {
        uint32_t *at = scratch(range * sizeof *at);
        if (!at)
            return -1;
        int dup = 0;
        for (uint64_t k = 0; k < n; k++) {
            uint32_t *e = &at[seqs[k] - min_seq];
            dup |= *e != 0;
            *e = order[k] + 1;
        }
        uint64_t k = 0;
        for (uint64_t j = 0; j < range && k < n; j++)
            if (at[j])
                order[k++] = at[j] - 1;
        munmap(at, range * sizeof *at);
        return dup || k != n ? -1 : 0;
    }
    struct seq_slot *a = scratch(2 * n * sizeof *a);
    if (!a)
        return -1;
    for (uint64_t k = 0; k < n; k++)
        a[k] = (struct seq_slot){seqs[k], order[k]};
    struct seq_slot *sorted = sort_by_seq(a, a + n, n, max_seq);
    for (uint64_t k = 0; k < n; k++)
        order[k] = (uint32_t)sorted[k].slot;
    munmap(a, 2 * n * sizeof *a);
    return 0;
}

/* The live set, and how many of its records each device's peak set shares (PEAK_REF counts them).
 * LIVE_SEQ in seq order with delta-coded times and addresses is about half the bytes of LIVE and
 * compresses several times better; without memory for the ordering or the columns, LIVE in table
 * order. Returns the section type written. Caller holds ot_lock. */
static uint32_t put_live(struct ot_buf *b, uint64_t peak_shared[OT_MAX_DEVICES])
{
    const struct ot_liveset *l = &S.live;
    uint64_t n = l->count, k = 0, min_seq = UINT64_MAX, max_seq = 0;
    uint32_t *order = n && l->mask < UINT32_MAX ? scratch(n * sizeof *order) : NULL;
    uint64_t *seqs = order ? scratch(n * sizeof *seqs) : NULL;
    memset(peak_shared, 0, OT_MAX_DEVICES * sizeof *peak_shared);
    for (uint64_t i = 0; l->slots && i <= l->mask; i++) {
        const struct ot_rec *r = &l->slots[i];
        if (!r->size)
            continue;
        if (seqs && k < n) {
            order[k] = (uint32_t)i;
            seqs[k] = r->seq;
            min_seq = r->seq < min_seq ? r->seq : min_seq;
            max_seq = r->seq > max_seq ? r->seq : max_seq;
        }
        k++;
        if (r->device >= 0 && r->device < OT_MAX_DEVICES &&
            ot_peak_ref_shares(r->device, r->cat, r->seq, r->device, S.dev[r->device].peak_seq))
            peak_shared[r->device]++;
    }
    int ordered = seqs && k == n && sort_slots_by_seq(order, seqs, n, min_seq, max_seq) == 0;
    if (seqs)
        munmap(seqs, n * sizeof *seqs);
    /* Column by column (docs/FORMAT.md): a column that barely changes (device, category, api, tid)
     * compresses to almost nothing and at memory speed, where the same bytes interleaved record by
     * record cost zstd a match search each. */
    enum { AHEAD = 16, NCOL = OT_RECORD_NFIELDS }; /* seq order is a random walk over the table: keep misses in flight */
    size_t cap = (size_t)n * 10; /* a varint takes at most 10 bytes; only touched pages cost memory */
    uint8_t *cols = ordered ? scratch(NCOL * cap) : NULL, *end[NCOL];
    ot_buf_uv(b, n);
    if (!cols) {
        if (order)
            munmap(order, n * sizeof *order);
        for (uint64_t i = 0; l->slots && i <= l->mask; i++)
            if (l->slots[i].size)
                put_rec(b, &l->slots[i]);
        return OT_SEC_LIVE;
    }
    for (int c = 0; c < NCOL; c++)
        end[c] = cols + c * cap;
    struct ot_rec prev = {0};
    for (uint64_t i = 0; i < n; i++) {
        if (i + AHEAD < n) {
            const char *next = (const char *)&l->slots[order[i + AHEAD]];
            __builtin_prefetch(next);
            __builtin_prefetch(next + sizeof(struct ot_rec) - 1);
        }
        const struct ot_rec *r = &l->slots[order[i]];
#define OT_X_COL(col, name, coding, seq_coding, doc)                                                   \
    end[col] = ot_put_field(end[col], OT_CODING_##seq_coding, REC_##name(r), REC_##name(&prev));
        OT_RECORD_FIELDS(OT_X_COL)
#undef OT_X_COL
        prev = *r;
    }
    for (int c = 0; c < NCOL; c++)
        ot_buf_put(b, cols + c * cap, (size_t)(end[c] - (cols + c * cap)));
    munmap(cols, NCOL * cap);
    munmap(order, n * sizeof *order);
    return OT_SEC_LIVE_SEQ;
}

/* The live set at one device's peak (lib/peak.c says why it is exact), by reference: the records it
 * shares with the live set are those of LIVE on this device, in device categories, with seq <= peak_seq;
 * only the records freed since the peak are written. */
static void put_peak(struct ot_buf *b, int ordinal, uint64_t shared)
{
    const struct ot_device *d = ot_devslot(ordinal);
    ot_buf_sv(b, ordinal);
    ot_buf_uv(b, d->peak);
    ot_buf_uv(b, d->peak_time);
    ot_buf_uv(b, d->peak_seq);
    ot_buf_uv(b, shared + d->nretained);
    ot_buf_uv(b, d->lost);
    ot_buf_uv(b, d->nretained);
    for (uint64_t i = 0; i < d->nretained; i++)
        put_rec(b, &d->retained[i]);
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
        p = ot_put_uvarint(p, v.flags);
        p = ot_put_uvarint(p, v.n);
        for (uint32_t i = 0; i < v.n; i++) {
            p = ot_put_uvarint(p, v.frames[i]);
            if (!(v.frames[i] & OT_FRAME_PYTHON))
                addrset_add(addrs, v.frames[i] >> 1);
        }
        b->len = (size_t)(p - b->p);
    }
}

static int cmp_marker(const void *a, const void *b)
{
    uint64_t x = (*(const struct ot_marker *const *)a)->seq, y = (*(const struct ot_marker *const *)b)->seq;
    return x < y ? -1 : x > y;
}

/* The recent markers and those pinned at each device's peak, by seq, each once. */
static void put_markers(struct ot_buf *b)
{
    enum { CAP = OT_MAX_MARKERS + OT_MAX_DEVICES * OT_PEAK_MARKERS };
    const struct ot_marker **v = malloc(CAP * sizeof *v);
    if (!v) {
        b->oom = 1;
        return;
    }
    size_t n = 0;
    uint64_t recent = S.nmarkers < OT_MAX_MARKERS ? S.nmarkers : OT_MAX_MARKERS;
    for (uint64_t i = S.nmarkers - recent; i < S.nmarkers; i++)
        v[n++] = &S.markers[i % OT_MAX_MARKERS];
    for (int d = 0; d < OT_MAX_DEVICES; d++)
        for (int i = 0; i < OT_PEAK_MARKERS; i++)
            if (S.peak_markers[d][i].seq)
                v[n++] = &S.peak_markers[d][i];
    qsort(v, n, sizeof *v, cmp_marker);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!k || v[i]->seq != v[k - 1]->seq)
            v[k++] = v[i];
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
    const struct ot_liveset *m = &S.maps;
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

static void put_failure(struct ot_buf *b, const struct ot_failure *f)
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

/* ---- the file ---- */

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int write_section(int fd, struct section *s, ZSTD_CCtx *cctx)
{
    struct ot_section_header h = {.type = s->type, .flags = 0, .stored_len = s->b.len, .raw_len = s->b.len};
    const void *payload = s->b.p;
    void *z = NULL;
    /* EVENTS chunks are compressed already; small sections are not worth a frame. */
    if (s->type != OT_SEC_EVENTS && s->b.len > 512 && cctx) {
        size_t bound = ZSTD_compressBound(s->b.len);
        z = malloc(bound);
        size_t zn = z ? ZSTD_compressCCtx(cctx, z, bound, s->b.p, s->b.len, 1) : 0;
        if (z && !ZSTD_isError(zn) && zn < s->b.len) {
            h.flags = OT_SECTION_ZSTD;
            h.stored_len = zn;
            payload = z;
        }
    }
    int rc = write_all(fd, &h, sizeof h) || write_all(fd, payload, (size_t)h.stored_len) ? -1 : 0;
    free(z);
    return rc;
}

/* oomtrace-HOST-PID[-rankR]-TAG.oomt, with '/' and ' ' kept out of the host part. */
static void snapshot_name(char *path, size_t len, const char *tag, const struct rank *rk)
{
    char host[128] = "";
    gethostname(host, sizeof host - 1);
    for (char *c = host; *c; c++)
        if (*c == '/' || *c == ' ')
            *c = '_';
    char rank[32] = "";
    if (rk->rank >= 0)
        snprintf(rank, sizeof rank, "-rank%ld", rk->rank);
    snprintf(path, len, "%s/oomtrace-%s-%d%s-%s.oomt", ot_opt.dir, host, (int)getpid(), rank, tag);
}

/* Never follow a link planted in the directory, never overwrite. */
static int create_private(const char *path)
{
    return open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

static int open_snapshot(char *path, size_t len, enum ot_trigger trigger, unsigned seq, const struct rank *rk)
{
    for (unsigned attempt = 0; attempt < 100; attempt++) {
        char tag[48];
        snprintf(tag, sizeof tag, attempt ? "%u-%s.%u" : "%u-%s", seq, ot_trigger_name(trigger), attempt);
        snapshot_name(path, len, tag, rk);
        int fd = create_private(path);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

/* The crash-surviving trace is one file per process, replaced as a whole at each flush (written beside it,
 * then renamed over it), so a kill at any moment leaves the last complete flush. */
static int open_flush(char *tmp, size_t len, char *final, const struct rank *rk)
{
    snapshot_name(final, len - 8, "flush", rk);
    snprintf(tmp, len, "%.1000s.tmp", final);
    unlink(tmp); /* our own leftover from a flush that failed */
    return create_private(tmp);
}

void ot_flush_file_remove(void)
{
    struct rank rk;
    read_rank(&rk);
    char path[1024];
    snapshot_name(path, sizeof path, "flush", &rk);
    unlink(path);
}

/* The final flush after a fatal signal must not wait forever on a lock the crashing thread may hold. */
static int lock_state(int flush)
{
    if (!flush || !ot_flush_final)
        return pthread_mutex_lock(&ot_lock);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    return pthread_mutex_timedlock(&ot_lock, &until);
}

int ot_snapshot_write(enum ot_trigger trigger, const char *reason)
{
    int saved_errno = errno;
    int was_busy = ot_self.busy;
    ot_self.busy = 1;
    int rc = -1;
    /* The writer opens, reads and writes files (cancellation points), some under ot_lock: a thread
     * cancelled there would leave the lock owned by a thread that no longer exists, and a file half made.
     * A cancel requested meanwhile acts at the program's next cancellation point. */
    int cancel_state;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);

    int flush = trigger == OT_TRIGGER_FLUSH;
    unsigned seq = flush ? 0 : __atomic_add_fetch(&snapshot_seq, 1, __ATOMIC_RELAXED);
    if (!flush && ot_opt.max_snapshots && seq > (unsigned)ot_opt.max_snapshots) {
        if (!__atomic_exchange_n(&warned_max, 1, __ATOMIC_RELAXED))
            ot_log("OOMTRACE_MAX_SNAPSHOTS=%d reached; no more snapshots from pid %d", ot_opt.max_snapshots,
                   (int)getpid());
        goto out;
    }

    /* Which devices, and which pools: a short look under the lock, then the driver without it. */
    uint64_t seen = 0, async = 0;
    struct poolinfo pools[OT_MAX_POOLS + 2 * OT_MAX_DEVICES];
    int npools = 0;
    if (lock_state(flush) != 0)
        goto out;
    for (int d = 0; d < OT_MAX_DEVICES; d++)
        if (S.dev[d].seen || S.dev[d].peak || S.dev[d].by_cat[OT_CAT_IMPORTED])
            seen |= 1ull << d;
    if (S.failure.valid && S.failure.req.device >= 0 && S.failure.req.device < OT_MAX_DEVICES)
        seen |= 1ull << S.failure.req.device;
    async = S.async_devices;
    for (int i = 0; i < S.npools; i++)
        pools[npools++] = (struct poolinfo){.handle = S.pools[i].handle, .device = S.pools[i].device};
    pthread_mutex_unlock(&ot_lock);

    int current = ot_real.cuCtxGetDevice ? ot_current_device() : -1;
    if (current >= 0 && current < OT_MAX_DEVICES)
        seen |= 1ull << current;
    struct devinfo *devs = calloc(OT_MAX_DEVICES, sizeof *devs);
    int ndevs = 0;
    for (int d = 0; devs && d < OT_MAX_DEVICES; d++)
        if (seen & (1ull << d))
            query_device(&devs[ndevs++], d, d == current);
    for (int d = 0; d < OT_MAX_DEVICES; d++) {
        if (!(async & (1ull << d)) || !ot_real.cuDeviceGetDefaultMemPool)
            continue;
        CUmemoryPool p;
        CUdevice dev = d;
        if (((CUresult(*)(CUmemoryPool *, CUdevice))ot_real.cuDeviceGetDefaultMemPool)(&p, dev) != CUDA_SUCCESS)
            continue;
        int dup = 0;
        for (int i = 0; i < npools; i++)
            dup |= pools[i].handle == (uint64_t)(uintptr_t)p;
        if (!dup)
            pools[npools++] = (struct poolinfo){.handle = (uint64_t)(uintptr_t)p, .device = d, .flags = OT_POOL_DEFAULT};
        else
            for (int i = 0; i < npools; i++)
                if (pools[i].handle == (uint64_t)(uintptr_t)p)
                    pools[i].flags |= OT_POOL_DEFAULT;
    }
    for (int i = 0; i < npools; i++)
        query_pool(&pools[i]);

    /* Other processes on these devices, and the memory of devices cuMemGetInfo cannot speak for. */
    struct ot_nvml *nv = trigger != OT_TRIGGER_FLUSH ? calloc(1, sizeof *nv) : NULL;
    if (nv && devs) {
        struct ot_nvml_device nd[OT_MAX_DEVICES];
        for (int i = 0; i < ndevs; i++)
            nd[i] = (struct ot_nvml_device){devs[i].ordinal, devs[i].has_uuid, {0}};
        for (int i = 0; i < ndevs; i++)
            memcpy(nd[i].uuid, devs[i].uuid, 16);
        ot_nvml_query(nv, nd, ndevs);
        for (int i = 0; i < ndevs; i++)
            if (!devs[i].mem_known && nv->mem[i].known) {
                devs[i].mem_known = 1;
                devs[i].total = nv->mem[i].total;
                devs[i].free = nv->mem[i].free;
            }
    }

    struct rank rk;
    read_rank(&rk);

    struct section secs[MAX_SECTIONS];
    int nsec = 0;
    memset(secs, 0, sizeof secs);
    struct addrset addrs = {calloc(1024, sizeof(uint64_t)), 1023, 0};

    if (lock_state(flush) != 0) {
        free(addrs.slots);
        free(devs);
        free(nv);
        goto out;
    }
    struct ot_ring_stats rs;
    ot_ring_stats(&rs);
    secs[nsec].type = OT_SEC_META;
    put_meta(&secs[nsec++].b, trigger, reason, seq, &rk, &rs);

    secs[nsec].type = OT_SEC_DEVICES;
    ot_buf_uv(&secs[nsec].b, (uint64_t)ndevs);
    for (int i = 0; i < ndevs; i++)
        put_device(&secs[nsec].b, &devs[i]);
    nsec++;

    /* A framework OOM's FAILURE is the framework's request (api framework_allocator). */
    struct ot_failure failed = S.failure;
    int has_failure = (trigger == OT_TRIGGER_OOM || trigger == OT_TRIGGER_FRAMEWORK_OOM) && failed.valid;
    if (has_failure) {
        secs[nsec].type = OT_SEC_FAILURE;
        put_failure(&secs[nsec++].b, &failed);
    }

    secs[nsec].type = OT_SEC_STACKS;
    put_stacks(&secs[nsec++].b, &addrs);

    uint64_t peak_shared[OT_MAX_DEVICES];
    secs[nsec].type = put_live(&secs[nsec].b, peak_shared);
    nsec++;

    for (int i = 0; i < ndevs; i++) {
        int ord = devs[i].ordinal;
        if (!ot_devslot(ord)->peak || ord < 0 || ord >= OT_MAX_DEVICES)
            continue;
        secs[nsec].type = OT_SEC_PEAK_REF;
        put_peak(&secs[nsec++].b, ord, peak_shared[ord]);
    }

    secs[nsec].type = OT_SEC_EVENTS;
    ot_ring_serialize(&secs[nsec++].b);

    secs[nsec].type = OT_SEC_MARKERS;
    put_markers(&secs[nsec++].b);

    if (S.maps.count) {
        secs[nsec].type = OT_SEC_MAPPINGS;
        put_mappings(&secs[nsec++].b);
    }
    pthread_mutex_unlock(&ot_lock);

    secs[nsec].type = OT_SEC_POOLS;
    ot_buf_uv(&secs[nsec].b, (uint64_t)npools);
    for (int i = 0; i < npools; i++) {
        ot_buf_uv(&secs[nsec].b, pools[i].handle);
        ot_buf_sv(&secs[nsec].b, pools[i].device);
        ot_buf_uv(&secs[nsec].b, pools[i].flags);
        ot_buf_uv(&secs[nsec].b, pools[i].reserved);
        ot_buf_uv(&secs[nsec].b, pools[i].used);
    }
    nsec++;

    if (nv) {
        secs[nsec].type = OT_SEC_PROCESSES;
        struct ot_buf *b = &secs[nsec++].b;
        ot_buf_uv(b, (uint64_t)nv->source);
        ot_buf_cstr(b, nv->note);
        ot_buf_uv(b, (uint64_t)nv->nprocs);
        for (int i = 0; i < nv->nprocs; i++) {
            ot_buf_sv(b, nv->procs[i].device);
            ot_buf_uv(b, nv->procs[i].pid);
            ot_buf_uv(b, nv->procs[i].used);
            ot_buf_cstr(b, nv->procs[i].name);
        }
        free(nv);
    }

    secs[nsec].type = OT_SEC_FRAMEWORK;
    if (ot_framework_serialize(&secs[nsec].b))
        nsec++;
    if (trigger == OT_TRIGGER_FRAMEWORK_OOM) {
        secs[nsec].type = OT_SEC_PROBES;
        ot_probes_take(&secs[nsec++].b);
    }

    secs[nsec].type = OT_SEC_PYFRAMES;
    ot_pyframes_serialize(&secs[nsec++].b);

    secs[nsec].type = OT_SEC_MODULES;
    ot_modules_serialize(&secs[nsec++].b);

    if (addrs.slots) {
        /* Compact the set into a list for dladdr. */
        uint64_t k = 0;
        for (uint64_t i = 0; i <= addrs.mask; i++)
            if (addrs.slots[i])
                addrs.slots[k++] = addrs.slots[i];
        secs[nsec].type = OT_SEC_SYMBOLS;
        ot_symbols_serialize(&secs[nsec++].b, addrs.slots, k);
    }
    free(addrs.slots);
    free(devs);

    int oom = 0;
    for (int i = 0; i < nsec; i++)
        oom |= secs[i].b.oom;
    char path[1024], final[1024];
    int fd = -1;
    if (oom) {
        ot_log("not enough memory to build a snapshot (trigger %s); none written", ot_trigger_name(trigger));
    } else if ((fd = flush ? open_flush(path, sizeof path, final, &rk)
                           : open_snapshot(path, sizeof path, trigger, seq, &rk)) < 0) {
        /* Said once: at the first allocation when the directory was already unusable, else here. */
        if (!ot_dir_warned && (!flush || !__atomic_exchange_n(&warned_flush, 1, __ATOMIC_RELAXED)))
            ot_log("cannot create a snapshot in %s: %s", ot_opt.dir, strerror(errno));
    } else {
        /* A flush is not a finished file: if it is what remains, the process did not finish. */
        struct ot_file_header fh = {.version_major = OT_VERSION_MAJOR, .version_minor = OT_VERSION_MINOR,
                                    .flags = flush ? 0 : OT_FILE_COMPLETE};
        memcpy(fh.magic, OT_MAGIC, 8);
        ZSTD_CCtx *cctx = ZSTD_createCCtx();
        int bad = write_all(fd, &fh, sizeof fh);
        for (int i = 0; i < nsec && !bad; i++)
            bad = write_section(fd, &secs[i], cctx);
        ZSTD_freeCCtx(cctx);
        int err = errno;
        if (close(fd) != 0 && !bad) {
            bad = 1;
            err = errno;
        }
        if (!bad && flush && rename(path, final) != 0) {
            bad = 1;
            err = errno;
        }
        if (bad) {
            if (!flush || !__atomic_exchange_n(&warned_flush, 1, __ATOMIC_RELAXED))
                ot_log("cannot write snapshot %s: %s; removed the partial file", path, strerror(err));
            unlink(path);
        } else if (flush) {
            rc = 0;
        } else {
            rc = 0;
            /* The framework OOM that may follow lists it as one of its probes. */
            if (trigger == OT_TRIGGER_OOM && has_failure)
                ot_probe_note(path, failed.seq, failed.req.size, failed.req.device);
            if (!ot_opt.quiet)
                ot_log("snapshot written: %s (%s)", path, ot_trigger_name(trigger));
        }
    }
    for (int i = 0; i < nsec; i++)
        ot_buf_free(&secs[i].b);
out:
    pthread_setcancelstate(cancel_state, NULL);
    ot_self.busy = was_busy;
    errno = saved_errno;
    return rc;
}
