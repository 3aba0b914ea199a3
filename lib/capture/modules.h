#ifndef OOMTRACE_MODULES_H
#define OOMTRACE_MODULES_H
#include <stdint.h>

#include "common/buf.h"
void ot_modules_serialize(struct ot_buf *out);
void ot_symbols_serialize(struct ot_buf *out, const uint64_t *addrs, uint64_t n);

/* The modules' generation: changes each time a library is unloaded (lib/intercept/dlclose.c). What is
 * kept by code address (the walk's frame rules) is only valid within one generation: another library may
 * be mapped where the unloaded one was. */
extern uint64_t ot_modules_gen;
static inline uint64_t ot_modules_generation(void)
{
    return __atomic_load_n(&ot_modules_gen, __ATOMIC_ACQUIRE);
}
void ot_modules_unloaded(void);

/* A library's MODULES record, taken before a dlclose that may unload it; kept for later snapshots when it
 * did (ot_modules_forget with unloaded_now: the unload count moved and the library is gone), dropped when not. */
struct ot_module_note {
    struct ot_buf rec;
    char *path;
    uint64_t bias, lo, hi;
};
int ot_modules_note(void *handle, struct ot_module_note *note); /* -1: not a library we can name */
void ot_modules_forget(struct ot_module_note *note, int unloaded_now);

/* dlopen for the tracer's own use (NVML): the library, and the libraries it needs that came with it, are left
 * out of the snapshots' modules (capture/modules.c says why) until ot_modules_used sees the program use it.
 * The first call only; the caller keeps the handle for good. */
void *ot_modules_open_hidden(const char *name, int flags);
/* The program looked a name up in handle (the exported dlsym): when it is that library's, the program uses it
 * too, and it is listed from then on. */
void ot_modules_used(void *handle);
#endif
