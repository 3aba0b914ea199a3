/* The module map and dump-time symbol names, so a snapshot can be symbolized on another machine
 * (by path and build-id) and still reads well where the binaries are missing (by dladdr names). */
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/loader.h"
#include "capture/modules.h"
#include "common/defs.h"

uint64_t ot_modules_gen;

/* The tracer's own load of NVML, and the libraries that load brought in (lib/snapshot/nvml.c keeps NVML open
 * once a snapshot asked it): not the program's modules, so not listed, and their ranges do not hide an unloaded
 * library's record (walk 7, #27: NVML is often mapped where a plugin the program unloaded was). No stack of the
 * program holds their code: NVML is called by the tracer only, and calls nothing that is traced. Filled once,
 * then published (nhidden); emptied when the program turns out to use NVML itself (ot_modules_used). */
#define OT_MAX_HIDDEN 8
static struct {
    uint64_t bias;
    const char *name; /* the loader's own string (dl_iterate_phdr's dlpi_name): they are never unloaded */
} hidden[OT_MAX_HIDDEN];
static unsigned nhidden;
static void *hidden_handle;

void ot_modules_unloaded(void)
{
    __atomic_add_fetch(&ot_modules_gen, 1, __ATOMIC_RELEASE);
}

struct walk {
    struct ot_buf *b;
    uint64_t count;
    uint64_t (*ranges)[2]; /* the loaded modules' [lo, hi), for the unloaded ones' overlap check */
    size_t nranges, cap;
    uint64_t want_bias; /* ot_modules_note: the one module wanted (by its load bias and name) */
    const char *want_name;
    uint64_t lo, hi;
};

static void put_build_id(struct ot_buf *b, const struct dl_phdr_info *info)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
        const uint8_t *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
            const uint8_t *name = p + sizeof *n;
            const uint8_t *desc = name + ((n->n_namesz + 3) & ~3u);
            const uint8_t *next = desc + ((n->n_descsz + 3) & ~3u);
            if (next > end || next <= p)
                break;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
                ot_buf_str(b, (const char *)desc, n->n_descsz);
                return;
            }
            p = next;
        }
    }
    ot_buf_str(b, "", 0);
}

/* The main program has no name in the link map. Apart, so that its 4 KiB buffer is on the stack only here:
 * the dlclose wrapper walks the modules (ot_modules_note) from inside the driver's first call on a thread,
 * whose stack the tracer keeps small (test_hostile's footprint). */
static __attribute__((noinline)) void put_exe_path(struct ot_buf *b)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    ot_buf_cstr(b, exe);
}

/* By address only, no copy and no strcmp: in a program built with ThreadSanitizer, the C library calls that
 * it intercepts would have to be ordered with the filling for it (common/tsan.c), this needs none. */
static int is_hidden(const struct dl_phdr_info *info)
{
    unsigned n = __atomic_load_n(&nhidden, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++)
        if (info->dlpi_addr == hidden[i].bias && info->dlpi_name == hidden[i].name)
            return 1;
    return 0;
}

static int add_module(struct dl_phdr_info *info, size_t size, void *data)
{
    struct walk *w = data;
    if (!w->want_name && is_hidden(info))
        return 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uint64_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < lo)
            lo = a;
        if (a + ph->p_memsz > hi)
            hi = a + ph->p_memsz;
    }
    if (hi == 0)
        return 0;
    if (w->want_name && (info->dlpi_addr != w->want_bias || !info->dlpi_name || strcmp(info->dlpi_name, w->want_name)))
        return 0;
    w->lo = lo;
    w->hi = hi;
    if (w->nranges == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        uint64_t(*r)[2] = realloc(w->ranges, cap * sizeof *r);
        if (r) {
            w->ranges = r;
            w->cap = cap;
        }
    }
    if (w->nranges < w->cap) {
        w->ranges[w->nranges][0] = lo;
        w->ranges[w->nranges++][1] = hi;
    }
    if (info->dlpi_name && *info->dlpi_name)
        ot_buf_cstr(w->b, info->dlpi_name);
    else
        put_exe_path(w->b);
    ot_buf_uv(w->b, lo);
    ot_buf_uv(w->b, hi);
    ot_buf_uv(w->b, info->dlpi_addr);
    put_build_id(w->b, info);
    w->count++;
    return 0;
}

