/* The ways an interposer of the driver goes wrong, each made observable. The test
 * (tests/e2e/test_pitfalls.c) runs a sub-command twice, traced and untraced, and compares what it
 * prints; "key value" lines name pointers as "object+offset" (dladdr), which is stable from run to
 * run, where raw addresses are not (ASLR).
 *
 *   pitfalls lookups  dlsym(RTLD_NEXT / RTLD_DEFAULT) from the program and from a library loaded
 *                     RTLD_LOCAL, handle lookups of names the tracer must not touch, cuGetProcAddress's
 *                     failures, and NULL out-parameters through routed pointers. Every line must be the
 *                     same traced and untraced.
 *   pitfalls routes   where cuGetProcAddress's and dlsym's pointers lead (the tracer's wrappers when
 *                     traced, the driver otherwise): default and _ptsz twins, both cuGetProcAddress ABIs.
 *                     Allocates through each and dumps "routes".
 *   pitfalls threads  16 threads allocate and free through routed pointers at once, with frees from
 *                     other threads; prints the ground truth and dumps "threads".
 *   pitfalls failures 6 threads fail an allocation each at once (a burst of out-of-memory failures); each
 *                     prints "failed TID BYTES RESULT". Each thread's snapshot must report its own.
 *   pitfalls refused  frees and unmaps that the driver refuses, of memory it still holds; dumps
 *                     "refused" (nothing may have changed) and "refused-cleaned" (after the real frees).
 *   pitfalls refused-release, refused-unmap
 *                     a cuMemRelease of the last reference, and a cuMemUnmap of the last mapping, that the
 *                     driver refuses (fakecuda_refuse_next); dumps "refused" and then "freed".
 */
#include <dlfcn.h>

#include "pitfalls.h"

/* ---- naming pointers ---- */

/* "object+0xoffset" for a pointer into a loaded object, "null", or "unknown". Returns a static buffer
 * from a small ring, so a few may be used in one printf. */
const char *where(const void *p)
{
    static char ring[8][512];
    static unsigned next;
    char *b = ring[next++ % 8];
    Dl_info info;
    if (!p)
        return "null";
    if (!dladdr(p, &info) || !info.dli_fname) {
        snprintf(b, 512, "unknown");
        return b;
    }
    const char *slash = strrchr(info.dli_fname, '/');
    snprintf(b, 512, "%s+0x%lx", slash ? slash + 1 : info.dli_fname,
             (unsigned long)((const char *)p - (const char *)info.dli_fbase));
    return b;
}

const char *object_of(const void *p)
{
    static char b[512];
    snprintf(b, sizeof b, "%s", where(p));
    char *plus = strrchr(b, '+');
    if (plus)
        *plus = 0;
    return b;
}

void say(const char *key, const char *value)
{
    printf("%s %s\n", key, value);
}

void say_int(const char *key, long long v)
{
    printf("%s %lld\n", key, v);
}


void *main_next(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    __asm__ volatile("" : : "r"(p) : "memory"); /* a call, not a tail jump: the caller is this program */
    return p;
}


int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: pitfalls lookups|routes|threads|failures|refused\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    drv_open();
    if (strcmp(argv[1], "lookups") == 0)
        return cmd_lookups();
    if (strcmp(argv[1], "routes") == 0)
        return cmd_routes();
    if (strcmp(argv[1], "threads") == 0)
        return cmd_threads();
    if (strcmp(argv[1], "failures") == 0)
        return cmd_failures();
    if (strcmp(argv[1], "refused") == 0)
        return cmd_refused();
    if (strcmp(argv[1], "refused-release") == 0)
        return cmd_refused_vmm(0);
    if (strcmp(argv[1], "refused-unmap") == 0)
        return cmd_refused_vmm(1);
    fprintf(stderr, "pitfalls: unknown sub-command %s\n", argv[1]);
    return 2;
}
