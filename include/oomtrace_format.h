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
#define OT_VERSION_MINOR 4

struct ot_file_header {
    char magic[8];          /* "OOMTRACE" */
    uint16_t version_major; /* readers refuse a different major */
    uint16_t version_minor; /* readers accept any minor: unknown sections are skipped */
    uint32_t flags;         /* OT_FILE_* (OT_FLAG_LIST) */
    uint64_t reserved0;
    uint64_t reserved1;
};

/* Section header: 24 bytes, then stored_len bytes of payload. */
struct ot_section_header {
    uint32_t type;       /* enum ot_section */
    uint32_t flags;      /* OT_SECTION_* (OT_FLAG_LIST) */
    uint64_t stored_len; /* bytes that follow this header */
    uint64_t raw_len;    /* payload bytes after decompression (== stored_len when not compressed) */
};

/* Readers cap raw_len to keep a hostile file from asking for unbounded memory. */
#define OT_MAX_SECTION_RAW ((uint64_t)4 << 30)

/* The lists below are the one place that names a section, trigger, event kind, record field or flag
 * bit; enums and name functions are generated from them. Ids are stable across versions of the format:
 * append, never renumber. Each entry is X(id, NAME, "name", "doc"): NAME makes the enum constant, "name" is
 * what the name function returns. */

/* case id: return "name"; for the name functions below. */
#define OT_X_NAME_CASE(id, NAME, name, doc)                                                        \
    case id:                                                                                       \
        return name;
#define OT_NAME_FUNCTION(fn, LIST, unknown)                                                        \
    static inline const char *fn(uint64_t id)                                                      \
    {                                                                                              \
        switch (id) {                                                                              \
            LIST(OT_X_NAME_CASE)                                                                   \
        default:                                                                                   \
            return unknown;                                                                        \
        }                                                                                          \
    }

/* Sections. A file holds each at most once, except PEAK and PEAK_REF (one per device). */
#define OT_SECTION_LIST(X)                                                                         \
    X(1, META, "META", "who, when, why: trigger, process, rank, ring statistics")                  \
    X(2, DEVICES, "DEVICES", "per device: name, uuid, memory, tracked bytes, peak")                \
    X(3, FAILURE, "FAILURE", "the allocation whose failure triggered the snapshot")                \
    X(4, MODULES, "MODULES", "loaded objects: path, range, load bias, build id")                   \
    X(5, SYMBOLS, "SYMBOLS", "names of native frame addresses, taken at dump time")                \
    X(6, PYFRAMES, "PYFRAMES", "Python frames by id: function, file, line")                        \
    X(7, STACKS, "STACKS", "interned backtraces by id")                                            \
    X(8, LIVE, "LIVE", "the live set, record by record")                                           \
    X(9, PEAK, "PEAK", "the live set at one device's peak, record by record")                      \
    X(10, EVENTS, "EVENTS", "the event ring: compressed chunks")                                   \
    X(11, MARKERS, "MARKERS", "oomtrace_mark() labels")                                            \
    X(12, POOLS, "POOLS", "stream-ordered memory pools")                                           \
    X(13, MAPPINGS, "MAPPINGS", "VMM mappings")                                                    \
    X(14, PROCESSES, "PROCESSES", "other processes on the devices (NVML)")                         \
    X(15, THREADS, "THREADS", "thread names")                                                      \
    X(16, LIVE_SEQ, "LIVE_SEQ", "since 1.1: LIVE in seq order, by column")                         \
    X(17, PEAK_REF, "PEAK_REF", "since 1.1: PEAK by reference to the live set")                    \
    X(18, FRAMEWORK, "FRAMEWORK", "since 1.2: the frameworks' own view, stored as the Python companion gave it") \
    X(19, PROBES, "PROBES", "since 1.2: with a framework OOM, the driver OOM snapshots since the last one") \
    X(20, BORROWED, "BORROWED", "since 1.2: the thread each borrowed stack took its Python frames from") \
    X(21, CTX_FREED, "CTX_FREED", "since 1.4: the allocations each context destruction in the ring freed")

enum ot_section {
#define OT_X_ENUM(id, NAME, name, doc) OT_SEC_##NAME = id,
    OT_SECTION_LIST(OT_X_ENUM)
#undef OT_X_ENUM
};

