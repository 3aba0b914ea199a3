/* Every door a program uses to reach the driver, against the stand-in driver: each runs the scenario of
 * tests/doors/scenario.h (or its Python twin) and the snapshot must say exactly the same thing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "harness.h"

static void check_scenario(struct loaded *l)
{
    const struct ot_snapshot *s = &l->s;
    assert_int_equal(s->meta.trigger, OT_TRIGGER_OOM);
    assert_true(s->file_flags & OT_FILE_COMPLETE);

    /* The failed request. */
    assert_true(s->has_failure);
    assert_int_equal(s->failure.requested_bytes, 700 * MiB);
    assert_int_equal(s->failure.api, OT_API_cuMemAlloc_v2);
    assert_int_equal(s->failure.device, 0);
    assert_int_equal(s->failure.result_code, 2);
    assert_true(stack_has_function(l, s->failure.stack_id, "request_too_big"));

    /* What the device had: cuMemGetInfo at the failure. */
    const struct snap_device *d = ot_snapshot_device(s, 0);
    assert_non_null(d);
    assert_true(d->flags & OT_DEV_MEMINFO_KNOWN);
    assert_int_equal(d->total_bytes, 1024 * MiB);
    assert_int_equal(d->free_bytes, 576 * MiB);
    assert_int_equal(d->tracked_bytes, 448 * MiB);
    assert_int_equal(d->peak_bytes, 512 * MiB);

    /* Who held the memory at the peak: exact bytes per call site, and they add up to the peak. */
    const struct ot_peak *p = ot_snapshot_peak(s, 0);
    assert_non_null(p);
    assert_int_equal(p->peak_bytes, 512 * MiB);
    assert_int_equal(sum_bytes(p->recs, p->count, true), 512 * MiB);
    uint64_t n;
    assert_int_equal(bytes_with_function(l, p->recs, p->count, "load_weights", &n), 256 * MiB);
    assert_int_equal(n, 1);
    assert_int_equal(bytes_with_function(l, p->recs, p->count, "make_activations", &n), 256 * MiB);
    assert_int_equal(n, 2);
    assert_int_equal(bytes_with_function(l, p->recs, p->count, "grow_cache", &n), 0);

    /* The same two allocations from one call site merge into one site. */
    struct ot_sites sites;
    struct ot_site_filter f = {.device = 0, .device_memory = true};
    assert_int_equal(ot_sites_build(p->recs, p->count, &f, &sites), 0);
    assert_int_equal(sites.n, 2);
    assert_int_equal(sites.bytes, 512 * MiB);
    assert_int_equal(sites.v[0].bytes, 256 * MiB);
    assert_int_equal(sites.v[1].bytes, 256 * MiB);
    ot_sites_free(&sites);

    /* Who held it at the failure. */
    assert_true(s->has_live);
    assert_int_equal(sum_bytes(s->live, s->nlive, true), 448 * MiB);
    assert_int_equal(bytes_with_function(l, s->live, s->nlive, "load_weights", NULL), 256 * MiB);
    assert_int_equal(bytes_with_function(l, s->live, s->nlive, "grow_cache", NULL), 192 * MiB);

    /* Events: 5 allocations, 2 frees, 1 failure... all kept. */
    assert_int_equal(s->meta.events_recorded, 7);
    assert_int_equal(s->meta.events_kept, 7);
    assert_int_equal(s->meta.events_dropped, 0);
}

static void run_door(char *const argv[])
{
    struct traced_run r;
    traced_run(&r, argv, NULL);
    assert_int_equal(r.status, 0); /* the program saw exactly what it would see untraced */
    assert_int_equal(r.nsnaps, 1);
    struct loaded l;
    load_snapshot(&l, r.paths[0]);
    check_scenario(&l);
    unload_snapshot(&l);
    traced_cleanup(&r);
}

static void test_linked_with_lcuda(void **st)
{
    (void)st;
    run_door((char *const[]){"build/tests/door_linked", NULL});
}

static void test_dlopen_dlsym(void **st)
{
    (void)st;
    run_door((char *const[]){"build/tests/door_dlsym", NULL});
}

static void test_procaddress_v2_flags0(void **st)
{
    (void)st;
    run_door((char *const[]){"build/tests/door_procaddr", "v2", "0", NULL});
}

