/* fakecuda's parts (README.md; the rules they keep are at the head of fakecuda.c): one library, one
 * mutex over all of this state. Nothing here is exported but what API marks; the rest is hidden
 * (-fvisibility=hidden in the build), so a tracer preloaded in front of us sees only the driver's names. */
#ifndef FAKECUDA_H
#define FAKECUDA_H
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
#undef cuCtxDestroy
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
#undef cuIpcOpenMemHandle

#define API __attribute__((visibility("default")))

/* Exported entry points that cuda.h does not declare in this configuration. */
API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev);
API CUresult cuCtxDestroy(CUcontext ctx);                /* the pre-4.0 ABI */
API CUresult cuDevicePrimaryCtxRelease(CUdevice dev);    /* the pre-11.0 ABIs, which static cudart asks */
API CUresult cuDevicePrimaryCtxReset(CUdevice dev);      /* for with cudaVersion 7000 */
API CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags); /* pre-11.0 */
API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active);
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

static inline uint64_t mk_handle(uint64_t tag, uint64_t serial, int dev)
{
    return tag << 48 | (serial & 0xFFFFFFFFFFull) << 8 | (uint64_t)(dev & 0xFF);
}

static inline int handle_is(uint64_t h, uint64_t tag) { return (h >> 48) == tag; }
static inline int handle_dev(uint64_t h) { return (int)(h & 0xFF); }
static inline uint64_t handle_serial(uint64_t h) { return (h >> 8) & 0xFFFFFFFFFFull; }

/* ---- configuration (fakecuda.c) ---- */

struct fake_cfg {
    int ndev;
    size_t capacity, baseline, other, granularity;
    int driver_version;
    int alarm_in_free; /* FAKECUDA_ALARM_IN_FREE=1: a SIGALRM lands inside cuMemFree, its lock held */
    long async_ns; /* FAKECUDA_ASYNC_NS: cuMemAllocAsync takes at least this long (a real driver's ~1 us, for benches) */
    int count_refused; /* FAKECUDA_COUNT_REFUSED=1: cuDeviceGetCount refuses, as a driver does before cuInit */
};
extern struct fake_cfg cfg;

/* ---- state (fakecuda.c) ---- */

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
    uint64_t ctx;         /* the context it was made in, which frees it when destroyed or reset; 0 for
                           * kinds that belong to no context (pool memory, cuMemCreate) */
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

extern struct device devs[MAX_DEVICES];
extern struct pool default_pools[MAX_DEVICES];
extern struct pool **pools;
extern size_t npools;
extern struct map mem_map, host_map, array_map, phys_map, ipc_map;
extern struct region vmm_va, ipc_va;
extern struct resv *resvs;
extern struct mapping *mappings;
extern size_t host_bytes;

/* The mutex over all state, the one-time start-up every entry point calls first, and the books of each
 * device (fakecuda.c). */
void lock(void);
void unlock(void);
int add_pool_locked(struct pool *p);
void enter(void);
int dev_ok(int dev);
size_t limit_bytes(void);
CUresult charge(int dev, size_t n);
void uncharge(int dev, size_t n);
int round_up(size_t v, size_t a, size_t *out);
uint64_t region_take(struct region *r, size_t size, size_t align);
int refused(const char *name);

/* The records' hash map (map.c). */
int map_put(struct map *m, struct rec *r);
struct rec *map_get(const struct map *m, uint64_t key);
void map_del(struct map *m, struct rec *r);
struct rec *map_find(const struct map *m, int (*fn)(const struct rec *, const void *), const void *arg);
struct rec *map_take_all(struct map *m, int (*fn)(const struct rec *, const void *), const void *arg);
struct rec *rec_new(enum rec_kind kind, uint64_t key, int dev, size_t size);

/* Contexts and streams (context.c). */
CUresult cur_dev(int *dev);
uint64_t cur_ctx(void);
CUresult stream_dev(CUstream s, int *dev);
uint64_t new_serial_locked(void);

/* Device memory (memory.c), also behind the stream-ordered allocator's pools. */
CUresult mem_new_locked(int dev, size_t size, enum rec_kind kind, struct pool *p, CUdeviceptr *out);
void pool_delete_locked(struct pool *p);
CUresult mem_free(CUdeviceptr dptr);

/* The VMM mapping that holds address a, or NULL (vmm.c). */
struct mapping *mapping_at_locked(uint64_t a);

#endif
