#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

extern char **environ;

static int cmp_str(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

void traced_run(struct traced_run *r, char *const argv[], const char *const *env)
{
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "/tmp/oomtrace-test-XXXXXX");
    assert_non_null(mkdtemp(r->dir));
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s/build/liboomtrace.so", cwd);
        setenv("LD_PRELOAD", buf, 1);
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
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0 && !getenv("OT_TEST_VERBOSE"))
            dup2(devnull, 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
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

void traced_cleanup(struct traced_run *r)
{
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
