/* The companion's work after each optimizer step, its common path in C: a STEPS entry and the step marker
 * "step N (shapes)" (lib/companion/_oomtrace_frameworks.py, Torch.on_step). In Python that path was two
 * calls and ~40 bytecodes, ~6,500 instructions a step (bench/step_hook_ir.py), and it runs where the step's
 * work has left the caches cold.
 *
 * _oomtrace_companion._step_fast(append, *due) returns a builtin fast(step, shapes): it appends
 * (step, t_ns, 0, 0, shapes) through `append` (the STEPS deque's), writes the marker and returns True. It
 * does nothing and returns False, for the Python path to do the whole step, when one of the `due` objects
 * (1 to 4) is due: its attribute `due` (CLOCK_MONOTONIC ns) is reached (the allocator's counters: that path
 * reads them; the step hook: it arms its sampled forward hook), or when anything fails (no exception is
 * left set). The label is the Python path's: "step N", then " " and the shapes' UTF-8 when
 * there are shapes, which oomtrace_mark cuts at 255 bytes, at a character's boundary. */
#include <string.h>
#include <sys/types.h>
#include <time.h>

#define OOMTRACE_NO_INLINE
#include "oomtrace.h"

#include "runtime/companion.h"
#include "runtime/cpython.h"

/* What this file needs beyond the shared table (runtime/cpython.h). */
static struct {
    PyObject *(*getattr)(PyObject *, PyObject *);
    PyObject *(*intern)(const char *);
    PyObject *(*tuple_pack)(ssize_t, ...);
    PyObject *(*tuple_getitem)(PyObject *, ssize_t);
    ssize_t (*tuple_size)(PyObject *);
    PyObject *(*long_from_ll)(long long);
    unsigned long long (*long_as_ull)(PyObject *);
    double (*float_as_double)(PyObject *);
    const char *(*utf8)(PyObject *, ssize_t *);
    PyObject *(*call)(PyObject *, ...);
    int (*arg_unpack)(PyObject *, const char *, ssize_t, ssize_t, ...);
} py;

static struct ot_py_method fast_def, make_def;
#define MAX_DUE 4

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
    if (ot_cpy.occurred())
        ot_cpy.clear();
    return ot_cpy.bool_from_long(0);
}

/* Whether `due` holder's due time is reached at now (or unreadable: the Python path then decides). */
static bool reached(PyObject *holder, long long now)
{
    PyObject *due = holder ? py.getattr(holder, due_name) : NULL;
    if (!due)
        return true;
    double d = py.float_as_double(due); /* an int or a float (inf: never) */
    ot_cpy.decref(due);
    return ot_cpy.occurred() || (double)now >= d;
}

static PyObject *step_fast(PyObject *self, PyObject *const *args, ssize_t nargs)
{
    if (nargs != 2)
        return no();
    PyObject *append = py.tuple_getitem(self, 0);
    ssize_t nbound = py.tuple_size(self);
    if (!append || nbound < 2)
        return no();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long now = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    for (ssize_t i = 1; i < nbound; i++)
        if (reached(py.tuple_getitem(self, i), now))
            return no();
    ssize_t n = 0;
    const char *shapes = py.utf8(args[1], &n);
    unsigned long long step = py.long_as_ull(args[0]);
    if (!shapes || ot_cpy.occurred())
        return no();
    PyObject *t_ns = py.long_from_ll(now), *zero = py.long_from_ll(0);
    PyObject *entry = t_ns && zero ? py.tuple_pack(5, args[0], t_ns, zero, zero, args[1]) : NULL;
    PyObject *r = entry ? py.call(append, entry, NULL) : NULL;
    if (t_ns)
        ot_cpy.decref(t_ns);
    if (zero)
        ot_cpy.decref(zero);
    if (entry)
        ot_cpy.decref(entry);
    if (!r)
        return no();
    ot_cpy.decref(r);
    char label[512];
    step_label(label, sizeof label, step, shapes, (size_t)n);
    oomtrace_mark(label);
    return ot_cpy.bool_from_long(1);
}

/* _step_fast(append, *due) -> the builtin above, bound to the tuple (append, *due). A TypeError for 1 or
 * more than 1 + MAX_DUE arguments. */
static PyObject *make_fast(PyObject *self, PyObject *args)
{
    PyObject *o[1 + MAX_DUE];
    if (!py.arg_unpack(args, "_step_fast", 2, 1 + MAX_DUE, &o[0], &o[1], &o[2], &o[3], &o[4]))
        return NULL; /* its TypeError */
    return ot_cpy.cfunction_new(&fast_def, args, NULL);
}

void ot_companion_step_builtins(PyObject *mod, void *(*sym)(const char *))
{
    py.getattr = (PyObject * (*)(PyObject *, PyObject *)) sym("PyObject_GetAttr");
    py.intern = (PyObject * (*)(const char *)) sym("PyUnicode_InternFromString");
    py.tuple_pack = (PyObject * (*)(ssize_t, ...)) sym("PyTuple_Pack");
    py.tuple_getitem = (PyObject * (*)(PyObject *, ssize_t)) sym("PyTuple_GetItem");
    py.tuple_size = (ssize_t(*)(PyObject *))sym("PyTuple_Size");
    py.long_from_ll = (PyObject * (*)(long long)) sym("PyLong_FromLongLong");
    py.long_as_ull = (unsigned long long (*)(PyObject *))sym("PyLong_AsUnsignedLongLong");
    py.float_as_double = (double (*)(PyObject *))sym("PyFloat_AsDouble");
    py.utf8 = (const char *(*)(PyObject *, ssize_t *))sym("PyUnicode_AsUTF8AndSize");
    py.call = (PyObject * (*)(PyObject *, ...)) sym("PyObject_CallFunctionObjArgs");
    py.arg_unpack = (int (*)(PyObject *, const char *, ssize_t, ssize_t, ...))sym("PyArg_UnpackTuple");
    void **need = (void **)&py;
    for (size_t i = 0; i < sizeof py / sizeof *need; i++)
        if (!need[i])
            return; /* the companion keeps its Python path */
    if (!due_name && !(due_name = py.intern("due"))) {
        ot_cpy.clear();
        return;
    }
    fast_def = (struct ot_py_method){"fast", (void *)step_fast, OT_METH_FASTCALL,
                                     "fast(step, shapes) -> bool: the STEPS entry and the step marker, or False"};
    make_def = (struct ot_py_method){"_step_fast", (void *)make_fast, OT_METH_VARARGS,
                                     "_step_fast(append, *due) -> fast(step, shapes)"};
    PyObject *fn = ot_cpy.cfunction_new(&make_def, NULL, NULL);
    if (!fn || ot_cpy.setattr(mod, "_step_fast", fn) != 0)
        ot_cpy.clear();
    if (fn)
        ot_cpy.decref(fn);
}
