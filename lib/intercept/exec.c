/* The exec family. A process that replaces its image finished as far as its trace goes: atexit does not
 * run, so without these its crash-surviving file stayed and read as "process did not finish" (issue 15,
 * item 10). Each wrapper tells the runtime before the real call, and again when the call failed and the
 * process goes on. glibc's exec functions reach the kernel through an internal execve, so each public one
 * is wrapped. Called between fork (or vfork) and exec, a wrapper only compares the pid and calls on. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#include "common/defs.h"
#include "driver/real.h"
#include "runtime/init.h"

static int missing(void *const *fn)
{
    if (!__atomic_load_n(fn, __ATOMIC_ACQUIRE))
        ot_exec_resolve();
    if (__atomic_load_n(fn, __ATOMIC_ACQUIRE))
        return 0;
    errno = ENOSYS; /* no such function in this C library */
    return 1;
}

/* The real call between the runtime's two notes; errno is the call's. */
#define AROUND_EXEC(call)                                                                                    \
    do {                                                                                                     \
        int began = ot_exec_begin();                                                                         \
        int rc = (call);                                                                                     \
        if (began) {                                                                                         \
            int err = errno;                                                                                 \
            ot_exec_failed();                                                                                \
            errno = err;                                                                                     \
        }                                                                                                    \
        return rc;                                                                                           \
    } while (0)

OT_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    if (OT_UNLIKELY(!ot_real_exec.execve) && missing((void *const *)&ot_real_exec.execve))
        return -1;
    AROUND_EXEC(ot_real_exec.execve(path, argv, envp));
}

OT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    if (OT_UNLIKELY(!ot_real_exec.execvpe) && missing((void *const *)&ot_real_exec.execvpe))
        return -1;
    AROUND_EXEC(ot_real_exec.execvpe(file, argv, envp));
}

OT_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
    if (OT_UNLIKELY(!ot_real_exec.execveat) && missing((void *const *)&ot_real_exec.execveat))
        return -1;
    AROUND_EXEC(ot_real_exec.execveat(dirfd, path, argv, envp, flags));
}

OT_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    if (OT_UNLIKELY(!ot_real_exec.fexecve) && missing((void *const *)&ot_real_exec.fexecve))
        return -1;
    AROUND_EXEC(ot_real_exec.fexecve(fd, argv, envp));
}

OT_EXPORT int execv(const char *path, char *const argv[])
{
    return execve(path, argv, environ);
}

OT_EXPORT int execvp(const char *file, char *const argv[])
{
    return execvpe(file, argv, environ);
}

/* The list forms: the arguments into an array on the stack, as glibc does. */
#define ARGV_FROM_LIST(first, argv)                                                                          \
    va_list ap;                                                                                              \
    size_t n = 1;                                                                                            \
    va_start(ap, first);                                                                                     \
    while (va_arg(ap, char *))                                                                               \
        n++;                                                                                                 \
    va_end(ap);                                                                                              \
    char *argv[n + 1];                                                                                       \
    argv[0] = (char *)(first);                                                                               \
    va_start(ap, first);                                                                                     \
    for (size_t i = 1; i <= n; i++) /* the last one read is the terminating NULL */                          \
        argv[i] = va_arg(ap, char *);                                                                        \
    va_end(ap)

OT_EXPORT int execl(const char *path, const char *arg, ...)
{
    ARGV_FROM_LIST(arg, argv);
    return execve(path, argv, environ);
}

OT_EXPORT int execlp(const char *file, const char *arg, ...)
{
    ARGV_FROM_LIST(arg, argv);
    return execvpe(file, argv, environ);
}

OT_EXPORT int execle(const char *path, const char *arg, ...)
{
    ARGV_FROM_LIST(arg, argv);
    va_start(ap, arg); /* the environment follows the terminating NULL */
    while (va_arg(ap, char *))
        ;
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}
