/* oomtrace snapshot format, version 1: the one definition shared by the writer (lib/) and the reader
 * (tools/). docs/FORMAT.md specifies the same bytes in prose; change both together.
 *
 * A snapshot is a 32-byte file header followed by sections until end of file. Every integer in a
 * fixed-width header is little-endian. Section payloads are streams of LEB128 varints (unsigned),
 * zigzag varints (signed) and strings (varint length, then bytes, no terminator). */
#ifndef OOMTRACE_FORMAT_H
#define OOMTRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define OT_MAGIC "OOMTRACE"
#define OT_VERSION_MAJOR 1
#define OT_VERSION_MINOR 2

/* File header flags. */
#define OT_FILE_COMPLETE 0x1u /* the writer finished; absent in a crash-surviving trace */

struct ot_file_header {
    char magic[8];          /* "OOMTRACE" */
    uint16_t version_major; /* readers refuse a different major */
    uint16_t version_minor; /* readers accept any minor: unknown sections are skipped */
    uint32_t flags;         /* OT_FILE_* */
    uint64_t reserved0;
    uint64_t reserved1;
};

/* Section header: 24 bytes, then stored_len bytes of payload. */
#define OT_SECTION_ZSTD 0x1u /* payload is one zstd frame that decompresses to raw_len bytes */

struct ot_section_header {
    uint32_t type;       /* enum ot_section */
    uint32_t flags;      /* OT_SECTION_* */
    uint64_t stored_len; /* bytes that follow this header */
    uint64_t raw_len;    /* payload bytes after decompression (== stored_len when not compressed) */
};

/* Readers cap raw_len to keep a hostile file from asking for unbounded memory. */
#define OT_MAX_SECTION_RAW ((uint64_t)4 << 30)

enum ot_section {
    OT_SEC_META = 1,
    OT_SEC_DEVICES = 2,
    OT_SEC_FAILURE = 3,
    OT_SEC_MODULES = 4,
    OT_SEC_SYMBOLS = 5,
    OT_SEC_PYFRAMES = 6,
    OT_SEC_STACKS = 7,
    OT_SEC_LIVE = 8,
    OT_SEC_PEAK = 9,
    OT_SEC_EVENTS = 10,
    OT_SEC_MARKERS = 11,
    OT_SEC_POOLS = 12,
    OT_SEC_MAPPINGS = 13,
    OT_SEC_PROCESSES = 14,
    OT_SEC_THREADS = 15,
    OT_SEC_LIVE_SEQ = 16, /* since 1.1: LIVE in seq order, delta-coded; the writer's choice over LIVE */
    OT_SEC_PEAK_REF = 17, /* since 1.1: PEAK by reference to the live set; the writer's choice over PEAK */
    OT_SEC_FRAMEWORK = 18, /* since 1.2: the frameworks' own view (pools, blocks, stats), as the Python
                              companion last reported it; the writer stores its bytes as given */
    OT_SEC_PROBES = 19,    /* since 1.2: in a framework-OOM snapshot, the driver-level OOM snapshots
                              written since the previous framework OOM (its retries and probes) */
};

/* What caused the snapshot. */
enum ot_trigger {
    OT_TRIGGER_OOM = 1,    /* an allocation returned CUDA_ERROR_OUT_OF_MEMORY */
    OT_TRIGGER_EXIT = 2,   /* process exit, OOMTRACE_DUMP contains "exit" */
    OT_TRIGGER_SIGNAL = 3, /* OOMTRACE_SIGNAL was delivered */
    OT_TRIGGER_API = 4,    /* oomtrace_dump() */
    OT_TRIGGER_FLUSH = 5,  /* periodic crash-surviving flush (process may not have finished) */
    OT_TRIGGER_FRAMEWORK_OOM = 6, /* since 1.2: a framework refused an allocation (the fatal snapshot) */
};