static void test_procaddress_v2_flags2(void **st)
{
    (void)st;
    run_door((char *const[]){"build/tests/door_procaddr", "v2", "2", NULL});
}

static void test_procaddress_4arg_11030(void **st)
{
    (void)st;
    run_door((char *const[]){"build/tests/door_procaddr", "v1", "0", NULL});
}

/* The line of the `# LINE:name` marker in the Python workload. */
static long marker_line(const char *path, const char *name)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[512], tag[128];
    snprintf(tag, sizeof tag, "# LINE:%s", name);
    long n = 0, found = -1;
    while (fgets(line, sizeof line, f)) {
        n++;
        if (strstr(line, tag))
            found = n;
    }
    fclose(f);
    return found;
}

static void check_python_with(const char *interp, const char *mode_flag, const char *threads)
{
    const char *py = "tests/py/alloc_ctypes.py";
    char *argv[] = {(char *)interp, (char *)py, (char *)mode_flag, (char *)threads, NULL};
    struct traced_run r;
    traced_run(&r, argv, NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.nsnaps, 1);
    struct loaded l;
    load_snapshot(&l, r.paths[0]);
    const struct ot_snapshot *s = &l.s;
    assert_true(s->meta.python_version.n > 0);
    assert_true(s->has_failure);
    assert_int_equal(s->failure.requested_bytes, 700 * MiB);
    /* Python frames: exact file, line and function, in the failed request's stack ... */
    assert_int_equal(stack_python_line(&l, s->failure.stack_id, "request_too_big", "alloc_ctypes.py"),
                     marker_line(py, "request_too_big"));
    assert_true(stack_python_line(&l, s->failure.stack_id, "scenario", "alloc_ctypes.py") > 0);
    /* ... and in the peak's sites. */
    const struct ot_peak *p = ot_snapshot_peak(s, 0);
    assert_non_null(p);
    int seen_w = 0, seen_a = 0;
    for (size_t i = 0; i < p->count; i++) {
        long lw = stack_python_line(&l, p->recs[i].stack_id, "load_weights", "alloc_ctypes.py");
        long la = stack_python_line(&l, p->recs[i].stack_id, "make_activations", "alloc_ctypes.py");
        if (lw > 0) {
            assert_int_equal(lw, marker_line(py, "load_weights"));
            assert_int_equal(p->recs[i].size, 256 * MiB);
            seen_w++;
        }
        if (la > 0) {
            assert_int_equal(la, marker_line(py, "make_activations"));
            assert_int_equal(p->recs[i].size, 128 * MiB);
            seen_a++;
        }
    }
    assert_int_equal(seen_w, 1);
    assert_int_equal(seen_a, 2);
    if (!threads) {
        assert_int_equal(p->peak_bytes, 512 * MiB);
        assert_int_equal(sum_bytes(s->live, s->nlive, true), 448 * MiB);
    }
    unload_snapshot(&l);
    traced_cleanup(&r);
}

static void check_python(const char *mode_flag, const char *threads)
{
    check_python_with("python3", mode_flag, threads);
}

static void test_python_ctypes_frames(void **st)
{
    (void)st;
    check_python(NULL, NULL);
}

/* Every CPython minor version with a frame layout (3.9 to 3.13), where this machine has the
 * interpreter: on PATH as python3.N, or under pyenv. Versions it lacks are said, not failed. Returns how
 * many ran. */
static int each_python(const char *test, void (*check)(const char *interp))
{
    static const char *const versions[] = {"3.9", "3.10", "3.11", "3.12", "3.13"};
    int ran = 0;
    for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++) {
        char cmd[512], path[512] = "";
        /* The real interpreter: pyenv's shims are scripts that may pick another version. */
        snprintf(cmd, sizeof cmd,
                 "p=$(ls -d \"$HOME\"/.pyenv/versions/%s*/bin/python%s 2>/dev/null | head -1); "
                 "[ -n \"$p\" ] && echo \"$p\" || command -v python%s 2>/dev/null",
                 versions[v], versions[v], versions[v]);
        FILE *p = popen(cmd, "r");
        if (p && fgets(path, sizeof path, p))
            path[strcspn(path, "\n")] = 0;
        if (p)
            pclose(p);
        if (!path[0] || strstr(path, "/shims/")) {
            fprintf(stderr, "%s: no python%s here; not run\n", test, versions[v]);
            continue;
        }
        fprintf(stderr, "%s: %s\n", test, path);
        check(path);
        ran++;
    }
    return ran;
}

