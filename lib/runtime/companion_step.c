/* The companion's work after each optimizer step, its common path in C: the step counted, a STEPS entry and
 * the step marker "step N (shapes)" (lib/companion/_oomtrace_steps.py, _StepHook; _oomtrace_frameworks.py,
 * Torch.on_step). In Python that path was two calls and ~40 bytecodes, ~6,500 instructions a step
 * (bench/step_hook_ir.py), and it runs where the step's work has left the caches cold.
 *
 * _oomtrace_companion._step_hook(hook, append, counters) returns the optimizer step post hook itself, a
 * builtin that torch calls with (opt, args, kwargs): no Python frame of the companion runs at a common step
 * (post_hook below says what it does and what it leaves to Python).
 *
 * _oomtrace_companion._step_fast(append, *due) returns a builtin fast(step, shapes), the same record for
 * the hook in Python: it appends (step, t_ns, 0, 0, shapes) through `append` (the STEPS deque's), writes the
 * marker and returns True. It does nothing and returns False, for the Python path to do the whole step,
 * when one of the `due` objects (1 to 4) is due: its attribute `due` (CLOCK_MONOTONIC ns) is reached (the
 * allocator's counters: that path reads them; the step hook: it arms its sampled forward hook), or when
 * anything fails (no exception is left set). The label is the Python path's: "step N", then " " and the
 * shapes' UTF-8 when there are shapes, which oomtrace_mark cuts at 255 bytes, at a character's boundary. */
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
    PyObject *(*dict_get)(PyObject *, PyObject *); /* borrowed, no exception */
    int (*dict_set)(PyObject *, PyObject *, PyObject *);
    PyObject *(*weakref_get)(PyObject *);          /* borrowed; None when dead */
    ssize_t (*unicode_len)(PyObject *);
    long long (*long_as_ll)(PyObject *);
    PyObject *(*call_method)(PyObject *, PyObject *, ...);
    void (*incref)(PyObject *);
    PyObject *none, *true_; /* Py_None, Py_True */
} py;

static struct ot_py_method fast_def, make_def, hook_def, make_hook_def;
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

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Whether a due time (CLOCK_MONOTONIC ns, an int or a float; inf: never) is reached at now; NULL or
 * unreadable counts as reached: the Python path then decides. */
static bool reached(PyObject *due, long long now)
{
    if (!due)
        return true;
    double d = py.float_as_double(due);
    return ot_cpy.occurred() || (double)now >= d;
}

static bool holder_reached(PyObject *holder, long long now)
{
    PyObject *due = holder ? py.getattr(holder, due_name) : NULL;
    bool r = reached(due, now);
    if (due)
        ot_cpy.decref(due);
    return r;
}

/* The STEPS entry (step, now, 0, 0, shapes) through append, and the marker. False (an exception may be
 * left set) when it could not. */
static bool record_step(PyObject *append, PyObject *step_obj, PyObject *shapes_obj, long long now)
{
    ssize_t n = 0;
    const char *shapes = py.utf8(shapes_obj, &n);
    unsigned long long step = py.long_as_ull(step_obj);
    if (!shapes || ot_cpy.occurred())
        return false;
    PyObject *t_ns = py.long_from_ll(now), *zero = py.long_from_ll(0);
    PyObject *entry = t_ns && zero ? py.tuple_pack(5, step_obj, t_ns, zero, zero, shapes_obj) : NULL;
    PyObject *r = entry ? py.call(append, entry, NULL) : NULL;
    if (t_ns)
        ot_cpy.decref(t_ns);
    if (zero)
        ot_cpy.decref(zero);
    if (entry)
        ot_cpy.decref(entry);
    if (!r)
        return false;
    ot_cpy.decref(r);
    char label[512];
    step_label(label, sizeof label, step, shapes, (size_t)n);
    oomtrace_mark(label);
    return true;
}

static PyObject *step_fast(PyObject *self, PyObject *const *args, ssize_t nargs)
{
    if (nargs != 2)
        return no();
    PyObject *append = py.tuple_getitem(self, 0);
    ssize_t nbound = py.tuple_size(self);
    if (!append || nbound < 2)
        return no();
    long long now = now_ns();
    for (ssize_t i = 1; i < nbound; i++)
        if (holder_reached(py.tuple_getitem(self, i), now))
            return no();
    return record_step(append, args[0], args[1], now) ? ot_cpy.bool_from_long(1) : no();
}

/* The optimizer's step post hook itself in C: torch calls it straight, no Python frame of the companion runs
 * at a step (a Python call right after a step costs microseconds: its code and data are cold). Bound to
 * (the hook's instance dict, the hook, append, counters) (lib/companion/_oomtrace_steps.py, _StepHook): its
 * common path reads the hook's state from its dict, counts the step there, takes the sampled inputs
 * (`seen`) for the step's entry and leaves "" in their place, and records the step (record_step). Anything
 * else goes to the hook's Python methods: post_step (not the primary optimizer's step yet, the model not
 * found yet, an unexpected state) or, with the step counted, slow_step(step, shapes) (the counters due, the
 * step's inputs sampled, or the record failed), or, with the step recorded, arm() (a sample due). Returns None and never leaves an exception: the program's step must
 * not see one. */
static struct {
    PyObject *off, *broken, *watched, *primary, *step, *seen, *due, *post_step, *slow_step, *arm, *empty, *dict;
} names;

static PyObject *none(void)
{
    if (ot_cpy.occurred())
        ot_cpy.clear();
    py.incref(py.none);
    return py.none;
}

static PyObject *to_python(PyObject *hook, PyObject *method, PyObject *a, PyObject *b)
{
    if (ot_cpy.occurred())
        ot_cpy.clear();
    PyObject *r = py.call_method(hook, method, a, b, NULL);
    if (r)
        ot_cpy.decref(r);
    return none();
}

