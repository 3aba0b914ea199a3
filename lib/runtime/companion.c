/* The Python companion: in a Python process, the sources of lib/companion/ (embedded in this library by
 * companion_src.S) become the modules _oomtrace_companion and _oomtrace_roles, and the companion records
 * what the frameworks' allocators hold (docs/FORMAT.md, FRAMEWORK).
 *
 * Python never runs inside a driver hook: a framework's allocator lock may be held there. A hook only asks
 * the interpreter for a pending call (Py_AddPendingCall may be called from any thread); the interpreter
 * runs it in the main thread at its next safe point, with the GIL held. Every CPython symbol is looked up
 * at run time, so a process without Python costs one failed lookup. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driver/real.h"
#include "internal.h"

/* Defined by companion_src.S for each lib/companion/NAME.py present at build time: NUL-terminated source. */
extern const char ot_py__oomtrace_companion[] __attribute__((weak, visibility("hidden")));
extern const char ot_py__oomtrace_roles[] __attribute__((weak, visibility("hidden")));

typedef struct _object PyObject;
#define PY_FILE_INPUT 257

static struct {
    int (*is_initialized)(void);
    int (*is_finalizing)(void);
    int (*add_pending)(int (*)(void *), void *);
    PyObject *(*compile)(const char *, const char *, int);
    PyObject *(*exec_module)(const char *, PyObject *);
    PyObject *(*getattr)(PyObject *, const char *);
    PyObject *(*call_function)(PyObject *, const char *, ...);
    PyObject *(*occurred)(void);
    void (*clear)(void);
    void (*decref)(PyObject *);
} py;

enum { C_NEW, C_ABSENT, C_READY, C_STARTED, C_FAILED };
static int cstate;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int scheduled;          /* a pending call is queued and has not run yet */
static uint64_t last_poke_ns;  /* when the last one was queued */
static PyObject *companion;    /* the module, once started (owned; touched with the GIL held) */

/* A framework imported after the companion started is found at the next pending call; allocations ask
 * for one at most this often. */
#define POKE_INTERVAL_NS 1000000000ull

static void *sym(const char *name)
{
    void *(*real)(void *, const char *) = (void *(*)(void *, const char *))ot_real_dlsym_fn();
    return real ? real(RTLD_DEFAULT, name) : NULL;
}

static void probe(void)
{
    py.add_pending = (int (*)(int (*)(void *), void *))sym("Py_AddPendingCall");
    py.is_initialized = (int (*)(void))sym("Py_IsInitialized");
    if (!py.add_pending || !py.is_initialized || !ot_py__oomtrace_companion) {
        __atomic_store_n(&cstate, C_ABSENT, __ATOMIC_RELEASE);
        return;
    }
    py.is_finalizing = (int (*)(void))sym("Py_IsFinalizing"); /* 3.13 */
    if (!py.is_finalizing)
        py.is_finalizing = (int (*)(void))sym("_Py_IsFinalizing");
    py.compile = (PyObject * (*)(const char *, const char *, int)) sym("Py_CompileString");
    py.exec_module = (PyObject * (*)(const char *, PyObject *)) sym("PyImport_ExecCodeModule");
    py.getattr = (PyObject * (*)(PyObject *, const char *)) sym("PyObject_GetAttrString");
    py.call_function = (PyObject * (*)(PyObject *, const char *, ...)) sym("PyObject_CallFunction");
    py.occurred = (PyObject * (*)(void)) sym("PyErr_Occurred");
    py.clear = (void (*)(void))sym("PyErr_Clear");
    py.decref = (void (*)(PyObject *))sym("Py_DecRef");
    if (!py.compile || !py.exec_module || !py.getattr || !py.call_function || !py.occurred || !py.clear ||
        !py.decref) {
        ot_log("this Python lacks the C API the framework companion needs; frameworks are not recorded");
        __atomic_store_n(&cstate, C_ABSENT, __ATOMIC_RELEASE);
        return;
    }
    __atomic_store_n(&cstate, C_READY, __ATOMIC_RELEASE);
}

