/* The companion's work after each optimizer step, its common path in C: a STEPS entry and the step marker
 * "step N (shapes)" (lib/companion/_oomtrace_frameworks.py, Torch.on_step). In Python that path was two
 * calls and ~40 bytecodes, ~6,500 instructions a step (bench/step_hook_ir.py), and it runs where the step's
 * work has left the caches cold.
 *
 * _oomtrace_companion._step_fast(append, counters) returns a builtin fast(step, shapes): it appends
 * (step, t_ns, 0, 0, shapes) through `append` (the STEPS deque's), writes the marker and returns True. It
 * does nothing and returns False, for the Python path to do the whole step, when the allocator's counters
 * are due (counters.due, CLOCK_MONOTONIC ns, is reached: that path reads them) or anything fails (no
 * exception is left set). The label is the Python path's: "step N", then " " and the shapes' UTF-8 when
 * there are shapes, which oomtrace_mark cuts at 255 bytes, at a character's boundary. */
#include <string.h>
#include <sys/types.h>
#include <time.h>

#define OOMTRACE_NO_INLINE
#include "oomtrace.h"

#include "runtime/companion.h"

#define PY_METH_VARARGS 0x0001
#define PY_METH_FASTCALL 0x0080

static struct {
    PyObject *(*cfunction_new)(void *, PyObject *, PyObject *);
    int (*setattr)(PyObject *, const char *, PyObject *);
    PyObject *(*getattr)(PyObject *, PyObject *);
    PyObject *(*intern)(const char *);
    PyObject *(*tuple_pack)(ssize_t, ...);
    PyObject *(*tuple_getitem)(PyObject *, ssize_t);
    int (*arg_unpack)(PyObject *, const char *, ssize_t, ssize_t, ...);
    PyObject *(*long_from_ll)(long long);
    unsigned long long (*long_as_ull)(PyObject *);
    double (*float_as_double)(PyObject *);
    const char *(*utf8)(PyObject *, ssize_t *);
    PyObject *(*call)(PyObject *, ...);
    PyObject *(*occurred)(void);
    void (*clear)(void);
    void (*decref)(PyObject *);
    PyObject *(*bool_from_long)(long);
} py;

static struct {
    const char *name;
    void *meth;
    int flags;
    const char *doc;
} fast_def, make_def;

static PyObject *due_name; /* "due", interned once: a C string's look-up builds a str at every call */

/* "step N", then " " and the shapes when there are shapes, cut at size - 1 bytes (oomtrace_mark cuts what
 * is longer than a marker keeps at a character's boundary). By hand: snprintf's "%.*s" takes glibc's
 * positional path, ~2,000 instructions a step. */
static void step_label(char *out, size_t size, unsigned long long step, const char *shapes, size_t n)
{
    char digits[24];
    size_t nd = 0;
    do
        digits[nd++] = (char)('0' + step % 10);
    while ((step /= 10) != 0);
    size_t k = 0;
    memcpy(out, "step ", 5);
    k = 5;
    while (nd && k < size - 1)
        out[k++] = digits[--nd];
    if (n && k < size - 1)
        out[k++] = ' ';
    size_t room = size - 1 - k;
    if (n > room)
        n = room;
    memcpy(out + k, shapes, n);
    out[k + n] = 0;
}

static PyObject *no(void)
{
    if (py.occurred())
        py.clear();
    return py.bool_from_long(0);
}

