/* The pitfall program's parts (pitfalls.c: what it does, and main): naming pointers, and the
 * sub-commands, each in its file: lookups (pitfalls_lookups.c), routes and refused frees
 * (pitfalls_routes.c), threads (pitfalls_threads.c). */
#ifndef DOORS_PITFALLS_H
#define DOORS_PITFALLS_H
#include "drv.h"

/* "object+0xoffset" for a pointer into a loaded object, "null", or "unknown". Returns a static buffer
 * from a small ring, so a few may be used in one printf. */
const char *where(const void *p);
/* The object's file name alone. */
const char *object_of(const void *p);
void say(const char *key, const char *value);
void say_int(const char *key, long long v);
/* dlsym(RTLD_NEXT, name), called from this program. */
void *main_next(const char *name);

int cmd_lookups(void);
int cmd_routes(void);
int cmd_refused(void);
int cmd_refused_vmm(int unmap_it);
int cmd_threads(void);
int cmd_failures(void);

#endif
