/* Linked into tests/doors/hostile (hostile ctorexec): a library whose constructor execs, as launchers that
 * re-execute themselves with a changed environment do. Its constructor runs before a preloaded library's
 * (a preloaded library is initialised after the program's own libraries), so the tracer's exec wrappers
 * are reached before the tracer initialised itself. With HOSTILE_CTOR_EXEC set, it execs
 * /proc/self/exe ctorexec done; a failed exec prints "ctorexec ERRNO" and exits 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void exec_early(void)
{
    if (!getenv("HOSTILE_CTOR_EXEC"))
        return;
    unsetenv("HOSTILE_CTOR_EXEC");
    execl("/proc/self/exe", "hostile", "ctorexec", "done", (char *)NULL);
    dprintf(1, "ctorexec %d\n", errno);
    _exit(1);
}