/* "STACKS", or "unknown". */
OT_NAME_FUNCTION(ot_section_name, OT_SECTION_LIST, "unknown")

/* What caused the snapshot. The name is the lower-case word reports and file names use. */
#define OT_TRIGGER_LIST(X)                                                                         \
    X(1, OOM, "oom", "an allocation returned CUDA_ERROR_OUT_OF_MEMORY")                            \
    X(2, EXIT, "exit", "process exit, OOMTRACE_DUMP contains \"exit\"")                            \
    X(3, SIGNAL, "signal", "OOMTRACE_SIGNAL was delivered")                                        \
    X(4, API, "api", "oomtrace_dump()")                                                            \
    X(5, FLUSH, "flush", "periodic crash-surviving flush (the process may not have finished)")     \
    X(6, FRAMEWORK_OOM, "framework-oom", "since 1.2: a framework refused an allocation")

enum ot_trigger {
#define OT_X_ENUM(id, NAME, name, doc) OT_TRIGGER_##NAME = id,
    OT_TRIGGER_LIST(OT_X_ENUM)
#undef OT_X_ENUM
};

/* "oom", ..., or NULL when unknown. */
OT_NAME_FUNCTION(ot_trigger_name, OT_TRIGGER_LIST, NULL)

/* Event kinds, in the ring and in allocation records' provenance. */
#define OT_EVENT_KIND_LIST(X)                                                                      \
    X(1, ALLOC, "alloc", "memory taken")                                                           \
    X(2, FREE, "free", "memory given back (size = the allocation's size)")                         \
    X(3, FAILED, "failed", "an allocation call that returned an error; size = requested bytes")    \
    X(4, MARKER, "marker", "oomtrace_mark(); label follows")                                       \
    X(5, MAP, "map", "VMM: a handle mapped at an address range (takes no memory)")                 \
    X(6, UNMAP, "unmap", "VMM: a range unmapped")                                                 \
    X(7, CONTEXT_END, "context_end", "since 1.4: a context destroyed or a primary context reset; every allocation made in it freed with it (size = their device bytes, addr = the context)")

enum ot_event_kind {
#define OT_X_ENUM(id, NAME, name, doc) OT_EV_##NAME = id,
    OT_EVENT_KIND_LIST(OT_X_ENUM)
#undef OT_X_ENUM
};

/* "alloc", ..., or NULL when unknown. */
OT_NAME_FUNCTION(ot_event_kind_name, OT_EVENT_KIND_LIST, NULL)

/* Memory categories. Host categories never enter device totals. X(id, NAME, "name", "doc"). */
#define OT_CATEGORY_LIST(X)                                                                        \
    X(1, DEVICE, "device", "cuMemAlloc, cuMemAllocPitch")                                          \
    X(2, ASYNC, "async", "stream-ordered: cuMemAllocAsync, cuMemAllocFromPoolAsync")               \
    X(3, VMM, "vmm", "cuMemCreate physical memory")                                                \
    X(4, MANAGED, "managed", "cuMemAllocManaged")                                                  \
    X(5, ARRAY, "array", "CUDA arrays, size estimated from the descriptor")                        \
    X(6, HOST_PINNED, "host_pinned", "page-locked host memory")                                    \
    X(7, IMPORTED, "imported", "imported from another process; not this process's own")

enum ot_category {
#define OT_X_ENUM(id, NAME, name, doc) OT_CAT_##NAME = id,
    OT_CATEGORY_LIST(OT_X_ENUM)
#undef OT_X_ENUM
    OT_CAT_COUNT = 8, /* one more than the largest id: the length of per-category arrays */
};

/* "device", ..., or "unknown". */
OT_NAME_FUNCTION(ot_category_name, OT_CATEGORY_LIST, "unknown")

/* Counts toward a device's own bytes (and so toward its peak). */
static inline int ot_category_is_device(uint64_t c)
{
    return c >= OT_CAT_DEVICE && c <= OT_CAT_ARRAY;
}

