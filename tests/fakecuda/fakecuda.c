/* fakecuda: a stand-in libcuda.so.1 for CI machines without a GPU (see README.md next to this file).
 *
 * It simulates FAKECUDA_DEVICES devices of FAKECUDA_CAPACITY bytes each and keeps exact books of what
 * this process holds on each of them, so tests of an allocation tracer can provoke out-of-memory at a
 * chosen point and compare the tracer's numbers against ground truth (the fakecuda_* hooks below).
 *
 * Rules this file keeps:
 *  - Every exported cu* function is a thin wrapper over static code. Nothing in here calls an exported
 *    symbol: a tracer preloaded in front of us interposes those names, and an internal call through one
 *    would be recorded twice. -Wl,-Bsymbolic (Makefile) makes the addresses in the cuGetProcAddress table
 *    our own definitions, the same ones dlsym(handle, name) returns.
 *  - One mutex guards all state. The environment is read once, on the first call into the library.
 *  - A failed call leaves its out-parameters untouched, so a test can see that an OOM wrote nothing.
 *  - Device addresses are fake (never dereferenced) and never reused within a run; pinned host memory
 *    is real memory from the C heap. */
#include <cuda.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* cuda.h maps these names to their newest ABI; we export the old ABIs under the plain names too. */
#undef cuGetProcAddress
#undef cuDeviceGetUuid

#define API __attribute__((visibility("default")))

/* Exported entry points that cuda.h does not declare in this configuration. */
API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
API CUresult cuStreamSynchronize_ptsz(CUstream hStream);
API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
API size_t fakecuda_used_bytes(int dev);
API size_t fakecuda_host_bytes(void);
API int fakecuda_live_count(int dev);
API void fakecuda_refuse_next(const char *name);

#define MAX_DEVICES 16
#define VA_ALIGN 512ull            /* cuMemAlloc alignment of the real driver */
#define POOL_CHUNK (2ull << 20)    /* stream-ordered pools grow and shrink in these steps */
#define HOST_ALIGN 4096ull

/* Fake address regions: one per device, one for VMM reservations, one for opened IPC handles. Each is
 * a bump allocator so an address, once handed out, is never handed out again in this run. */
#define DEV_VA_BASE 0x100000000000ull
#define DEV_VA_SPAN 0x040000000000ull /* 4 TiB of address space per device */
#define VMM_VA_BASE 0x600000000000ull
#define VMM_VA_SPAN 0x100000000000ull
#define IPC_VA_BASE 0x700000000000ull
#define IPC_VA_SPAN 0x0f0000000000ull

/* Opaque handles (contexts, streams, pools, arrays, VMM handles) are tagged integers, not pointers to
 * our memory, so a garbage handle is rejected instead of dereferenced. Layout: tag<<48 | serial<<8 | dev. */
#define TAG_CTX 0xFC01ull
#define TAG_STREAM 0xFC02ull
#define TAG_POOL 0xFC03ull
#define TAG_ARRAY 0xFC04ull
#define TAG_MIPMAP 0xFC05ull
#define TAG_VMM 0xFC06ull

static uint64_t mk_handle(uint64_t tag, uint64_t serial, int dev)
{
    return tag << 48 | (serial & 0xFFFFFFFFFFull) << 8 | (uint64_t)(dev & 0xFF);
}

static int handle_is(uint64_t h, uint64_t tag) { return (h >> 48) == tag; }
static int handle_dev(uint64_t h) { return (int)(h & 0xFF); }
static uint64_t handle_serial(uint64_t h) { return (h >> 8) & 0xFFFFFFFFFFull; }

/* ---------------------------------------------------------------------------------------------- */
/* Configuration                                                                                    */

static struct {
    int ndev;
    size_t capacity, baseline, other, granularity;
    int driver_version;
} cfg;

/* Accepts "123", "64K", "2M", "1G", "1T" (binary multiples; an optional "B" or "iB" may follow). */
static int parse_bytes(const char *s, size_t *out)
{
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s < '0' || *s > '9')
        return -1; /* strtoull would take "-1" as a huge number */
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    case 't': case 'T': shift = 40; break;
    }
    if (shift) {
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
    }
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end || v > (SIZE_MAX >> shift))
        return -1;
    *out = (size_t)v << shift;
    return 0;
}

static size_t env_bytes(const char *name, size_t def)
{
    const char *s = getenv(name);
    size_t v;
    if (!s || !*s)
        return def;
    if (parse_bytes(s, &v) == 0)
        return v;
    fprintf(stderr, "fakecuda: ignoring %s=%s (not a byte count), using %zu\n", name, s, def);
    return def;
}

static long env_long(const char *name, long def, long lo, long hi)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) {
        fprintf(stderr, "fakecuda: ignoring %s=%s (want %ld..%ld), using %ld\n", name, s, lo, hi, def);
        return def;
    }
    return v;
}

/* ---------------------------------------------------------------------------------------------- */
/* State                                                                                            */

struct region {
    uint64_t next, end;
};

enum rec_kind {
    R_MEM,      /* cuMemAlloc */
    R_PITCH,    /* cuMemAllocPitch */
    R_MANAGED,  /* cuMemAllocManaged */
    R_POOLMEM,  /* cuMemAllocAsync / FromPoolAsync: charged to its pool, not directly */
    R_HOST,     /* cuMemAllocHost / cuMemHostAlloc */
    R_HOSTREG,  /* cuMemHostRegister */
    R_ARRAY,    /* cuArrayCreate / cuArray3DCreate */
    R_MIPMAP,   /* cuMipmappedArrayCreate */
    R_PHYS,     /* cuMemCreate / cuMemImportFromShareableHandle */
    R_IPC,      /* cuIpcOpenMemHandle */
};

struct pool;

/* One record per live object, kept in a hash map keyed by its address or handle. */
struct rec {
    struct rec *next;
    uint64_t key;
    enum rec_kind kind;
    int dev;              /* -1 for host memory */
    size_t size;          /* bytes; for device kinds other than R_POOLMEM, R_IPC and imported
                           * R_PHYS this is exactly what the object charges to dev */
    struct pool *pool;    /* R_POOLMEM */
    int handle_refs;      /* R_PHYS: creation + retains; R_IPC: opens */
    int map_refs;         /* R_PHYS: live cuMemMap mappings */
    int imported;         /* R_PHYS: from another export; charges nothing here */
    CUmemAllocationProp prop; /* R_PHYS */
    uint64_t ipc_base;    /* R_IPC: exporter's address and pid identify the allocation */
    uint32_t ipc_pid;
};

struct map {
    struct rec **b;
    unsigned bits;
    size_t n;
};

struct pool {
    uint64_t id;
    int dev;
    int is_default, destroyed;
    size_t reserved, used, reserved_high, used_high, max_size;
    cuuint64_t release_threshold;
    int reuse[3];
    CUmemPoolProps props;
};

struct device {
    size_t used;           /* capacity this process holds on the device */
    int live;              /* user-visible live allocations (fakecuda_live_count) */
    struct region va;
    struct pool *cur_pool; /* cuDeviceGetMemPool / cuDeviceSetMemPool */
};

struct resv {
    struct resv *next;
    uint64_t base;
    size_t size;
};