/* The load biases of the loaded objects (dl_iterate_phdr): before the tracer's own dlopen, to tell what it
 * brought in. Two objects loaded at once never share a bias (they would overlap), and a library's is never 0. */
struct biases {
    uint64_t *v;
    size_t n, cap;
    const struct link_map *lm; /* after: the library opened */
};

static int add_bias(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct biases *b = data;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 128;
        uint64_t *v = realloc(b->v, cap * sizeof *v);
        if (!v)
            return 1;
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = info->dlpi_addr;
    return 0;
}

/* Whether lm's library names base ("libpthread.so.0") among its DT_NEEDED. glibc relocates the dynamic
 * section's addresses in place where it is writable (x86-64); where it is not they are the file's, below the
 * bias. */
static int needs(const struct link_map *lm, const char *base)
{
    uintptr_t strtab = 0;
    for (const ElfW(Dyn) *d = lm->l_ld; d && d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_STRTAB)
            strtab = d->d_un.d_ptr;
    if (!strtab)
        return 0;
    if (strtab < lm->l_addr)
        strtab += lm->l_addr;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_NEEDED && strcmp((const char *)strtab + d->d_un.d_val, base) == 0)
            return 1;
    return 0;
}

static int add_hidden(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct biases *b = data;
    for (size_t i = 0; i < b->n; i++)
        if (b->v[i] == info->dlpi_addr)
            return 0; /* there before */
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const char *sl = strrchr(name, '/');
    /* NVML itself, and what it needs that came with it (a concurrent dlopen of the program's is neither) */
    if (info->dlpi_addr != b->lm->l_addr && !(*name && needs(b->lm, sl ? sl + 1 : name)))
        return 0;
    unsigned n = nhidden;
    if (n < OT_MAX_HIDDEN) {
        hidden[n].bias = info->dlpi_addr;
        hidden[n].name = info->dlpi_name;
        __atomic_store_n(&nhidden, n + 1, __ATOMIC_RELEASE);
    }
    return 0;
}

void *ot_modules_open_hidden(const char *name, int flags)
{
    struct biases b = {0};
    ot_loader_enter();
    int short_list = dl_iterate_phdr(add_bias, &b) != 0;
    ot_loader_leave();
    void *h = dlopen(name, flags);
    struct link_map *lm = NULL;
    /* Once: a second call would find its own load there before (the caller keeps the handle) */
    if (h && !short_list && !__atomic_load_n(&hidden_handle, __ATOMIC_ACQUIRE) &&
        dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm) {
        b.lm = lm;
        ot_loader_enter();
        dl_iterate_phdr(add_hidden, &b);
        ot_loader_leave();
        __atomic_store_n(&hidden_handle, h, __ATOMIC_RELEASE);
    }
    free(b.v);
    return h;
}

void ot_modules_used(void *handle)
{
    void *h = __atomic_load_n(&hidden_handle, __ATOMIC_RELAXED);
    if (OT_UNLIKELY(h && handle == h))
        __atomic_store_n(&nhidden, 0, __ATOMIC_RELEASE);
}

/* Libraries unloaded by dlclose keep their record (walk 7, #27): the stacks of allocations they made, still
 * live, hold their code addresses, which without it read "(no module)" and named the caller as the site.
 * Written after the loaded ones, each unless a module loaded since covers any of its range (its addresses
 * are that one's now), or an earlier record is the same (a plugin loaded and unloaded again at one place).
 * The first OT_MAX_UNLOADED unloads are kept. No lock: a slot is claimed with a compare-and-swap, filled, then
 * published; readers take the published ones. A lock here could be copied held into a forked child (a fork
 * while another thread records an unload or a snapshot copies the list), whose next dlclose would then wait
 * for a thread that does not exist there. */
#define OT_MAX_UNLOADED 256
static struct {
    struct ot_buf rec; /* the MODULES record, as it was while loaded */
    uint64_t lo, hi;
    int ready; /* published: rec, lo and hi are written and never change again */
} unloaded[OT_MAX_UNLOADED];
static unsigned nclaimed; /* slots taken, at most OT_MAX_UNLOADED */