/* Flag bits, each named once. X(FIELD, NAME, bit, "doc") gives OT_<FIELD>_<NAME>. */
#define OT_FLAG_LIST(X)                                                                            \
    X(FILE, COMPLETE, 0x1, "file header: the writer finished; absent in a crash-surviving trace")  \
    X(SECTION, ZSTD, 0x1, "section header: the payload is one zstd frame of raw_len bytes")        \
    X(DEV, MEMINFO_KNOWN, 0x1, "DEVICES: total and free bytes are known")                          \
    X(DEV, BASELINE_KNOWN, 0x2, "DEVICES: the used bytes before the first tracked allocation are known") \
    X(STACK, TRUNCATED, 0x1, "STACKS: the backtrace was cut at the maximum depth")                 \
    X(STACK, NO_PYTHON, 0x2, "STACKS: the process runs Python, this thread had no Python frames")  \
    X(STACK, BORROWED, 0x4, "STACKS: since 1.2, the Python frames are another thread's, which waited meanwhile") \
    X(REC, SIZE_ESTIMATED, 0x1, "record: size estimated (arrays: descriptor; imported: a mapping, size 1 = not known)") \
    X(REC, HOST_LOCATION, 0x2, "record: VMM memory whose location is the host")                    \
    X(POOL, DEFAULT, 0x1, "POOLS: the device's default pool")                                      \
    X(POOL, UNREADABLE, 0x2, "POOLS: the pool's attributes could not be read")                     \
    X(FRAME, PYTHON, 0x1, "STACKS frame word: a Python frame (PYFRAMES id << 1); else address << 1")

enum ot_flag {
#define OT_X_ENUM(field, name, bit, doc) OT_##field##_##name = bit,
    OT_FLAG_LIST(OT_X_ENUM)
#undef OT_X_ENUM
};

/* PYFRAMES: the file name of the Python companion's own modules starts with this (they are loaded from
 * source embedded in the library). Stacks taken from its hooks keep those frames; readers leave them out. */
#define OT_TRACER_PYFILE_PREFIX "<oomtrace>/"

/* The driver entry points oomtrace wraps. X(id, exact_name). Ids are stable across versions of the
 * format: append, never renumber. 33-35 also stand for the same context end through the older ABIs
 * (cuCtxDestroy, cuDevicePrimaryCtxReset, cuDevicePrimaryCtxRelease without _v2). */
#define OT_API_LIST(X)                                                                             \
    X(1, cuMemAlloc_v2)                                                                            \
    X(2, cuMemFree_v2)                                                                             \
    X(3, cuMemAllocPitch_v2)                                                                       \
    X(4, cuMemAllocManaged)                                                                        \
    X(5, cuMemAllocAsync)                                                                          \
    X(6, cuMemAllocAsync_ptsz)                                                                     \
    X(7, cuMemFreeAsync)                                                                           \
    X(8, cuMemFreeAsync_ptsz)                                                                      \
    X(9, cuMemAllocFromPoolAsync)                                                                  \
    X(10, cuMemAllocFromPoolAsync_ptsz)                                                            \
    X(11, cuMemCreate)                                                                             \
    X(12, cuMemRelease)                                                                            \
    X(13, cuMemRetainAllocationHandle)                                                             \
    X(14, cuMemMap)                                                                                \
    X(15, cuMemUnmap)                                                                              \
    X(16, cuMemImportFromShareableHandle)                                                          \
    X(17, cuArrayCreate_v2)                                                                        \
    X(18, cuArray3DCreate_v2)                                                                      \
    X(19, cuMipmappedArrayCreate)                                                                  \
    X(20, cuArrayDestroy)                                                                          \
    X(21, cuMipmappedArrayDestroy)                                                                 \
    X(22, cuMemAllocHost_v2)                                                                       \
    X(23, cuMemHostAlloc)                                                                          \
    X(24, cuMemFreeHost)                                                                           \
    X(25, cuMemHostRegister_v2)                                                                    \
    X(26, cuMemHostUnregister)                                                                     \
    X(27, cuIpcOpenMemHandle_v2)                                                                   \
    X(28, cuIpcCloseMemHandle)                                                                     \
    X(29, cuMemAddressReserve)                                                                     \
    X(30, cuMemAddressFree)                                                                        \
    X(31, oomtrace_mark)                                                                           \
    X(32, framework_allocator)                                                                     \
    X(33, cuCtxDestroy_v2)                                                                         \
    X(34, cuDevicePrimaryCtxReset_v2)                                                              \
    X(35, cuDevicePrimaryCtxRelease_v2)

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
#define OT_X_NAME(i, name)                                                                         \
    case i:                                                                                        \
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

