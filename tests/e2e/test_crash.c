/* The crash-surviving trace (OOMTRACE_DUMP=crash): a workload killed by SIGKILL at random moments still
 * leaves a readable trace, and its live set holds every allocation made more than one flush interval
 * before the kill. Also: a fatal signal gets a final flush and keeps its exit status, and a process that
 * finishes leaves no flush file behind. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define FLUSH_MS 100
#define MAXI 4096

static unsigned long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

struct child {
    pid_t pid;
    int out; /* read end of its stdout */
    char dir[64];
    double deadline;
};

static void spawn(struct child *c, const char *mode, const char *arg)
{
    snprintf(c->dir, sizeof c->dir, "/tmp/oomtrace-crash-XXXXXX");
    assert_non_null(mkdtemp(c->dir));
    int p[2];
    assert_int_equal(pipe(p), 0);
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    c->deadline = run_deadline();
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        setpgid(0, 0);
        char buf[1024];
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        snprintf(buf, sizeof buf, "%s/build/liboomtrace.so", cwd);
        setenv("LD_PRELOAD", buf, 1);
        snprintf(buf, sizeof buf, "%s/build/fake", cwd);
        setenv("LD_LIBRARY_PATH", buf, 1);
        setenv("OOMTRACE_DIR", c->dir, 1);
        setenv("OOMTRACE_DUMP", "crash", 1);
        setenv("OOMTRACE_FLUSH_MS", "100", 1);
        setenv("FAKECUDA_CAPACITY", "1T", 1);
        execl("build/tests/crash_workload", "crash_workload", mode, arg, (char *)NULL);
        _exit(127);
    }
    setpgid(c->pid, c->pid);
    close(p[1]);
    c->out = p[0];
}

/* The workload's own account: when each allocation was made and freed (0 = not yet). */
struct truth {
    unsigned long long alloc_t[MAXI], free_t[MAXI];
    char buf[1 << 16];
    size_t len;
};

