/* The companion's work after each optimizer step, its common path in C: the step counted, a STEPS entry and
 * the step marker "step N (shapes)" (lib/companion/_oomtrace_steps.py, _StepHook; _oomtrace_frameworks.py,
 * Torch.on_step). In Python that path was two calls and ~40 bytecodes, ~6,500 instructions a step
 * (bench/step_hook_ir.py), and it runs where the step's work has left the caches cold.
 *
 * _oomtrace_companion._step_hook(hook, counters) returns the optimizer step post hook itself, a builtin
 * that torch calls with (opt, args, kwargs), with the builtins that keep its C state: no Python frame of the
 * companion runs at a common step, which reads one Python object (the optimizer's weak reference) and makes
 * none (post_hook below says what it does and what it leaves to Python).
 *
 * _oomtrace_companion._step_fast(append, *due) returns a builtin fast(step, shapes), the same record for
 * the hook in Python: it appends (step, t_ns, 0, 0, shapes) through `append` (the STEPS deque's), writes the
 * marker and returns True. It does nothing and returns False, for the Python path to do the whole step,
 * when one of the `due` objects (1 to 4) is due: its attribute `due` (CLOCK_MONOTONIC ns) is reached (the
 * allocator's counters: that path reads them; the step hook: it arms its sampled forward hook), or when
 * anything fails (no exception is left set). The label is the Python path's: "step N", then " " and the
 * shapes' UTF-8 when there are shapes, which oomtrace_mark cuts at 255 bytes, at a character's boundary. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#define OOMTRACE_NO_INLINE
#include "oomtrace.h"

#include "common/clock.h"
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
    PyObject *(*weakref_get)(PyObject *);          /* borrowed; None when dead */
    ssize_t (*unicode_len)(PyObject *);
    long long (*long_as_ll)(PyObject *);
    PyObject *(*call_method)(PyObject *, PyObject *, ...);
    void (*incref)(PyObject *);
    void *(*capsule_pointer)(PyObject *, const char *);
    PyObject *(*capsule_new)(void *, const char *, void (*)(PyObject *));
    PyObject *(*list_new)(ssize_t);
    int (*list_append)(PyObject *, PyObject *);
    PyObject *none, *true_; /* Py_None, Py_True */
} py;

static struct ot_py_method fast_def, make_def, hook_def, make_hook_def, load_def, count_def, entries_def;
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

/* "step N" into a label whose first five bytes are "step " (the C hook's, written once): the common step's
 * marker has no formatting but its digits. Returns its length (at most 25). */
