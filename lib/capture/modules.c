/* The module map and dump-time symbol names, so a snapshot can be symbolized on another machine
 * (by path and build-id) and still reads well where the binaries are missing (by dladdr names). */
#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

#include "capture/loader.h"
#include "capture/modules.h"

uint64_t ot_modules_gen;

void ot_modules_unloaded(void)
{
    __atomic_add_fetch(&ot_modules_gen, 1, __ATOMIC_RELEASE);
}

struct walk {
    struct ot_buf *b;
    uint64_t count;
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

static int add_module(struct dl_phdr_info *info, size_t size, void *data)
{
    struct walk *w = data;
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
    char exe[4096];
    const char *path = info->dlpi_name;
    if (!path || !*path) {
        /* The main program has no name in the link map. */
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
        path = exe;
    }
    ot_buf_cstr(w->b, path);
    ot_buf_uv(w->b, lo);
    ot_buf_uv(w->b, hi);
    ot_buf_uv(w->b, info->dlpi_addr);
    put_build_id(w->b, info);
    w->count++;
    return 0;
}

void ot_modules_serialize(struct ot_buf *out)
{
    struct ot_buf body = {0};
    struct walk w = {&body, 0};
    ot_loader_enter();
    dl_iterate_phdr(add_module, &w);
    ot_loader_leave();
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