/* Event kinds, in the ring and in allocation records' provenance. */
enum ot_event_kind {
    OT_EV_ALLOC = 1,  /* memory taken */
    OT_EV_FREE = 2,   /* memory given back (size = the allocation's size) */
    OT_EV_FAILED = 3, /* an allocation call that returned an error; size = requested bytes */
    OT_EV_MARKER = 4, /* oomtrace_mark(); label follows */
    OT_EV_MAP = 5,    /* VMM: a handle mapped at an address range (takes no memory) */
    OT_EV_UNMAP = 6,  /* VMM: a range unmapped */
};

/* Memory categories. Host categories never enter device totals. */
enum ot_category {
    OT_CAT_DEVICE = 1,      /* cuMemAlloc, cuMemAllocPitch */
    OT_CAT_ASYNC = 2,       /* stream-ordered: cuMemAllocAsync, cuMemAllocFromPoolAsync */
    OT_CAT_VMM = 3,         /* cuMemCreate physical memory */
    OT_CAT_MANAGED = 4,     /* cuMemAllocManaged */
    OT_CAT_ARRAY = 5,       /* CUDA arrays, size estimated from the descriptor */
    OT_CAT_HOST_PINNED = 6, /* page-locked host memory */
    OT_CAT_IMPORTED = 7,    /* imported from another process; not this process's own */
    OT_CAT_COUNT = 8,
};

static inline const char *ot_category_name(unsigned c)
{
    static const char *const names[OT_CAT_COUNT] = {
        "unknown", "device", "async", "vmm", "managed", "array", "host_pinned", "imported",
    };
    return c < OT_CAT_COUNT ? names[c] : "unknown";
}

/* Counts toward a device's own bytes (and so toward its peak). */
static inline int ot_category_is_device(unsigned c)
{
    return c >= OT_CAT_DEVICE && c <= OT_CAT_ARRAY;
}

/* Allocation record flags. */
#define OT_REC_SIZE_ESTIMATED 0x1u /* size computed from a descriptor (arrays) */
#define OT_REC_HOST_LOCATION 0x2u  /* VMM memory whose location is the host */

/* The driver entry points oomtrace wraps. X(id, exact_name). Ids are stable across versions of the
 * format: append, never renumber. */
#define OT_API_LIST(X)                                                                                 \
    X(1, cuMemAlloc_v2)                                                                                \
    X(2, cuMemFree_v2)                                                                                 \
    X(3, cuMemAllocPitch_v2)                                                                           \
    X(4, cuMemAllocManaged)                                                                            \
    X(5, cuMemAllocAsync)                                                                              \
    X(6, cuMemAllocAsync_ptsz)                                                                         \
    X(7, cuMemFreeAsync)                                                                               \
    X(8, cuMemFreeAsync_ptsz)                                                                          \
    X(9, cuMemAllocFromPoolAsync)                                                                      \
    X(10, cuMemAllocFromPoolAsync_ptsz)                                                                \
    X(11, cuMemCreate)                                                                                 \
    X(12, cuMemRelease)                                                                                \
    X(13, cuMemRetainAllocationHandle)                                                                 \
    X(14, cuMemMap)                                                                                    \
    X(15, cuMemUnmap)                                                                                  \
    X(16, cuMemImportFromShareableHandle)                                                              \
    X(17, cuArrayCreate_v2)                                                                            \
    X(18, cuArray3DCreate_v2)                                                                          \
    X(19, cuMipmappedArrayCreate)                                                                      \
    X(20, cuArrayDestroy)                                                                              \
    X(21, cuMipmappedArrayDestroy)                                                                     \
    X(22, cuMemAllocHost_v2)                                                                           \
    X(23, cuMemHostAlloc)                                                                              \
    X(24, cuMemFreeHost)                                                                               \
    X(25, cuMemHostRegister_v2)                                                                        \
    X(26, cuMemHostUnregister)                                                                         \
    X(27, cuIpcOpenMemHandle_v2)                                                                       \
    X(28, cuIpcCloseMemHandle)                                                                         \
    X(29, cuMemAddressReserve)                                                                         \
    X(30, cuMemAddressFree)                                                                            \
    X(31, oomtrace_mark)                                                                               \
    X(32, framework_allocator)