static void check_python_plain(const char *interp)
{
    check_python_with(interp, NULL, NULL);
}

static void test_python_versions(void **st)
{
    (void)st;
    assert_true(each_python("test_python_versions", check_python_plain) > 0);
}

/* Runs a Python workload whose one argument is build/tests/libnative_thread.so, which exits 0 after one
 * snapshot, and loads that snapshot (its output kept for run_u64). */
static void run_with_native_lib(const char *interp, const char *py, struct traced_run *r, struct loaded *l)
{
    char *argv[] = {(char *)interp, (char *)py, "build/tests/libnative_thread.so", NULL};
    traced_run_capture(r, argv, NULL);
    assert_int_equal(r->status, 0);
    assert_int_equal(r->nsnaps, 1);
    load_snapshot(l, r->paths[0]);
}

/* tests/py/borrow_native.py: allocations of a thread with no Python frame take the Python stack of the
 * main thread, which waits in a call that released the GIL, flagged borrowed and naming the main thread;
 * while the main thread holds the GIL, nothing is borrowed. */
static void check_borrowed(const char *interp)
{
    const char *py = "tests/py/borrow_native.py";
    struct traced_run r;
    struct loaded l;
    run_with_native_lib(interp, py, &r, &l);
    uint64_t pid = run_u64(&r, "pid"), waiter = run_u64(&r, "waiter_lender");
    const struct ot_snapshot *s = &l.s;
    int borrowed = 0, native = 0, reg = 0, from_waiter = 0;
    for (size_t i = 0; i < s->nlive; i++) {
        const struct ot_record *rec = &s->live[i];
        const struct ot_stack *stk = ot_snapshot_stack(s, rec->stack_id);
        assert_non_null(stk);
        if (rec->size == 64 * MiB) {
            assert_true(stk->flags & OT_STACK_BORROWED);
            assert_false(stk->flags & OT_STACK_NO_PYTHON);
            assert_int_equal(stk->lender_tid, pid);
            assert_int_not_equal(rec->tid, pid);
            assert_int_equal(stack_python_line(&l, rec->stack_id, "backward", "borrow_native.py"),
                             marker_line(py, "backward"));
            assert_true(stack_python_line(&l, rec->stack_id, "main", "borrow_native.py") > 0);
            borrowed++;
        } else if (rec->size == 48 * MiB) { /* a thread with a thread state and no frame: the same */
            assert_true(stk->flags & OT_STACK_BORROWED);
            assert_int_equal(stk->lender_tid, pid);
            assert_int_equal(stack_python_line(&l, rec->stack_id, "registered", "borrow_native.py"),
                             marker_line(py, "registered"));
            reg++;
        } else if (rec->size == 32 * MiB) {
            assert_false(stk->flags & OT_STACK_BORROWED);
            assert_true(stk->flags & OT_STACK_NO_PYTHON);
            assert_int_equal(stack_python_line(&l, rec->stack_id, "busy", "borrow_native.py"), -1);
            native++;
        } else if (rec->size == 16 * MiB) { /* the main thread holds the GIL: the waiting thread lends */
            assert_true(stk->flags & OT_STACK_BORROWED);
            assert_int_equal(stk->lender_tid, waiter);
            assert_int_equal(stack_python_line(&l, rec->stack_id, "waiter", "borrow_native.py"),
                             marker_line(py, "waiter"));
            assert_int_equal(stack_python_line(&l, rec->stack_id, "hold_while", "borrow_native.py"), -1);
            from_waiter++;
        }
    }
    assert_int_equal(borrowed, 3);
    assert_int_equal(reg, 2);
    assert_int_equal(native, 2);
    assert_int_equal(from_waiter, 2);
    assert_true(s->has_failure);
    const struct ot_stack *fs = ot_snapshot_stack(s, s->failure.stack_id);
    assert_non_null(fs);
    assert_true(fs->flags & OT_STACK_BORROWED);
    assert_int_equal(fs->lender_tid, pid);
    assert_int_equal(stack_python_line(&l, s->failure.stack_id, "too_big", "borrow_native.py"),
                     marker_line(py, "too_big"));
    unload_snapshot(&l);
    traced_cleanup(&r);
}

