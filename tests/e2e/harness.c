#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "model/events.h"

extern char **environ;

static int cmp_str(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

double run_deadline(void)
{
    const char *v = getenv("OT_TEST_RUN_TIMEOUT");
    long n = v ? strtol(v, NULL, 10) : 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9 + (double)(n > 0 ? n : 300);
}

static double left_s(double deadline)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return deadline - ((double)ts.tv_sec + ts.tv_nsec / 1e9);
}

/* Reads the child's standard output until it closes it (before waitpid, so a full pipe cannot
 * block the child) or the deadline passes; keeps at most RUN_OUT_MAX bytes. */
static void read_output(struct traced_run *r, int fd, double deadline)
{
    r->out = calloc(1, RUN_OUT_MAX + 1);
    assert_non_null(r->out);
    for (;;) {
        double left = left_s(deadline);
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&pfd, 1, (int)(left * 1000) + 1) == 0)
            break;
        char tmp[4096];
        ssize_t n = read(fd, tmp, sizeof tmp);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        size_t keep = (size_t)n < RUN_OUT_MAX - r->outlen ? (size_t)n : RUN_OUT_MAX - r->outlen;
        memcpy(r->out + r->outlen, tmp, keep);
        r->outlen += keep;
    }
    close(fd);
}

int wait_until(pid_t pid, const char *name, double deadline)
{
    int st = 0;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return st;
        if (w < 0 && errno != EINTR)
            fail_msg("waitpid(%d): %s", (int)pid, strerror(errno));
        if (left_s(deadline) <= 0) {
            kill(-pid, SIGKILL);
            waitpid(pid, &st, 0);
            fail_msg("%s did not finish in time (OT_TEST_RUN_TIMEOUT); killed", name);
        }
        nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);
    }
}

/* traced: LD_PRELOAD is the tracer; otherwise LD_PRELOAD is removed and the rest is identical.
 * capture: the child's stdout goes to r->out rather than /dev/null. */
static void run_program(struct traced_run *r, char *const argv[], const char *const *env, bool traced,
                        bool capture)
{
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "/tmp/oomtrace-test-XXXXXX");
    assert_non_null(mkdtemp(r->dir));
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    int pipefd[2] = {-1, -1};
    if (capture)
        assert_int_equal(pipe(pipefd), 0);
    double deadline = run_deadline();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setpgid(0, 0); /* its own group, so a timeout can kill what it forked too */
        char buf[1024], lib[600];
        /* Sanitizer runs (make sanitize / make tsan, tests/fuzz/fuzz.mk) trace with their own build of
         * the library, and an uninstrumented program needs the sanitizer runtime loaded before it. The
         * runtime stays in untraced runs too, so that they differ from traced ones by the tracer alone. */
        const char *env_lib = getenv("OOMTRACE_TEST_LIB"), *extra = getenv("OOMTRACE_TEST_PRELOAD_EXTRA");
        if (env_lib)
            snprintf(lib, sizeof lib, "%s", env_lib);
        else
            snprintf(lib, sizeof lib, "%s/build/liboomtrace.so", cwd);
        snprintf(buf, sizeof buf, "%s%s%s", extra ? extra : "", extra ? " " : "", traced ? lib : "");
        if (traced || extra)
            setenv("LD_PRELOAD", buf, 1);
        else
            unsetenv("LD_PRELOAD");
        snprintf(buf, sizeof buf, "%s/build/fake", cwd);
        setenv("LD_LIBRARY_PATH", buf, 1);
        setenv("OOMTRACE_DIR", r->dir, 1);
        setenv("OOMTRACE_QUIET", "1", 1);
        setenv("FAKECUDA_CAPACITY", "1G", 0);
        for (const char *const *e = env; e && *e; e++) {
            char kv[512];
            snprintf(kv, sizeof kv, "%s", *e);
            char *eq = strchr(kv, '=');
            if (eq) {
                *eq = 0;
                setenv(kv, eq + 1, 1);
            }
        }
        if (capture) {
            dup2(pipefd[1], 1);
            close(pipefd[0]);
            close(pipefd[1]);
        } else {
            int devnull = open("/dev/null", O_WRONLY);
            if (devnull >= 0 && !getenv("OT_TEST_VERBOSE"))
                dup2(devnull, 1);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    setpgid(pid, pid);
    if (capture) {
        close(pipefd[1]);
        read_output(r, pipefd[0], deadline);
    }
    int st = wait_until(pid, argv[0], deadline);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (capture && getenv("OT_TEST_VERBOSE"))
        fwrite(r->out, 1, r->outlen, stdout);
    DIR *d = opendir(r->dir);
    assert_non_null(d);
    char names[16][256];
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t n = strlen(e->d_name);
        if (n > 5 && strcmp(e->d_name + n - 5, ".oomt") == 0 && r->nsnaps < 16)
            snprintf(names[r->nsnaps++], 256, "%s", e->d_name);
    }
    closedir(d);
    qsort(names, r->nsnaps, sizeof names[0], cmp_str);
    for (size_t i = 0; i < r->nsnaps; i++)
        snprintf(r->paths[i], sizeof r->paths[i], "%s/%s", r->dir, names[i]);
}

