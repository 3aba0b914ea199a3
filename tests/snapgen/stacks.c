/* The stacks the simulated allocations come from, with the modules, symbols and Python frames that
 * resolve them: fake ones laid out like a PyTorch process (the default, a function of the seed), or this
 * process's own backtraces (--real-stacks, for symbolization with libdw). */
#include "snapgen.h"

#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>
#include <link.h>
#include <unistd.h>

struct gstack *stacks;
size_t nstacks;
struct gmodule *modules;
size_t nmodules;
struct gsym *syms;
size_t nsyms;
static size_t capsyms;
struct gpy *pys;
size_t npys;

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

void make_pyframes(void)
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

void make_fake_stacks(void)
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

void make_real_stacks(void)
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