static PyObject *step_fast(PyObject *self, PyObject *const *args, ssize_t nargs)
{
    if (nargs != 2)
        return no();
    PyObject *append = py.tuple_getitem(self, 0), *counters = py.tuple_getitem(self, 1);
    if (!append || !counters)
        return no();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long now = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    PyObject *due = py.getattr(counters, due_name);
    if (!due)
        return no();
    double d = py.float_as_double(due); /* an int or a float (inf: never) */
    py.decref(due);
    if (py.occurred() || (double)now >= d)
        return no();
    ssize_t n = 0;
    const char *shapes = py.utf8(args[1], &n);
    unsigned long long step = py.long_as_ull(args[0]);
    if (!shapes || py.occurred())
        return no();
    PyObject *t_ns = py.long_from_ll(now), *zero = py.long_from_ll(0);
    PyObject *entry = t_ns && zero ? py.tuple_pack(5, args[0], t_ns, zero, zero, args[1]) : NULL;
    PyObject *r = entry ? py.call(append, entry, NULL) : NULL;
    if (t_ns)
        py.decref(t_ns);
    if (zero)
        py.decref(zero);
    if (entry)
        py.decref(entry);
    if (!r)
        return no();
    py.decref(r);
    char label[512];
    step_label(label, sizeof label, step, shapes, (size_t)n);
    oomtrace_mark(label);
    return py.bool_from_long(1);
}

/* _step_fast(append, counters) -> the builtin above, bound to (append, counters). */
static PyObject *make_fast(PyObject *self, PyObject *args)
{
    PyObject *append, *counters;
    if (!py.arg_unpack(args, "_step_fast", 2, 2, &append, &counters))
        return NULL;
    PyObject *bound = py.tuple_pack(2, append, counters);
    if (!bound)
        return NULL;
    PyObject *fn = py.cfunction_new(&fast_def, bound, NULL);
    py.decref(bound);
    return fn;
}

void ot_companion_step_builtins(PyObject *mod, void *(*sym)(const char *))
{
    py.cfunction_new = (PyObject * (*)(void *, PyObject *, PyObject *)) sym("PyCFunction_NewEx");
    py.setattr = (int (*)(PyObject *, const char *, PyObject *))sym("PyObject_SetAttrString");
    py.getattr = (PyObject * (*)(PyObject *, PyObject *)) sym("PyObject_GetAttr");
    py.intern = (PyObject * (*)(const char *)) sym("PyUnicode_InternFromString");
    py.tuple_pack = (PyObject * (*)(ssize_t, ...)) sym("PyTuple_Pack");
    py.tuple_getitem = (PyObject * (*)(PyObject *, ssize_t)) sym("PyTuple_GetItem");
    py.arg_unpack = (int (*)(PyObject *, const char *, ssize_t, ssize_t, ...))sym("PyArg_UnpackTuple");
    py.long_from_ll = (PyObject * (*)(long long)) sym("PyLong_FromLongLong");
    py.long_as_ull = (unsigned long long (*)(PyObject *))sym("PyLong_AsUnsignedLongLong");
    py.float_as_double = (double (*)(PyObject *))sym("PyFloat_AsDouble");
    py.utf8 = (const char *(*)(PyObject *, ssize_t *))sym("PyUnicode_AsUTF8AndSize");
    py.call = (PyObject * (*)(PyObject *, ...)) sym("PyObject_CallFunctionObjArgs");
    py.occurred = (PyObject * (*)(void)) sym("PyErr_Occurred");
    py.clear = (void (*)(void))sym("PyErr_Clear");
    py.decref = (void (*)(PyObject *))sym("Py_DecRef");
    py.bool_from_long = (PyObject * (*)(long)) sym("PyBool_FromLong");
    void **need = (void **)&py;
    for (size_t i = 0; i < sizeof py / sizeof *need; i++)
        if (!need[i])
            return; /* the companion keeps its Python path */
    if (!due_name && !(due_name = py.intern("due"))) {
        py.clear();
        return;
    }
    fast_def = (typeof(fast_def)){"fast", (void *)step_fast, PY_METH_FASTCALL,
                                  "fast(step, shapes) -> bool: the STEPS entry and the step marker, or False"};
    make_def = (typeof(make_def)){"_step_fast", (void *)make_fast, PY_METH_VARARGS,
                                  "_step_fast(append, counters) -> fast(step, shapes)"};
    PyObject *fn = py.cfunction_new(&make_def, NULL, NULL);
    if (!fn || py.setattr(mod, "_step_fast", fn) != 0)
        py.clear();
    if (fn)
        py.decref(fn);
}
