/* Preloaded into the test programs by tests/fuzz/sanitize.sh: skips the cmocka tests named by
 * OOMTRACE_TEST_SKIP (one pattern, * and ? as in cmocka_set_skip_filter). For tests whose expectation
 * cannot hold with a sanitizer runtime in the process, such as "dlsym(RTLD_NEXT, "malloc") from main is
 * libc's", which is the sanitizer's interceptor there. cmocka is looked up at run time so that this
 * library can be preloaded into a program without it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

__attribute__((constructor)) static void skip_from_env(void)
{
    const char *pattern = getenv("OOMTRACE_TEST_SKIP");
    if (!pattern || !*pattern)
        return;
    void (*set_skip)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "cmocka_set_skip_filter");
    if (set_skip)
        set_skip(pattern);
}