static void test_python_borrowed(void **st)
{
    (void)st;
    check_borrowed("python3");
    each_python("test_python_borrowed", check_borrowed);
}

/* tests/py/borrow_again.py: a native thread kept for the process borrows the main thread's stack at two
 * places in turn, then at one place from two callers in turn; each allocation names the place the main thread
 * waits at then, and its callers, though most borrows read none of the main thread's frames. */
static void check_borrow_again(const char *interp)
{
    const char *py = "tests/py/borrow_again.py";
    struct traced_run r;
    struct loaded l;
    run_with_native_lib(interp, py, &r, &l);
    const struct ot_snapshot *s = &l.s;
    int a = 0, b = 0, vias[2] = {0, 0}, callers[2] = {0, 0}, deeps[2] = {0, 0};
    for (size_t i = 0; i < s->nlive; i++) {
        const struct ot_record *rec = &s->live[i];
        const struct ot_stack *stk = ot_snapshot_stack(s, rec->stack_id);
        assert_non_null(stk);
        if (rec->size == 14 * MiB || rec->size == 15 * MiB) { /* under a chain deeper than one is kept whole */
            const int right = rec->size == 15 * MiB;
            assert_true(stk->flags & OT_STACK_BORROWED);
            assert_true(stk->flags & OT_STACK_TRUNCATED);
            assert_int_equal(stack_python_line(&l, rec->stack_id, "wait_deep", "borrow_again.py"),
                             marker_line(py, "wait_deep"));
            assert_int_equal(stack_python_line(&l, rec->stack_id, "main", "borrow_again.py"),
                             marker_line(py, "deep_call"));
            assert_true(stack_has_function(&l, rec->stack_id, right ? "via_right" : "via_left"));
            deeps[right]++;
            continue;
        }
        if (rec->size == 12 * MiB || rec->size == 13 * MiB) { /* one waiting frame, two callers further out */
            const int y = rec->size == 13 * MiB;
            assert_true(stk->flags & OT_STACK_BORROWED);
            assert_int_equal(stack_python_line(&l, rec->stack_id, "wait_inner", "borrow_again.py"),
                             marker_line(py, "wait_inner"));
            assert_int_equal(stack_python_line(&l, rec->stack_id, y ? "from_y" : "from_x", "borrow_again.py"),
                             marker_line(py, y ? "from_y" : "from_x"));
            assert_int_equal(stack_python_line(&l, rec->stack_id, y ? "from_x" : "from_y", "borrow_again.py"), -1);
            callers[y]++;
            continue;
        }
        if (rec->size == 10 * MiB || rec->size == 11 * MiB) { /* one waiting line, two native call sites */
            const int right = rec->size == 11 * MiB;
            assert_true(stk->flags & OT_STACK_BORROWED);
            assert_int_equal(stack_python_line(&l, rec->stack_id, "wait_via", "borrow_again.py"),
                             marker_line(py, "wait_via"));
            assert_true(stack_has_function(&l, rec->stack_id, right ? "via_right" : "via_left"));
            assert_false(stack_has_function(&l, rec->stack_id, right ? "via_left" : "via_right"));
            vias[right]++;
            continue;
        }
        if (rec->size != 8 * MiB && rec->size != 9 * MiB)
            continue;
        int is_a = rec->size == 8 * MiB;
        assert_true(stk->flags & OT_STACK_BORROWED);
        assert_int_equal(stack_python_line(&l, rec->stack_id, is_a ? "wait_a" : "wait_b", "borrow_again.py"),
                         marker_line(py, is_a ? "wait_a" : "wait_b"));
        assert_int_equal(stack_python_line(&l, rec->stack_id, is_a ? "wait_b" : "wait_a", "borrow_again.py"), -1);
        a += is_a;
        b += !is_a;
    }
    assert_int_equal(a, 20);
    assert_int_equal(b, 20);
    assert_int_equal(vias[0], 6);
    assert_int_equal(vias[1], 6);
    assert_int_equal(callers[0], 12);
    assert_int_equal(callers[1], 12);
    assert_int_equal(deeps[0], 4);
    assert_int_equal(deeps[1], 4);
    unload_snapshot(&l);
    traced_cleanup(&r);
}

