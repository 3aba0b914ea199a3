#include <stdint.h>
#include <sys/mman.h>

#include "common/options.h"
#include "common/pages.h"
#include "common/tables.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* (Linux 6.1; headers older than the kernel lack it) */
#endif

static size_t reserved(size_t bytes)
{
    return (bytes + OT_TABLE_ALIGN - 1) / OT_TABLE_ALIGN * OT_TABLE_ALIGN;
}

void *ot_table_map(size_t bytes)
{
    const size_t len = reserved(bytes);
    /* mmap aligns to a page only: map 2 MiB more, and give back what lies outside the aligned span */
    char *const p = mmap(NULL, len + OT_TABLE_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    char *const a = (char *)(((uintptr_t)p + OT_TABLE_ALIGN - 1) & ~(uintptr_t)(OT_TABLE_ALIGN - 1));
    if (a > p)
        munmap(p, (size_t)(a - p));
    if (a + len < p + len + OT_TABLE_ALIGN)
        munmap(a + len, (size_t)(p + OT_TABLE_ALIGN - a));
    madvise(a, len, MADV_NOHUGEPAGE);
    return a;
}

void ot_table_unmap(void *p, size_t bytes)
{
    ot_unmap(p, reserved(bytes));
}

void ot_table_hot(void *p, size_t bytes)
{
    const size_t len = reserved(bytes);
    if (ot_opt.huge_pages && madvise(p, len, MADV_HUGEPAGE) == 0)
        madvise(p, len, MADV_COLLAPSE);
}