struct mapping {
    struct mapping *next;
    uint64_t base;
    size_t size;
    struct rec *phys;
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static struct device devs[MAX_DEVICES];
static struct pool default_pools[MAX_DEVICES];
static struct pool **pools; /* indexed by pool id; NULL once destroyed */
static size_t npools, pools_cap;
static struct map mem_map, host_map, array_map, phys_map, ipc_map;
static struct region vmm_va, ipc_va;
static struct resv *resvs;
static struct mapping *mappings;
static size_t host_bytes;
static uint64_t next_serial = 1; /* contexts, streams, arrays, VMM handles */

/* The current context of this thread. Until the thread sets one, it behaves as if device 0's primary
 * context were current, so tests need no setup; after cuCtxSetCurrent(NULL) it has none. */
static __thread int tl_ctx_set;
static __thread uint64_t tl_ctx;

static void lock(void) { pthread_mutex_lock(&mu); }
static void unlock(void) { pthread_mutex_unlock(&mu); }

/* A child forked while another thread was inside the driver would otherwise inherit mu held and hang on
 * its first call (tests/doors/fork_workload.c forks while a thread allocates in a loop). */
static void fork_prepare(void) { lock(); }
static void fork_done(void) { unlock(); }

static int add_pool_locked(struct pool *p)
{
    if (npools == pools_cap) {
        size_t cap = pools_cap ? 2 * pools_cap : 32;
        struct pool **np = realloc(pools, cap * sizeof *np);
        if (!np)
            return -1;
        pools = np;
        pools_cap = cap;
    }
    p->id = npools;
    pools[npools++] = p;
    return 0;
}

static void init(void)
{
    cfg.ndev = (int)env_long("FAKECUDA_DEVICES", 1, 0, MAX_DEVICES);
    cfg.capacity = env_bytes("FAKECUDA_CAPACITY", 1ull << 30);
    cfg.baseline = env_bytes("FAKECUDA_BASELINE", 0);
    cfg.other = env_bytes("FAKECUDA_OTHER_USED", 0);
    cfg.granularity = env_bytes("FAKECUDA_GRANULARITY", 2ull << 20);
    if (cfg.granularity < VA_ALIGN || (cfg.granularity & (cfg.granularity - 1))) {
        fprintf(stderr, "fakecuda: FAKECUDA_GRANULARITY must be a power of two >= 512, using 2M\n");
        cfg.granularity = 2ull << 20;
    }
    cfg.driver_version = (int)env_long("FAKECUDA_DRIVER_VERSION", 13000, 1000, 1000000);
    pthread_atfork(fork_prepare, fork_done, fork_done);

    for (int d = 0; d < MAX_DEVICES; d++) {
        devs[d].va.next = DEV_VA_BASE + (uint64_t)d * DEV_VA_SPAN;
        devs[d].va.end = devs[d].va.next + DEV_VA_SPAN;
    }
    vmm_va = (struct region){VMM_VA_BASE, VMM_VA_BASE + VMM_VA_SPAN};
    ipc_va = (struct region){IPC_VA_BASE, IPC_VA_BASE + IPC_VA_SPAN};

    /* Default pools take ids 0..ndev-1. */
    for (int d = 0; d < cfg.ndev; d++) {
        struct pool *p = &default_pools[d];
        p->dev = d;
        p->is_default = 1;
        p->props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        p->props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        p->props.location.id = d;
        p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
        if (add_pool_locked(p)) {
            fprintf(stderr, "fakecuda: out of memory at start-up\n");
            abort();
        }
        devs[d].cur_pool = p;
    }
}

static void enter(void) { pthread_once(&init_once, init); }

static int dev_ok(int dev) { return dev >= 0 && dev < cfg.ndev; }

/* Capacity this process may hold on one device. */
static size_t limit_bytes(void)
{
    size_t taken = cfg.baseline + cfg.other;
    if (taken < cfg.baseline || taken >= cfg.capacity)
        return 0;
    return cfg.capacity - taken;
}

static CUresult charge(int dev, size_t n)
{
    size_t lim = limit_bytes();
    if (n > lim || devs[dev].used > lim - n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    devs[dev].used += n;
    return CUDA_SUCCESS;
}

static void uncharge(int dev, size_t n) { devs[dev].used -= n; }

static int round_up(size_t v, size_t a, size_t *out)
{
    if (v > SIZE_MAX - (a - 1))
        return -1;
    *out = (v + a - 1) & ~(a - 1);
    return 0;
}

/* Returns 0 when the region is exhausted (that is reported as out of memory). */
static uint64_t region_take(struct region *r, size_t size, size_t align)
{
    uint64_t base = (r->next + align - 1) & ~(uint64_t)(align - 1);
    size_t span;
    if (round_up(size, VA_ALIGN, &span) || base < r->next || base >= r->end || span > r->end - base)
        return 0;
    r->next = base + span;
    return base;
}

/* ---------------------------------------------------------------------------------------------- */
/* Hash map of records                                                                              */

static size_t map_slot(const struct map *m, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - m->bits));
}

static int map_grow(struct map *m)
{
    unsigned bits = m->bits ? m->bits + 1 : 8;
    size_t nb = (size_t)1 << bits;
    struct rec **b = calloc(nb, sizeof *b);
    if (!b)
        return -1;
    struct map nm = {b, bits, m->n};
    for (size_t i = 0; m->b && i < ((size_t)1 << m->bits); i++) {
        struct rec *r = m->b[i], *nx;
        for (; r; r = nx) {
            nx = r->next;
            size_t s = map_slot(&nm, r->key);
            r->next = b[s];
            b[s] = r;
        }
    }
    free(m->b);
    *m = nm;
    return 0;
}

static int map_put(struct map *m, struct rec *r)
{
    /* A failed grow is fine while a table exists: chains just get longer. */
    if ((!m->b || m->n >= ((size_t)1 << m->bits)) && map_grow(m) && !m->b)
        return -1;
    size_t s = map_slot(m, r->key);
    r->next = m->b[s];
    m->b[s] = r;
    m->n++;
    return 0;
}

static struct rec *map_get(const struct map *m, uint64_t key)
{
    if (!m->b)
        return NULL;
    for (struct rec *r = m->b[map_slot(m, key)]; r; r = r->next)
        if (r->key == key)
            return r;
    return NULL;
}

static void map_del(struct map *m, struct rec *r)
{
    struct rec **pp = &m->b[map_slot(m, r->key)];
    while (*pp != r)
        pp = &(*pp)->next;
    *pp = r->next;
    m->n--;
}

/* Calls fn on every record until it returns nonzero; returns that record. */
static struct rec *map_find(const struct map *m, int (*fn)(const struct rec *, const void *), const void *arg)
{
    for (size_t i = 0; m->b && i < ((size_t)1 << m->bits); i++)
        for (struct rec *r = m->b[i]; r; r = r->next)
            if (fn(r, arg))
                return r;
    return NULL;
}

static struct rec *rec_new(enum rec_kind kind, uint64_t key, int dev, size_t size)
{
    struct rec *r = calloc(1, sizeof *r);
    if (r) {
        r->kind = kind;
        r->key = key;
        r->dev = dev;
        r->size = size;
    }
    return r;
}

/* ---------------------------------------------------------------------------------------------- */
/* Contexts and streams                                                                             */

/* The device of the calling thread's current context. Caller holds no lock (only thread-locals). */
static CUresult cur_dev(int *dev)
{
    int d = 0;
    if (tl_ctx_set) {
        if (!tl_ctx)
            return CUDA_ERROR_INVALID_CONTEXT;
        d = handle_dev(tl_ctx);
    }
    if (!dev_ok(d))
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = d;
    return CUDA_SUCCESS;
}