static void test_python_borrow_again(void **st)
{
    (void)st;
    check_borrow_again("python3");
    each_python("test_python_borrow_again", check_borrow_again);
}

/* tests/py/stack_cache.py: allocations whose stacks differ only in the innermost Python frame's line, only
 * in its caller's line, or only in their native frames, alternating in one loop: each keeps its own stack
 * (the thread's last chain and last merged stack are reused only when both are the same). */
static void check_stack_cache(const char *interp)
{
    const char *py = "tests/py/stack_cache.py";
    struct traced_run r;
    struct loaded l;
    run_with_native_lib(interp, py, &r, &l);
    const struct ot_snapshot *s = &l.s;
    int seen[8] = {0};
    for (size_t i = 0; i < s->nlive; i++) {
        const struct ot_record *rec = &s->live[i];
        uint64_t id = rec->stack_id;
        switch (rec->size / MiB) {
        case 2:
            assert_int_equal(stack_python_line(&l, id, "lines", "stack_cache.py"), marker_line(py, "even"));
            break;
        case 3:
            assert_int_equal(stack_python_line(&l, id, "lines", "stack_cache.py"), marker_line(py, "odd"));
            break;
        case 4:
        case 5:
            assert_int_equal(stack_python_line(&l, id, "inner", "stack_cache.py"), marker_line(py, "inner"));
            assert_int_equal(stack_python_line(&l, id, "callers", "stack_cache.py"),
                             marker_line(py, rec->size == 4 * MiB ? "caller_even" : "caller_odd"));
            break;
        case 6:
        case 7:
            assert_int_equal(stack_python_line(&l, id, "natives", "stack_cache.py"), marker_line(py, "via"));
            assert_true(stack_has_function(&l, id, rec->size == 6 * MiB ? "via_left" : "via_right"));
            assert_false(stack_has_function(&l, id, rec->size == 6 * MiB ? "via_right" : "via_left"));
            break;
        default:
            continue;
        }
        seen[rec->size / MiB]++;
    }
    for (int k = 2; k <= 7; k++)
        assert_int_equal(seen[k], 3);
    unload_snapshot(&l);
    traced_cleanup(&r);
}

static void test_python_stack_cache(void **st)
{
    (void)st;
    check_stack_cache("python3");
    each_python("test_python_stack_cache", check_stack_cache);
}

/* tests/py/places.py: 12 places in a fixed rotation, differing in the innermost line, an outer line or
 * the native frames only: each allocation keeps its own place's stack though the thread's merged stacks
 * by place give most of them back without a merge (pyframes.c, struct mcache). Then a place found so, followed
 * by its own chain again: from the same native frames (6, 7 MiB), or from others (8, 9). */
static void check_places(const char *interp)
{
    const char *py = "tests/py/places.py";
    static const char *const line_marks[] = {"l10", "l11", "l12", "l13", "l14", "l15"};
    static const char *const caller_marks[] = {"c16", "c17", "c18", "c19"};
    struct traced_run r;
    struct loaded l;
    run_with_native_lib(interp, py, &r, &l);
    const struct ot_snapshot *s = &l.s;
    int seen[22] = {0};
    for (size_t i = 0; i < s->nlive; i++) {
        const struct ot_record *rec = &s->live[i];
        uint64_t id = rec->stack_id, mib = rec->size / MiB;
        if (rec->size % MiB || mib < 6 || mib > 21)
            continue;
        if (mib == 8 || mib == 9) {
            assert_int_equal(stack_python_line(&l, id, "again", "places.py"), marker_line(py, "twoways"));
            assert_int_equal(stack_python_line(&l, id, "twice", "places.py"), -1);
            assert_true(stack_has_function(&l, id, mib == 8 ? "via_left" : "via_right"));
            assert_false(stack_has_function(&l, id, mib == 8 ? "via_right" : "via_left"));
        } else if (mib == 6 || mib == 7) {
            assert_int_equal(stack_python_line(&l, id, "twice", "places.py"), marker_line(py, "twice"));
            assert_int_equal(stack_python_line(&l, id, "again", "places.py"), marker_line(py, "t_call"));
            assert_false(stack_has_function(&l, id, "via_left"));
        } else if (mib <= 15) {
            assert_int_equal(stack_python_line(&l, id, "lines", "places.py"), marker_line(py, line_marks[mib - 10]));
        } else if (mib <= 19) {
            assert_int_equal(stack_python_line(&l, id, "inner", "places.py"), marker_line(py, "inner"));
            assert_int_equal(stack_python_line(&l, id, "callers", "places.py"), marker_line(py, caller_marks[mib - 16]));
        } else {
            assert_int_equal(stack_python_line(&l, id, "natives", "places.py"), marker_line(py, "via"));
            assert_true(stack_has_function(&l, id, mib == 20 ? "via_left" : "via_right"));
            assert_false(stack_has_function(&l, id, mib == 20 ? "via_right" : "via_left"));
        }
        seen[mib]++;
    }
    for (int k = 6; k <= 21; k++) /* (the second part: 5 rounds, at 10-14 MiB once more, via_right in 4) */
        assert_int_equal(seen[k], k <= 8 || (k >= 10 && k <= 14) ? 5 : 4);
    unload_snapshot(&l);
    traced_cleanup(&r);
}