/* Runs NAME's source as a module registered in sys.modules. NULL (no exception left set) on failure. */
static PyObject *load_module(const char *name, const char *file, const char *src)
{
    PyObject *code = py.compile(src, file, PY_FILE_INPUT);
    PyObject *mod = code ? py.exec_module(name, code) : NULL;
    if (code)
        py.decref(code);
    if (!mod)
        py.clear();
    return mod;
}

/* Calls companion.FN(arg); any exception is cleared: the program must never see one from us. */
static int call(const char *fn, int arg)
{
    PyObject *f = py.getattr(companion, fn);
    PyObject *r = f ? py.call_function(f, "i", arg) : NULL;
    if (f)
        py.decref(f);
    if (r)
        py.decref(r);
    int failed = !r || py.occurred();
    if (failed)
        py.clear();
    return failed ? -1 : 0;
}

static void start(void)
{
    /* The roles module is optional: the companion works without it. */
    if (ot_py__oomtrace_roles) {
        PyObject *roles = load_module("_oomtrace_roles", "<oomtrace>/_oomtrace_roles.py", ot_py__oomtrace_roles);
        if (roles)
            py.decref(roles);
        else
            ot_log("the framework companion's roles module did not load; parameters and gradients are not named");
    }
    const char *src = ot_py__oomtrace_companion;
    const char *fail = getenv("OOMTRACE_TEST_COMPANION_FAIL"); /* tests only: a companion that cannot load */
    if (fail && strcmp(fail, "load") == 0)
        src = "raise ImportError('oomtrace test: the companion cannot load')\n";
    companion = load_module("_oomtrace_companion", "<oomtrace>/_oomtrace_companion.py", src);
    if (!companion || call("_start", 0) != 0) {
        ot_log("the Python framework companion did not start; frameworks' allocators are not recorded");
        __atomic_store_n(&cstate, C_FAILED, __ATOMIC_RELEASE);
        return;
    }
    __atomic_store_n(&cstate, C_STARTED, __ATOMIC_RELEASE);
}

/* In the main thread, GIL held. Returns 0 with no exception set, whatever happened. */
static int run_pending(void *arg)
{
    __atomic_store_n(&scheduled, 0, __ATOMIC_RELEASE);
    int s = __atomic_load_n(&cstate, __ATOMIC_ACQUIRE);
    if (s == C_READY)
        start();
    else if (s == C_STARTED && call("_poke", (int)(intptr_t)arg) != 0)
        ot_log("the Python framework companion failed; it stays as it was");
    return 0;
}

void ot_companion_poke(enum ot_poke why)
{
    if (!ot_opt.frameworks)
        return;
    int s = __atomic_load_n(&cstate, __ATOMIC_ACQUIRE);
    if (OT_LIKELY(s == C_ABSENT || s == C_FAILED))
        return;
    uint64_t now = ot_now_ns();
    if (why == OT_POKE_ALLOC && s != C_NEW &&
        now - __atomic_load_n(&last_poke_ns, __ATOMIC_RELAXED) < POKE_INTERVAL_NS)
        return;
    if (s == C_NEW) {
        pthread_once(&probe_once, probe);
        if (__atomic_load_n(&cstate, __ATOMIC_ACQUIRE) != C_READY)
            return;
    }
    /* Before Py_Initialize and after finalization began, there is no interpreter to ask. */
    if (!py.is_initialized() || (py.is_finalizing && py.is_finalizing()))
        return;
    if (__atomic_exchange_n(&scheduled, 1, __ATOMIC_ACQ_REL))
        return;
    __atomic_store_n(&last_poke_ns, now, __ATOMIC_RELAXED);
    if (py.add_pending(run_pending, (void *)(intptr_t)why) != 0)
        __atomic_store_n(&scheduled, 0, __ATOMIC_RELEASE); /* the queue was full: the next poke retries */
}
