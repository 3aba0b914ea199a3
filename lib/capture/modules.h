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
#endif
