/* The tracer's tables on 2 MiB pages (lib/common/tables.c) and the live set that lives in one
 * (lib/record/liveset.c): a table is aligned, zeroed and kept off 2 MiB pages while cold; moved onto them in
 * place, its contents stay; unmapped, its whole reservation goes. Whether the kernel gave 2 MiB pages is
 * checked where it can (transparent huge pages not "never"), and said otherwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/options.h"
#include "common/tables.h"
#include "record/liveset.h"
#include "record/rec.h"

/* The VMA of /proc/self/smaps that holds p: its VmFlags line into flags and its AnonHugePages in KiB; 0 when
 * no VMA holds p. */
static int vma_of(const void *p, char *flags, size_t room, long *huge_kb)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    assert_non_null(f);
    char line[512];
    int in = 0, found = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a VMA's first line; its fields follow */
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            found |= in;
            continue;
        }
        if (in && huge_kb && !strncmp(line, "AnonHugePages:", 14))
            *huge_kb = strtol(line + 14, NULL, 10);
        if (in && !strncmp(line, "VmFlags:", 8)) {
            snprintf(flags, room, "%s", line + 8);
            break;
        }
    }
    fclose(f);
    return found;
}

static int has_flag(const char *flags, const char *flag)
{
    char want[8];
    snprintf(want, sizeof want, " %s", flag);
    return strstr(flags, want) != NULL;
}

static int thp_never(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128] = "";
    if (f) {
        if (!fgets(line, sizeof line, f))
            line[0] = 0;
        fclose(f);
    }
    return !f || strstr(line, "[never]") != NULL;
}

static void cold_table_aligned_zeroed_small_pages(void **state)
{
    (void)state;
    const size_t bytes = 700 * 1024;
    unsigned char *t = ot_table_map(bytes);
    assert_non_null(t);
    assert_int_equal((uintptr_t)t % OT_TABLE_ALIGN, 0);
    for (size_t i = 0; i < bytes; i += 4096)
        assert_int_equal(t[i], 0);
    t[bytes - 1] = 7;
    char flags[512] = "";
    long huge = -1;
    assert_true(vma_of(t, flags, sizeof flags, &huge));
    assert_true(has_flag(flags, "nh")); /* no 2 MiB page while cold, whatever the system's setting */
    assert_int_equal(huge, 0);
    /* The alignment's slack after the reservation is given back: the map took 2 MiB more and kept the aligned
     * span, so at least the page right after the span was ours, and nothing maps it now. */
    assert_false(vma_of((char *)t + OT_TABLE_ALIGN, flags, sizeof flags, NULL));
    ot_table_unmap(t, bytes);
}

static void hot_table_keeps_contents(void **state)
{
    (void)state;
    const size_t bytes = 3 * OT_TABLE_ALIGN - 4096; /* (rounded up to three 2 MiB pages) */
    uint64_t *t = ot_table_map(bytes);
    assert_non_null(t);
    const size_t n = bytes / sizeof *t;
    for (size_t i = 0; i < n; i += 97)
        t[i] = i * 0x9E3779B97F4A7C15ull;
    ot_table_hot(t, bytes);
    for (size_t i = 0; i < n; i++)
        assert_true(t[i] == (i % 97 == 0 ? i * 0x9E3779B97F4A7C15ull : 0));
    char flags[512] = "";
    long huge = -1;
    assert_true(vma_of(t, flags, sizeof flags, &huge));
    assert_false(has_flag(flags, "nh"));
    assert_true(has_flag(flags, "hg"));
    if (thp_never())
        print_message("transparent huge pages are off here: 2 MiB pages not checked\n");
    else if (huge == 0)
        print_message("the kernel gave no 2 MiB page (no MADV_COLLAPSE before Linux 6.1): not checked\n");
    else if (huge < 3 * 2048)
        print_message("the kernel gave %ld KiB of the table's 6144 on 2 MiB pages (memory short?)\n", huge);
    else
        assert_int_equal(huge, 3 * 2048);
    ot_table_unmap(t, bytes);
}

/* OOMTRACE_HUGE_PAGES=0: a hot table stays as it was mapped. */
static void hot_table_off(void **state)
{
    (void)state;
    ot_opt.huge_pages = 0;
    char *t = ot_table_map(OT_TABLE_ALIGN);
    assert_non_null(t);
    t[0] = 1;
    ot_table_hot(t, OT_TABLE_ALIGN);
    ot_opt.huge_pages = 1;
    char flags[512] = "";
    long huge = -1;
    assert_true(vma_of(t, flags, sizeof flags, &huge));
    assert_true(has_flag(flags, "nh"));
    assert_false(has_flag(flags, "hg"));
    assert_int_equal(huge, 0);
    ot_table_unmap(t, OT_TABLE_ALIGN);
}

static void unmap_takes_the_whole_reservation(void **state)
{
    (void)state;
    char *t = ot_table_map(4096);
    assert_non_null(t);
    char flags[512];
    assert_true(vma_of(t + OT_TABLE_ALIGN - 1, flags, sizeof flags, NULL)); /* reserved in whole 2 MiB */
    ot_table_unmap(t, 4096);
    assert_false(vma_of(t, flags, sizeof flags, NULL));
    assert_false(vma_of(t + OT_TABLE_ALIGN - 1, flags, sizeof flags, NULL));
}

/* A live set made hot keeps every record, and a table it grows into afterwards is hot from the start; another
 * set is not made hot with it, and a cleared one starts cold again. */
static void live_set_hot_and_grown(void **state)
{
    (void)state;
    struct ot_liveset s = {0};
    struct ot_rec r = {.ns = OT_NS_DEVPTR, .size = 4096};
    for (uint64_t k = 1; k <= 500; k++) {
        r.key = k << 12;
        r.seq = k;
        assert_non_null(ot_live_put(&s, &r));
    }
    ot_live_hot(&s);
    char flags[512] = "";
    assert_true(vma_of(s.slots, flags, sizeof flags, NULL));
    assert_true(has_flag(flags, "hg"));
    for (uint64_t k = 501; k <= 5000; k++) { /* grows past its first table's 1024 slots */
        r.key = k << 12;
        r.seq = k;
        assert_non_null(ot_live_put(&s, &r));
    }
    assert_int_equal(s.count, 5000);
    for (uint64_t k = 1; k <= 5000; k++) {
        const struct ot_rec *q = ot_live_find(&s, OT_NS_DEVPTR, k << 12);
        assert_non_null(q);
        assert_int_equal(q->seq, k);
    }
    assert_true(vma_of(s.slots, flags, sizeof flags, NULL));
    assert_true(has_flag(flags, "hg"));
    struct ot_liveset other = {0};
    assert_non_null(ot_live_put(&other, &r));
    assert_true(vma_of(other.slots, flags, sizeof flags, NULL));
    assert_false(has_flag(flags, "hg"));
    ot_live_clear(&other);
    ot_live_clear(&s);
    assert_non_null(ot_live_put(&s, &r));
    assert_true(vma_of(s.slots, flags, sizeof flags, NULL));
    assert_false(has_flag(flags, "hg"));
    ot_live_clear(&s);
}

int main(void)
{
    ot_opt.huge_pages = 1; /* (the library's default; options are not loaded here) */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cold_table_aligned_zeroed_small_pages),
        cmocka_unit_test(hot_table_keeps_contents),
        cmocka_unit_test(hot_table_off),
        cmocka_unit_test(unmap_takes_the_whole_reservation),
        cmocka_unit_test(live_set_hot_and_grown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