static PyObject *post_hook(PyObject *self, PyObject *const *args, ssize_t nargs)
{
    PyObject *d = py.tuple_getitem(self, 0), *hook = py.tuple_getitem(self, 1);
    PyObject *append = py.tuple_getitem(self, 2), *counters = py.tuple_getitem(self, 3);
    if (!d || !hook || !append || !counters || nargs < 1)
        return none();
    PyObject *opt = args[0];
    PyObject *off = py.dict_get(d, names.off), *broken = py.dict_get(d, names.broken);
    if (off == py.true_ || broken == py.true_)
        return none();
    PyObject *primary = py.dict_get(d, names.primary), *step = py.dict_get(d, names.step);
    PyObject *seen = py.dict_get(d, names.seen);
    if (!off || !broken || py.dict_get(d, names.watched) != py.true_ || !primary || primary == py.none ||
        py.weakref_get(primary) != opt || !step || !seen)
        return to_python(hook, names.post_step, opt, NULL);
    long long n = py.long_as_ll(step);
    ssize_t seen_len = py.unicode_len(seen);
    if (n < 0 || seen_len < 0 || ot_cpy.occurred())
        return to_python(hook, names.post_step, opt, NULL);
    PyObject *next = py.long_from_ll(n + 1);
    if (!next)
        return none();
    py.incref(seen); /* the step's inputs, kept while the dict's entry is replaced */
    bool counted = py.dict_set(d, names.step, next) == 0;
    if (counted && seen_len && py.dict_set(d, names.seen, names.empty) != 0)
        ot_cpy.clear();
    if (counted) {
        long long now = now_ns();
        /* A sampled step (its inputs seen) goes to Python too: on_step keeps its entry past the last 64. */
        if (seen_len || holder_reached(counters, now) || !record_step(append, next, seen, now))
            to_python(hook, names.slow_step, next, seen);
        else if (reached(py.dict_get(d, names.due), now))
            to_python(hook, names.arm, NULL, NULL);
    }
    ot_cpy.decref(seen);
    ot_cpy.decref(next);
    return none();
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

/* _step_hook(hook, append, counters) -> the post hook above, bound to (hook.__dict__, hook, append, counters). */
static PyObject *make_hook(PyObject *self, PyObject *args)
{
    PyObject *hook, *append, *counters;
    if (!py.arg_unpack(args, "_step_hook", 3, 3, &hook, &append, &counters))
        return NULL;
    PyObject *d = py.getattr(hook, names.dict);
    if (!d)
        return NULL;
    PyObject *bound = py.tuple_pack(4, d, hook, append, counters);
    ot_cpy.decref(d);
    if (!bound)
        return NULL;
    PyObject *fn = ot_cpy.cfunction_new(&hook_def, bound, NULL);
    ot_cpy.decref(bound);
    return fn;
}

static void add(PyObject *mod, struct ot_py_method *def)
{
    PyObject *fn = ot_cpy.cfunction_new(def, NULL, NULL);
    if (!fn || ot_cpy.setattr(mod, def->name, fn) != 0)
        ot_cpy.clear();
    if (fn)
        ot_cpy.decref(fn);
}

static bool intern_names(void)
{
    PyObject **out[] = {&names.off, &names.broken, &names.watched, &names.primary, &names.step, &names.seen,
                        &names.due, &names.post_step, &names.slow_step, &names.arm, &names.empty, &names.dict};
    const char *s[] = {"off", "broken", "watched", "primary", "step", "seen", "due", "post_step", "slow_step", "arm",
                       "", "__dict__"};
    for (size_t i = 0; i < sizeof s / sizeof *s; i++)
        if (!(*out[i] = py.intern(s[i])))
            return false;
    due_name = names.due;
    return true;
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
    py.dict_get = (PyObject * (*)(PyObject *, PyObject *)) sym("PyDict_GetItem");
    py.dict_set = (int (*)(PyObject *, PyObject *, PyObject *))sym("PyDict_SetItem");
    py.weakref_get = (PyObject * (*)(PyObject *)) sym("PyWeakref_GetObject");
    py.unicode_len = (ssize_t(*)(PyObject *))sym("PyUnicode_GetLength");
    py.long_as_ll = (long long (*)(PyObject *))sym("PyLong_AsLongLong");
    py.call_method = (PyObject * (*)(PyObject *, PyObject *, ...)) sym("PyObject_CallMethodObjArgs");
    py.incref = (void (*)(PyObject *))sym("Py_IncRef");
    py.none = (PyObject *)sym("_Py_NoneStruct");
    py.true_ = (PyObject *)sym("_Py_TrueStruct");
    void **need = (void **)&py;
    for (size_t i = 0; i < sizeof py / sizeof *need; i++)
        if (!need[i])
            return; /* the companion keeps its Python path */
    if (!due_name && !intern_names()) {
        ot_cpy.clear();
        return;
    }
    fast_def = (struct ot_py_method){"fast", (void *)step_fast, OT_METH_FASTCALL,
                                     "fast(step, shapes) -> bool: the STEPS entry and the step marker, or False"};
    make_def = (struct ot_py_method){"_step_fast", (void *)make_fast, OT_METH_VARARGS,
                                     "_step_fast(append, *due) -> fast(step, shapes)"};
    hook_def = (struct ot_py_method){"post_step", (void *)post_hook, OT_METH_FASTCALL,
                                     "post_step(opt, args, kwargs): the optimizer step post hook, in C"};
    make_hook_def = (struct ot_py_method){"_step_hook", (void *)make_hook, OT_METH_VARARGS,
                                          "_step_hook(hook, append, counters) -> post_step(opt, args, kwargs)"};
    add(mod, &make_def);
    add(mod, &make_hook_def);
}
