#include "symbols/demangle.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef char *(*ot_cxa_demangle_fn)(const char *, char *, size_t *, int *);

static ot_cxa_demangle_fn ot_cxa_demangle(void)
{
    static int tried;
    static ot_cxa_demangle_fn fn;
    if (!tried) {
        tried = 1;
        /* Already in the process (a sanitizer runtime, a preloaded library)? Else load libstdc++. */
        fn = (ot_cxa_demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
        if (!fn) {
            void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
            if (h)
                fn = (ot_cxa_demangle_fn)dlsym(h, "__cxa_demangle");
        }
    }
    return fn;
}

bool ot_demangler_available(void)
{
    return ot_cxa_demangle() != NULL;
}

/* The demangler keeps arrays proportional to the name on the stack and recurses with its nesting, so a
 * hostile multi-megabyte name from a snapshot could overflow the stack; real names are far shorter. */
#define OT_DEMANGLE_MAX_NAME 4096

char *ot_demangle(const char *name)
{
    if (!name || strncmp(name, "_Z", 2) != 0 || strnlen(name, OT_DEMANGLE_MAX_NAME + 1) > OT_DEMANGLE_MAX_NAME)
        return NULL;
    ot_cxa_demangle_fn fn = ot_cxa_demangle();
    if (!fn)
        return NULL;
    int status = -1;
    char *d = fn(name, NULL, NULL, &status);
    if (status != 0) {
        free(d);
        return NULL;
    }
    return d;
}