static void test_python_places(void **st)
{
    (void)st;
    check_places("python3");
    each_python("test_python_places", check_places);
}

/* tests/py/code_reuse.py: six functions made, called and dropped in turn, whose code objects take each
 * other's addresses, with the same bytecode, native frames and lines: each allocation names its own
 * function (a merged stack by place is keyed by the code's qualified name too, not its address alone). */
static void check_code_reuse(const char *interp)
{
    static const char *const names[] = {"fa", "fb", "fc", "fd", "fe", "ff"};
    const char *py = "tests/py/code_reuse.py";
    struct traced_run r;
    struct loaded l;
    run_with_native_lib(interp, py, &r, &l);
    assert_true(run_u64(&r, "code_addresses") < 6);
    assert_true(run_u64(&r, "code_addresses_gil") < 6);
    const struct ot_snapshot *s = &l.s;
    int seen[16] = {0};
    for (size_t i = 0; i < s->nlive; i++) {
        const struct ot_record *rec = &s->live[i];
        const uint64_t id = rec->stack_id, mib = rec->size / MiB;
        if (rec->size % MiB || mib < 30 || mib > 45 || (mib > 35 && mib < 40))
            continue;
        for (int k = 0; k < 6; k++) /* (40 + i MiB: allocated with the GIL held) */
            assert_int_equal(stack_python_line(&l, id, names[k], "code_reuse_gen.py"), k == (int)(mib % 10) ? 3 : -1);
        assert_int_equal(stack_python_line(&l, id, "call", "code_reuse.py"), marker_line(py, "call"));
        seen[mib - 30]++;
    }
    for (int k = 0; k < 6; k++) {
        assert_int_equal(seen[k], 1);
        assert_int_equal(seen[10 + k], 1);
    }
    unload_snapshot(&l);
    traced_cleanup(&r);
}

static void test_python_code_reuse(void **st)
{
    (void)st;
    check_code_reuse("python3");
    each_python("test_python_code_reuse", check_code_reuse);
}

/* Four threads allocate through ctypes while the main thread runs the scenario: no deadlock, and the
 * main thread's Python frames are still exact. */
static void test_python_threads_no_deadlock(void **st)
{
    (void)st;
    check_python("--threads", "4");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linked_with_lcuda),
        cmocka_unit_test(test_dlopen_dlsym),
        cmocka_unit_test(test_procaddress_v2_flags0),
        cmocka_unit_test(test_procaddress_v2_flags2),
        cmocka_unit_test(test_procaddress_4arg_11030),
        cmocka_unit_test(test_python_ctypes_frames),
        cmocka_unit_test(test_python_threads_no_deadlock),
        cmocka_unit_test(test_python_versions),
        cmocka_unit_test(test_python_borrowed),
        cmocka_unit_test(test_python_stack_cache),
        cmocka_unit_test(test_python_borrow_again),
        cmocka_unit_test(test_python_places),
        cmocka_unit_test(test_python_code_reuse),
    };
    return cmocka_run_group_tests_name("doors", tests, NULL, NULL);
}
