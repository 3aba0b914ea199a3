/* For the file-safety test: before running the door scenario, it plants what an attacker or an earlier run
 * could leave in OOMTRACE_DIR under the names this process's first snapshot would take:
 *   oomtrace-HOST-PID-1-oom.oomt      an existing file (must not be overwritten)
 *   oomtrace-HOST-PID-1-oom.1.oomt    a symlink to $PLANT_VICTIM (must not be followed)
 * Linked with -lcuda. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "scenario.h"

int main(void)
{
    const char *dir = getenv("OOMTRACE_DIR"), *victim = getenv("PLANT_VICTIM");
    char host[128] = "", path[PATH_MAX];
    gethostname(host, sizeof host - 1);
    snprintf(path, sizeof path, "%s/oomtrace-%s-%d-1-oom.oomt", dir, host, (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f)
        return 40;
    fputs("precious\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/oomtrace-%s-%d-1-oom.1.oomt", dir, host, (int)getpid());
    if (symlink(victim, path) != 0)
        return 41;
    int rc = make_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
    return rc ? rc : run_scenario(cuMemAlloc_v2, cuMemFree_v2);
}
