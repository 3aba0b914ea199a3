/* The Python companion (lib/companion/), started at a pending call (companion.c). */
#ifndef OOMTRACE_RUNTIME_COMPANION_H
#define OOMTRACE_RUNTIME_COMPANION_H

#include <stddef.h>
#include <stdint.h>

/* OT_POKE_LOOKUP: the CUDA runtime looking up driver functions (cuGetProcAddress), which it does when it
 * starts, before any allocation: it only starts the companion. */
enum ot_poke { OT_POKE_ALLOC = 1, OT_POKE_DRIVER_OOM = 2, OT_POKE_LOOKUP = 3 };
void ot_companion_poke(enum ot_poke why); /* never from signal context, never with the recorder's lock held */
/* The same for an allocation whose event time now_ns the recorder just read: the check whether the companion's
 * look is due reads no clock of its own (~20 ns a read on the H200). */
void ot_companion_poke_at(enum ot_poke why, uint64_t now_ns);

typedef struct _object PyObject;
/* companion_step.c: puts _step_hook (the optimizer step post hook in C) and _step_fast (the STEPS entry's
 * and step marker's common path in C) into the companion's module; sym looks up the interpreter's C API.
 * Called once ot_cpy (runtime/cpython.h) is filled; without every symbol it needs, it adds nothing. */
void ot_companion_step_builtins(PyObject *mod, void *(*sym)(const char *));
/* api.c: oomtrace_mark for a label of n bytes (n < OT_LABEL_MAX), 0 when recorded. */
int ot_mark_n(const char *label, size_t n);
#endif