enum ot_api {
    OT_API_NONE = 0,
#define OT_X_ENUM(id, name) OT_API_##name = id,
    OT_API_LIST(OT_X_ENUM)
#undef OT_X_ENUM
    OT_API_COUNT
};

static inline const char *ot_api_name(unsigned id)
{
    switch (id) {
#define OT_X_NAME(i, name)                                                                             \
    case i:                                                                                            \
        return #name;
        OT_API_LIST(OT_X_NAME)
#undef OT_X_NAME
    default:
        return "unknown";
    }
}

/* OT_SEC_FRAMEWORK payload (docs/FORMAT.md): uv layout_version, uv n_records, then n_records x
 * { uv kind, uv body_len, body }. Readers skip unknown kinds by length. */
#define OT_FW_LAYOUT_VERSION 1
enum ot_fw_record {
    OT_FW_INFO = 1,
    OT_FW_STATS = 2,
    OT_FW_SETTINGS = 3,
    OT_FW_SEGMENTS = 4,
    OT_FW_BLOCKS = 5,
    OT_FW_ARRAYS = 6,
    OT_FW_ERROR = 7,
    OT_FW_BLOCK_FRAMES = 8,
    OT_FW_ROLES = 9,
    OT_FW_STEPS = 10,
};
/* Values inside the records (docs/FORMAT.md, FRAMEWORK). */
#define OT_FW_DEVICE_ALL 0xffffffffu /* STATS device: the counters are not one device's */
#define OT_FW_SEG_EXPANDABLE 0x1u
#define OT_FW_SEG_LARGE_POOL 0x2u
#define OT_FW_SEG_PRIVATE_POOL 0x4u /* a CUDA graph's private pool */
enum ot_fw_block_state { OT_FW_BLOCK_INACTIVE = 0, OT_FW_BLOCK_ALLOCATED = 1, OT_FW_BLOCK_PENDING_FREE = 2 };
enum ot_fw_role_category {
    OT_FW_ROLE_PARAMETERS = 1,
    OT_FW_ROLE_GRADIENTS = 2,
    OT_FW_ROLE_OPTIMIZER_STATE = 3,
    OT_FW_ROLE_BUFFERS = 4,
};

/* A frame in a STACKS entry: native addresses are stored shifted left by one; Python frames set the
 * low bit and carry a PYFRAMES id. */
#define OT_FRAME_PYTHON 0x1u

/* Varint codec, shared so that writer and reader cannot drift apart. */
static inline uint8_t *ot_put_uvarint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint64_t ot_zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t ot_unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Bounded reading cursor. Every get_* fails (returns 0 and sets err) rather than reading past end. */
struct ot_cursor {
    const uint8_t *p;
    const uint8_t *end;
    int err;
};

static inline uint64_t ot_get_uvarint(struct ot_cursor *c)
{
    uint64_t v = 0;
    unsigned shift = 0;
    while (c->p < c->end && shift < 64) {
        uint8_t b = *c->p++;
        if (shift == 63 && b > 1)
            break; /* a tenth byte may only carry the 64th bit */
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
        shift += 7;
    }
    c->err = 1;
    return 0;
}

static inline int64_t ot_get_svarint(struct ot_cursor *c)
{
    return ot_unzigzag(ot_get_uvarint(c));
}

/* A string view into the payload; len is bounded by what remains. */
static inline const char *ot_get_str(struct ot_cursor *c, size_t *len)
{
    uint64_t n = ot_get_uvarint(c);
    if (c->err || n > (uint64_t)(c->end - c->p)) {
        c->err = 1;
        *len = 0;
        return "";
    }
    const char *s = (const char *)c->p;
    c->p += n;
    *len = (size_t)n;
    return s;
}

#endif