void traced_run(struct traced_run *r, char *const argv[], const char *const *env)
{
    run_program(r, argv, env, true, false);
}

void traced_run_capture(struct traced_run *r, char *const argv[], const char *const *env)
{
    run_program(r, argv, env, true, true);
}

void untraced_run(struct traced_run *r, char *const argv[], const char *const *env)
{
    run_program(r, argv, env, false, true);
}

const char *run_value(const struct traced_run *r, const char *key)
{
    size_t kn = strlen(key);
    for (const char *line = r->out; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len > kn && memcmp(line, key, kn) == 0 && line[kn] == ' ') {
            static char value[512]; /* valid until the next call */
            size_t vn = len - kn - 1 < sizeof value - 1 ? len - kn - 1 : sizeof value - 1;
            memcpy(value, line + kn + 1, vn);
            value[vn] = 0;
            return value;
        }
        line = nl ? nl + 1 : line + len;
    }
    return NULL;
}

uint64_t run_u64(const struct traced_run *r, const char *key)
{
    const char *v = run_value(r, key);
    if (!v)
        fail_msg("the program printed no \"%s\" line", key);
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 0);
    if (errno || end == v || *end)
        fail_msg("\"%s %s\" is not a number", key, v);
    return n;
}

void traced_cleanup(struct traced_run *r)
{
    free(r->out);
    r->out = NULL;
    for (size_t i = 0; i < r->nsnaps; i++)
        unlink(r->paths[i]);
    rmdir(r->dir);
}

void load_snapshot(struct loaded *l, const char *path)
{
    memset(l, 0, sizeof *l);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    l->len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    l->buf = malloc(l->len ? l->len : 1);
    assert_int_equal(fread(l->buf, 1, l->len, f), l->len);
    fclose(f);
    char err[OT_ERRBUF] = "";
    int rc = ot_snapshot_parse(l->buf, l->len, &l->s, err);
    if (rc != 0)
        fail_msg("%s: %s", path, err);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600); /* snapshots are private to their owner */
    l->res = ot_resolver_new(&l->s, NULL);
    assert_non_null(l->res);
}

void unload_snapshot(struct loaded *l)
{
    ot_resolver_free(l->res);
    ot_snapshot_free(&l->s);
    free(l->buf);
}

static bool str_is(struct ot_str s, const char *name)
{
    size_t n = strlen(name);
    return s.p && s.n >= n && memcmp(s.p, name, n) == 0 && (s.n == n || s.p[n] == '+');
}

bool stack_has_function(struct loaded *l, uint64_t stack_id, const char *name)
{
    const struct ot_stack *st = ot_snapshot_stack(&l->s, stack_id);
    for (size_t i = 0; st && i < st->nframes; i++) {
        const struct ot_frame *fr;
        size_t n = ot_resolve(l->res, st->frames[i], &fr);
        for (size_t k = 0; k < n; k++)
            if (str_is(fr[k].function, name))
                return true;
    }
    return false;
}