/* The fields of the other sections, in file order (docs/FORMAT.md gives their meaning and units). Each
 * entry is X(ctx, name, coding, "doc"): ctx is passed through as given (a user's struct type, say);
 * coding is U (uvarint), S (zigzag varint) or STR (string). A list section is `uv count`, then count
 * items of its fields; what a list holds beyond them is said above it. */

/* META: the head, argc strings (the command line), the tail. */
#define OT_META_FIELDS_HEAD(X, ctx)                                                                \
    X(ctx, tracer_version, STR, "")                                                                \
    X(ctx, trigger, U, "enum ot_trigger")                                                          \
    X(ctx, reason, STR, "free text: the signal's name, oomtrace_dump's label")                     \
    X(ctx, pid, U, "")                                                                             \
    X(ctx, ppid, U, "")                                                                            \
    X(ctx, host, STR, "")                                                                          \
    X(ctx, argc, U, "then argc strings")
#define OT_META_FIELDS_TAIL(X, ctx)                                                                \
    X(ctx, exe, STR, "/proc/self/exe")                                                             \
    X(ctx, wall_ns, U, "CLOCK_REALTIME at the snapshot")                                           \
    X(ctx, mono_ns, U, "CLOCK_MONOTONIC at the snapshot")                                          \
    X(ctx, start_mono_ns, U, "CLOCK_MONOTONIC when the tracer started")                            \
    X(ctx, rank, S, "-1 unknown")                                                                  \
    X(ctx, local_rank, S, "-1 unknown")                                                            \
    X(ctx, world_size, S, "-1 unknown")                                                            \
    X(ctx, rank_source, STR, "the variable the rank came from, or empty")                          \
    X(ctx, events_recorded, U, "events recorded since start")                                      \
    X(ctx, events_kept, U, "events in EVENTS")                                                     \
    X(ctx, events_dropped, U, "events in chunks the ring dropped")                                 \
    X(ctx, chunks_dropped, U, "")                                                                  \
    X(ctx, ring_budget_bytes, U, "OOMTRACE_RING")                                                  \
    X(ctx, ring_used_bytes, U, "compressed bytes held by the ring")                                \
    X(ctx, snapshot_seq, U, "1 for the process's first snapshot")                                  \
    X(ctx, python_version, STR, "or empty")                                                        \
    X(ctx, cuda_visible_devices, STR, "or empty")

/* DEVICES item: the fields, then ncat uvarints (live bytes by category id). */
#define OT_DEVICE_FIELDS(X, ctx)                                                                   \
    X(ctx, ordinal, S, "as this process sees it")                                                  \
    X(ctx, name, STR, "")                                                                          \
    X(ctx, uuid, STR, "16 raw bytes, or empty")                                                    \
    X(ctx, flags, U, "OT_DEV_* bits")                                                              \
    X(ctx, total_bytes, U, "cuMemGetInfo at the snapshot")                                         \
    X(ctx, free_bytes, U, "cuMemGetInfo at the snapshot")                                          \
    X(ctx, baseline_used_bytes, U, "used before this process's first tracked allocation")          \
    X(ctx, tracked_bytes, U, "this process's live bytes in device categories")                     \
    X(ctx, peak_bytes, U, "high-water mark of tracked_bytes")                                      \
    X(ctx, peak_time_ns, U, "")                                                                    \
    X(ctx, peak_seq, U, "the event that set the peak")                                             \
    X(ctx, ncat, U, "then ncat uvarints")

/* FAILURE: one item, no count. */
#define OT_FAILURE_FIELDS(X, ctx)                                                                  \
    X(ctx, api, U, "enum ot_api")                                                                  \
    X(ctx, category, U, "enum ot_category")                                                        \
    X(ctx, device, S, "")                                                                          \
    X(ctx, requested_bytes, U, "")                                                                 \
    X(ctx, result_code, U, "the CUresult returned")                                                \
    X(ctx, time_ns, U, "")                                                                         \
    X(ctx, tid, U, "")                                                                             \
    X(ctx, stack_id, U, "")                                                                        \
    X(ctx, seq, U, "")

#define OT_MODULE_FIELDS(X, ctx)                                                                   \
    X(ctx, path, STR, "")                                                                          \
    X(ctx, start, U, "[start, end) of the loaded segments")                                        \
    X(ctx, end, U, "")                                                                             \
    X(ctx, load_bias, U, "dlpi_addr")                                                              \
    X(ctx, build_id, STR, "raw NT_GNU_BUILD_ID bytes, or empty")