static int ctx_decode(CUcontext ctx, int *dev)
{
    uint64_t h = (uint64_t)(uintptr_t)ctx;
    if (!handle_is(h, TAG_CTX) || !dev_ok(handle_dev(h)))
        return -1;
    *dev = handle_dev(h);
    return 0;
}

/* The device a stream belongs to; the null and special streams belong to the current context. */
static CUresult stream_dev(CUstream s, int *dev)
{
    uint64_t h = (uint64_t)(uintptr_t)s;
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
        return cur_dev(dev);
    if (!handle_is(h, TAG_STREAM) || !dev_ok(handle_dev(h)))
        return CUDA_ERROR_INVALID_HANDLE;
    *dev = handle_dev(h);
    return CUDA_SUCCESS;
}

static uint64_t new_serial_locked(void) { return next_serial++; }

static CUresult ctx_create(CUcontext *pctx, CUdevice dev)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    lock();
    uint64_t h = mk_handle(TAG_CTX, new_serial_locked(), dev);
    unlock();
    tl_ctx_set = 1;
    tl_ctx = h;
    *pctx = (CUcontext)(uintptr_t)h;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------- */
/* Device memory                                                                                    */

/* Hands out a fresh address on dev and records it. The caller has charged the capacity already. */
static CUresult mem_new_locked(int dev, size_t size, enum rec_kind kind, struct pool *p, CUdeviceptr *out)
{
    uint64_t a = region_take(&devs[dev].va, size, VA_ALIGN);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct rec *r = rec_new(kind, a, dev, size);
    if (!r || map_put(&mem_map, r)) {
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r->pool = p;
    devs[dev].live++;
    *out = a;
    return CUDA_SUCCESS;
}

static CUresult mem_alloc(int dev, size_t charged, size_t size, enum rec_kind kind, CUdeviceptr *out)
{
    lock();
    CUresult rc = charge(dev, charged);
    if (rc == CUDA_SUCCESS && (rc = mem_new_locked(dev, size, kind, NULL, out)) != CUDA_SUCCESS)
        uncharge(dev, charged);
    unlock();
    return rc;
}

static CUresult alloc_plain(CUdeviceptr *dptr, size_t size, enum rec_kind kind)
{
    int dev;
    CUresult rc;
    if (!dptr || !size)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = cur_dev(&dev)))
        return rc;
    return mem_alloc(dev, size, size, kind, dptr);
}

static void pool_delete_locked(struct pool *p)
{
    uncharge(p->dev, p->reserved);
    if (devs[p->dev].cur_pool == p)
        devs[p->dev].cur_pool = &default_pools[p->dev];
    pools[p->id] = NULL;
    free(p);
}

static void pool_put_used_locked(struct pool *p, size_t n)
{
    p->used -= n;
    if (p->destroyed && p->used == 0)
        pool_delete_locked(p);
}

static CUresult mem_free(CUdeviceptr dptr)
{
    if (!dptr)
        return CUDA_SUCCESS; /* free(NULL) semantics, as the real driver */
    lock();
    struct rec *r = map_get(&mem_map, dptr);
    if (!r) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    map_del(&mem_map, r);
    devs[r->dev].live--;
    if (r->kind == R_POOLMEM)
        pool_put_used_locked(r->pool, r->size);
    else
        uncharge(r->dev, r->size);
    unlock();
    free(r);
    return CUDA_SUCCESS;
}

static CUresult mem_alloc_pitch(CUdeviceptr *dptr, size_t *ppitch, size_t width, size_t height, unsigned elem)
{
    int dev;
    size_t pitch, bytes;
    CUresult rc;
    if (!dptr || !ppitch || !width || !height || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = cur_dev(&dev)))
        return rc;
    if (round_up(width, VA_ALIGN, &pitch) || __builtin_mul_overflow(pitch, height, &bytes))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUdeviceptr p;
    if ((rc = mem_alloc(dev, bytes, bytes, R_PITCH, &p)))
        return rc;
    *dptr = p;
    *ppitch = pitch;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------- */
/* Stream-ordered allocation                                                                        */

static struct pool *pool_get_locked(CUmemoryPool h)
{
    uint64_t v = (uint64_t)(uintptr_t)h;
    if (!handle_is(v, TAG_POOL) || handle_serial(v) >= npools)
        return NULL;
    struct pool *p = pools[handle_serial(v)];
    return p && !p->destroyed ? p : NULL;
}

static CUmemoryPool pool_handle(const struct pool *p)
{
    return (CUmemoryPool)(uintptr_t)mk_handle(TAG_POOL, p->id, p->dev);
}

static CUresult pool_alloc_locked(struct pool *p, size_t size, CUdeviceptr *out)
{
    size_t want = p->used + size, res = p->reserved, grow = 0;
    CUresult rc;
    if (want < p->used)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (want > p->reserved) {
        if (round_up(want, POOL_CHUNK, &res) || (p->max_size && res > p->max_size))
            return CUDA_ERROR_OUT_OF_MEMORY;
        grow = res - p->reserved;
        if ((rc = charge(p->dev, grow)))
            return rc;
    }
    if ((rc = mem_new_locked(p->dev, size, R_POOLMEM, p, out))) {
        uncharge(p->dev, grow);
        return rc;
    }
    p->reserved = res;
    p->used = want;
    if (res > p->reserved_high)
        p->reserved_high = res;
    if (want > p->used_high)
        p->used_high = want;
    return CUDA_SUCCESS;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUstream s)
{
    int dev;
    CUresult rc;
    if (!dptr || !size)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = stream_dev(s, &dev)))
        return rc;
    lock();
    rc = pool_alloc_locked(devs[dev].cur_pool, size, dptr);
    unlock();
    return rc;
}

static CUresult alloc_from_pool_async(CUdeviceptr *dptr, size_t size, CUmemoryPool h, CUstream s)
{
    int dev;
    CUresult rc;
    if (!dptr || !size)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = stream_dev(s, &dev)))
        return rc;
    lock();
    struct pool *p = pool_get_locked(h);
    rc = p ? pool_alloc_locked(p, size, dptr) : CUDA_ERROR_INVALID_VALUE;
    unlock();
    return rc;
}

static CUresult free_async(CUdeviceptr dptr, CUstream s)
{
    int dev;
    CUresult rc;
    if ((rc = stream_dev(s, &dev)))
        return rc;
    return mem_free(dptr);
}