static void parse_truth(struct truth *t)
{
    memset(t->alloc_t, 0, sizeof t->alloc_t);
    memset(t->free_t, 0, sizeof t->free_t);
    t->buf[t->len] = 0;
    char *save = NULL;
    for (char *line = strtok_r(t->buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char k;
        long i;
        unsigned long long ts;
        if (sscanf(line, "%c %ld %llu", &k, &i, &ts) == 3 && i >= 0 && i < MAXI)
            (k == 'a' ? t->alloc_t : t->free_t)[i] = ts;
    }
}

static void drain(int fd, struct truth *t, unsigned long long until)
{
    fcntl(fd, F_SETFL, O_NONBLOCK);
    for (;;) {
        ssize_t n = read(fd, t->buf + t->len, sizeof t->buf - 1 - t->len);
        if (n > 0) {
            t->len += (size_t)n;
            continue;
        }
        if (n == 0 || (until && now_ns() >= until) || (!until && errno != EAGAIN))
            break;
        if (!until)
            break;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

static int find_flush(const char *dir, char *path, size_t len)
{
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n > 11 && strcmp(e->d_name + n - 11, "-flush.oomt") == 0) {
            snprintf(path, len, "%s/%s", dir, e->d_name);
            found++;
        }
    }
    if (d)
        closedir(d);
    return found;
}

static void cleanup_dir(const char *dir)
{
    DIR *d = opendir(dir);
    char p[600];
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* After the workload ran for run_ms: sends sig, checks it died of it, reads what it reported and the flush
 * file it left, and marks in_live[i] for each allocation the flush holds. The caller unloads l. */
static void stop_and_read(struct child *c, int sig, unsigned long long run_ms, struct truth *t, struct loaded *l,
                          char in_live[MAXI], unsigned long long *sent_at)
{
    t->len = 0;
    drain(c->out, t, now_ns() + run_ms * 1000000ull);
    *sent_at = now_ns();
    kill(c->pid, sig);
    int status = wait_until(c->pid, "crash_workload", c->deadline);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == sig);
    drain(c->out, t, 0);
    close(c->out);
    parse_truth(t);
    char path[600];
    assert_int_equal(find_flush(c->dir, path, sizeof path), 1);
    load_snapshot(l, path);
    assert_false(l->s.file_flags & OT_FILE_COMPLETE); /* "process did not finish" */
    assert_int_equal(l->s.meta.trigger, OT_TRIGGER_FLUSH);
    memset(in_live, 0, MAXI);
    for (size_t k = 0; k < l->s.nlive; k++) {
        uint64_t i = l->s.live[k].size / 4096 - 1;
        assert_true(l->s.live[k].size % 4096 == 0 && i < MAXI);
        in_live[i] = 1;
    }
}

static void test_sigkill_at_random_points(void **st)
{
    (void)st;
    static struct truth t;
    srand(12345);
    for (int round = 0; round < 20; round++) {
        struct child c;
        spawn(&c, "run", NULL);
        struct loaded l;
        static char in_live[MAXI];
        unsigned long long kill_t;
        stop_and_read(&c, SIGKILL, 250 + (unsigned long long)(rand() % 700), &t, &l, in_live, &kill_t);
        /* The flush is at most one interval old when its thread runs on time; on a loaded machine it may run
         * late, so what is checked is the state at the flush's own time (less a margin for the workload's
         * clock reads around each call), and its age only loosely. */
        unsigned long long horizon = kill_t - FLUSH_MS * 1000000ull;
        unsigned long long taken = l.s.meta.mono_ns;
        assert_true(taken + 5000000000ull > kill_t);
        if (taken - 10000000ull < horizon)
            horizon = taken - 10000000ull;
        int checked = 0;
        for (int i = 0; i < MAXI; i++) {
            if (!t.alloc_t[i] || t.alloc_t[i] >= horizon)
                continue;
            if (t.free_t[i] && t.free_t[i] < horizon)
                assert_false(in_live[i]); /* freed well before the kill: gone */
            else if (!t.free_t[i])
                assert_true(in_live[i]); /* made well before the kill and never freed: there */
            checked++;
        }
        assert_true(checked > 0);
        unload_snapshot(&l);
        cleanup_dir(c.dir);
    }
}

/* A fatal signal: the final flush runs from the handler's hand-off, and the exit status is unchanged. */
static void test_sigsegv_final_flush(void **st)
{
    (void)st;
    struct child c;
    spawn(&c, "segv", "50");
    static struct truth t;
    t.len = 0;
    int status = wait_until(c.pid, "crash_workload", c.deadline);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
    drain(c.out, &t, 0);
    close(c.out);
    char path[600];
    assert_int_equal(find_flush(c.dir, path, sizeof path), 1);
    struct loaded l;
    load_snapshot(&l, path);
    /* 50 allocations, 12 freed (i % 4 == 3 frees i - 1): all accounted for in the final flush. */
    assert_int_equal(l.s.nlive, 50 - 12);
    unload_snapshot(&l);
    cleanup_dir(c.dir);
}

/* A launcher's SIGTERM (torchrun stopping the other ranks): a final flush, then death by SIGTERM as before.
 * The final flush holds every allocation the workload reported before the signal. */
static void test_sigterm_final_flush(void **st)
{
    (void)st;
    static struct truth t;
    struct child c;
    spawn(&c, "run", NULL);
    struct loaded l;
    static char in_live[MAXI];
    unsigned long long sent_at;
    stop_and_read(&c, SIGTERM, 400, &t, &l, in_live, &sent_at);
    int live = 0;
    for (int i = 0; i < MAXI; i++)
        if (t.alloc_t[i] && !t.free_t[i]) {
            assert_true(in_live[i]);
            live++;
        }
    assert_true(live > 0);
    unload_snapshot(&l);
    cleanup_dir(c.dir);
}

static void test_finished_process_leaves_no_flush_file(void **st)
{
    (void)st;
    struct child c;
    spawn(&c, "exit", "20");
    int status = wait_until(c.pid, "crash_workload", c.deadline);
    close(c.out);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char path[600];
    assert_int_equal(find_flush(c.dir, path, sizeof path), 0);
    cleanup_dir(c.dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigkill_at_random_points),
        cmocka_unit_test(test_sigsegv_final_flush),
        cmocka_unit_test(test_sigterm_final_flush),
        cmocka_unit_test(test_finished_process_leaves_no_flush_file),
    };
    return cmocka_run_group_tests_name("crash", tests, NULL, NULL);
}
