/* snapgen's parts (tests/snapgen/README): the options, the bytes, the simulated run and its stacks, and the
 * writers of each group of sections, which follow docs/FORMAT.md. One program; these are its shared state. */
#ifndef SNAPGEN_H
#define SNAPGEN_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr, for --real-stacks */
#endif
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "oomtrace_format.h"

/* ---- output buffer (bytes.c) ---- */

void oom(void);

struct buf {
    uint8_t *p;
    size_t n, cap;
};

void need(struct buf *b, size_t k);
void put_bytes(struct buf *b, const void *p, size_t n);
void put_uv(struct buf *b, uint64_t v);
void put_sv(struct buf *b, int64_t v);
void put_str(struct buf *b, const char *s, size_t n);
void put_cstr(struct buf *b, const char *s);
void put_le(struct buf *b, uint64_t v, int bytes);
void free_buf(struct buf *b);

/* ---- deterministic randomness (splitmix64); the seed is the only state ---- */

extern uint64_t rng;

static inline uint64_t rnd(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t below(uint64_t n)
{
    return n ? rnd() % n : 0;
}

/* ---- options (snapgen.c) and damage modes (damage.c) ---- */

enum corrupt {
    C_NONE,
    C_TRUNCATED,
    C_BAD_MAGIC,
    C_BAD_VERSION,
    C_SECTION_PAST_EOF,
    C_BAD_ZSTD,
    C_HUGE_COUNT,
    C_VARINT_OVERFLOW,
    C_RAW_LEN_CAP,
    C_ZSTD_SIZE_MISMATCH,
    C_CHUNK_ZSTD,
    C_EVENT_TRUNCATED,
    C_CHUNK_COUNT,
    C_NO_META,
    C_SHORT_HEADER,
    C_FIELD_PAST_END,
    C_DUP_SECTION,
    C_DUP_STACK,
    C_STRING_PAST_END,
    C_SECTION_FLAGS,
    C_RAW_MISMATCH,
    C_HEADER_CUT,
    C_PEAK_REF_COUNT,
    C_LIVE_SEQ_SHORT,
    C_BOTH_LIVE,
    C_PEAK_REF_NO_LIVE,
    /* These damage the borrowed stacks' list and imply --borrowed. */
    C_BORROWED_STACK,
    C_BORROWED_UNFLAGGED,
    C_BORROWED_COUNT,
    /* These damage the context ends' list and imply --ctx-ends. */
    C_CTX_ORDER,
    C_CTX_OVERLIST,
    C_CTX_COUNT,
    C_CTX_SIZE,
    /* From here on the modes damage the frameworks' view and imply --framework torch when none is given. */
    C_FW_LAYOUT,
    C_FW_RECORD_PAST_END,
    C_FW_BODY_LEFTOVER,
    C_FW_INFO_SHORT,
    C_FW_STATS_COUNT,
    C_FW_SETTINGS_SHORT,
    C_FW_SEGMENT_COLUMNS,
    C_FW_SEGMENT_BLOCKS,
    C_FW_SEGMENT_WRAP,
    C_FW_BLOCK_STATE,
    C_FW_BLOCK_SEGMENT,
    C_FW_BLOCK_OUTSIDE,
    C_FW_DUP_SEGMENTS,
    C_FW_ARRAYS_SHORT,
    C_FW_ERROR_SHORT,
    C_FW_FRAMES_BLOCK,
    C_FW_ROLES_LABEL,
    C_FW_STEPS_SHORT,
    C_PROBES_COUNT,
    C_PROCESS_DETAILS_COUNT,
    C_PROCESS_DETAILS_SHORT,
    C_COUNT
};

extern const char *const corrupt_names[C_COUNT];

struct cfg {
    uint64_t seed, events, live, stacks, devices, chunk, drop_chunks, markers_every;
    int trigger;
    bool incomplete, compress, real_stacks, future, hostile, seq_order;
    unsigned frameworks; /* FW_* bits: the frameworks' view the companion would have written */
    uint64_t fraction_pct; /* torch's per-process memory fraction, percent (0: none) */
    uint64_t jax_device;   /* the device JAX's counters and arrays are on */
    bool no_model;         /* torch's ROLES record empty (no model's tensor on the GPU) */
    bool fw_earlier;       /* the frameworks' view is the one of an earlier framework OOM */
    uint64_t probes;       /* driver-level OOM snapshots before a framework OOM */
    bool no_probes;        /* a framework OOM without its list of them (an older companion's) */
    bool borrowed;         /* some stacks borrowed their Python frames from a waiting thread (BORROWED) */
    bool ctx_ends;         /* some steps end with a context's end instead of their frees (CTX_FREED) */
    enum corrupt corrupt;
    const char *out;
};
extern struct cfg cfg;

#define FW_TORCH 0x1u
#define FW_JAX 0x2u
#define FW_CUPY 0x4u

/* ---- stacks, modules, symbols, Python frames (stacks.c) ---- */

struct gstack {
    uint64_t id, flags, base_size;
    size_t n;
    uint64_t *frames;
};

struct gmodule {
    char *path;
    uint64_t start, end, bias;
    uint8_t build_id[64];
    size_t build_id_len;
};

struct gsym {
    uint64_t addr, off;
    char *name;
};

struct gpy {
    uint64_t id, line;
    char *func, *file;
};

extern struct gstack *stacks;
extern size_t nstacks;
extern struct gmodule *modules;
extern size_t nmodules;
extern struct gsym *syms;
extern size_t nsyms;
extern struct gpy *pys;
extern size_t npys;

void make_pyframes(void);
void make_fake_stacks(void);
void make_real_stacks(void);

/* ---- the simulated run (simulate.c) ---- */

struct rec {
    uint64_t addr, size, stack, tid, t, seq;
    int64_t dev;
    uint32_t cat, api, flags;
};

#define MAX_TEMPS 64
#define MAX_DEV 16

struct dev_state {
    uint64_t tracked, peak, peak_t, peak_seq, by_cat[OT_CAT_COUNT];
    uint64_t bump, temp_bump;
    size_t peak_npersist, peak_ntemps;
    struct rec peak_temps[MAX_TEMPS];
};

struct chunk {
    uint64_t first_seq, nevents, t0, raw_len;
    uint8_t *frame;
    size_t frame_len;
};

struct marker {
    uint64_t seq, t, tid;
    char label[64];
};

struct sim {
    uint64_t seq, t, start_t, total;
    struct rec *persist;
    size_t npersist, cappersist;
    struct rec temps[MAX_TEMPS];
    size_t ntemps;
    struct dev_state dev[MAX_DEV];
    uint64_t host_bump, vmm_handle;
    struct rec failed;
    bool has_failed;
    /* ring */
    struct buf raw;
    uint64_t c_first, c_n, c_t0, c_prev_t, c_prev_addr;
    struct chunk *chunks;
    size_t nchunks, capchunks;
    ZSTD_CCtx *cctx;
    /* context ends (--ctx-ends): each one's event and what it freed */
    struct ctx_end {
        uint64_t seq;
        size_t n;
        struct rec v[MAX_TEMPS];
    } ctx_ends[8];
    size_t nctx_ends;
    /* markers: the last 1024, as the tracer keeps them */
    struct marker markers[1024];
    uint64_t nmarkers;
};
extern struct sim sim;

void simulate(void);
uint64_t device_total(int64_t d);
uint64_t device_free(int64_t d);

#define BASELINE (512ULL << 20)
#define OTHER_PROC (2ULL << 30)
#define CONTEXT (300ULL << 20)

/* ---- sections (sections.c; the frameworks' view in framework.c) ---- */

struct secinfo {
    uint32_t type;
    size_t hdr_off, payload_off, stored_len;
    bool compressed;
};

extern struct buf snap; /* the file being written */
extern struct secinfo secs[64];
extern size_t nsecs;

void section(uint32_t type, struct buf *payload, bool compress);
struct secinfo *find_section(uint32_t type);
void write_file(void);
void write_framework(void);
void write_framework_failure(void);
void corrupt_file(void);

#endif