static CUresult pool_create(CUmemoryPool *out, const CUmemPoolProps *props)
{
    if (!out || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_NOT_SUPPORTED; /* host and managed pools are not simulated */
    if (!dev_ok(props->location.id))
        return CUDA_ERROR_INVALID_DEVICE;
    struct pool *p = calloc(1, sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->dev = props->location.id;
    p->props = *props;
    p->max_size = props->maxSize;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    lock();
    int bad = add_pool_locked(p);
    unlock();
    if (bad) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = pool_handle(p);
    return CUDA_SUCCESS;
}

static CUresult pool_destroy(CUmemoryPool h)
{
    lock();
    struct pool *p = pool_get_locked(h);
    if (!p || p->is_default) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* As in the real driver, a pool with live allocations goes away when the last one is freed. */
    p->destroyed = 1;
    if (devs[p->dev].cur_pool == p)
        devs[p->dev].cur_pool = &default_pools[p->dev];
    if (p->used == 0)
        pool_delete_locked(p);
    unlock();
    return CUDA_SUCCESS;
}

static CUresult pool_trim(CUmemoryPool h, size_t keep)
{
    lock();
    struct pool *p = pool_get_locked(h);
    if (!p) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    size_t keep_min = p->used > keep ? p->used : keep, target;
    if (round_up(keep_min, POOL_CHUNK, &target) == 0 && target < p->reserved) {
        uncharge(p->dev, p->reserved - target);
        p->reserved = target;
    }
    unlock();
    return CUDA_SUCCESS;
}

static CUresult pool_get_attr(CUmemoryPool h, CUmemPool_attribute attr, void *value)
{
    CUresult rc = CUDA_SUCCESS;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    struct pool *p = pool_get_locked(h);
    if (!p) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *(int *)value = p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = p->release_threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = p->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = p->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = p->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = p->used_high; break;
    default: rc = CUDA_ERROR_INVALID_VALUE; break;
    }
    unlock();
    return rc;
}

static CUresult pool_set_attr(CUmemoryPool h, CUmemPool_attribute attr, const void *value)
{
    CUresult rc = CUDA_SUCCESS;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    struct pool *p = pool_get_locked(h);
    if (!p) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *(const int *)value != 0;
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        /* Stored and reported only: the fake never releases pool memory on synchronisation. */
        p->release_threshold = *(const cuuint64_t *)value;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        /* The driver only accepts 0, which resets the watermark to the current value. */
        if (*(const cuuint64_t *)value != 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
            p->reserved_high = p->reserved;
        else
            p->used_high = p->used;
        break;
    default: rc = CUDA_ERROR_INVALID_VALUE; break;
    }
    unlock();
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* Pinned host memory                                                                               */

struct range {
    uint64_t base;
    size_t size;
};

static int host_overlaps(const struct rec *r, const void *arg)
{
    const struct range *q = arg;
    return q->base < r->key + r->size && r->key < q->base + q->size;
}

static int host_contains(const struct rec *r, const void *arg)
{
    uint64_t p = *(const uint64_t *)arg;
    return p >= r->key && p - r->key < r->size;
}

static CUresult host_alloc(void **pp, size_t size, unsigned flags)
{
    void *p;
    if (!pp || !size || (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                                             CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    if (posix_memalign(&p, HOST_ALIGN, size))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct rec *r = rec_new(R_HOST, (uint64_t)(uintptr_t)p, -1, size);
    lock();
    int bad = !r || map_put(&host_map, r);
    if (!bad)
        host_bytes += size;
    unlock();
    if (bad) {
        free(r);
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

static CUresult host_free(void *p)
{
    if (!p)
        return CUDA_SUCCESS; /* free(NULL) semantics, as the real driver */
    lock();
    struct rec *r = map_get(&host_map, (uint64_t)(uintptr_t)p);
    if (!r || r->kind != R_HOST) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    map_del(&host_map, r);
    host_bytes -= r->size;
    unlock();
    free(r);
    free(p);
    return CUDA_SUCCESS;
}

static CUresult host_register(void *p, size_t size, unsigned flags)
{
    if (!p || !size || (flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                                            CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)))
        return CUDA_ERROR_INVALID_VALUE;
    struct range q = {(uint64_t)(uintptr_t)p, size};
    if (q.base + size < q.base)
        return CUDA_ERROR_INVALID_VALUE;
    struct rec *r = rec_new(R_HOSTREG, q.base, -1, size);
    if (!r)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = CUDA_SUCCESS;
    lock();
    if (map_find(&host_map, host_overlaps, &q))
        rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    else if (map_put(&host_map, r))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    unlock();
    if (rc)
        free(r);
    return rc;
}

static CUresult host_unregister(void *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    struct rec *r = map_get(&host_map, (uint64_t)(uintptr_t)p);
    if (!r || r->kind != R_HOSTREG) {
        unlock();
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    }
    map_del(&host_map, r);
    unlock();
    free(r);
    return CUDA_SUCCESS;
}

static CUresult host_get_device_pointer(CUdeviceptr *pdptr, void *p, unsigned flags)
{
    if (!pdptr || !p || flags)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t a = (uint64_t)(uintptr_t)p;
    lock();
    struct rec *r = map_get(&host_map, a);
    if (!r)
        r = map_find(&host_map, host_contains, &a);
    unlock();
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = a; /* unified addressing: the device sees pinned memory at its host address */
    return CUDA_SUCCESS;
}

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

/* ---------------------------------------------------------------------------------------------- */
/* Virtual memory management                                                                        */

static int loc_is_host(CUmemLocationType t)
{
    return t == CU_MEM_LOCATION_TYPE_HOST || t == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
           t == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

static CUresult check_location(const CUmemLocation *loc)
{
    if (loc->type == CU_MEM_LOCATION_TYPE_DEVICE)
        return dev_ok(loc->id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    return loc_is_host(loc->type) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static struct rec *phys_get_locked(CUmemGenericAllocationHandle h)
{
    struct rec *r = map_get(&phys_map, h);
    return r && r->handle_refs > 0 ? r : NULL;
}

/* Physical memory is freed once no handle reference and no mapping is left. */
static void phys_maybe_free_locked(struct rec *r)
{
    if (r->handle_refs > 0 || r->map_refs > 0)
        return;
    map_del(&phys_map, r);
    if (!r->imported) {
        if (r->dev >= 0) {
            uncharge(r->dev, r->size);
            devs[r->dev].live--;
        } else {
            host_bytes -= r->size;
        }
    }
    free(r);
}

/* Records a physical allocation; charges it unless it is imported. */
static CUresult phys_new_locked(size_t size, const CUmemAllocationProp *prop, int imported,
                                CUmemGenericAllocationHandle *out)
{
    int dev = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
    CUresult rc;
    if (!imported && dev >= 0 && (rc = charge(dev, size)))
        return rc;
    uint64_t h = mk_handle(TAG_VMM, new_serial_locked(), dev < 0 ? 0xFF : dev);
    struct rec *r = rec_new(R_PHYS, h, dev, size);
    if (!r || map_put(&phys_map, r)) {
        if (!imported && dev >= 0)
            uncharge(dev, size);
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r->prop = *prop;
    r->imported = imported;
    r->handle_refs = 1;
    if (!imported) {
        if (dev >= 0)
            devs[dev].live++;
        else
            host_bytes += size;
    }
    *out = h;
    return CUDA_SUCCESS;
}

static CUresult vmm_create(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                           unsigned long long flags)
{
    CUresult rc;
    if (!handle || !prop || flags || !size || size % cfg.granularity)
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->type == CU_MEM_ALLOCATION_TYPE_MANAGED)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = check_location(&prop->location)))
        return rc;
    CUmemGenericAllocationHandle h;
    lock();
    rc = phys_new_locked(size, prop, 0, &h);
    unlock();
    if (rc == CUDA_SUCCESS)
        *handle = h;
    return rc;
}

static CUresult vmm_release(CUmemGenericAllocationHandle h)
{
    lock();
    struct rec *r = phys_get_locked(h);
    if (!r) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    r->handle_refs--;
    phys_maybe_free_locked(r);
    unlock();
    return CUDA_SUCCESS;
}

static struct mapping *mapping_at_locked(uint64_t a)
{
    for (struct mapping *m = mappings; m; m = m->next)
        if (a >= m->base && a - m->base < m->size)
            return m;
    return NULL;
}

static CUresult vmm_retain(CUmemGenericAllocationHandle *handle, void *addr)
{
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    struct mapping *m = mapping_at_locked((uint64_t)(uintptr_t)addr);
    if (!m) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    m->phys->handle_refs++;
    *handle = m->phys->key;
    unlock();
    return CUDA_SUCCESS;
}

static CUresult vmm_reserve(CUdeviceptr *ptr, size_t size, size_t alignment)
{
    if (!ptr || !size || size % cfg.granularity || (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    size_t align = alignment > cfg.granularity ? alignment : cfg.granularity;
    struct resv *r = calloc(1, sizeof *r);
    if (!r)
        return CUDA_ERROR_OUT_OF_MEMORY;
    lock();
    uint64_t a = region_take(&vmm_va, size, align);
    if (a) {
        r->base = a;
        r->size = size;
        r->next = resvs;
        resvs = r;
    }
    unlock();
    if (!a) {
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ptr = a;
    return CUDA_SUCCESS;
}

static CUresult vmm_address_free(CUdeviceptr ptr, size_t size)
{
    lock();
    struct resv **pp = &resvs;
    while (*pp && !((*pp)->base == ptr && (*pp)->size == size))
        pp = &(*pp)->next;
    struct resv *r = *pp;
    int busy = 0;
    for (struct mapping *m = mappings; r && m; m = m->next)
        busy |= m->base >= r->base && m->base - r->base < r->size;
    /* Freeing a range that still has mappings is refused, so the mapped memory is not leaked silently. */
    if (!r || busy) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pp = r->next;
    unlock();
    free(r);
    return CUDA_SUCCESS;
}

static CUresult vmm_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                        unsigned long long flags)
{
    uint64_t g = cfg.granularity;
    if (flags || !size || size % g || ptr % g || offset % g || ptr + size < ptr)
        return CUDA_ERROR_INVALID_VALUE;
    struct mapping *nm = calloc(1, sizeof *nm);
    if (!nm)
        return CUDA_ERROR_OUT_OF_MEMORY;
    lock();
    struct rec *r = phys_get_locked(h);
    struct resv *rv = resvs;
    while (rv && !(ptr >= rv->base && ptr - rv->base < rv->size))
        rv = rv->next;
    int ok = r && offset <= r->size && size <= r->size - offset && rv && size <= rv->size - (ptr - rv->base);
    for (struct mapping *m = mappings; ok && m; m = m->next)
        ok = !(ptr < m->base + m->size && m->base < ptr + size);
    if (!ok) {
        unlock();
        free(nm);
        return CUDA_ERROR_INVALID_VALUE;
    }
    nm->base = ptr;
    nm->size = size;
    nm->phys = r;
    nm->next = mappings;
    mappings = nm;
    r->map_refs++;
    unlock();
    return CUDA_SUCCESS;
}

/* Removes every mapping inside [ptr, ptr+size); a mapping only partly inside makes the call fail. */
static CUresult vmm_unmap(CUdeviceptr ptr, size_t size)
{
    uint64_t end = ptr + size;
    if (!size || end < ptr)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    int inside = 0;
    for (struct mapping *m = mappings; m; m = m->next) {
        int overlaps = m->base < end && ptr < m->base + m->size;
        int contained = m->base >= ptr && m->base + m->size <= end;
        if (overlaps && !contained) {
            unlock();
            return CUDA_ERROR_INVALID_VALUE;
        }
        inside += contained;
    }
    if (!inside) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct mapping **pp = &mappings, *dead = NULL;
    while (*pp) {
        struct mapping *m = *pp;
        if (m->base >= ptr && m->base + m->size <= end) {
            *pp = m->next;
            m->phys->map_refs--;
            phys_maybe_free_locked(m->phys);
            m->next = dead;
            dead = m;
        } else {
            pp = &m->next;
        }
    }
    unlock();
    while (dead) {
        struct mapping *nx = dead->next;
        free(dead);
        dead = nx;
    }
    return CUDA_SUCCESS;
}

/* What an exported allocation carries: enough to import it in this or another process. It is the
 * payload of a CUmemFabricHandle, and the first bytes of the memfd given out as a POSIX fd. */
struct export_blob {
    char magic[8];
    uint64_t size;
    int32_t loc_type, loc_id;
    uint32_t handle_types, pid;
    uint64_t handle;
};
static const char export_magic[8] = "FKCUEXP";

static CUresult vmm_export(void *out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType type,
                           unsigned long long flags)
{
    if (!out || flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR && type != CU_MEM_HANDLE_TYPE_FABRIC)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct export_blob b;
    memset(&b, 0, sizeof b);
    lock();
    struct rec *r = phys_get_locked(h);
    /* The driver only exports to a handle type requested when the memory was created. */
    int ok = r && (r->prop.requestedHandleTypes & type);
    if (ok) {
        memcpy(b.magic, export_magic, sizeof b.magic);
        b.size = r->size;
        b.loc_type = r->prop.location.type;
        b.loc_id = r->prop.location.id;
        b.handle_types = r->prop.requestedHandleTypes;
        b.pid = (uint32_t)getpid();
        b.handle = h;
    }
    unlock();
    if (!ok)
        return CUDA_ERROR_INVALID_VALUE;
    if (type == CU_MEM_HANDLE_TYPE_FABRIC) {
        CUmemFabricHandle fh;
        memset(&fh, 0, sizeof fh);
        memcpy(fh.data, &b, sizeof b);
        memcpy(out, &fh, sizeof fh);
        return CUDA_SUCCESS;
    }
    /* A real descriptor, so the caller may close it or pass it over a socket like the real one. */
    int fd = memfd_create("fakecuda-export", MFD_CLOEXEC);
    if (fd < 0)
        return CUDA_ERROR_OPERATING_SYSTEM;
    if (pwrite(fd, &b, sizeof b, 0) != (ssize_t)sizeof b) {
        close(fd);
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    *(int *)out = fd;
    return CUDA_SUCCESS;
}

static CUresult vmm_import(CUmemGenericAllocationHandle *handle, void *os_handle, CUmemAllocationHandleType type)
{
    struct export_blob b;
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    if (type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        int fd = (int)(intptr_t)os_handle;
        if (pread(fd, &b, sizeof b, 0) != (ssize_t)sizeof b)
            return CUDA_ERROR_INVALID_VALUE;
    } else if (type == CU_MEM_HANDLE_TYPE_FABRIC) {
        if (!os_handle)
            return CUDA_ERROR_INVALID_VALUE;
        memcpy(&b, os_handle, sizeof b);
    } else {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (memcmp(b.magic, export_magic, sizeof b.magic) || !b.size)
        return CUDA_ERROR_INVALID_VALUE;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = (CUmemAllocationHandleType)b.handle_types;
    prop.location.type = (CUmemLocationType)b.loc_type;
    prop.location.id = b.loc_id;
    if (prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE && !dev_ok(prop.location.id))
        return CUDA_ERROR_INVALID_DEVICE; /* exported from a device this process does not see */
    CUmemGenericAllocationHandle h;
    lock();
    CUresult rc = phys_new_locked(b.size, &prop, 1, &h);
    unlock();
    if (rc == CUDA_SUCCESS)
        *handle = h;
    return rc;
}

static CUresult vmm_get_props(CUmemAllocationProp *prop, CUmemGenericAllocationHandle h)
{
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    struct rec *r = phys_get_locked(h);
    if (r)
        *prop = r->prop;
    unlock();
    return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---------------------------------------------------------------------------------------------- */
/* IPC                                                                                              */

struct ipc_blob {
    char magic[8];
    uint64_t base, size;
    int32_t dev;
    uint32_t pid;
};
static const char ipc_magic[8] = "FKCUIPC";

static CUresult ipc_get(CUipcMemHandle *out, CUdeviceptr dptr)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    struct rec *r = map_get(&mem_map, dptr);
    /* Only cuMemAlloc-style memory can be shared this way; pool memory needs the pool export APIs. */
    int ok = r && (r->kind == R_MEM || r->kind == R_PITCH);
    struct ipc_blob b = {{0}, dptr, ok ? r->size : 0, ok ? r->dev : 0, (uint32_t)getpid()};
    unlock();
    if (!ok)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(b.magic, ipc_magic, sizeof b.magic);
    CUipcMemHandle h;
    memset(&h, 0, sizeof h);
    memcpy(h.reserved, &b, sizeof b);
    *out = h;
    return CUDA_SUCCESS;
}

struct ipc_key {
    uint64_t base;
    uint32_t pid;
};

static int ipc_same(const struct rec *r, const void *arg)
{
    const struct ipc_key *k = arg;
    return r->ipc_base == k->base && r->ipc_pid == k->pid;
}

static CUresult ipc_open(CUdeviceptr *pdptr, const CUipcMemHandle *h, unsigned flags)
{
    struct ipc_blob b;
    if (!pdptr || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&b, h->reserved, sizeof b);
    if (memcmp(b.magic, ipc_magic, sizeof b.magic) || !b.size)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(b.dev))
        return CUDA_ERROR_INVALID_DEVICE;
    struct ipc_key k = {b.base, b.pid};
    CUresult rc = CUDA_SUCCESS;
    lock();
    /* Opening the same allocation again returns the same address and counts one more open. */
    struct rec *r = map_find(&ipc_map, ipc_same, &k);
    if (r) {
        r->handle_refs++;
    } else {
        uint64_t a = region_take(&ipc_va, b.size, VA_ALIGN);
        r = a ? rec_new(R_IPC, a, b.dev, b.size) : NULL;
        if (!r || map_put(&ipc_map, r)) {
            free(r);
            r = NULL;
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            r->ipc_base = b.base;
            r->ipc_pid = b.pid;
            r->handle_refs = 1;
        }
    }
    if (r)
        *pdptr = r->key;
    unlock();
    return rc;
}

static CUresult ipc_close(CUdeviceptr dptr)
{
    lock();
    struct rec *r = map_get(&ipc_map, dptr);
    if (!r) {
        unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (--r->handle_refs == 0)
        map_del(&ipc_map, r);
    else
        r = NULL;
    unlock();
    free(r);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------- */
/* Errors, export table                                                                             */

static const struct {
    CUresult code;
    const char *name, *text;
} errors[] = {
#define E(c, t) {c, #c, t}
    E(CUDA_SUCCESS, "no error"),
    E(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    E(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    E(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
    E(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    E(CUDA_ERROR_PROFILER_DISABLED, "profiler disabled while using external profiling tool"),
    E(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library"),
    E(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, "operation not supported by this driver version"),
    E(CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA-capable device(s) is/are busy or unavailable"),
    E(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
    E(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    E(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"),
    E(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
    E(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current"),
    E(CUDA_ERROR_MAP_FAILED, "mapping of buffer object failed"),
    E(CUDA_ERROR_UNMAP_FAILED, "unmapping of buffer object failed"),
    E(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped"),
    E(CUDA_ERROR_NOT_MAPPED, "resource not mapped"),
    E(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid"),
    E(CUDA_ERROR_FILE_NOT_FOUND, "file not found"),
    E(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS"),
    E(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    E(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state"),
    E(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    E(CUDA_ERROR_NOT_READY, "device not ready"),
    E(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
    E(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch"),
    E(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated"),
    E(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled"),
    E(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled"),
    E(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "cannot set while device is active in this process"),
    E(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"),
    E(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "part or all of the requested memory range is already mapped"),
    E(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region"),
    E(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"),
    E(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
    E(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    E(CUDA_ERROR_SYSTEM_NOT_READY, "system not yet initialized"),
    E(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "system has unsupported display driver / cuda driver combination"),
    E(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing"),
    E(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "operation failed due to a previous error during capture"),
    E(CUDA_ERROR_TIMEOUT, "wait operation timed out"),
    E(CUDA_ERROR_UNKNOWN, "unknown error"),
#undef E
};

static CUresult error_lookup(CUresult code, const char **pstr, int want_name)
{
    if (!pstr)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == code) {
            *pstr = want_name ? errors[i].name : errors[i].text;
            return CUDA_SUCCESS;
        }
    *pstr = NULL; /* as the real driver does for a code it does not know */
    return CUDA_ERROR_INVALID_VALUE;
}


/* ---------------------------------------------------------------------------------------------- */
/* Exported API: devices, contexts, streams                                                         */

API CUresult cuInit(unsigned int flags)
{
    enter();
    if (flags)
        return CUDA_ERROR_INVALID_VALUE;
    return cfg.ndev ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

API CUresult cuDriverGetVersion(int *driverVersion)
{
    enter();
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = cfg.driver_version;
    return CUDA_SUCCESS;
}

API CUresult cuDeviceGetCount(int *count)
{
    enter();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = cfg.ndev;
    return CUDA_SUCCESS;
}

API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    enter();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(ordinal))
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    enter();
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "Fake CUDA Device %d (simulated)", dev);
    return CUDA_SUCCESS;
}

static CUresult device_uuid(CUuuid *uuid, CUdevice dev)
{
    enter();
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    static const unsigned char base[16] = {0xfa, 0xce, 0xc0, 0xda, 0x00, 0x00, 0x40, 0x00,
                                           0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    memcpy(uuid->bytes, base, sizeof base);
    uuid->bytes[5] = (char)dev;
    uuid->bytes[15] = (char)(0x5a ^ dev);
    return CUDA_SUCCESS;
}

API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return device_uuid(uuid, dev); }
API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) { return device_uuid(uuid, dev); }

API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    enter();
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = cfg.capacity;
    return CUDA_SUCCESS;
}

API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    enter();
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    int v = 0; /* unlisted attributes read as 0 */
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = 132; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = 0x10 + dev; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = 5120; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: v = 1; break;
    default: break;
    }
    *pi = v;
    return CUDA_SUCCESS;
}

API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    enter();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *pctx = (CUcontext)(uintptr_t)mk_handle(TAG_CTX, 0, dev);
    return CUDA_SUCCESS;
}

API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    enter();
    return dev_ok(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    (void)flags;
    enter();
    return ctx_create(pctx, dev);
}

API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
    (void)params, (void)flags;
    enter();
    return ctx_create(pctx, dev);
}

API CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    int dev;
    enter();
    if (ctx_decode(ctx, &dev))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (tl_ctx_set && tl_ctx == (uint64_t)(uintptr_t)ctx)
        tl_ctx = 0;
    return CUDA_SUCCESS;
}

API CUresult cuCtxSetCurrent(CUcontext ctx)
{
    int dev;
    enter();
    if (ctx && ctx_decode(ctx, &dev))
        return CUDA_ERROR_INVALID_CONTEXT;
    tl_ctx_set = 1;
    tl_ctx = (uint64_t)(uintptr_t)ctx;
    return CUDA_SUCCESS;
}

API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    enter();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t h = tl_ctx_set ? tl_ctx : (cfg.ndev ? mk_handle(TAG_CTX, 0, 0) : 0);
    *pctx = (CUcontext)(uintptr_t)h;
    return CUDA_SUCCESS;
}

API CUresult cuCtxGetDevice(CUdevice *device)
{
    int dev;
    CUresult rc;
    enter();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = cur_dev(&dev)))
        return rc;
    *device = dev;
    return CUDA_SUCCESS;
}

API CUresult cuCtxSynchronize(void)
{
    int dev;
    enter();
    return cur_dev(&dev);
}

API CUresult cuStreamCreate(CUstream *phStream, unsigned int flags)
{
    int dev;
    CUresult rc;
    enter();
    if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = cur_dev(&dev)))
        return rc;
    lock();
    uint64_t h = mk_handle(TAG_STREAM, new_serial_locked(), dev);
    unlock();
    *phStream = (CUstream)(uintptr_t)h;
    return CUDA_SUCCESS;
}

API CUresult cuStreamDestroy_v2(CUstream hStream)
{
    uint64_t h = (uint64_t)(uintptr_t)hStream;
    enter();
    return handle_is(h, TAG_STREAM) && dev_ok(handle_dev(h)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult stream_sync(CUstream s)
{
    int dev;
    enter();
    return stream_dev(s, &dev);
}

API CUresult cuStreamSynchronize(CUstream hStream) { return stream_sync(hStream); }
API CUresult cuStreamSynchronize_ptsz(CUstream hStream) { return stream_sync(hStream); }

API CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    enter();
    return error_lookup(error, pStr, 1);
}

API CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    enter();
    return error_lookup(error, pStr, 0);
}

/* The CUDA runtime (libcudart, dynamic or static) calls into the undocumented tables this returns before its
 * first cudaMalloc. A stand-in cannot fill them, and a dummy table made cudart jump into nothing (a segfault
 * even untraced), so every table is refused: cudart then fails cleanly with cudaErrorNotSupported, and the
 * one line below says why. Only driver-API programs run on this stand-in. */
API CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    static atomic_int said;
    enter();
    if (!ppExportTable || !pExportTableId)
        return CUDA_ERROR_INVALID_VALUE;
    *ppExportTable = NULL;
    if (!atomic_exchange(&said, 1))
        fprintf(stderr, "fakecuda: the CUDA runtime (cudaMalloc, libcudart) is not supported by this stand-in "
                        "driver; use driver-API calls (cuMemAlloc) or a real GPU\n");
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---------------------------------------------------------------------------------------------- */
/* Exported API: memory                                                                             */

API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    int dev;
    CUresult rc;
    enter();
    if ((rc = cur_dev(&dev)))
        return rc;
    lock();
    size_t fr = limit_bytes() - devs[dev].used;
    unlock();
    if (free_bytes)
        *free_bytes = fr;
    if (total_bytes)
        *total_bytes = cfg.capacity;
    return CUDA_SUCCESS;
}

API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    enter();
    return alloc_plain(dptr, bytesize, R_MEM);
}

API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    enter();
    return mem_free(dptr);
}

API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                unsigned int ElementSizeBytes)
{
    enter();
    return mem_alloc_pitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
}

API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    enter();
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_plain(dptr, bytesize, R_MANAGED);
}

API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    enter();
    return alloc_async(dptr, bytesize, hStream);
}

API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    enter();
    return alloc_async(dptr, bytesize, hStream);
}

API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    enter();
    return free_async(dptr, hStream);
}

API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    enter();
    return free_async(dptr, hStream);
}

API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    enter();
    return alloc_from_pool_async(dptr, bytesize, pool, hStream);
}

API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    enter();
    return alloc_from_pool_async(dptr, bytesize, pool, hStream);
}

API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    enter();
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *pool_out = pool_handle(&default_pools[dev]);
    return CUDA_SUCCESS;
}

API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    enter();
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    lock();
    CUmemoryPool h = pool_handle(devs[dev].cur_pool);
    unlock();
    *pool = h;
    return CUDA_SUCCESS;
}

API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    enter();
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    lock();
    struct pool *p = pool_get_locked(pool);
    int ok = p && p->dev == dev;
    if (ok)
        devs[dev].cur_pool = p;
    unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    enter();
    return pool_create(pool, poolProps);
}

API CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    enter();
    return pool_destroy(pool);
}

API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    enter();
    return pool_trim(pool, minBytesToKeep);
}

API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    enter();
    return pool_get_attr(pool, attr, value);
}

API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    enter();
    return pool_set_attr(pool, attr, value);
}

API CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    enter();
    return dev_ok(device) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    enter();
    return host_alloc(pp, bytesize, 0);
}

API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    enter();
    return host_alloc(pp, bytesize, Flags);
}

API CUresult cuMemFreeHost(void *p)
{
    enter();
    return host_free(p);
}

API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    enter();
    return host_register(p, bytesize, Flags);
}

API CUresult cuMemHostUnregister(void *p)
{
    enter();
    return host_unregister(p);
}

API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    enter();
    return host_get_device_pointer(pdptr, p, Flags);
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

API CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                           CUmemAllocationGranularity_flags option)
{
    CUresult rc;
    enter();
    if (!granularity || !prop ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = check_location(&prop->location)))
        return rc;
    *granularity = cfg.granularity;
    return CUDA_SUCCESS;
}

API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                         unsigned long long flags)
{
    enter();
    return vmm_create(handle, size, prop, flags);
}

