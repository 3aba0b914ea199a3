/* C++ demangling without linking libstdc++: __cxa_demangle is looked up at run time in the
 * libstdc++ that practically every machine running CUDA programs has. Without it names stay mangled. */
#ifndef OT_READ_DEMANGLE_H
#define OT_READ_DEMANGLE_H

#include <stdbool.h>
#include <stddef.h>

/* A malloc'd demangled name, or NULL when name is not a mangled C++ name or no demangler exists. */
char *ot_demangle(const char *name);
bool ot_demangler_available(void);

#endif
