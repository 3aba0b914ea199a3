/* The exported dlclose. Code addresses name frames only while their library stays loaded: once one is
 * unloaded, another may be mapped at the same place, and the walk's rules kept by return address
 * (lib/capture/backtrace.c) would then describe the wrong code. So a dlclose that unloads something
 * (glibc's count of unloads, dlpi_subs, moved) starts a new modules' generation, and each thread's walk
 * drops its rules when it sees one. The call itself is the real one, with the caller's argument and
 * result; a dlclose that only drops a reference changes nothing. */
#include <dlfcn.h>
#include <link.h>

#include "capture/loader.h"
#include "capture/modules.h"
#include "common/self.h"
#include "common/defs.h"
#include "driver/real.h"

static int first_subs(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(unsigned long long *)data = info->dlpi_subs;
    return 1; /* the same counter in every entry: the first is enough */
}

static unsigned long long unloads(void)
{
    unsigned long long subs = 0;
    ot_loader_enter();
    dl_iterate_phdr(first_subs, &subs);
    ot_loader_leave();
    return subs;
}

OT_EXPORT int dlclose(void *handle)
{
    static void *real;
    int (*fn)(void *) = (int (*)(void *))ot_real_next(&real, "dlclose");
    if (!fn)
        return -1;
    /* Not one the tracer's own threads make (it closed NVML here at each snapshot, before NVML stayed open): no
     * stack of the program holds such a library's addresses. */
    struct ot_module_note note = {0};
    if (!ot_self.busy)
        ot_modules_note(handle, &note);
    unsigned long long before = unloads();
    int r = fn(handle);
    int gone = unloads() != before;
    if (gone)
        ot_modules_unloaded();
    ot_modules_forget(&note, gone);
    return r;
}
