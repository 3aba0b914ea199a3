/* fakecuda: a stand-in libcuda.so.1 for CI machines without a GPU (see README.md next to this file).
 *
 * It simulates FAKECUDA_DEVICES devices of FAKECUDA_CAPACITY bytes each and keeps exact books of what
 * this process holds on each of them, so tests of an allocation tracer can provoke out-of-memory at a
 * chosen point and compare the tracer's numbers against ground truth (the fakecuda_* hooks below).
 *
 * Rules this file keeps:
 *  - Every exported cu* function is a thin wrapper over internal (hidden) code. Nothing in here calls an exported
 *    symbol: a tracer preloaded in front of us interposes those names, and an internal call through one
 *    would be recorded twice. -Wl,-Bsymbolic (Makefile) makes the addresses in the cuGetProcAddress table
 *    our own definitions, the same ones dlsym(handle, name) returns.
 *  - One mutex guards all state. The environment is read once, on the first call into the library.
 *  - A failed call leaves its out-parameters untouched, so a test can see that an OOM wrote nothing.
 *  - Device addresses are fake (never dereferenced) and never reused within a run; pinned host memory
 *    is real memory from the C heap.
 *
 * The parts (fakecuda.h declares what they share): this file holds the configuration, the state and its
 * mutex, the books of each device and the test hooks; map.c the records' hash map; context.c devices,
 * contexts and streams; memory.c device memory; async.c stream-ordered allocation and its pools; host.c
 * pinned host memory; arrays.c arrays; vmm.c virtual memory management; ipc.c IPC handles; errors.c error
 * names and the export tables; procaddress.c cuGetProcAddress. */
#include "fakecuda.h"

/* ---------------------------------------------------------------------------------------------- */
/* Configuration                                                                                    */

struct fake_cfg cfg;

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

struct device devs[MAX_DEVICES];
struct pool default_pools[MAX_DEVICES];
struct pool **pools; /* indexed by pool id; NULL once destroyed */
size_t npools;
static size_t pools_cap;
struct map mem_map, host_map, array_map, phys_map, ipc_map;
struct region vmm_va, ipc_va;
struct resv *resvs;
struct mapping *mappings;
size_t host_bytes;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

void lock(void) { pthread_mutex_lock(&mu); }
void unlock(void) { pthread_mutex_unlock(&mu); }

/* A child forked while another thread was inside the driver would otherwise inherit mu held and hang on
 * its first call (tests/doors/fork_workload.c forks while a thread allocates in a loop). */
static void fork_prepare(void) { lock(); }
static void fork_done(void) { unlock(); }

int add_pool_locked(struct pool *p)
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
    cfg.alarm_in_free = (int)env_long("FAKECUDA_ALARM_IN_FREE", 0, 0, 1);
    cfg.async_ns = env_long("FAKECUDA_ASYNC_NS", 0, 0, 100000000);
    cfg.count_refused = (int)env_long("FAKECUDA_COUNT_REFUSED", 0, 0, 1);
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

void enter(void) { pthread_once(&init_once, init); }

int dev_ok(int dev) { return dev >= 0 && dev < cfg.ndev; }

/* Capacity this process may hold on one device. */
size_t limit_bytes(void)
{
    size_t taken = cfg.baseline + cfg.other;
    if (taken < cfg.baseline || taken >= cfg.capacity)
        return 0;
    return cfg.capacity - taken;
}

CUresult charge(int dev, size_t n)
{
    size_t lim = limit_bytes();
    if (n > lim || devs[dev].used > lim - n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    devs[dev].used += n;
    return CUDA_SUCCESS;
}

void uncharge(int dev, size_t n) { devs[dev].used -= n; }

int round_up(size_t v, size_t a, size_t *out)
{
    if (v > SIZE_MAX - (a - 1))
        return -1;
    *out = (v + a - 1) & ~(a - 1);
    return 0;
}

/* Returns 0 when the region is exhausted (that is reported as out of memory). */
uint64_t region_take(struct region *r, size_t size, size_t align)
{
    uint64_t base = (r->next + align - 1) & ~(uint64_t)(align - 1);
    size_t span;
    if (round_up(size, VA_ALIGN, &span) || base < r->next || base >= r->end || span > r->end - base)
        return 0;
    r->next = base + span;
    return base;
}

/* fakecuda_refuse_next: the entry point whose next call is refused, "" for none. */
static char refuse_next[64];

int refused(const char *name)
{
    lock();
    int r = strcmp(refuse_next, name) == 0;
    if (r)
        refuse_next[0] = 0;
    unlock();
    return r;
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