static size_t step_digits(char *label, unsigned long long step)
{
    char digits[24];
    size_t nd = 0;
    do
        digits[nd++] = (char)('0' + step % 10);
    while ((step /= 10) != 0);
    size_t k = 5;
    while (nd)
        label[k++] = digits[--nd];
    label[k] = 0;
    return k;
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

static struct {
    PyObject *off, *broken, *watched, *primary, *seen, *due, *post_step, *slow_step, *arm, *empty;
} names;

static PyObject *none(void)
{
    if (ot_cpy.occurred())
        ot_cpy.clear();
    py.incref(py.none);
    return py.none;
}

/* The optimizer's step post hook itself in C: torch calls it straight, no Python frame of the companion runs
 * at a step (a Python call right after a step costs microseconds: its code and data are cold). Its state is
 * a C struct (struct hook_state, in a capsule), not the hook's instance dict: at a common step it reads no
 * Python object but the optimizer's weak reference, makes none, and keeps the step's STEPS entry in a C
 * ring (the H200 measured ~13 us a step for the version that read seven dict entries, built a tuple of five
 * and appended it to a deque: run 30, docs/PERFORMANCE.md).
 *
 * _step_hook(hook, counters) -> (post_step, load, count, entries), bound to (the state's capsule, hook,
 * counters) (lib/companion/_oomtrace_steps.py, _StepHook):
 *   post_step(opt, args, kwargs)  the hook; returns None and never leaves an exception.
 *   load()       reads what the common path depends on from the hook (off, broken, watched, primary, seen,
 *                due) and the counters (due): the hook calls it whenever Python sets one of them.
 *   count([n])   the step count (the hook's `step` reads and sets it here; set back, the ring's entries
 *                past it are dropped).
 *   entries()    the ring's STEPS entries, oldest first: [(step, t_ns, 0, 0, ""), ...].
 * The common step: the primary optimizer's, neither off nor broken, the model's roots watched, no sampled
 * inputs waiting (seen == ""), the counters not due. It counts the step, writes its entry to the ring and
 * the marker "step N", then, when a sample is due, calls the hook's arm(). Anything else goes to the hook's
 * Python methods: post_step (all but the common step and the counters due), slow_step(step, "") (the
 * counters due: on_step reads them and keeps the entry in Python's STEPS deque). */
enum { MODE_PYTHON, MODE_COMMON, MODE_OFF };
#define RING 64 /* the STEPS entries a snapshot keeps (lib/companion/_oomtrace_payload.py, STEPS_KEPT) */

struct hook_state {
    long long step;
    long long due, counters_due; /* CLOCK_MONOTONIC ns; LLONG_MAX: never; LLONG_MIN: unreadable (reached) */
    int mode;
    PyObject *primary; /* the primary optimizer's weak reference (owned), NULL before the first step */
    unsigned long long written; /* entries written to the ring, of which the last `kept` are there */
    unsigned kept;
    struct {
        long long step, t_ns;
    } ring[RING];
    char label[32]; /* "step " and the digits */
};

static struct hook_state *state_of(PyObject *self)
{
    PyObject *cap = py.tuple_getitem(self, 0);
    return cap ? (struct hook_state *)py.capsule_pointer(cap, NULL) : NULL;
}

static void state_free(PyObject *cap)
{
    struct hook_state *s = py.capsule_pointer(cap, NULL);
    if (!s)
        return;
    if (s->primary)
        ot_cpy.decref(s->primary);
    free(s);
}

/* A due time (an int or a float, ns) as C ns: inf -> LLONG_MAX; unreadable or NaN -> LLONG_MIN (reached:
 * the Python path then decides). */
static long long due_ns(PyObject *o)
{
    double d = o ? py.float_as_double(o) : 0.0 / 0.0;
    if (ot_cpy.occurred() || d != d) {
        if (ot_cpy.occurred())
            ot_cpy.clear();
        return LLONG_MIN;
    }
    return d >= 9.2e18 ? LLONG_MAX : d <= -9.2e18 ? LLONG_MIN + 1 : (long long)d;
}

static PyObject *attr(PyObject *o, PyObject *name)
{
    PyObject *v = py.getattr(o, name);
    if (!v)
        ot_cpy.clear();
    return v;
}

/* Python's state into the C struct. Anything unreadable leaves the step to Python's post_step. */
static void load_state(struct hook_state *s, PyObject *hook, PyObject *counters)
{
    PyObject *off = attr(hook, names.off), *broken = attr(hook, names.broken), *watched = attr(hook, names.watched);
    PyObject *primary = attr(hook, names.primary), *seen = attr(hook, names.seen), *due = attr(hook, names.due);
    PyObject *cdue = attr(counters, names.due);
    ssize_t seen_len = seen ? py.unicode_len(seen) : -1;
    if (seen_len < 0 && ot_cpy.occurred())
        ot_cpy.clear();
    PyObject *was = s->primary; /* let go of once the state is whole: a decref may run Python code */
    s->primary = primary && primary != py.none ? primary : NULL;
    if (s->primary)
        py.incref(s->primary);
    s->due = due_ns(due);
    s->counters_due = due_ns(cdue);
    if (off == py.true_ || broken == py.true_)
        s->mode = MODE_OFF;
    else if (off && broken && watched == py.true_ && s->primary && seen_len == 0)
        s->mode = MODE_COMMON;
    else
        s->mode = MODE_PYTHON;
    PyObject *held[] = {was, off, broken, watched, primary, seen, due, cdue};
    for (size_t i = 0; i < sizeof held / sizeof *held; i++)
        if (held[i])
            ot_cpy.decref(held[i]);
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
    struct hook_state *s = state_of(self);
    if (!s || nargs < 1 || s->mode == MODE_OFF)
        return none();
    PyObject *opt = args[0];
    if (s->mode != MODE_COMMON || py.weakref_get(s->primary) != opt)
        return to_python(py.tuple_getitem(self, 1), names.post_step, opt, NULL);
    long long now = (long long)ot_now_ns(), n = ++s->step;
    if (now >= s->counters_due) {
        PyObject *step = py.long_from_ll(n);
        if (step) {
            to_python(py.tuple_getitem(self, 1), names.slow_step, step, names.empty);
            ot_cpy.decref(step);
        }
        return none();
    }
    unsigned i = (unsigned)(s->written++ % RING);
    if (s->kept < RING)
        s->kept++;
    s->ring[i].step = n;
    s->ring[i].t_ns = now;
    size_t len = step_digits(s->label, (unsigned long long)n);
    ot_mark_n(s->label, len);
    if (now >= s->due)
        return to_python(py.tuple_getitem(self, 1), names.arm, NULL, NULL);
    return none();
}

static PyObject *load_builtin(PyObject *self, PyObject *const *args, ssize_t nargs)
{
    struct hook_state *s = state_of(self);
    PyObject *hook = py.tuple_getitem(self, 1), *counters = py.tuple_getitem(self, 2);
    if (s && hook && counters)
        load_state(s, hook, counters);
    return none();
}

static PyObject *count_builtin(PyObject *self, PyObject *const *args, ssize_t nargs)
{
    struct hook_state *s = state_of(self);
    if (!s)
        return NULL;
    if (nargs >= 1) {
        long long n = py.long_as_ll(args[0]);
        if (ot_cpy.occurred())
            return NULL; /* its TypeError or OverflowError, to the companion */
        s->step = n;
        /* A count set back (a benchmark's timing loop restores it): the steps past it did not happen. */
        while (s->kept && s->ring[(s->written - 1) % RING].step > n) {
            s->written--;
            s->kept--;
        }
        py.incref(py.none);
        return py.none;
    }
    return py.long_from_ll(s->step);
}

static PyObject *entries_builtin(PyObject *self, PyObject *const *args, ssize_t nargs)
{
    struct hook_state *s = state_of(self);
    if (!s)
        return NULL;
    unsigned long long n = s->kept;
    PyObject *list = py.list_new(0);
    for (unsigned long long k = s->written - n; list && k < s->written; k++) {
        PyObject *step = py.long_from_ll(s->ring[k % RING].step), *t = py.long_from_ll(s->ring[k % RING].t_ns);
        PyObject *zero = py.long_from_ll(0);
        PyObject *e = step && t && zero ? py.tuple_pack(5, step, t, zero, zero, names.empty) : NULL;
        PyObject *held[] = {step, t, zero};
        for (size_t i = 0; i < 3; i++)
            if (held[i])
                ot_cpy.decref(held[i]);
        if (!e || py.list_append(list, e) != 0) {
            ot_cpy.decref(list);
            list = NULL;
        }
        if (e)
            ot_cpy.decref(e);
    }
    return list;
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

/* _step_hook(hook, counters) -> (post_step, load, count, entries), bound to (the state's capsule, hook,
 * counters); None when there is no memory for the state. */
static PyObject *make_hook(PyObject *self, PyObject *args)
{
    PyObject *hook, *counters;
    if (!py.arg_unpack(args, "_step_hook", 2, 2, &hook, &counters))
        return NULL;
    struct hook_state *s = calloc(1, sizeof *s);
    if (!s) {
        py.incref(py.none);
        return py.none;
    }
    memcpy(s->label, "step ", 5);
    s->mode = MODE_PYTHON;
    PyObject *cap = py.capsule_new(s, NULL, state_free);
    if (!cap) {
        free(s);
        return NULL;
    }
    PyObject *bound = py.tuple_pack(3, cap, hook, counters);
    ot_cpy.decref(cap);
    if (!bound)
        return NULL;
    load_state(s, hook, counters);
    struct ot_py_method *defs[] = {&hook_def, &load_def, &count_def, &entries_def};
    PyObject *fn[4] = {NULL};
    for (size_t i = 0; i < 4; i++)
        fn[i] = ot_cpy.cfunction_new(defs[i], bound, NULL);
    ot_cpy.decref(bound);
    PyObject *r = fn[0] && fn[1] && fn[2] && fn[3] ? py.tuple_pack(4, fn[0], fn[1], fn[2], fn[3]) : NULL;
    for (size_t i = 0; i < 4; i++)
        if (fn[i])
            ot_cpy.decref(fn[i]);
    return r;
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
    PyObject **out[] = {&names.off,  &names.broken,    &names.watched,   &names.primary, &names.seen,
                        &names.due,  &names.post_step, &names.slow_step, &names.arm,     &names.empty};
    const char *s[] = {"off", "broken", "watched", "primary", "seen", "due", "post_step", "slow_step", "arm", ""};
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
    py.weakref_get = (PyObject * (*)(PyObject *)) sym("PyWeakref_GetObject");
    py.unicode_len = (ssize_t(*)(PyObject *))sym("PyUnicode_GetLength");
    py.long_as_ll = (long long (*)(PyObject *))sym("PyLong_AsLongLong");
    py.call_method = (PyObject * (*)(PyObject *, PyObject *, ...)) sym("PyObject_CallMethodObjArgs");
    py.incref = (void (*)(PyObject *))sym("Py_IncRef");
    py.capsule_pointer = (void *(*)(PyObject *, const char *))sym("PyCapsule_GetPointer");
    py.capsule_new = (PyObject * (*)(void *, const char *, void (*)(PyObject *))) sym("PyCapsule_New");
    py.list_new = (PyObject * (*)(ssize_t)) sym("PyList_New");
    py.list_append = (int (*)(PyObject *, PyObject *))sym("PyList_Append");
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
    load_def = (struct ot_py_method){"load", (void *)load_builtin, OT_METH_FASTCALL,
                                     "load(): the hook's and the counters' state into the C hook"};
    count_def = (struct ot_py_method){"count", (void *)count_builtin, OT_METH_FASTCALL,
                                      "count([n]) -> the step count (None when n sets it)"};
    entries_def = (struct ot_py_method){"entries", (void *)entries_builtin, OT_METH_FASTCALL,
                                        "entries() -> [(step, t_ns, 0, 0, ''), ...]: the C hook's STEPS entries"};
    make_hook_def = (struct ot_py_method){"_step_hook", (void *)make_hook, OT_METH_VARARGS,
                                          "_step_hook(hook, counters) -> (post_step, load, count, entries)"};
    add(mod, &make_def);
    add(mod, &make_hook_def);
}
