/* A library that tests/doors/pitfalls_lookups.c dlopens RTLD_LOCAL, so that dlsym(RTLD_NEXT / RTLD_DEFAULT) is
 * called from an object outside the global scope. glibc resolves those two handles relative to the
 * caller, found from dlsym's return address: a preloaded dlsym must leave this library as the caller. */
#include <dlfcn.h>

#define EXPORT __attribute__((visibility("default"), noinline))

/* The empty asm after each call keeps it a call: as a tail jump, dlsym's caller would be the program. */
#define KEEP_CALLER(p) __asm__ volatile("" : : "r"(p) : "memory")

/* Only this library defines it; the program cannot see it with RTLD_DEFAULT, and neither can anything
 * loaded before it. */
EXPORT int pitfall_only_here(void)
{
    return 42;
}

EXPORT void *pitfall_next(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    KEEP_CALLER(p);
    return p;
}

EXPORT void *pitfall_default(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    KEEP_CALLER(p);
    return p;
}

EXPORT void *pitfall_handle(void *handle, const char *name)
{
    void *p = dlsym(handle, name);
    KEEP_CALLER(p);
    return p;
}
