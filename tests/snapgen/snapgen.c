/* snapgen: writes synthetic oomtrace snapshots that follow docs/FORMAT.md, so the reader can be tested
 * (and fuzzed, and benchmarked) without the tracer or a GPU.
 *
 * The run is simulated: persistent allocations (still live at the end), steps of temporaries that are
 * allocated and freed again, one large step (the peak), markers, and for --trigger oom a final failed
 * allocation. Every number in the snapshot comes from that simulation, so the sections agree with one
 * another: LIVE sums to DEVICES.tracked_bytes, PEAK to the peak, the ring to events_kept.
 *
 *   cc -O2 -Iinclude tests/snapgen/snapgen.c -lzstd -o build/snapgen
 *
 * The output is a function of the options (the seed included), except with --real-stacks, whose
 * addresses are this process's own and change with ASLR. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>
#include <getopt.h>
#include <inttypes.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "oomtrace_format.h"

/* ---- output buffer ---- */

struct buf {
    uint8_t *p;
    size_t n, cap;
};

static void oom(void)
{
    fputs("snapgen: out of memory\n", stderr);
    exit(1);
}

static void need(struct buf *b, size_t k)
{
    if (b->n + k <= b->cap)
        return;
    size_t c = b->cap ? b->cap : 256;
    while (c < b->n + k)
        c *= 2;
    b->p = realloc(b->p, c);
    if (!b->p)
        oom();
    b->cap = c;
}

static void put_bytes(struct buf *b, const void *p, size_t n)
{
    need(b, n);
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void put_uv(struct buf *b, uint64_t v)
{
    need(b, 10);
    b->n = (size_t)(ot_put_uvarint(b->p + b->n, v) - b->p);
}

static void put_sv(struct buf *b, int64_t v)
{
    put_uv(b, ot_zigzag(v));
}

static void put_str(struct buf *b, const char *s, size_t n)
{
    put_uv(b, n);
    put_bytes(b, s, n);
}

static void put_cstr(struct buf *b, const char *s)
{
    put_str(b, s, strlen(s));
}

static void put_le(struct buf *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) {
        uint8_t c = (uint8_t)(v >> (8 * i));
        put_bytes(b, &c, 1);
    }
}

static void free_buf(struct buf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

/* ---- deterministic randomness (splitmix64) ---- */

static uint64_t rng;

static uint64_t rnd(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t below(uint64_t n)
{
    return n ? rnd() % n : 0;
}

/* ---- options ---- */

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
};

static const char *const corrupt_names[] = {
    [C_NONE] = "none",
    [C_TRUNCATED] = "truncated",
    [C_BAD_MAGIC] = "bad-magic",
    [C_BAD_VERSION] = "bad-version",
    [C_SECTION_PAST_EOF] = "section-past-eof",
    [C_BAD_ZSTD] = "bad-zstd",
    [C_HUGE_COUNT] = "huge-count",
    [C_VARINT_OVERFLOW] = "varint-overflow",
    [C_RAW_LEN_CAP] = "raw-len-cap",
    [C_ZSTD_SIZE_MISMATCH] = "zstd-size-mismatch",
    [C_CHUNK_ZSTD] = "chunk-zstd",
    [C_EVENT_TRUNCATED] = "event-truncated",
    [C_CHUNK_COUNT] = "chunk-count",
    [C_NO_META] = "no-meta",
    [C_SHORT_HEADER] = "short-header",
    [C_FIELD_PAST_END] = "field-past-end",
    [C_DUP_SECTION] = "duplicate-section",
    [C_DUP_STACK] = "duplicate-stack",
    [C_STRING_PAST_END] = "string-past-end",
    [C_SECTION_FLAGS] = "section-flags",
    [C_RAW_MISMATCH] = "raw-mismatch",
    [C_HEADER_CUT] = "header-cut",
    [C_PEAK_REF_COUNT] = "peak-ref-count",
    [C_LIVE_SEQ_SHORT] = "live-seq-short",
    [C_BOTH_LIVE] = "both-live",
    [C_PEAK_REF_NO_LIVE] = "peak-ref-no-live",
    [C_BORROWED_STACK] = "borrowed-stack",
    [C_BORROWED_UNFLAGGED] = "borrowed-unflagged",
    [C_BORROWED_COUNT] = "borrowed-count",
    [C_FW_LAYOUT] = "fw-layout",
    [C_FW_RECORD_PAST_END] = "fw-record-past-end",
    [C_FW_BODY_LEFTOVER] = "fw-body-leftover",
    [C_FW_INFO_SHORT] = "fw-info-short",
    [C_FW_STATS_COUNT] = "fw-stats-count",
    [C_FW_SETTINGS_SHORT] = "fw-settings-short",
    [C_FW_SEGMENT_COLUMNS] = "fw-segment-columns",
    [C_FW_SEGMENT_BLOCKS] = "fw-segment-blocks",
    [C_FW_SEGMENT_WRAP] = "fw-segment-wrap",
    [C_FW_BLOCK_STATE] = "fw-block-state",
    [C_FW_BLOCK_SEGMENT] = "fw-block-segment",
    [C_FW_BLOCK_OUTSIDE] = "fw-block-outside",
    [C_FW_DUP_SEGMENTS] = "fw-duplicate-segments",
    [C_FW_ARRAYS_SHORT] = "fw-arrays-short",
    [C_FW_ERROR_SHORT] = "fw-error-short",
    [C_FW_FRAMES_BLOCK] = "fw-frames-block",
    [C_FW_ROLES_LABEL] = "fw-roles-label",
    [C_FW_STEPS_SHORT] = "fw-steps-short",
    [C_PROBES_COUNT] = "probes-count",
};
#define NCORRUPT (sizeof(corrupt_names) / sizeof(corrupt_names[0]))

static struct cfg {
    uint64_t seed, events, live, stacks, devices, chunk, drop_chunks, markers_every;
    int trigger;
    bool incomplete, compress, real_stacks, future, hostile, seq_order;
    unsigned frameworks; /* FW_* bits: the frameworks' view the companion would have written */
    uint64_t fraction_pct; /* torch's per-process memory fraction, percent (0: none) */
    uint64_t probes;       /* driver-level OOM snapshots before a framework OOM */
    bool no_probes;        /* a framework OOM without its list of them (an older companion's) */
    bool borrowed;         /* some stacks borrowed their Python frames from a waiting thread (BORROWED) */
    enum corrupt corrupt;
    const char *out;
} cfg = {
    .seed = 1,
    .events = 10000,
    .live = 100,
    .stacks = 50,
    .devices = 1,
    .chunk = 8192,
    .markers_every = 1000,
    .trigger = OT_TRIGGER_OOM,
    .compress = true,
    .probes = 3,
};

#define FW_TORCH 0x1u
#define FW_JAX 0x2u
#define FW_CUPY 0x4u

/* ---- stacks, modules, symbols, Python frames ---- */

/* STACKS flags (FORMAT.md; oomtrace_format.h has no names for them). */

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

static struct gstack *stacks;
static size_t nstacks;
static struct gmodule *modules;
static size_t nmodules;
static struct gsym *syms;
static size_t nsyms, capsyms;
static struct gpy *pys;
static size_t npys;

static void add_sym(uint64_t addr, const char *name, uint64_t off)
{
    for (size_t i = 0; i < nsyms; i++)
        if (syms[i].addr == addr)
            return;
    if (nsyms == capsyms) {
        capsyms = capsyms ? capsyms * 2 : 64;
        syms = realloc(syms, capsyms * sizeof(*syms));
        if (!syms)
            oom();
    }
    syms[nsyms++] = (struct gsym){addr, off, strdup(name)};
}

/* Fake modules laid out like a PyTorch process: the innermost frames are the CUDA runtime, then the
 * caching allocator, ATen, the Python bindings and the interpreter. */
static const struct fake_module {
    const char *path;
    const char *funcs[4];
} fake_modules[] = {
    {"/usr/local/cuda/lib64/libcudart.so.12", {"cudaMalloc", "cudaMallocAsync", "cudaMallocHost", NULL}},
    {"/opt/conda/lib/python3.12/site-packages/torch/lib/libc10_cuda.so",
     {"_ZN3c104cuda20CUDACachingAllocator6mallocEPPvim",
      "_ZN3c104cuda20CUDACachingAllocator22DeviceCachingAllocator11alloc_blockERNS1_11AllocParamsEb", NULL, NULL}},
    {"/opt/conda/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so",
     {"_ZN2at6native10empty_cudaEv", "_ZN2at4_ops10empty_like4callERKNS_6TensorE", "_ZN2at6native5emptyEv", NULL}},
    {"/opt/conda/lib/python3.12/site-packages/torch/lib/libtorch_python.so",
     {"_ZN5torch8autograd6python11call_kernelEv", "_ZN5torch3jit8Function3runEv", NULL, NULL}},
    {"/opt/conda/bin/python3.12", {"_PyEval_EvalFrameDefault", "PyObject_Call", "_PyObject_MakeTpCall", NULL}},
};
#define NFAKE (sizeof(fake_modules) / sizeof(fake_modules[0]))

static const char *const py_funcs[] = {"forward", "_call_impl", "_wrapped_call_impl", "attention", "mlp",
                                       "train_step", "backward", "main", "<module>"};

static void make_pyframes(void)
{
    npys = cfg.stacks < 8 ? 8 : (size_t)cfg.stacks;
    pys = calloc(npys, sizeof(*pys));
    if (!pys)
        oom();
    for (size_t i = 0; i < npys; i++) {
        char file[128];
        snprintf(file, sizeof(file), "/workspace/model/layer%zu.py", i % 24);
        pys[i].id = 1000 + 7 * i;
        pys[i].func = strdup(py_funcs[below(sizeof(py_funcs) / sizeof(py_funcs[0]))]);
        pys[i].file = strdup(file);
        pys[i].line = 1 + below(500);
    }
    if (cfg.hostile) {
        free(pys[0].func);
        pys[0].func = strdup("evil\x1b[2J\"quoted\"\\back\xff\xfe\xc0\x80");
    }
}

static uint64_t fake_addr(size_t m, size_t f, bool resolve)
{
    uint64_t fn = modules[m].start + 0x10000 + f * 0x1000;
    uint64_t a = fn + 0x20 + below(0x300);
    if (resolve)
        add_sym(a, fake_modules[m].funcs[f], a - fn);
    return a;
}

static size_t nfuncs(size_t m)
{
    size_t n = 0;
    while (n < 4 && fake_modules[m].funcs[n])
        n++;
    return n;
}

static void make_fake_stacks(void)
{
    nmodules = NFAKE;
    modules = calloc(nmodules, sizeof(*modules));
    if (!modules)
        oom();
    for (size_t i = 0; i < nmodules; i++) {
        modules[i].path = strdup(fake_modules[i].path);
        modules[i].start = 0x7f1000000000ULL + i * 0x10000000ULL;
        modules[i].end = modules[i].start + 0x4000000;
        modules[i].bias = modules[i].start;
        modules[i].build_id_len = 20;
        for (size_t k = 0; k < 20; k++)
            modules[i].build_id[k] = (uint8_t)rnd();
    }
    nstacks = cfg.stacks;
    stacks = calloc(nstacks ? nstacks : 1, sizeof(*stacks));
    if (!stacks)
        oom();
    for (size_t i = 0; i < nstacks; i++) {
        struct gstack *s = &stacks[i];
        s->id = 1 + 3 * i;
        s->base_size = (uint64_t)1 << (12 + below(17));
        bool python = below(8) != 0;
        bool truncated = below(16) == 0;
        size_t cap = truncated ? 64 : 48;
        s->frames = calloc(cap, sizeof(uint64_t));
        if (!s->frames)
            oom();
        /* 90% of native addresses are in SYMBOLS: the rest test the reader's fallback. */
#define NATIVE(m) s->frames[s->n++] = fake_addr(m, below(nfuncs(m)), below(10) != 0) << 1
        NATIVE(0);
        for (uint64_t k = 1 + below(2); k--;)
            NATIVE(1);
        for (uint64_t k = 1 + below(3); k--;)
            NATIVE(2);
        for (uint64_t k = below(2); k--;)
            NATIVE(3);
        if (python) {
            for (uint64_t k = 1 + below(8); k-- && s->n + 2 <= cap;) {
                NATIVE(4);
                s->frames[s->n++] = (pys[below(npys)].id << 1) | OT_FRAME_PYTHON;
            }
            if (cfg.borrowed && i % 5 == 1) /* after the random draws: the rest of the file is unchanged */
                s->flags |= OT_STACK_BORROWED;
        } else {
            s->flags |= OT_STACK_NO_PYTHON;
        }
        while (truncated && s->n < cap)
            NATIVE(4);
#undef NATIVE
        if (truncated)
            s->flags |= OT_STACK_TRUNCATED;
    }
    /* A Python id that PYFRAMES does not have, to exercise the reader's "missing" path. */
    if (nstacks > 2 && stacks[2].n)
        stacks[2].frames[stacks[2].n - 1] = (999999ULL << 1) | OT_FRAME_PYTHON;
}

/* ---- real stacks: this process's own return addresses, for testing symbolization ---- */

#define RS_MAX 64

static __attribute__((noinline)) int rs_capture(void **f, int max)
{
    int n = backtrace(f, max);
    __asm__ volatile("" ::: "memory");
    return n;
}

/* Inlined into rs_gamma: the return address after the call lies in this function's inlined code,
 * so debug info must report rs_inline_helper [inlined] and then rs_gamma. */
static inline __attribute__((always_inline)) int rs_inline_helper(void **f, int max)
{
    int n = rs_capture(f, max);
    __asm__ volatile("" ::: "memory");
    return n;
}

static int rs_level(void **f, int max, unsigned path, int depth);

static __attribute__((noinline)) int rs_alpha(void **f, int max, unsigned path, int depth)
{
    volatile int here = depth; /* keeps the compiler from merging rs_alpha and rs_beta */
    int n = rs_level(f, max, path, here + 1);
    __asm__ volatile("" ::: "memory");
    return n;
}

static __attribute__((noinline)) int rs_beta(void **f, int max, unsigned path, int depth)
{
    int n = rs_level(f, max, path, depth + 1);
    __asm__ volatile("" ::: "memory");
    return n;
}

static __attribute__((noinline)) int rs_gamma(void **f, int max)
{
    int n = rs_inline_helper(f, max);
    __asm__ volatile("" ::: "memory");
    return n;
}

static __attribute__((noinline)) int rs_level(void **f, int max, unsigned path, int depth)
{
    int n;
    if (depth >= 4)
        n = (path & 16) ? rs_gamma(f, max) : rs_capture(f, max);
    else
        n = ((path >> depth) & 1) ? rs_alpha(f, max, path, depth) : rs_beta(f, max, path, depth);
    __asm__ volatile("" ::: "memory");
    return n;
}

static size_t build_id_of(const struct dl_phdr_info *info, uint8_t *out, size_t cap)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
        const uint8_t *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const uint8_t *name = p + sizeof(*nh);
            const uint8_t *desc = name + ((nh->n_namesz + 3) & ~3u);
            if (desc + nh->n_descsz > end)
                break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
                size_t n = nh->n_descsz < cap ? nh->n_descsz : cap;
                memcpy(out, desc, n);
                return n;
            }
            p = desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
    return 0;
}