#define OT_SYMBOL_FIELDS(X, ctx)                                                                   \
    X(ctx, address, U, "")                                                                         \
    X(ctx, name, STR, "")                                                                          \
    X(ctx, offset, U, "address - symbol start")

#define OT_PYFRAME_FIELDS(X, ctx)                                                                  \
    X(ctx, id, U, "")                                                                              \
    X(ctx, function, STR, "qualified name")                                                        \
    X(ctx, file, STR, "")                                                                          \
    X(ctx, line, U, "0 unknown")

/* STACKS item: the fields, then nframes frame words (OT_FRAME_PYTHON). */
#define OT_STACK_FIELDS(X, ctx)                                                                    \
    X(ctx, id, U, "never 0")                                                                       \
    X(ctx, flags, U, "OT_STACK_* bits")                                                            \
    X(ctx, nframes, U, "then nframes words")

/* EVENTS item: one compressed chunk of the ring. */
#define OT_CHUNK_FIELDS(X, ctx)                                                                    \
    X(ctx, first_seq, U, "seq of the chunk's first event")                                         \
    X(ctx, nevents, U, "")                                                                         \
    X(ctx, t0_ns, U, "")                                                                           \
    X(ctx, raw_len, U, "bytes once decompressed")                                                  \
    X(ctx, frame, STR, "one zstd frame")

#define OT_MARKER_FIELDS(X, ctx)                                                                   \
    X(ctx, seq, U, "")                                                                             \
    X(ctx, time_ns, U, "")                                                                         \
    X(ctx, tid, U, "")                                                                             \
    X(ctx, label, STR, "")

#define OT_POOL_FIELDS(X, ctx)                                                                     \
    X(ctx, handle, U, "")                                                                          \
    X(ctx, device, S, "")                                                                          \
    X(ctx, flags, U, "OT_POOL_* bits")                                                             \
    X(ctx, reserved_bytes, U, "")                                                                  \
    X(ctx, used_bytes, U, "")

#define OT_MAPPING_FIELDS(X, ctx)                                                                  \
    X(ctx, address, U, "")                                                                         \
    X(ctx, size, U, "")                                                                            \
    X(ctx, handle, U, "")                                                                          \
    X(ctx, offset, U, "")

/* PROCESSES source: where the list of other processes came from. */
enum ot_processes_source { OT_PROCESSES_NONE = 0, OT_PROCESSES_NVML = 1 };

/* PROCESSES, appended (since 1.3): how each listed process is related to this one, and where its name
 * came from. */
enum ot_process_relation {
    OT_PROCESS_RELATION_UNKNOWN = 0, /* its /proc/PID/stat was not readable (another PID namespace) */
    OT_PROCESS_RELATION_NONE = 1,    /* neither this process's descendant nor its ancestor */
    OT_PROCESS_RELATION_CHILD = 2,   /* a descendant: its parents, walked up, reach this process */
    OT_PROCESS_RELATION_PARENT = 3,  /* an ancestor: this process's parents, walked up, reach it */
    OT_PROCESS_RELATION_SELF = 4     /* this process */
};
enum ot_process_name_source {
    OT_PROCESS_NAME_NONE = 0,
    OT_PROCESS_NAME_PROC = 1, /* /proc/PID/comm, and command from /proc/PID/cmdline */
    OT_PROCESS_NAME_NVML = 2  /* nvmlSystemGetProcessName: /proc did not show the process (or showed another) */
};

/* PROCESSES: these two, then the list. */
#define OT_PROCESSES_FIELDS(X, ctx)                                                                \
    X(ctx, source, U, "enum ot_processes_source")                                                  \
    X(ctx, note, STR, "why the list is empty or partial")
#define OT_PROCESS_FIELDS(X, ctx)                                                                  \
    X(ctx, device, S, "")                                                                          \
    X(ctx, pid, U, "")                                                                             \
    X(ctx, used_bytes, U, "")                                                                      \
    X(ctx, name, STR, "")
/* Then (since 1.3) a count equal to the list's, and for each process in the list's order: */
#define OT_PROCESS_DETAIL_FIELDS(X, ctx)                                                           \
    X(ctx, relation, U, "enum ot_process_relation")                                                \
    X(ctx, name_source, U, "enum ot_process_name_source")                                          \
    X(ctx, command, STR, "its command line (arguments joined by spaces), else NVML's name")