int ot_modules_note(void *handle, struct ot_module_note *note)
{
    struct link_map *lm = NULL;
    memset(note, 0, sizeof *note);
    if (!handle || dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name || !*lm->l_name)
        return -1;
    struct walk w = {.b = &note->rec, .want_bias = lm->l_addr, .want_name = lm->l_name};
    ot_loader_enter();
    dl_iterate_phdr(add_module, &w);
    ot_loader_leave();
    free(w.ranges);
    note->bias = lm->l_addr;
    note->lo = w.lo;
    note->hi = w.hi;
    note->path = strdup(lm->l_name);
    if (w.count != 1 || note->rec.oom || !note->path) {
        ot_buf_free(&note->rec);
        free(note->path);
        note->path = NULL;
        return -1;
    }
    return 0;
}

static int still_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const struct ot_module_note *n = data;
    return info->dlpi_addr == n->bias && info->dlpi_name && strcmp(info->dlpi_name, n->path) == 0;
}

void ot_modules_forget(struct ot_module_note *note, int unloaded_now)
{
    if (unloaded_now && note->path) {
        ot_loader_enter();
        int loaded = dl_iterate_phdr(still_loaded, note);
        ot_loader_leave();
        unsigned i = __atomic_load_n(&nclaimed, __ATOMIC_RELAXED);
        while (!loaded && i < OT_MAX_UNLOADED &&
               !__atomic_compare_exchange_n(&nclaimed, &i, i + 1, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            ;
        if (!loaded && i < OT_MAX_UNLOADED) {
            unloaded[i].rec = note->rec;
            unloaded[i].lo = note->lo;
            unloaded[i].hi = note->hi;
            __atomic_store_n(&unloaded[i].ready, 1, __ATOMIC_RELEASE);
            note->rec = (struct ot_buf){0};
        }
    }
    ot_buf_free(&note->rec);
    free(note->path);
    note->path = NULL;
}

void ot_modules_serialize(struct ot_buf *out)
{
    struct ot_buf body = {0};
    struct walk w = {.b = &body};
    ot_loader_enter();
    dl_iterate_phdr(add_module, &w);
    ot_loader_leave();
    /* The loaded modules' count before any unloaded one is added: ranges short of memory (fewer than that)
     * allow no overlap check, and then none is written. */
    int short_ranges = w.nranges < w.count;
    unsigned n = __atomic_load_n(&nclaimed, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n && !short_ranges; i++) {
        if (!__atomic_load_n(&unloaded[i].ready, __ATOMIC_ACQUIRE))
            continue; /* being filled (or, in a forked child, claimed by a thread of the parent) */
        int covered = 0;
        for (size_t k = 0; k < w.nranges && !covered; k++)
            covered = unloaded[i].lo < w.ranges[k][1] && w.ranges[k][0] < unloaded[i].hi;
        for (unsigned j = 0; j < i && !covered; j++)
            covered = __atomic_load_n(&unloaded[j].ready, __ATOMIC_ACQUIRE) && unloaded[j].lo == unloaded[i].lo &&
                      unloaded[j].hi == unloaded[i].hi && unloaded[j].rec.len == unloaded[i].rec.len &&
                      memcmp(unloaded[j].rec.p, unloaded[i].rec.p, unloaded[i].rec.len) == 0;
        if (!covered) {
            ot_buf_put(&body, unloaded[i].rec.p, unloaded[i].rec.len);
            w.count++;
        }
    }
    free(w.ranges);
    ot_buf_uv(out, w.count);
    ot_buf_put(out, body.p, body.len);
    if (body.oom)
        out->oom = 1;
    ot_buf_free(&body);
}

void ot_symbols_serialize(struct ot_buf *out, const uint64_t *addrs, uint64_t n)
{
    struct ot_buf body = {0};
    uint64_t count = 0;
    ot_loader_enter();
    for (uint64_t i = 0; i < n; i++) {
        Dl_info info;
        /* A return address points after the call; the call itself is one byte before. */
        if (!addrs[i] || !dladdr((void *)(uintptr_t)(addrs[i] - 1), &info) || !info.dli_sname)
            continue;
        ot_buf_uv(&body, addrs[i]);
        ot_buf_cstr(&body, info.dli_sname);
        ot_buf_uv(&body, addrs[i] - (uint64_t)(uintptr_t)info.dli_saddr);
        count++;
    }
    ot_loader_leave();
    ot_buf_uv(out, count);
    ot_buf_put(out, body.p, body.len);
    if (body.oom)
        out->oom = 1;
    ot_buf_free(&body);
}