static int add_real_module(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uint64_t s = info->dlpi_addr + ph->p_vaddr, e = s + ph->p_memsz;
        if (s < lo)
            lo = s;
        if (e > hi)
            hi = e;
    }
    if (lo >= hi)
        return 0;
    modules = realloc(modules, (nmodules + 1) * sizeof(*modules));
    if (!modules)
        oom();
    struct gmodule *m = &modules[nmodules++];
    memset(m, 0, sizeof(*m));
    char exe[4096];
    if (info->dlpi_name && info->dlpi_name[0]) {
        m->path = strdup(info->dlpi_name);
    } else {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        exe[n > 0 ? n : 0] = 0;
        m->path = strdup(exe);
    }
    m->start = lo;
    m->end = hi;
    m->bias = info->dlpi_addr;
    m->build_id_len = build_id_of(info, m->build_id, sizeof(m->build_id));
    return 0;
}

static void make_real_stacks(void)
{
    dl_iterate_phdr(add_real_module, NULL);
    nstacks = cfg.stacks < 32 ? cfg.stacks : 32;
    stacks = calloc(nstacks ? nstacks : 1, sizeof(*stacks));
    if (!stacks)
        oom();
    for (size_t i = 0; i < nstacks; i++) {
        void *f[RS_MAX];
        int n = rs_level(f, RS_MAX, (unsigned)i, 0);
        struct gstack *s = &stacks[i];
        s->id = 1 + 3 * i;
        s->base_size = (uint64_t)1 << (12 + below(17));
        s->frames = calloc(RS_MAX + 8, sizeof(uint64_t));
        if (!s->frames)
            oom();
        /* Entry 0 is inside rs_capture (the "tracer"), which a real tracer removes. */
        for (int k = 1; k < n; k++) {
            uint64_t a = (uint64_t)(uintptr_t)f[k];
            Dl_info di;
            if (dladdr(f[k], &di) && di.dli_sname && di.dli_saddr)
                add_sym(a, di.dli_sname, a - (uint64_t)(uintptr_t)di.dli_saddr);
            s->frames[s->n++] = a << 1;
        }
        if (i % 2 == 0) {
            for (int k = 0; k < 3; k++)
                s->frames[s->n++] = (pys[below(npys)].id << 1) | OT_FRAME_PYTHON;
            if (cfg.borrowed && i % 5 == 1)
                s->flags |= OT_STACK_BORROWED;
        } else
            s->flags |= OT_STACK_NO_PYTHON;
    }
}

/* ---- the simulated run ---- */

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

static struct {
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
    /* markers: the last 1024, as the tracer keeps them */
    struct marker markers[1024];
    uint64_t nmarkers;
} sim;

static void flush_chunk(bool last)
{
    if (!sim.c_n)
        return;
    size_t raw_len = sim.raw.n;
    if (last && cfg.corrupt == C_EVENT_TRUNCATED)
        raw_len -= 3; /* the last event loses its tail */
    size_t bound = ZSTD_compressBound(raw_len);
    uint8_t *frame = malloc(bound);
    if (!frame)
        oom();
    size_t z = ZSTD_compressCCtx(sim.cctx, frame, bound, sim.raw.p, raw_len, 1);
    if (ZSTD_isError(z)) {
        fprintf(stderr, "snapgen: zstd: %s\n", ZSTD_getErrorName(z));
        exit(1);
    }
    if (sim.nchunks == sim.capchunks) {
        sim.capchunks = sim.capchunks ? sim.capchunks * 2 : 64;
        sim.chunks = realloc(sim.chunks, sim.capchunks * sizeof(*sim.chunks));
        if (!sim.chunks)
            oom();
    }
    sim.chunks[sim.nchunks++] = (struct chunk){sim.c_first, sim.c_n, sim.c_t0, raw_len, frame, z};
    sim.raw.n = 0;
    sim.c_n = 0;
}

static void emit(uint64_t kind, uint64_t api, uint64_t cat, int64_t dev, uint64_t tid, uint64_t addr, uint64_t size,
                 uint64_t stack, const char *label)
{
    uint64_t prev_t = sim.t;
    sim.t += 200 + below(5000);
    uint64_t seq = ++sim.seq;
    if (sim.c_n == 0) {
        sim.c_first = seq;
        sim.c_t0 = prev_t; /* so the first event's dt is not always 0 */
        sim.c_prev_t = prev_t;
        sim.c_prev_addr = 0;
    }
    struct buf *b = &sim.raw;
    put_uv(b, kind);
    put_uv(b, api);
    put_uv(b, cat);
    put_sv(b, dev);
    put_uv(b, sim.t - sim.c_prev_t);
    put_uv(b, tid);
    put_sv(b, (int64_t)(addr - sim.c_prev_addr));
    put_uv(b, size);
    put_uv(b, stack);
    if (kind == OT_EV_MARKER)
        put_cstr(b, label);
    sim.c_prev_t = sim.t;
    sim.c_prev_addr = addr;
    if (++sim.c_n == cfg.chunk)
        flush_chunk(sim.seq == sim.total);
}

static const struct gstack *pick_stack(void)
{
    /* Skewed: a few sites take most allocations, as in real programs. */
    uint64_t u = below(1000);
    return &stacks[(size_t)(u * u / 1000 * nstacks / 1000)];
}