#define OT_THREAD_FIELDS(X, ctx)                                                                   \
    X(ctx, tid, U, "")                                                                             \
    X(ctx, name, STR, "")

/* PEAK and PEAK_REF begin with these; PEAK then has a record list, PEAK_REF OT_PEAK_REF_FIELDS and one. */
#define OT_PEAK_FIELDS(X, ctx)                                                                     \
    X(ctx, device, S, "")                                                                          \
    X(ctx, peak_bytes, U, "")                                                                      \
    X(ctx, peak_time_ns, U, "")                                                                    \
    X(ctx, peak_seq, U, "")
#define OT_PEAK_REF_FIELDS(X, ctx)                                                                 \
    X(ctx, count, U, "records in the whole peak set")                                              \
    X(ctx, lost, U, "peak records the tracer had no memory to keep")

/* An allocation record (LIVE, PEAK, PEAK_REF, and by column in LIVE_SEQ): its fields in file order.
 * X(column, name, coding, seq_coding, "doc"): coding is how the field is stored in a record; seq_coding
 * how its column is stored in LIVE_SEQ, where records are in seq order and some fields are deltas from
 * the record before (the first from zero). */
#define OT_RECORD_FIELDS(X)                                                                        \
    X(0, address, U, DS, "address (device, host memory), or handle (VMM, arrays)")                 \
    X(1, size, U, U, "bytes")                                                                      \
    X(2, device, S, S, "device ordinal; -1 the host")                                              \
    X(3, category, U, U, "enum ot_category")                                                       \
    X(4, api, U, U, "enum ot_api: the call that allocated")                                        \
    X(5, flags, U, U, "OT_REC_* bits")                                                             \
    X(6, stack_id, U, U, "STACKS id of the allocating backtrace; 0 none")                          \
    X(7, tid, U, U, "thread id")                                                                   \
    X(8, time_ns, U, DS, "monotonic time of the allocation")                                       \
    X(9, seq, U, DU, "the allocation's event seq")

enum {
#define OT_X_COUNT(col, name, coding, seq_coding, doc) +1
    OT_RECORD_NFIELDS = 0 OT_RECORD_FIELDS(OT_X_COUNT),
#undef OT_X_COUNT
};

/* How a field is stored: U uvarint, S zigzag varint, DU uvarint of the difference from the previous
 * value, DS zigzag varint of that difference (wrapping, as unsigned arithmetic). */
enum ot_coding { OT_CODING_U, OT_CODING_S, OT_CODING_DU, OT_CODING_DS };

static inline uint8_t *ot_put_field(uint8_t *p, enum ot_coding c, uint64_t v, uint64_t prev)
{
    switch (c) {
    case OT_CODING_S:
        return ot_put_uvarint(p, ot_zigzag((int64_t)v));
    case OT_CODING_DU:
        return ot_put_uvarint(p, v - prev);
    case OT_CODING_DS:
        return ot_put_uvarint(p, ot_zigzag((int64_t)(v - prev)));
    default:
        return ot_put_uvarint(p, v);
    }
}

/* The value, given the previous one for a delta coding (sums wrap: a reader that needs a growing column
 * compares the result with prev). */
static inline uint64_t ot_get_field(struct ot_cursor *c, enum ot_coding coding, uint64_t prev)
{
    switch (coding) {
    case OT_CODING_S:
        return (uint64_t)ot_get_svarint(c);
    case OT_CODING_DU:
        return prev + ot_get_uvarint(c);
    case OT_CODING_DS:
        return prev + (uint64_t)ot_get_svarint(c);
    default:
        return ot_get_uvarint(c);
    }
}

/* The PEAK_REF rule: a record of the live set belongs to a device's peak set iff it is on that device,
 * in a device category, and was made at or before the peak (seq <= peak_seq). Records freed since are
 * the PEAK_REF section's own; those still live are found in the live set by this rule. */
static inline int ot_peak_ref_shares(int64_t device, uint64_t category, uint64_t seq, int64_t peak_device,
                                     uint64_t peak_seq)
{
    return device == peak_device && ot_category_is_device(category) && seq <= peak_seq;
}

#endif