long stack_python_line(struct loaded *l, uint64_t stack_id, const char *function, const char *file_suffix)
{
    const struct ot_stack *st = ot_snapshot_stack(&l->s, stack_id);
    for (size_t i = 0; st && i < st->nframes; i++) {
        const struct ot_frame *fr;
        size_t n = ot_resolve(l->res, st->frames[i], &fr);
        for (size_t k = 0; k < n; k++) {
            if (fr[k].kind != OT_FRAME_PY || !str_is(fr[k].function, function))
                continue;
            size_t sl = strlen(file_suffix);
            if (!fr[k].file.p || fr[k].file.n < sl || memcmp(fr[k].file.p + fr[k].file.n - sl, file_suffix, sl))
                continue;
            return fr[k].has_line ? (long)fr[k].line : -1;
        }
    }
    return -1;
}

uint64_t bytes_with_function(struct loaded *l, const struct ot_record *recs, size_t n, const char *function,
                             uint64_t *count)
{
    uint64_t b = 0, c = 0;
    for (size_t i = 0; i < n; i++)
        if (stack_has_function(l, recs[i].stack_id, function)) {
            b += recs[i].size;
            c++;
        }
    if (count)
        *count = c;
    return b;
}

uint64_t sum_bytes(const struct ot_record *recs, size_t n, bool device_only)
{
    uint64_t b = 0;
    for (size_t i = 0; i < n; i++)
        if (!device_only || ot_category_is_device64(recs[i].category))
            b += recs[i].size;
    return b;
}

void load_all(struct loaded_run *lr, const struct traced_run *r)
{
    memset(lr, 0, sizeof *lr);
    for (size_t i = 0; i < r->nsnaps; i++)
        load_snapshot(&lr->snap[lr->n++], r->paths[i]);
}

void unload_all(struct loaded_run *lr)
{
    for (size_t i = 0; i < lr->n; i++)
        unload_snapshot(&lr->snap[i]);
    lr->n = 0;
}

static bool reason_is(const struct ot_snapshot *s, const char *reason)
{
    size_t n = strlen(reason);
    return s->meta.reason.n == n && memcmp(s->meta.reason.p, reason, n) == 0;
}

struct loaded *by_reason(struct loaded_run *lr, const char *reason)
{
    struct loaded *found = NULL;
    for (size_t i = 0; i < lr->n; i++) {
        if (!reason_is(&lr->snap[i].s, reason))
            continue;
        if (found)
            fail_msg("two snapshots have the reason \"%s\"", reason);
        found = &lr->snap[i];
    }
    if (!found)
        fail_msg("no snapshot has the reason \"%s\"", reason);
    return found;
}

size_t count_recs(const struct ot_record *recs, size_t n, const struct rec_match *m)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ot_record *x = &recs[i];
        bool fields = (!m->api || x->api == m->api) && (!m->category || x->category == m->category) &&
                      (!m->size || x->size == m->size) && (!m->address || x->address == m->address);
        bool device = m->any_device || x->device == m->device;
        bool flags = m->any_flags || x->flags == m->flags;
        c += fields && device && flags;
    }
    return c;
}

size_t count_events(const struct ot_snapshot *s, uint64_t kind, uint64_t api, uint64_t addr, uint64_t *bytes)
{
    struct ot_event_reader rd;
    ot_event_reader_init(&rd, s);
    const struct snap_event *ev;
    size_t n, c = 0;
    uint64_t b = 0;
    char err[OT_ERRBUF];
    int rc;
    while ((rc = ot_event_reader_next(&rd, &ev, &n, err)) == 1)
        for (size_t i = 0; i < n; i++)
            if (ev[i].kind == kind && (!api || ev[i].api == api) && (!addr || ev[i].addr == addr)) {
                c++;
                b += ev[i].size;
            }
    ot_event_reader_free(&rd);
    if (rc < 0)
        fail_msg("events: %s", err);
    if (bytes)
        *bytes = b;
    return c;
}
