/* The CPython C API the companion's C parts call (companion.c, companion_step.c), looked up at run time in
 * the process's interpreter: a process without Python costs one failed lookup. One table, filled by
 * companion.c's probe; a NULL entry is a symbol this Python lacks. */
#ifndef OOMTRACE_RUNTIME_CPYTHON_H
#define OOMTRACE_RUNTIME_CPYTHON_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct _object PyObject;

struct ot_cpython {
    PyObject *(*occurred)(void);
    void (*clear)(void);
    void (*decref)(PyObject *);
    PyObject *(*bool_from_long)(long);
    PyObject *(*cfunction_new)(void *, PyObject *, PyObject *); /* PyCFunction_NewEx(def, self, module) */
    int (*setattr)(PyObject *, const char *, PyObject *);
};
extern struct ot_cpython ot_cpy;

/* A PyMethodDef: what PyCFunction_NewEx binds. */
struct ot_py_method {
    const char *name;
    void *meth;
    int flags;
    const char *doc;
};
#define OT_METH_VARARGS 0x0001
#define OT_METH_O 0x0008
#define OT_METH_FASTCALL 0x0080

/* Fills ot_cpy with sym (the interpreter's symbols by name); false when one of them is missing. */
bool ot_cpython_probe(void *(*sym)(const char *));
#endif
