/* Processes: fork with and without CUDA in the child, exec'd children that trace themselves, and snapshot
 * names and metadata carrying the rank from each launcher's variables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "harness.h"

static void test_fork_child_uses_cuda(void **st)
{
    (void)st;
    struct traced_run r;
    traced_run(&r, (char *const[]){"build/tests/fork_workload", "cuda", NULL}, NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.nsnaps, 2);
    int seen_child = 0, seen_parent = 0;
    for (size_t i = 0; i < r.nsnaps; i++) {
        struct loaded l;
        load_snapshot(&l, r.paths[i]);
        assert_true(l.s.has_failure);
        uint64_t live = sum_bytes(l.s.live, l.s.nlive, true);
        if (l.s.failure.requested_bytes == 2048 * MiB) {
            /* The child's own file holds only the child's memory: the parent's 256 MiB is not its. */
            assert_int_equal(live, 128 * MiB);
            assert_int_equal(ot_snapshot_peak(&l.s, 0)->peak_bytes, 128 * MiB);
            /* ... and no frameworks' view: the parent's is not its */
            assert_false(l.s.fw.present || l.s.fw_earlier.present);
            seen_child++;
        } else {
            assert_int_equal(l.s.failure.requested_bytes, 1024 * MiB);
            /* 256 MiB, plus at most one 4 KiB block of the busy thread in flight. */
            assert_true(live >= 256 * MiB && live <= 256 * MiB + 4096);
            assert_true(l.s.fw.present || l.s.fw_earlier.present); /* the view it reported */
            seen_parent++;
        }
        unload_snapshot(&l);
    }
    assert_int_equal(seen_child, 1);
    assert_int_equal(seen_parent, 1);
    traced_cleanup(&r);
}

static void test_fork_child_without_cuda(void **st)
{
    (void)st;
    struct traced_run r;
    traced_run(&r, (char *const[]){"build/tests/fork_workload", "nocuda", NULL}, NULL);
    assert_int_equal(r.status, 0); /* 20 children forked mid-allocation exited with their own status */
    assert_int_equal(r.nsnaps, 1);
    traced_cleanup(&r);
}

static void test_exec_child_traces_itself(void **st)
{
    (void)st;
    struct traced_run r;
    traced_run(&r, (char *const[]){"build/tests/fork_workload", "exec", NULL}, NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.nsnaps, 2);
    int seen_exec = 0;
    for (size_t i = 0; i < r.nsnaps; i++) {
        struct loaded l;
        load_snapshot(&l, r.paths[i]);
        if (l.s.meta.argc == 1 && ot_str_eq(l.s.meta.argv[0], "door_linked")) {
            assert_int_equal(l.s.failure.requested_bytes, 700 * MiB);
            assert_int_equal(ot_snapshot_peak(&l.s, 0)->peak_bytes, 512 * MiB);
            seen_exec++;
        }
        unload_snapshot(&l);
    }
    assert_int_equal(seen_exec, 1);
    traced_cleanup(&r);
}

static void check_rank(const char *var, long rank, const char *local, long want_local)
{
    char kv[64], lv[64];
    snprintf(kv, sizeof kv, "%s=%ld", var, rank);
    snprintf(lv, sizeof lv, "%s", local ? local : "UNUSED_VAR=1");
    struct traced_run r;
    traced_run(&r, (char *const[]){"build/tests/door_linked", NULL}, (const char *const[]){kv, lv, NULL});
    assert_int_equal(r.status, 0);
    assert_int_equal(r.nsnaps, 1);
    char tag[32];
    snprintf(tag, sizeof tag, "-rank%ld-1-oom.oomt", rank);
    assert_non_null(strstr(r.paths[0], tag));
    struct loaded l;
    load_snapshot(&l, r.paths[0]);
    assert_int_equal(l.s.meta.rank, rank);
    assert_true(ot_str_eq(l.s.meta.rank_source, var));
    assert_int_equal(l.s.meta.local_rank, want_local);
    unload_snapshot(&l);
    traced_cleanup(&r);
}

static void test_rank_from_each_launcher(void **st)
{
    (void)st;
    check_rank("RANK", 3, "LOCAL_RANK=1", 1);                      /* torchrun */
    check_rank("SLURM_PROCID", 5, "SLURM_LOCALID=2", 2);           /* Slurm */
    check_rank("OMPI_COMM_WORLD_RANK", 7, "OMPI_COMM_WORLD_LOCAL_RANK=3", 3); /* Open MPI */
    check_rank("PMI_RANK", 2, NULL, -1);                           /* MPICH / Intel MPI */
}

/* OOMTRACE_DUMP=exit: a process that used the device leaves an exit snapshot; one that never did (a
 * launcher, a shell under the same LD_PRELOAD) leaves nothing. */
static void test_exit_snapshot_only_for_device_users(void **st)
{
    (void)st;
    struct traced_run r;
    traced_run(&r, (char *const[]){"build/tests/door_linked", NULL}, (const char *const[]){"OOMTRACE_DUMP=exit", NULL});
    assert_int_equal(r.status, 0);
    assert_int_equal(r.nsnaps, 2);
    assert_non_null(strstr(r.paths[1], "-2-exit.oomt"));
    struct loaded l;
    load_snapshot(&l, r.paths[1]);
    assert_int_equal(l.s.meta.trigger, OT_TRIGGER_EXIT);
    assert_int_equal(sum_bytes(l.s.live, l.s.nlive, true), 0); /* the scenario freed everything */
    assert_int_equal(ot_snapshot_peak(&l.s, 0)->peak_bytes, 512 * MiB);
    unload_snapshot(&l);
    traced_cleanup(&r);

    traced_run(&r, (char *const[]){"/bin/true", NULL}, (const char *const[]){"OOMTRACE_DUMP=exit", NULL});
    assert_int_equal(r.status, 0);
    assert_int_equal(r.nsnaps, 0);
    traced_cleanup(&r);
}

/* A snapshot holds the command line but no environment: a secret in the environment appears nowhere in the
 * file (raw bytes) nor in anything the parser decodes from it (every string of META). */
static void test_no_environment_in_snapshots(void **st)
{
    (void)st;
    const char *secret = "hunter2-oomtrace-secret";
    struct traced_run r;
    traced_run(&r, (char *const[]){"build/tests/door_linked", "--token=visible-arg", NULL},
               (const char *const[]){"OOMTRACE_TEST_SECRET=hunter2-oomtrace-secret", NULL});
    assert_int_equal(r.nsnaps, 1);
    struct loaded l;
    load_snapshot(&l, r.paths[0]);
    assert_null(memmem(l.buf, l.len, secret, strlen(secret)));
    int seen_arg = 0;
    for (size_t i = 0; i < l.s.meta.argc; i++) {
        assert_null(memmem(l.s.meta.argv[i].p, l.s.meta.argv[i].n, secret, strlen(secret)));
        seen_arg |= ot_str_eq(l.s.meta.argv[i], "--token=visible-arg");
    }
    assert_true(seen_arg); /* the command line is there, as documented */
    unload_snapshot(&l);
    traced_cleanup(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fork_child_uses_cuda),
        cmocka_unit_test(test_fork_child_without_cuda),
        cmocka_unit_test(test_exec_child_traces_itself),
        cmocka_unit_test(test_rank_from_each_launcher),
        cmocka_unit_test(test_exit_snapshot_only_for_device_users),
        cmocka_unit_test(test_no_environment_in_snapshots),
    };
    return cmocka_run_group_tests_name("procs", tests, NULL, NULL);
}