/* fakecuda_refuse_next: the entry point whose next call is refused, "" for none. */
static char refuse_next[64];

static int refused(const char *name)
{
    lock();
    int r = strcmp(refuse_next, name) == 0;
    if (r)
        refuse_next[0] = 0;
    unlock();
    return r;
}

API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    enter();
    if (refused("cuMemRelease"))
        return CUDA_ERROR_INVALID_VALUE;
    return vmm_release(handle);
}

API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    enter();
    return vmm_retain(handle, addr);
}

API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                 unsigned long long flags)
{
    (void)addr, (void)flags;
    enter();
    return vmm_reserve(ptr, size, alignment); /* the address hint is only a hint; it is ignored */
}

API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    enter();
    return vmm_address_free(ptr, size);
}

API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                      unsigned long long flags)
{
    enter();
    return vmm_map(ptr, size, offset, handle, flags);
}

API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    enter();
    if (refused("cuMemUnmap"))
        return CUDA_ERROR_INVALID_VALUE;
    return vmm_unmap(ptr, size);
}

API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    enter();
    return ptr && size && (desc || !count) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

API CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                          CUmemAllocationHandleType handleType, unsigned long long flags)
{
    enter();
    return vmm_export(shareableHandle, handle, handleType, flags);
}

API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                            CUmemAllocationHandleType shHandleType)
{
    enter();
    return vmm_import(handle, osHandle, shHandleType);
}