static void note_peak(int64_t d)
{
    if (d < 0)
        return;
    struct dev_state *ds = &sim.dev[d];
    if (ds->tracked <= ds->peak)
        return;
    ds->peak = ds->tracked;
    ds->peak_t = sim.t;
    ds->peak_seq = sim.seq;
    /* Persistent allocations are never freed, so the live set at any moment is a prefix of them
     * plus the temporaries of the current step. */
    ds->peak_npersist = sim.npersist;
    ds->peak_ntemps = sim.ntemps;
    memcpy(ds->peak_temps, sim.temps, sim.ntemps * sizeof(struct rec));
}

static uint64_t api_for(uint32_t cat)
{
    switch (cat) {
    case OT_CAT_ASYNC:
        return OT_API_cuMemAllocAsync;
    case OT_CAT_VMM:
        return OT_API_cuMemCreate;
    case OT_CAT_MANAGED:
        return OT_API_cuMemAllocManaged;
    case OT_CAT_HOST_PINNED:
        return OT_API_cuMemHostAlloc;
    default:
        return OT_API_cuMemAlloc_v2;
    }
}

static struct rec do_alloc(bool persistent, bool big)
{
    const struct gstack *st = pick_stack();
    struct rec r = {0};
    uint64_t c = below(100);
    r.cat = !persistent ? (c < 80 ? OT_CAT_DEVICE : OT_CAT_ASYNC)
            : c < 70    ? OT_CAT_DEVICE
            : c < 80    ? OT_CAT_ASYNC
            : c < 85    ? OT_CAT_VMM
            : c < 90    ? OT_CAT_MANAGED
                        : OT_CAT_HOST_PINNED;
    r.dev = r.cat == OT_CAT_HOST_PINNED ? -1 : (int64_t)below(cfg.devices);
    r.api = (uint32_t)api_for(r.cat);
    r.size = st->base_size * (1 + below(4)) * (big ? 8 : 1);
    r.stack = st->id;
    r.tid = 1000 + below(3);
    uint64_t aligned = (r.size + 0x1fffff) & ~(uint64_t)0x1fffff;
    if (r.cat == OT_CAT_HOST_PINNED) {
        r.addr = 0x7e0000000000ULL + sim.host_bump;
        sim.host_bump += aligned;
    } else if (r.cat == OT_CAT_VMM) {
        r.addr = ++sim.vmm_handle; /* a CUmemGenericAllocationHandle, not an address */
    } else if (persistent) {
        struct dev_state *ds = &sim.dev[r.dev];
        r.addr = 0x7f0000000000ULL + ((uint64_t)r.dev << 40) + ds->bump;
        ds->bump += aligned;
    } else {
        /* Temporaries reuse one region per device, as a caching allocator would. */
        struct dev_state *ds = &sim.dev[r.dev];
        r.addr = 0x7f8000000000ULL + ((uint64_t)r.dev << 40) + ds->temp_bump;
        ds->temp_bump += aligned;
    }
    emit(OT_EV_ALLOC, r.api, r.cat, r.dev, r.tid, r.addr, r.size, r.stack, NULL);
    r.t = sim.t;
    r.seq = sim.seq;
    if (r.dev >= 0) {
        sim.dev[r.dev].tracked += r.size;
        sim.dev[r.dev].by_cat[r.cat] += r.size;
    }
    return r;
}

static void add_persistent(void)
{
    struct rec r = do_alloc(true, false);
    if (sim.npersist == sim.cappersist) {
        sim.cappersist = sim.cappersist ? sim.cappersist * 2 : 64;
        sim.persist = realloc(sim.persist, sim.cappersist * sizeof(*sim.persist));
        if (!sim.persist)
            oom();
    }
    sim.persist[sim.npersist++] = r;
    note_peak(r.dev);
}

static void add_temp(bool big)
{
    struct rec r = do_alloc(false, big);
    sim.temps[sim.ntemps++] = r;
    note_peak(r.dev);
}

static void free_temp(void)
{
    size_t i = (size_t)below(sim.ntemps);
    struct rec r = sim.temps[i];
    sim.temps[i] = sim.temps[--sim.ntemps];
    uint64_t api = r.cat == OT_CAT_ASYNC ? OT_API_cuMemFreeAsync : OT_API_cuMemFree_v2;
    emit(OT_EV_FREE, api, r.cat, r.dev, r.tid, r.addr, r.size, 0, NULL);
    sim.dev[r.dev].tracked -= r.size;
    sim.dev[r.dev].by_cat[r.cat] -= r.size;
    if (sim.ntemps == 0)
        for (uint64_t d = 0; d < cfg.devices; d++)
            sim.dev[d].temp_bump = 0;
}

static void add_marker(uint64_t step)
{
    struct marker *m = &sim.markers[sim.nmarkers++ % 1024];
    snprintf(m->label, sizeof(m->label), "step %" PRIu64 " seq_len=%u", step, 512u << (step % 4));
    if (cfg.hostile && step == 1)
        snprintf(m->label, sizeof(m->label), "bad\x07label\x01\xff end");
    emit(OT_EV_MARKER, OT_API_oomtrace_mark, 0, -1, 1000, 0, 0, 0, m->label);
    m->seq = sim.seq;
    m->t = sim.t;
    m->tid = 1000;
}

static uint64_t device_total(int64_t d)
{
    uint64_t t = 80ULL << 30, need_ = sim.dev[d].peak + (3ULL << 30);
    return need_ > t ? (need_ + (1ULL << 30)) & ~((1ULL << 30) - 1) : t;
}

#define BASELINE (512ULL << 20)
#define OTHER_PROC (2ULL << 30)
#define CONTEXT (300ULL << 20)

static uint64_t device_free(int64_t d)
{
    uint64_t used = BASELINE + sim.dev[d].tracked + CONTEXT + (d == 0 ? OTHER_PROC : 0);
    uint64_t total = device_total(d);
    return used < total ? total - used : 0;
}

static void simulate(void)
{
    sim.cctx = ZSTD_createCCtx();
    if (!sim.cctx)
        oom();
    sim.start_t = sim.t = 1000ULL * 1000000000ULL;
    uint64_t every = cfg.markers_every;
    uint64_t n = cfg.events, failed = cfg.trigger == OT_TRIGGER_OOM ? 1 : 0;
    uint64_t markers = every ? n / every : 0;
    if (n < cfg.live + markers + failed)
        n = cfg.live + markers + failed;
    sim.total = n;
    uint64_t rest = n - cfg.live - markers - failed;
    if (rest % 2) {
        markers++; /* temporaries come in pairs; one more marker makes the count exact */
        rest--;
    }
    uint64_t pairs = rest / 2, total_pairs = pairs;
    uint64_t persist_left = cfg.live, markers_left = markers, step = 0;
    /* Persistent allocations are spread over the first half, so that the large step at 70% is the
     * peak rather than the end. */
    uint64_t spacing = cfg.live ? (n / 2) / cfg.live : 0, next_persist = 0;
    uint64_t alloc_left = 0, free_left = 0;
    bool bulged = false, big = false;
    for (uint64_t i = 0; i < n; i++) {
        if (failed && i == n - 1) {
            sim.has_failed = true;
            break;
        }
        if (markers_left && every && (i + 1) % every == 0) {
            add_marker(++step);
            markers_left--;
        } else if (persist_left && i >= next_persist) {
            add_persistent();
            persist_left--;
            next_persist += spacing;
        } else if (alloc_left) {
            add_temp(big);
            alloc_left--;
        } else if (free_left) {
            free_temp();
            free_left--;
        } else if (pairs) {
            uint64_t k = 1 + below(16);
            big = false;
            if (!bulged && (total_pairs - pairs) * 10 >= total_pairs * 7) {
                k = MAX_TEMPS;
                big = bulged = true;
            }
            if (k > pairs)
                k = pairs;
            pairs -= k;
            add_temp(big);
            alloc_left = k - 1;
            free_left = k;
        } else if (persist_left) {
            add_persistent();
            persist_left--;
        } else if (markers_left) {
            add_marker(++step);
            markers_left--;
        }
    }
    if (sim.has_failed) {
        const struct gstack *st = &stacks[0];
        uint64_t tr = sim.dev[0].tracked; /* the request: more than the device has free */
        sim.failed = (struct rec){.size = device_free(0) + tr / 8 + ((uint64_t)1 << 30), .stack = st->id, .tid = 1000, .dev = 0,
                                  .cat = OT_CAT_DEVICE, .api = OT_API_cuMemAlloc_v2};
        emit(OT_EV_FAILED, sim.failed.api, sim.failed.cat, 0, 1000, 0, sim.failed.size, st->id, NULL);
        sim.failed.t = sim.t;
        sim.failed.seq = sim.seq;
    }
    flush_chunk(true);
}

/* ---- sections ---- */

struct secinfo {
    uint32_t type;
    size_t hdr_off, payload_off, stored_len;
    bool compressed;
};

static struct buf file;
static struct secinfo secs[64];
static size_t nsecs;

static void section(uint32_t type, struct buf *payload, bool compress)
{
    uint32_t flags = 0;
    uint64_t raw_len = payload->n;
    struct buf stored = {0};
    if (compress) {
        size_t bound = ZSTD_compressBound(payload->n);
        need(&stored, bound);
        size_t z = ZSTD_compress(stored.p, bound, payload->p, payload->n, 3);
        if (ZSTD_isError(z)) {
            fprintf(stderr, "snapgen: zstd: %s\n", ZSTD_getErrorName(z));
            exit(1);
        }
        stored.n = z;
        flags |= OT_SECTION_ZSTD;
    } else {
        put_bytes(&stored, payload->p, payload->n);
    }
    if (nsecs < 64)
        secs[nsecs++] = (struct secinfo){type, file.n, file.n + 24, stored.n, compress};
    put_le(&file, type, 4);
    put_le(&file, flags, 4);
    put_le(&file, stored.n, 8);
    put_le(&file, raw_len, 8);
    put_bytes(&file, stored.p, stored.n);
    free_buf(&stored);
    free_buf(payload);
}

static struct secinfo *find_section(uint32_t type)
{
    for (size_t i = 0; i < nsecs; i++)
        if (secs[i].type == type)
            return &secs[i];
    return NULL;
}

