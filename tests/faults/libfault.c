/* Fault injection for tests/e2e/test_faults.c, preloaded before liboomtrace.so. It interposes write(2) for
 * files whose name ends in ".oomt" (or ".oomt.tmp"), as the tracer's snapshot writer sees them:
 *   FAULT_ENOSPC_AFTER=N  the write that would take the file past N bytes fails with ENOSPC (disk full)
 *   FAULT_EINTR=1         every other write fails with EINTR before writing anything
 *   FAULT_SLOW_MS=N       the first write of a file (at offset 0) sleeps N ms first: a write still going on
 *                         when another thread exits or execs (tests/sh/exit_waits.sh, walk 8 #33)
 *   FAULT_KILL_AFTER=N    the write that would take the file past N bytes writes up to N, then the process
 *                         is killed (SIGKILL): a write cut off by the process's death
 *                         (tests/sh/snapshot_files.sh; a file size limit no longer kills it, walk 8 #26) */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static int is_snapshot(int fd)
{
    char link[64], path[512];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0)
        return 0;
    path[n] = 0;
    return strstr(path, ".oomt") != NULL;
}

EXPORT ssize_t write(int fd, const void *buf, size_t count)
{
    static ssize_t (*real)(int, const void *, size_t);
    static int flip;
    if (!real)
        real = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (fd > 2 && is_snapshot(fd)) {
        const char *e = getenv("FAULT_EINTR");
        if (e && *e == '1' && (flip ^= 1)) {
            errno = EINTR;
            return -1;
        }
        const char *slow = getenv("FAULT_SLOW_MS");
        if (slow && lseek(fd, 0, SEEK_CUR) == 0) {
            long ms = atol(slow);
            struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
        }
        const char *kill_at = getenv("FAULT_KILL_AFTER");
        if (kill_at) {
            off_t at = lseek(fd, 0, SEEK_CUR);
            unsigned long long n = strtoull(kill_at, NULL, 10);
            if (at >= 0 && (unsigned long long)at + count > n) {
                if ((unsigned long long)at < n)
                    real(fd, buf, (size_t)(n - (unsigned long long)at));
                raise(SIGKILL);
            }
        }
        const char *lim = getenv("FAULT_ENOSPC_AFTER");
        if (lim) {
            off_t at = lseek(fd, 0, SEEK_CUR);
            if (at >= 0 && (unsigned long long)at + count > strtoull(lim, NULL, 10)) {
                errno = ENOSPC;
                return -1;
            }
        }
    }
    return real(fd, buf, count);
}