API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
    enter();
    return vmm_get_props(prop, handle);
}

API CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    enter();
    return ipc_get(pHandle, dptr);
}

API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    enter();
    return ipc_open(pdptr, &handle, Flags);
}

API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    enter();
    return ipc_close(dptr);
}

/* ---------------------------------------------------------------------------------------------- */
/* cuGetProcAddress                                                                                 */

/* One row per ABI version of a driver function: the name as documented, the first CUDA version that
 * resolves the name to this ABI, the function, and its per-thread-default-stream twin if any. */
struct proc {
    const char *name;
    int version;
    void *fn, *ptsz;
};

#define P(name, ver, fn) {name, ver, (void *)fn, NULL}
#define PT(name, ver, fn, twin) {name, ver, (void *)fn, (void *)twin}
static const struct proc procs[] = {
    P("cuInit", 2000, cuInit),
    P("cuDriverGetVersion", 2020, cuDriverGetVersion),
    P("cuGetErrorName", 6000, cuGetErrorName),
    P("cuGetErrorString", 6000, cuGetErrorString),
    P("cuGetExportTable", 3000, cuGetExportTable),
    P("cuGetProcAddress", 11030, cuGetProcAddress),
    P("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    P("cuDeviceGetCount", 2000, cuDeviceGetCount),
    P("cuDeviceGet", 2000, cuDeviceGet),
    P("cuDeviceGetName", 2000, cuDeviceGetName),
    P("cuDeviceGetUuid", 9020, cuDeviceGetUuid),
    P("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
    P("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    P("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    P("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    P("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    P("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    P("cuDeviceGetMemPool", 11020, cuDeviceGetMemPool),
    P("cuDeviceSetMemPool", 11020, cuDeviceSetMemPool),
    P("cuDeviceGraphMemTrim", 11040, cuDeviceGraphMemTrim),
    P("cuCtxCreate", 3020, cuCtxCreate_v2),
    P("cuCtxCreate", 12050, cuCtxCreate_v4),
    P("cuCtxDestroy", 4000, cuCtxDestroy_v2),
    P("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    P("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    P("cuCtxGetDevice", 2000, cuCtxGetDevice),
    P("cuCtxSynchronize", 2000, cuCtxSynchronize),
    P("cuStreamCreate", 2000, cuStreamCreate),
    P("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    PT("cuStreamSynchronize", 2000, cuStreamSynchronize, cuStreamSynchronize_ptsz),
    P("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    P("cuMemAlloc", 3020, cuMemAlloc_v2),
    P("cuMemFree", 3020, cuMemFree_v2),
    P("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    P("cuMemAllocManaged", 6000, cuMemAllocManaged),
    P("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    P("cuMemHostAlloc", 2020, cuMemHostAlloc),
    P("cuMemFreeHost", 2000, cuMemFreeHost),
    P("cuMemHostRegister", 6050, cuMemHostRegister_v2),
    P("cuMemHostUnregister", 4000, cuMemHostUnregister),
    P("cuMemHostGetDevicePointer", 3020, cuMemHostGetDevicePointer_v2),
    PT("cuMemAllocAsync", 11020, cuMemAllocAsync, cuMemAllocAsync_ptsz),
    PT("cuMemFreeAsync", 11020, cuMemFreeAsync, cuMemFreeAsync_ptsz),
    PT("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz),
    P("cuMemPoolCreate", 11020, cuMemPoolCreate),
    P("cuMemPoolDestroy", 11020, cuMemPoolDestroy),
    P("cuMemPoolTrimTo", 11020, cuMemPoolTrimTo),
    P("cuMemPoolGetAttribute", 11020, cuMemPoolGetAttribute),
    P("cuMemPoolSetAttribute", 11020, cuMemPoolSetAttribute),
    P("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
    P("cuMemCreate", 10020, cuMemCreate),
    P("cuMemRelease", 10020, cuMemRelease),
    P("cuMemRetainAllocationHandle", 11000, cuMemRetainAllocationHandle),
    P("cuMemAddressReserve", 10020, cuMemAddressReserve),
    P("cuMemAddressFree", 10020, cuMemAddressFree),
    P("cuMemMap", 10020, cuMemMap),
    P("cuMemUnmap", 10020, cuMemUnmap),
    P("cuMemSetAccess", 10020, cuMemSetAccess),
    P("cuMemExportToShareableHandle", 10020, cuMemExportToShareableHandle),
    P("cuMemImportFromShareableHandle", 10020, cuMemImportFromShareableHandle),
    P("cuMemGetAllocationPropertiesFromHandle", 10020, cuMemGetAllocationPropertiesFromHandle),
    P("cuArrayCreate", 3020, cuArrayCreate_v2),
    P("cuArray3DCreate", 3020, cuArray3DCreate_v2),
    P("cuArrayDestroy", 2000, cuArrayDestroy),
    P("cuMipmappedArrayCreate", 5000, cuMipmappedArrayCreate),
    P("cuMipmappedArrayDestroy", 5000, cuMipmappedArrayDestroy),
    P("cuIpcGetMemHandle", 4010, cuIpcGetMemHandle),
    P("cuIpcOpenMemHandle", 11000, cuIpcOpenMemHandle_v2),
    P("cuIpcCloseMemHandle", 4010, cuIpcCloseMemHandle),
};
#undef P
#undef PT

static CUresult get_proc(const char *symbol, void **pfn, int version, cuuint64_t flags,
                         CUdriverProcAddressQueryResult *status)
{
    const cuuint64_t known = CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    const struct proc *best = NULL;
    int name_seen = 0;

    enter();
    if (!symbol || !pfn || (flags & ~known) || flags == known || version > cfg.driver_version)
        goto out;
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
        if (strcmp(procs[i].name, symbol))
            continue;
        name_seen = 1;
        if (procs[i].version <= version && (!best || procs[i].version > best->version))
            best = &procs[i];
    }
    if (!best) {
        st = name_seen ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        rc = CUDA_ERROR_NOT_FOUND;
        *pfn = NULL;
        goto out;
    }
    *pfn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best->ptsz ? best->ptsz : best->fn;
    st = CU_GET_PROC_ADDRESS_SUCCESS;
    rc = CUDA_SUCCESS;
out:
    if (rc == CUDA_ERROR_INVALID_VALUE && pfn)
        *pfn = NULL;
    if (status)
        *status = st;
    return rc;
}

API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return get_proc(symbol, pfn, cudaVersion, flags, NULL);
}

API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *symbolStatus)
{
    return get_proc(symbol, pfn, cudaVersion, flags, symbolStatus);
}

/* ---------------------------------------------------------------------------------------------- */
/* Test hooks                                                                                       */

/* Capacity this process holds on dev: allocations, arrays, VMM memory and pool reservations. Not the
 * baseline and not FAKECUDA_OTHER_USED. */
API size_t fakecuda_used_bytes(int dev)
{
    enter();
    if (!dev_ok(dev))
        return 0;
    lock();
    size_t v = devs[dev].used;
    unlock();
    return v;
}

/* Pinned host memory this process holds: cuMemAllocHost, cuMemHostAlloc and host-located cuMemCreate. */
API size_t fakecuda_host_bytes(void)
{
    enter();
    lock();
    size_t v = host_bytes;
    unlock();
    return v;
}

/* The next call of the entry point `name` (cuMemRelease, cuMemUnmap) is refused with
 * CUDA_ERROR_INVALID_VALUE and changes nothing, as a driver refuses a call it cannot make now. */
API void fakecuda_refuse_next(const char *name)
{
    enter();
    lock();
    snprintf(refuse_next, sizeof refuse_next, "%s", name ? name : "");
    unlock();
}

/* Live user-visible allocations on dev (see README.md for what counts). */
API int fakecuda_live_count(int dev)
{
    enter();
    if (!dev_ok(dev))
        return 0;
    lock();
    int v = devs[dev].live;
    unlock();
    return v;
}