static uint64_t chunks_kept_from(void)
{
    return cfg.drop_chunks < sim.nchunks ? cfg.drop_chunks : sim.nchunks;
}

static uint64_t events_in(size_t from, size_t to)
{
    uint64_t n = 0;
    for (size_t i = from; i < to; i++)
        n += sim.chunks[i].nevents;
    return n;
}

static uint64_t ring_used(void)
{
    uint64_t n = 0;
    for (size_t i = chunks_kept_from(); i < sim.nchunks; i++)
        n += sim.chunks[i].frame_len;
    return n;
}

static void write_meta(void)
{
    struct buf b = {0};
    put_cstr(&b, "0.1.0-snapgen");
    put_uv(&b, (uint64_t)cfg.trigger);
    put_cstr(&b, cfg.trigger == OT_TRIGGER_SIGNAL ? "SIGUSR1" : cfg.trigger == OT_TRIGGER_API ? "after epoch 3" : "");
    if (cfg.corrupt == C_VARINT_OVERFLOW) {
        static const uint8_t eleven[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
        put_bytes(&b, eleven, sizeof(eleven));
    } else {
        put_uv(&b, 4242);
    }
    put_uv(&b, 4200);
    if (cfg.hostile)
        put_str(&b, "evil\x1b]0;pwned\x07host\n\"\\\0nul", sizeof("evil\x1b]0;pwned\x07host\n\"\\\0nul") - 1);
    else
        put_cstr(&b, "snapgen-host");
    char seed[32];
    snprintf(seed, sizeof(seed), "%" PRIu64, cfg.seed);
    const char *argv[] = {"python3", "train.py", "--batch-size", "64", "--seed", seed,
                          cfg.hostile ? "\xff\xfe\x1b[31mred" : "--fast"};
    put_uv(&b, 7);
    for (int i = 0; i < 7; i++)
        put_cstr(&b, argv[i]);
    put_cstr(&b, "/opt/conda/bin/python3.12");
    put_uv(&b, 1735689600ULL * 1000000000ULL + (sim.t - sim.start_t));
    put_uv(&b, sim.t + 1000);
    put_uv(&b, sim.start_t);
    put_sv(&b, 3);
    put_sv(&b, 3);
    put_sv(&b, 8);
    put_cstr(&b, "RANK");
    size_t from = chunks_kept_from();
    uint64_t kept = events_in(from, sim.nchunks), dropped = events_in(0, from);
    put_uv(&b, kept + dropped);
    put_uv(&b, kept);
    put_uv(&b, dropped);
    put_uv(&b, from);
    uint64_t budget = 64ULL << 20; /* OOMTRACE_RING; a long run gets a budget its ring fits in */
    while (budget < ring_used())
        budget *= 2;
    put_uv(&b, budget);
    put_uv(&b, ring_used());
    put_uv(&b, 1);
    put_cstr(&b, "3.12.3");
    put_cstr(&b, "0,1,2,3");
    if (cfg.future)
        put_cstr(&b, "a field from a later minor version");
    section(OT_SEC_META, &b, false);
}

static void write_devices(void)
{
    struct buf b = {0};
    put_uv(&b, cfg.devices);
    for (uint64_t d = 0; d < cfg.devices; d++) {
        struct dev_state *ds = &sim.dev[d];
        put_sv(&b, (int64_t)d);
        put_cstr(&b, "NVIDIA H100 80GB HBM3 (synthetic)");
        uint8_t uuid[16];
        for (int i = 0; i < 16; i++)
            uuid[i] = (uint8_t)(0x10 * d + (uint64_t)i);
        put_str(&b, (const char *)uuid, 16);
        put_uv(&b, 0x3); /* total/free known, baseline known */
        put_uv(&b, device_total((int64_t)d));
        put_uv(&b, device_free((int64_t)d));
        put_uv(&b, BASELINE);
        put_uv(&b, ds->tracked);
        put_uv(&b, ds->peak);
        put_uv(&b, ds->peak_t);
        put_uv(&b, ds->peak_seq);
        put_uv(&b, OT_CAT_COUNT);
        for (int c = 0; c < OT_CAT_COUNT; c++)
            put_uv(&b, ds->by_cat[c]);
    }
    if (cfg.future)
        put_uv(&b, 12345); /* bytes appended by a later minor version: a reader ignores them */
    if (cfg.corrupt == C_FIELD_PAST_END)
        b.n -= 5;
    section(OT_SEC_DEVICES, &b, false);
}

/* ---- the frameworks' view (FRAMEWORK, PROBES), as the Python companion writes it ---- */

/* What the torch view holds, for the framework OOM's request and for checks. */
static struct {
    uint64_t reserved, allocated, free_total, largest_free, request;
    uint64_t jax_limit, jax_in_use, jax_largest_free;
    int64_t device;
} fwv;

static void fw_record(struct buf *recs, uint64_t *nrec, uint64_t kind, struct buf *body)
{
    put_uv(recs, kind);
    put_uv(recs, body->n + (cfg.corrupt == C_FW_BODY_LEFTOVER && kind == OT_FW_INFO ? 1 : 0));
    put_bytes(recs, body->p, body->n);
    if (cfg.corrupt == C_FW_BODY_LEFTOVER && kind == OT_FW_INFO)
        put_uv(recs, 0);
    body->n = 0;
    ++*nrec;
}

static void put_u64(struct buf *b, uint64_t v)
{
    put_le(b, v, 8);
}

static void put_stat(struct buf *b, const char *key, int64_t v)
{
    put_cstr(b, key);
    put_sv(b, v);
}

static void put_setting(struct buf *b, const char *key, const char *v)
{
    put_cstr(b, key);
    put_cstr(b, v);
}

#define FW_MAX_SEG 256
#define FW_MAX_BLK (FW_MAX_SEG * 4)

struct fw_seg {
    uint64_t device, address, total, allocated, requested, stream, pool, flags, first, n;
};
struct fw_blk {
    uint64_t address, size, requested, state, segment;
};

static uint64_t round512(uint64_t v)
{
    return v & ~(uint64_t)511;
}

/* PyTorch's caching allocator on device 0: each live driver allocation there is one segment. Every
 * third segment is wholly free (memory the program freed and the allocator kept); the others are split
 * into allocated and free blocks, so the free memory lies in pieces (fragmentation). The last segment
 * belongs to a CUDA graph's private pool; the VMM mappings, when there are any, form one expandable
 * segment. */
static void fw_torch(struct buf *recs, uint64_t *nrec)
{
    static struct fw_seg seg[FW_MAX_SEG];
    static struct fw_blk blk[FW_MAX_BLK];
    size_t ns = 0, nb = 0;
    for (size_t i = 0; i < sim.npersist && ns + 2 < FW_MAX_SEG; i++) {
        const struct rec *r = &sim.persist[i];
        if (r->cat != OT_CAT_DEVICE || r->dev != 0 || r->size < 4096)
            continue;
        struct fw_seg *g = &seg[ns];
        *g = (struct fw_seg){.device = 0, .address = r->addr, .total = r->size, .stream = 0,
                             .flags = r->size > (1u << 20) ? OT_FW_SEG_LARGE_POOL : 0, .first = nb};
        if (ns % 3 == 1) {
            blk[nb++] = (struct fw_blk){r->addr, r->size, 0, OT_FW_BLOCK_INACTIVE, ns};
        } else {
            uint64_t a = round512(r->size * 3 / 8), f1 = round512(r->size / 8), b2 = round512(r->size * 3 / 8);
            uint64_t f2 = r->size - a - f1 - b2;
            blk[nb++] = (struct fw_blk){r->addr, a, a - (a > 1024 ? 1000 : 0), OT_FW_BLOCK_ALLOCATED, ns};
            blk[nb++] = (struct fw_blk){r->addr + a, f1, 0, OT_FW_BLOCK_INACTIVE, ns};
            blk[nb++] = (struct fw_blk){r->addr + a + f1, b2, b2, ns % 7 == 5 ? OT_FW_BLOCK_PENDING_FREE
                                                                              : OT_FW_BLOCK_ALLOCATED, ns};
            blk[nb++] = (struct fw_blk){r->addr + a + f1 + b2, f2, 0, OT_FW_BLOCK_INACTIVE, ns};
        }
        g->n = nb - g->first;
        ns++;
    }
    if (ns > 1) { /* the last one: a graph's private pool */
        seg[ns - 1].pool = (1ULL << 32) ^ 7;
        seg[ns - 1].flags |= OT_FW_SEG_PRIVATE_POOL;
    }
    /* The VMM mappings (laid out as write_rest lays them, from 0x7fa000000000 in record order) as one
     * expandable segment: the leading run of device 0's. */
    uint64_t va = 0x7fa000000000ULL, vsize = 0;
    for (size_t i = 0; i < sim.npersist; i++) {
        if (sim.persist[i].cat != OT_CAT_VMM)
            continue;
        if (sim.persist[i].dev != 0)
            break;
        vsize += (sim.persist[i].size + 0x1fffff) & ~(uint64_t)0x1fffff;
    }
    if (vsize) {
        struct fw_seg *g = &seg[ns];
        *g = (struct fw_seg){.device = 0, .address = va, .total = vsize, .flags = OT_FW_SEG_EXPANDABLE | OT_FW_SEG_LARGE_POOL,
                             .first = nb, .n = 2};
        uint64_t half = round512(vsize / 2);
        blk[nb++] = (struct fw_blk){va, half, half, OT_FW_BLOCK_ALLOCATED, ns};
        blk[nb++] = (struct fw_blk){va + half, vsize - half, 0, OT_FW_BLOCK_INACTIVE, ns};
        ns++;
    }
    fwv.reserved = fwv.allocated = fwv.free_total = fwv.largest_free = 0;
    uint64_t inactive_split = 0, active = 0;
    for (size_t i = 0; i < ns; i++) {
        for (size_t k = seg[i].first; k < seg[i].first + seg[i].n; k++) {
            if (blk[k].state != OT_FW_BLOCK_INACTIVE) {
                seg[i].allocated += blk[k].size;
                seg[i].requested += blk[k].requested;
                active += blk[k].size;
                continue;
            }
            fwv.free_total += blk[k].size;
            if (seg[i].n > 1)
                inactive_split += blk[k].size;
            if (blk[k].size > fwv.largest_free && !(seg[i].flags & OT_FW_SEG_PRIVATE_POOL))
                fwv.largest_free = blk[k].size;
        }
        fwv.reserved += seg[i].total;
        fwv.allocated += seg[i].allocated;
    }
    uint64_t total = device_total(0);
    uint64_t limit = cfg.fraction_pct ? total / 100 * cfg.fraction_pct : 0;
    /* The framework's request: beyond the largest free block (fragmentation), or beyond the fraction. */
    if (cfg.fraction_pct)
        fwv.request = limit > fwv.reserved ? round512(limit - fwv.reserved) + (64ULL << 20) : (64ULL << 20);
    else
        fwv.request = round512(fwv.largest_free + (fwv.free_total - fwv.largest_free) / 2) + 512;
    fwv.device = 0;

    struct buf b = {0};
    put_cstr(&b, "torch");
    put_uv(&b, 0);
    put_uv(&b, 10 + (cfg.fraction_pct ? 2 : 0) + (cfg.corrupt == C_FW_STATS_COUNT ? 1000 : 0));
    put_stat(&b, "allocated_bytes", (int64_t)fwv.allocated);
    put_stat(&b, "allocated_peak_bytes", (int64_t)(fwv.allocated + (fwv.allocated >> 2)));
    put_stat(&b, "reserved_bytes", (int64_t)fwv.reserved);
    put_stat(&b, "reserved_peak_bytes", (int64_t)fwv.reserved);
    put_stat(&b, "active_bytes", (int64_t)active);
    put_stat(&b, "inactive_split_bytes", (int64_t)inactive_split);
    put_stat(&b, "num_alloc_retries", 1);
    put_stat(&b, "num_ooms", cfg.trigger == OT_TRIGGER_FRAMEWORK_OOM ? 1 : 0);
    put_stat(&b, "num_device_alloc", (int64_t)ns + 4);
    put_stat(&b, "num_device_free", 4);
    if (cfg.fraction_pct) {
        put_stat(&b, "memory_fraction_limit_bytes", (int64_t)limit);
        put_stat(&b, "memory_fraction_ppm", (int64_t)cfg.fraction_pct * 10000);
    }
    fw_record(recs, nrec, OT_FW_STATS, &b);

    put_cstr(&b, "torch");
    put_uv(&b, 6);
    put_setting(&b, "backend", "native");
    /* The setting governs new segments; the expandable one was made while it was on (it can change at run time). */
    put_setting(&b, "expandable_segments", "False");
    put_setting(&b, "max_split_size", "");
    put_setting(&b, "garbage_collection_threshold", "0");
    put_setting(&b, "PYTORCH_CUDA_ALLOC_CONF", "");
    char frac[32];
    snprintf(frac, sizeof(frac), cfg.fraction_pct ? "0.%02" PRIu64 : "1.0", cfg.fraction_pct);
    if (cfg.corrupt == C_FW_SETTINGS_SHORT)
        put_uv(&b, 200); /* a key that runs past the body */
    else
        put_setting(&b, "per_process_memory_fraction", frac);
    fw_record(recs, nrec, OT_FW_SETTINGS, &b);

    if (cfg.corrupt == C_FW_SEGMENT_WRAP && ns)
        seg[0].total = UINT64_MAX - seg[0].address + 2;
    if (cfg.corrupt == C_FW_SEGMENT_BLOCKS && ns)
        seg[0].n = nb + 5;
    if (cfg.corrupt == C_FW_BLOCK_STATE && nb)
        blk[0].state = 9;
    if (cfg.corrupt == C_FW_BLOCK_SEGMENT && nb)
        blk[nb - 1].segment = ns + 3;
    if (cfg.corrupt == C_FW_BLOCK_OUTSIDE && nb)
        blk[0].address -= 4096;
    for (int rep = 0; rep < (cfg.corrupt == C_FW_DUP_SEGMENTS ? 2 : 1); rep++) {
        put_cstr(&b, "torch");
        put_uv(&b, ns);
        const size_t cols = cfg.corrupt == C_FW_SEGMENT_COLUMNS ? 9 : 10; /* one column short */
        for (size_t c = 0; c < cols; c++)
            for (size_t i = 0; i < ns; i++) {
                const struct fw_seg *g = &seg[i];
                const uint64_t v[10] = {g->device, g->address, g->total, g->allocated, g->requested,
                                        g->stream, g->pool, g->flags, g->first, g->n};
                put_u64(&b, v[c]);
            }
        fw_record(recs, nrec, OT_FW_SEGMENTS, &b);
    }
    put_cstr(&b, "torch");
    put_uv(&b, nb);
    for (int c = 0; c < 5; c++)
        for (size_t i = 0; i < nb; i++) {
            const uint64_t v[5] = {blk[i].address, blk[i].size, blk[i].requested, blk[i].state, blk[i].segment};
            put_u64(&b, v[c]);
        }
    fw_record(recs, nrec, OT_FW_BLOCKS, &b);

    /* Python stacks of the first allocated blocks (OOMTRACE_TORCH_STACKS=python). */
    size_t nfr = 0;
    for (size_t i = 0; i < nb && nfr < 3; i++)
        nfr += blk[i].state == OT_FW_BLOCK_ALLOCATED;
    put_cstr(&b, "torch");
    put_uv(&b, nfr);
    for (size_t i = 0, k = 0; i < nb && k < nfr; i++) {
        if (blk[i].state != OT_FW_BLOCK_ALLOCATED)
            continue;
        put_uv(&b, cfg.corrupt == C_FW_FRAMES_BLOCK ? nb + 1 : i);
        put_uv(&b, 2);
        put_cstr(&b, "/opt/conda/lib/python3.12/site-packages/torch/nn/modules/linear.py");
        put_uv(&b, 125);
        put_cstr(&b, "forward");
        put_cstr(&b, "train.py");
        put_uv(&b, 40 + k);
        put_cstr(&b, cfg.hostile ? "step\x1b[31m\xff" : "train_step");
        k++;
    }
    fw_record(recs, nrec, OT_FW_BLOCK_FRAMES, &b);

    /* Roles of the allocated blocks: parameters, gradients, Adam's two states. */
    static const char *const labels[] = {"", "", "Adam.exp_avg", "Adam.exp_avg_sq", ""};
    static const uint64_t cats[] = {OT_FW_ROLE_PARAMETERS, OT_FW_ROLE_GRADIENTS, OT_FW_ROLE_OPTIMIZER_STATE,
                                    OT_FW_ROLE_OPTIMIZER_STATE, OT_FW_ROLE_BUFFERS};
    put_cstr(&b, "torch");
    put_uv(&b, 5);
    for (int i = 0; i < 5; i++) {
        put_uv(&b, cats[i]);
        put_cstr(&b, labels[i]);
    }
    size_t nrole = 0;
    for (size_t i = 0; i < nb; i++)
        nrole += blk[i].state == OT_FW_BLOCK_ALLOCATED;
    put_uv(&b, nrole);
    for (int c = 0; c < 3; c++)
        for (size_t i = 0, k = 0; i < nb; i++) {
            if (blk[i].state != OT_FW_BLOCK_ALLOCATED)
                continue;
            uint64_t lab = k % 5;
            if (cfg.corrupt == C_FW_ROLES_LABEL && k == 0)
                lab = 5;
            put_u64(&b, c == 0 ? blk[i].address : c == 1 ? blk[i].size : lab);
            k++;
        }
    fw_record(recs, nrec, OT_FW_ROLES, &b);

    put_cstr(&b, "torch");
    put_uv(&b, 4);
    for (uint64_t i = 0; i < 4; i++) {
        put_uv(&b, 97 + i);
        put_uv(&b, sim.t - (4 - i) * 1000000000ULL);
        put_uv(&b, fwv.allocated - (3 - i) * (fwv.allocated / 16));
        put_uv(&b, fwv.reserved);
        if (cfg.corrupt == C_FW_STEPS_SHORT && i == 3)
            break;
        put_cstr(&b, i == 3 ? "(64, 2048)" : "(64, 1024)");
    }
    fw_record(recs, nrec, OT_FW_STEPS, &b);
}

/* JAX with its default preallocation: 75% of the device reserved at start, arrays inside it. */
static void fw_jax(struct buf *recs, uint64_t *nrec)
{
    uint64_t total = device_total(0);
    fwv.jax_limit = total / 4 * 3;
    fwv.jax_in_use = fwv.jax_limit - fwv.jax_limit / 16;
    fwv.jax_largest_free = fwv.jax_limit / 32;
    struct buf b = {0};
    put_cstr(&b, "jax");
    put_uv(&b, 0);
    put_uv(&b, 7);
    put_stat(&b, "bytes_in_use", (int64_t)fwv.jax_in_use);
    put_stat(&b, "peak_bytes_in_use", (int64_t)fwv.jax_in_use);
    put_stat(&b, "bytes_limit", (int64_t)fwv.jax_limit);
    put_stat(&b, "bytes_reserved", 0);
    put_stat(&b, "largest_free_block_bytes", (int64_t)fwv.jax_largest_free);
    put_stat(&b, "pool_bytes", (int64_t)fwv.jax_limit);
    put_stat(&b, "num_allocs", 212);
    fw_record(recs, nrec, OT_FW_STATS, &b);
    put_cstr(&b, "jax");
    put_uv(&b, 4);
    put_setting(&b, "XLA_PYTHON_CLIENT_PREALLOCATE", "");
    put_setting(&b, "XLA_PYTHON_CLIENT_MEM_FRACTION", "");
    put_setting(&b, "XLA_PYTHON_CLIENT_ALLOCATOR", "");
    put_setting(&b, "preallocate_effective", "true");
    fw_record(recs, nrec, OT_FW_SETTINGS, &b);
    put_cstr(&b, "jax");
    static const char *const shapes[] = {"(8192, 8192)", "(4096, 16384)", "(1024,)"};
    static const char *const dtypes[] = {"float32", "bfloat16", "int32"};
    static const uint64_t counts[] = {180, 40, 3};
    static const uint64_t each[] = {8192ULL * 8192 * 4, 4096ULL * 16384 * 2, 1024 * 4};
    put_uv(&b, 3);
    for (int i = 0; i < 3; i++) {
        put_cstr(&b, dtypes[i]);
        put_cstr(&b, shapes[i]);
        put_uv(&b, 0);
        put_uv(&b, counts[i]);
        if (cfg.corrupt == C_FW_ARRAYS_SHORT && i == 2)
            break;
        put_uv(&b, counts[i] * each[i]);
    }
    fw_record(recs, nrec, OT_FW_ARRAYS, &b);
    if (!(cfg.frameworks & FW_TORCH)) {
        fwv.request = fwv.jax_largest_free * 2 + 4096;
        fwv.device = 0;
    }
}

/* CuPy's default pool holding memory the program freed. */
static void fw_cupy(struct buf *recs, uint64_t *nrec)
{
    uint64_t used = 6ULL << 30, freeb = 84ULL << 30;
    struct buf b = {0};
    put_cstr(&b, "cupy");
    put_uv(&b, OT_FW_DEVICE_ALL);
    put_uv(&b, 4);
    put_stat(&b, "pool_used_bytes", (int64_t)used);
    put_stat(&b, "pool_total_bytes", (int64_t)(used + freeb));
    put_stat(&b, "pool_free_bytes", (int64_t)freeb);
    put_stat(&b, "pinned_pool_free_blocks", 2);
    fw_record(recs, nrec, OT_FW_STATS, &b);
    if (!(cfg.frameworks & (FW_TORCH | FW_JAX))) {
        fwv.request = 2ULL << 30;
        fwv.device = 0;
    }
}

static const char *fw_main_name(void)
{
    return cfg.frameworks & FW_TORCH ? "torch" : cfg.frameworks & FW_JAX ? "jax" : "cupy";
}

static void write_framework(void)
{
    if (!cfg.frameworks)
        return;
    struct buf recs = {0}, b = {0};
    uint64_t nrec = 0;
    const bool fatal = cfg.trigger == OT_TRIGGER_FRAMEWORK_OOM;
    put_cstr(&b, fw_main_name());
    put_cstr(&b, cfg.frameworks & FW_TORCH ? "2.11.0+cu130" : cfg.frameworks & FW_JAX ? "0.11.2" : "14.0.0");
    put_cstr(&b, fatal ? "oom" : cfg.trigger == OT_TRIGGER_OOM ? "driver-oom" : cfg.trigger == OT_TRIGGER_API ? "api"
                                                                                                            : "exit");
    put_uv(&b, sim.t);
    if (cfg.corrupt != C_FW_INFO_SHORT)
        put_uv(&b, 3500000);
    fw_record(&recs, &nrec, OT_FW_INFO, &b);
    if (cfg.frameworks & FW_TORCH)
        fw_torch(&recs, &nrec);
    if (cfg.frameworks & FW_JAX)
        fw_jax(&recs, &nrec);
    if (cfg.frameworks & FW_CUPY)
        fw_cupy(&recs, &nrec);
    if (fatal) {
        char text[512];
        char rq[32];
        snprintf(rq, sizeof(rq), "%.2f GiB", (double)fwv.request / (1 << 30));
        if (cfg.frameworks & FW_TORCH)
            snprintf(text, sizeof(text),
                     "CUDA out of memory. Tried to allocate %s. GPU 0 has a total capacity of 79.19 GiB of which"
                     " 1.02 GiB is free. Of the allocated memory %.2f GiB is allocated by PyTorch, and %.2f GiB is"
                     " reserved by PyTorch but unallocated.%s",
                     rq, (double)fwv.allocated / (1 << 30), (double)(fwv.reserved - fwv.allocated) / (1 << 30),
                     cfg.hostile ? " \x1b[2J\xff" : "");
        else if (cfg.frameworks & FW_JAX)
            snprintf(text, sizeof(text), "RESOURCE_EXHAUSTED: Out of memory while trying to allocate %" PRIu64
                     " bytes.", fwv.request);
        else
            snprintf(text, sizeof(text), "Out of memory allocating %" PRIu64 " bytes (allocated so far: %llu"
                     " bytes).", fwv.request, 6ULL << 30);
        put_cstr(&b, fw_main_name());
        put_cstr(&b, text);
        put_uv(&b, (uint64_t)fwv.device);
        if (cfg.corrupt != C_FW_ERROR_SHORT)
            put_uv(&b, fwv.request);
        fw_record(&recs, &nrec, OT_FW_ERROR, &b);
    }
    /* A record of a kind from a later layout: skipped by length. */
    put_cstr(&b, "from a later companion");
    fw_record(&recs, &nrec, 200, &b);

    put_uv(&b, cfg.corrupt == C_FW_LAYOUT ? 2 : OT_FW_LAYOUT_VERSION);
    put_uv(&b, nrec);
    put_bytes(&b, recs.p, cfg.corrupt == C_FW_RECORD_PAST_END ? recs.n - 3 : recs.n);
    free_buf(&recs);
    section(OT_SEC_FRAMEWORK, &b, cfg.compress);

    if (fatal && !cfg.no_probes) {
        put_uv(&b, cfg.probes + (cfg.corrupt == C_PROBES_COUNT ? 100 : 0));
        for (uint64_t i = 0; i < cfg.probes; i++) {
            char name[96];
            snprintf(name, sizeof(name), "oomtrace-snapgen-host-4242-%" PRIu64 "-oom.oomt", i + 1);
            put_cstr(&b, name);
            put_uv(&b, sim.seq - cfg.probes + i);
            put_uv(&b, i == 0 ? (2ULL << 30) + (30ULL << 20) : fwv.request);
            put_uv(&b, 0);
        }
        section(OT_SEC_PROBES, &b, false);
    }
}

/* The framework's refused request: no driver call failed, so the API is the framework's allocator. */
static void write_framework_failure(void)
{
    struct buf b = {0};
    put_uv(&b, OT_API_framework_allocator);
    put_uv(&b, OT_CAT_DEVICE);
    put_sv(&b, fwv.device);
    put_uv(&b, fwv.request);
    put_uv(&b, 2); /* CUDA_ERROR_OUT_OF_MEMORY */
    put_uv(&b, sim.t);
    put_uv(&b, 1000);
    put_uv(&b, stacks[0].id);
    put_uv(&b, sim.seq);
    section(OT_SEC_FAILURE, &b, false);
}

static void write_failure(void)
{
    if (cfg.trigger == OT_TRIGGER_FRAMEWORK_OOM) {
        write_framework_failure();
        return;
    }
    if (!sim.has_failed)
        return;
    struct buf b = {0};
    put_uv(&b, sim.failed.api);
    put_uv(&b, sim.failed.cat);
    put_sv(&b, sim.failed.dev);
    put_uv(&b, sim.failed.size);
    put_uv(&b, 2); /* CUDA_ERROR_OUT_OF_MEMORY */
    put_uv(&b, sim.failed.t);
    put_uv(&b, sim.failed.tid);
    put_uv(&b, sim.failed.stack);
    put_uv(&b, sim.failed.seq);
    section(OT_SEC_FAILURE, &b, false);
}

static void write_modules_symbols_pyframes(void)
{
    struct buf b = {0};
    put_uv(&b, nmodules);
    for (size_t i = 0; i < nmodules; i++) {
        put_cstr(&b, modules[i].path);
        put_uv(&b, modules[i].start);
        put_uv(&b, modules[i].end);
        put_uv(&b, modules[i].bias);
        put_str(&b, (const char *)modules[i].build_id, modules[i].build_id_len);
    }
    section(OT_SEC_MODULES, &b, false);

    put_uv(&b, nsyms);
    for (size_t i = 0; i < nsyms; i++) {
        put_uv(&b, syms[i].addr);
        put_cstr(&b, syms[i].name);
        put_uv(&b, syms[i].off);
    }
    section(OT_SEC_SYMBOLS, &b, cfg.compress);

    put_uv(&b, npys);
    for (size_t i = 0; i < npys; i++) {
        put_uv(&b, pys[i].id);
        put_cstr(&b, pys[i].func);
        put_cstr(&b, pys[i].file);
        put_uv(&b, pys[i].line);
    }
    section(OT_SEC_PYFRAMES, &b, cfg.compress);
}

static void write_stacks(void)
{
    struct buf b = {0};
    put_uv(&b, nstacks + (cfg.corrupt == C_DUP_STACK ? 1 : 0));
    for (size_t i = 0; i < nstacks; i++) {
        put_uv(&b, stacks[i].id);
        put_uv(&b, stacks[i].flags);
        put_uv(&b, stacks[i].n);
        for (size_t k = 0; k < stacks[i].n; k++)
            put_uv(&b, stacks[i].frames[k]);
    }
    if (cfg.corrupt == C_DUP_STACK) {
        put_uv(&b, stacks[0].id);
        put_uv(&b, 0);
        put_uv(&b, 0);
    }
    if (cfg.corrupt == C_STRING_PAST_END) {
        /* Not a string, but the same failure: a frame count far past the payload. */
        b.n = 0;
        put_uv(&b, 1);
        put_uv(&b, 1);
        put_uv(&b, 0);
        put_uv(&b, 1000);
        put_uv(&b, 2);
    }
    section(OT_SEC_STACKS, &b, cfg.compress && cfg.corrupt != C_STRING_PAST_END);
    if (!cfg.borrowed)
        return;
    /* Every stack flagged borrowed (make_*_stacks: every fifth), lent by the main thread (the pid), by
     * another thread, or by one the tracer could not name (0). */
    size_t n = 0;
    for (size_t i = 0; i < nstacks; i++)
        n += (stacks[i].flags & OT_STACK_BORROWED) != 0;
    put_uv(&b, n + (cfg.corrupt == C_BORROWED_COUNT ? 1000 : 0));
    for (size_t i = 0, k = 0; i < nstacks; i++) {
        if (!(stacks[i].flags & OT_STACK_BORROWED))
            continue;
        put_uv(&b, stacks[i].id + (cfg.corrupt == C_BORROWED_STACK && k == 0 ? 1000000 : 0));
        put_uv(&b, k % 3 == 0 ? 4242 : k % 3 == 1 ? 4250 + k : 0);
        k++;
    }
    if (cfg.corrupt == C_BORROWED_UNFLAGGED) {
        for (size_t i = 0; i < nstacks; i++)
            if (!(stacks[i].flags & OT_STACK_BORROWED)) {
                b.n = 0;
                put_uv(&b, 1);
                put_uv(&b, stacks[i].id);
                put_uv(&b, 4242);
                break;
            }
    }
    section(OT_SEC_BORROWED, &b, cfg.compress);
}

/* snapgen's record, field by field in the order of OT_RECORD_FIELDS. */
#define REC_address(r) (r)->addr
#define REC_size(r) (r)->size
#define REC_device(r) (uint64_t)(r)->dev
#define REC_category(r) (r)->cat
#define REC_api(r) (r)->api
#define REC_flags(r) (r)->flags
#define REC_stack_id(r) (r)->stack
#define REC_tid(r) (r)->tid
#define REC_time_ns(r) (r)->t
#define REC_seq(r) (r)->seq

/* One field, coded as the format says. */
static void put_field(struct buf *b, enum ot_coding coding, uint64_t v, uint64_t prev)
{
    uint8_t tmp[10];
    put_bytes(b, tmp, (size_t)(ot_put_field(tmp, coding, v, prev) - tmp));
}

static void put_record(struct buf *b, const struct rec *r)
{
#define OT_X_PUT(col, name, coding, seq_coding, doc) put_field(b, OT_CODING_##coding, REC_##name(r), 0);
    OT_RECORD_FIELDS(OT_X_PUT)
#undef OT_X_PUT
}

static int cmp_rec_seq(const void *a, const void *b)
{
    uint64_t x = ((const struct rec *)a)->seq, y = ((const struct rec *)b)->seq;
    return x < y ? -1 : x > y;
}

/* The tracer's form since 1.1 (docs/FORMAT.md): LIVE_SEQ, column by column in seq order, and PEAK_REF,
 * which writes only the peak records no longer live. */
static void write_live_seq_peak_refs(void)
{
    struct buf b = {0};
    struct rec *r = malloc((sim.npersist ? sim.npersist : 1) * sizeof *r);
    if (!r) {
        fprintf(stderr, "snapgen: out of memory\n");
        exit(1);
    }
    memcpy(r, sim.persist, sim.npersist * sizeof *r);
    qsort(r, sim.npersist, sizeof *r, cmp_rec_seq);
    size_t n = sim.npersist;
    if (cfg.corrupt == C_BOTH_LIVE) {
        put_uv(&b, n);
        for (size_t i = 0; i < n; i++)
            put_record(&b, &r[i]);
        section(OT_SEC_LIVE, &b, cfg.compress);
    }
    put_uv(&b, cfg.corrupt == C_LIVE_SEQ_SHORT ? n + 1 : n);
#define OT_X_COL(col, name, coding, seq_coding, doc)                                                   \
    for (size_t i = 0; i < n; i++)                                                                     \
        put_field(&b, OT_CODING_##seq_coding, REC_##name(&r[i]), i ? REC_##name(&r[i - 1]) : 0);
    OT_RECORD_FIELDS(OT_X_COL)
#undef OT_X_COL
    if (cfg.corrupt == C_PEAK_REF_NO_LIVE)
        b.n = 0;
    else
        section(OT_SEC_LIVE_SEQ, &b, cfg.compress);

    for (uint64_t d = 0; d < cfg.devices; d++) {
        struct dev_state *ds = &sim.dev[d];
        uint64_t shared = 0;
        for (size_t i = 0; i < n; i++)
            shared += ot_peak_ref_shares(r[i].dev, r[i].cat, r[i].seq, (int64_t)d, ds->peak_seq);
        put_sv(&b, (int64_t)d);
        put_uv(&b, ds->peak);
        put_uv(&b, ds->peak_t);
        put_uv(&b, ds->peak_seq);
        put_uv(&b, shared + ds->peak_ntemps + (cfg.corrupt == C_PEAK_REF_COUNT));
        put_uv(&b, 0); /* lost */
        put_uv(&b, ds->peak_ntemps);
        for (size_t i = 0; i < ds->peak_ntemps; i++)
            put_record(&b, &ds->peak_temps[i]);
        section(OT_SEC_PEAK_REF, &b, cfg.compress);
    }
    free(r);
}

static void write_live_peaks(void)
{
    if (cfg.seq_order) {
        write_live_seq_peak_refs();
        return;
    }
    struct buf b = {0};
    put_uv(&b, cfg.corrupt == C_HUGE_COUNT ? (1ULL << 60) : sim.npersist);
    for (size_t i = 0; i < sim.npersist; i++)
        put_record(&b, &sim.persist[i]);
    section(OT_SEC_LIVE, &b, cfg.compress);

    for (uint64_t d = 0; d < cfg.devices; d++) {
        struct dev_state *ds = &sim.dev[d];
        put_sv(&b, (int64_t)d);
        put_uv(&b, ds->peak);
        put_uv(&b, ds->peak_t);
        put_uv(&b, ds->peak_seq);
        put_uv(&b, ds->peak_npersist + ds->peak_ntemps);
        for (size_t i = 0; i < ds->peak_npersist; i++)
            put_record(&b, &sim.persist[i]);
        for (size_t i = 0; i < ds->peak_ntemps; i++)
            put_record(&b, &ds->peak_temps[i]);
        section(OT_SEC_PEAK, &b, cfg.compress);
    }
}

static void write_events(void)
{
    struct buf b = {0};
    size_t from = chunks_kept_from();
    put_uv(&b, sim.nchunks - from);
    for (size_t i = from; i < sim.nchunks; i++) {
        struct chunk *c = &sim.chunks[i];
        put_uv(&b, c->first_seq);
        put_uv(&b, cfg.corrupt == C_CHUNK_COUNT && i == from ? c->raw_len : c->nevents);
        put_uv(&b, c->t0);
        put_uv(&b, c->raw_len);
        if (cfg.corrupt == C_CHUNK_ZSTD && i == (from + sim.nchunks) / 2)
            c->frame[0] ^= 0xff; /* the frame's magic number */
        put_str(&b, (const char *)c->frame, c->frame_len);
    }
    section(OT_SEC_EVENTS, &b, false);
}

static void write_rest(void)
{
    struct buf b = {0};
    uint64_t nm = sim.nmarkers < 1024 ? sim.nmarkers : 1024;
    put_uv(&b, nm);
    for (uint64_t i = sim.nmarkers - nm; i < sim.nmarkers; i++) {
        struct marker *m = &sim.markers[i % 1024];
        put_uv(&b, m->seq);
        put_uv(&b, m->t);
        put_uv(&b, m->tid);
        put_cstr(&b, m->label);
    }
    section(OT_SEC_MARKERS, &b, cfg.compress);

    put_uv(&b, cfg.devices + 1);
    for (uint64_t d = 0; d < cfg.devices; d++) {
        uint64_t used = sim.dev[d].by_cat[OT_CAT_ASYNC];
        put_uv(&b, 0x5000 + d);
        put_sv(&b, (int64_t)d);
        put_uv(&b, 0x1);
        put_uv(&b, (used + (1ULL << 30)) & ~((1ULL << 29) - 1));
        put_uv(&b, used);
    }
    put_uv(&b, 0x6000);
    put_sv(&b, 0);
    put_uv(&b, 0x2); /* attributes unreadable */
    put_uv(&b, 0);
    put_uv(&b, 0);
    section(OT_SEC_POOLS, &b, false);

    size_t nmap = 0;
    for (size_t i = 0; i < sim.npersist; i++)
        nmap += sim.persist[i].cat == OT_CAT_VMM;
    put_uv(&b, nmap);
    uint64_t va = 0x7fa000000000ULL;
    for (size_t i = 0; i < sim.npersist; i++) {
        if (sim.persist[i].cat != OT_CAT_VMM)
            continue;
        put_uv(&b, va);
        put_uv(&b, sim.persist[i].size);
        put_uv(&b, sim.persist[i].addr);
        put_uv(&b, 0);
        va += (sim.persist[i].size + 0x1fffff) & ~(uint64_t)0x1fffff;
    }
    section(OT_SEC_MAPPINGS, &b, false);

    put_uv(&b, 1);
    put_cstr(&b, "");
    put_uv(&b, 2);
    put_sv(&b, 0);
    put_uv(&b, 31337);
    put_uv(&b, OTHER_PROC);
    put_cstr(&b, "other_job");
    put_sv(&b, 0);
    put_uv(&b, 4242); /* the process itself, which the reader must not count as "other" */
    put_uv(&b, sim.dev[0].tracked + CONTEXT);
    put_cstr(&b, "python3");
    section(OT_SEC_PROCESSES, &b, false);

    static const char *const tn[] = {"python3", "pt_autograd_0", "pin_memory", "nccl"};
    put_uv(&b, 4);
    for (int i = 0; i < 4; i++) {
        put_uv(&b, 1000 + (uint64_t)i);
        put_cstr(&b, tn[i]);
    }
    section(OT_SEC_THREADS, &b, false);
}

static void write_file(void)
{
    put_bytes(&file, OT_MAGIC, 8);
    put_le(&file, cfg.corrupt == C_BAD_VERSION ? 2 : OT_VERSION_MAJOR, 2);
    put_le(&file, cfg.future ? 7 : OT_VERSION_MINOR, 2);
    put_le(&file, cfg.incomplete ? 0 : OT_FILE_COMPLETE, 4);
    put_le(&file, 0, 8);
    put_le(&file, 0, 8);
    if (cfg.corrupt != C_NO_META)
        write_meta();
    if (cfg.future) {
        struct buf b = {0};
        for (int i = 0; i < 100; i++)
            put_uv(&b, rnd());
        section(99, &b, true);
    }
    write_devices();
    if (cfg.corrupt == C_DUP_SECTION)
        write_devices();
    write_framework(); /* before FAILURE: a framework OOM's request comes from the framework's view */
    write_failure();
    write_modules_symbols_pyframes();
    write_stacks();
    write_live_peaks();
    write_events();
    write_rest();
}

/* Damage applied to the finished bytes. */
static void corrupt_file(void)
{
    struct secinfo *s;
    switch (cfg.corrupt) {
    case C_TRUNCATED:
        file.n = file.n * 2 / 3;
        break;
    case C_BAD_MAGIC:
        file.p[0] = 'X';
        break;
    case C_SECTION_PAST_EOF:
        s = &secs[nsecs - 1]; /* stored_len 1000 bytes longer than what is left */
        for (int i = 0; i < 8; i++)
            file.p[s->hdr_off + 8 + i] = (uint8_t)((s->stored_len + 1000) >> (8 * i));
        break;
    case C_BAD_ZSTD:
        s = find_section(OT_SEC_STACKS);
        if (s && s->compressed)
            file.p[s->payload_off] ^= 0xff;
        break;
    case C_RAW_LEN_CAP:
        s = find_section(OT_SEC_LIVE);
        if (s)
            for (int i = 0; i < 8; i++)
                file.p[s->hdr_off + 16 + i] = (uint8_t)((5ULL << 30) >> (8 * i));
        break;
    case C_ZSTD_SIZE_MISMATCH:
        s = find_section(OT_SEC_LIVE);
        if (s && s->compressed)
            file.p[s->hdr_off + 16]++; /* raw_len one more than the frame holds */
        break;
    case C_SHORT_HEADER:
        file.n = 20;
        break;
    case C_SECTION_FLAGS:
        s = find_section(OT_SEC_DEVICES);
        if (s)
            file.p[s->hdr_off + 4] |= 0x4;
        break;
    case C_RAW_MISMATCH:
        s = find_section(OT_SEC_DEVICES);
        if (s)
            file.p[s->hdr_off + 16]++;
        break;
    case C_HEADER_CUT:
        file.n = secs[nsecs - 1].hdr_off + 10;
        break;
    default:
        break;
    }
}

static const char usage[] =
    "Usage: snapgen [OPTIONS] -o FILE\n"
    "Writes a synthetic oomtrace snapshot (docs/FORMAT.md).\n"
    "  --seed N            PRNG seed (default 1); same options and seed give the same bytes\n"
    "  --trigger T         oom (default), exit, signal, api, flush or framework-oom (a framework refused\n"
    "                      its own request: the fatal snapshot, with the probes before it)\n"
    "  --events N          events recorded (default 10000)\n"
    "  --live N            allocations live at the snapshot (default 100)\n"
    "  --stacks N          distinct stacks (default 50)\n"
    "  --devices N         devices, 1 to 16 (default 1)\n"
    "  --chunk N           events per ring chunk (default 8192)\n"
    "  --drop-chunks N     oldest ring chunks dropped (default 0)\n"
    "  --markers-every N   a marker every N events (default 1000, 0 none)\n"
    "  --incomplete        leave out the COMPLETE flag (a crash-surviving flush)\n"
    "  --no-compress       write every section uncompressed\n"
    "  --real-stacks       this program's own backtraces, modules and dladdr symbols (for libdw tests)\n"
    "  --future            a later minor version: an unknown section and appended fields\n"
    "  --hostile-strings   control characters, quotes and invalid UTF-8 in strings\n"
    "  --seq-order         the live set as LIVE_SEQ and peaks as PEAK_REF, as the tracer writes them since\n"
    "                      format 1.1 (the corrupt modes from peak-ref-count on imply it)\n"
    "  --framework LIST    the frameworks' view the companion writes: torch, jax, cupy, comma-separated\n"
    "                      (torch: segments split into allocated and free blocks, a graph pool, an\n"
    "                      expandable segment over the VMM mappings, roles and steps; jax: preallocated\n"
    "                      pool and live arrays; cupy: a pool caching freed memory)\n"
    "  --fraction PCT      torch's per-process memory fraction, percent (its framework OOM hits the limit)\n"
    "  --probes N          driver-level OOM snapshots listed before a framework OOM (default 3)\n"
    "  --no-probes         a framework OOM without that list\n"
    "  --borrowed          every fifth stack borrowed its Python frames from a waiting thread (BORROWED)\n"
    "  --corrupt MODE      damage the file (the fw-* and probes-* modes imply --framework); MODE is one of:\n"
    "                      ";

enum { O_SEED = 256, O_TRIGGER, O_EVENTS, O_LIVE, O_STACKS, O_DEVICES, O_CHUNK, O_DROP, O_MARKERS,
       O_INCOMPLETE, O_NOCOMPRESS, O_REAL, O_FUTURE, O_HOSTILE, O_CORRUPT, O_SEQ_ORDER, O_FRAMEWORK, O_FRACTION,
       O_PROBES, O_NO_PROBES, O_BORROWED, O_HELP };

static uint64_t num(const char *opt, const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || s[0] == '-') {
        fprintf(stderr, "snapgen: %s needs a number, got '%s'\n", opt, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"seed", 1, 0, O_SEED},          {"trigger", 1, 0, O_TRIGGER},     {"events", 1, 0, O_EVENTS},
        {"live", 1, 0, O_LIVE},          {"stacks", 1, 0, O_STACKS},       {"devices", 1, 0, O_DEVICES},
        {"chunk", 1, 0, O_CHUNK},        {"drop-chunks", 1, 0, O_DROP},    {"markers-every", 1, 0, O_MARKERS},
        {"incomplete", 0, 0, O_INCOMPLETE}, {"no-compress", 0, 0, O_NOCOMPRESS}, {"real-stacks", 0, 0, O_REAL},
        {"future", 0, 0, O_FUTURE},      {"hostile-strings", 0, 0, O_HOSTILE}, {"corrupt", 1, 0, O_CORRUPT},
        {"seq-order", 0, 0, O_SEQ_ORDER}, {"help", 0, 0, O_HELP},          {"framework", 1, 0, O_FRAMEWORK},
        {"fraction", 1, 0, O_FRACTION},  {"probes", 1, 0, O_PROBES},         {"no-probes", 0, 0, O_NO_PROBES},
        {"borrowed", 0, 0, O_BORROWED},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "o:", lo, NULL)) != -1) {
        switch (c) {
        case O_SEED: cfg.seed = num("--seed", optarg); break;
        case O_EVENTS: cfg.events = num("--events", optarg); break;
        case O_LIVE: cfg.live = num("--live", optarg); break;
        case O_STACKS: cfg.stacks = num("--stacks", optarg); break;
        case O_DEVICES: cfg.devices = num("--devices", optarg); break;
        case O_CHUNK: cfg.chunk = num("--chunk", optarg); break;
        case O_DROP: cfg.drop_chunks = num("--drop-chunks", optarg); break;
        case O_MARKERS: cfg.markers_every = num("--markers-every", optarg); break;
        case O_INCOMPLETE: cfg.incomplete = true; break;
        case O_NOCOMPRESS: cfg.compress = false; break;
        case O_REAL: cfg.real_stacks = true; break;
        case O_FUTURE: cfg.future = true; break;
        case O_HOSTILE: cfg.hostile = true; break;
        case O_SEQ_ORDER: cfg.seq_order = true; break;
        case O_FRACTION: cfg.fraction_pct = num("--fraction", optarg); break;
        case O_PROBES: cfg.probes = num("--probes", optarg); break;
        case O_NO_PROBES: cfg.no_probes = true; break;
        case O_BORROWED: cfg.borrowed = true; break;
        case O_FRAMEWORK: {
            char *list = strdup(optarg), *save = NULL;
            for (char *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
                unsigned bit = !strcmp(w, "torch") ? FW_TORCH : !strcmp(w, "jax") ? FW_JAX : !strcmp(w, "cupy") ? FW_CUPY : 0;
                if (!bit) {
                    fprintf(stderr, "snapgen: unknown framework '%s' (torch, jax, cupy)\n", w);
                    return 2;
                }
                cfg.frameworks |= bit;
            }
            free(list);
            break;
        }
        case O_TRIGGER: {
            cfg.trigger = 0;
            for (int i = 1; ot_trigger_name((uint64_t)i); i++)
                if (!strcmp(optarg, ot_trigger_name((uint64_t)i)))
                    cfg.trigger = i;
            if (!cfg.trigger) {
                fprintf(stderr, "snapgen: unknown trigger '%s'\n", optarg);
                return 2;
            }
            break;
        }
        case O_CORRUPT: {
            size_t i;
            for (i = 0; i < NCORRUPT && strcmp(optarg, corrupt_names[i]); i++)
                ;
            if (i == NCORRUPT) {
                fprintf(stderr, "snapgen: unknown corruption '%s' (see --help)\n", optarg);
                return 2;
            }
            cfg.corrupt = (enum corrupt)i;
            cfg.seq_order |= cfg.corrupt >= C_PEAK_REF_COUNT && cfg.corrupt < C_FW_LAYOUT;
            break;
        }
        case 'o': cfg.out = optarg; break;
        case O_HELP:
            fputs(usage, stdout);
            for (size_t i = 1; i < NCORRUPT; i++)
                printf("%s%s", corrupt_names[i], i + 1 < NCORRUPT ? ", " : "\n");
            return 0;
        default:
            fputs("snapgen: see --help\n", stderr);
            return 2;
        }
    }
    if (!cfg.out || optind != argc) {
        fputs("snapgen: -o FILE is required (see --help)\n", stderr);
        return 2;
    }
    if (cfg.devices < 1 || cfg.devices > MAX_DEV || cfg.stacks < 1 || cfg.chunk < 1) {
        fputs("snapgen: --devices must be 1..16, --stacks and --chunk at least 1\n", stderr);
        return 2;
    }
    if (cfg.corrupt >= C_BORROWED_STACK && cfg.corrupt <= C_BORROWED_COUNT)
        cfg.borrowed = true;
    if (cfg.corrupt >= C_FW_LAYOUT) {
        cfg.frameworks |= cfg.frameworks ? 0 : FW_TORCH;
        cfg.frameworks |= cfg.corrupt == C_FW_ARRAYS_SHORT ? FW_JAX : 0;
        if (cfg.corrupt == C_FW_ERROR_SHORT || cfg.corrupt == C_PROBES_COUNT)
            cfg.trigger = OT_TRIGGER_FRAMEWORK_OOM;
    }
    if (cfg.trigger == OT_TRIGGER_FRAMEWORK_OOM && !cfg.frameworks)
        cfg.frameworks = FW_TORCH;
    rng = cfg.seed;
    make_pyframes();
    if (cfg.real_stacks)
        make_real_stacks();
    else
        make_fake_stacks();
    simulate();
    write_file();
    corrupt_file();

    FILE *f = strcmp(cfg.out, "-") ? fopen(cfg.out, "wb") : stdout;
    if (!f || fwrite(file.p, 1, file.n, f) != file.n || fflush(f) != 0) {
        perror(cfg.out);
        return 1;
    }
    if (f != stdout)
        fclose(f);
    return 0;
}
