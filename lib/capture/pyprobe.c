/* Which CPython runs in this process, and where its structures keep what the walk reads.
 *
 * The thread's state comes from PyGILState_GetThisThreadState (a thread-local lookup), and the frames from
 * the interpreter's own structures, whose layout is fixed per CPython minor version (3.9 to 3.13, each
 * checked against its own headers; other versions are declined with one line on stderr). 3.9 and 3.10
 * keep a chain of frame objects; 3.11 and later, interpreter frames. */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>

#include "capture/pyframes.h"
#include "capture/python.h"
#include "common/log.h"
#include "common/options.h"
#include "driver/real.h"

static const struct obj_layout obj39 = {
    .uni_state = 32, .uni_length = 16, .ascii_data = 48, .compact_utf8 = 56, .compact_data = 72,
    .var_size = 16, .bytes_data = 32,
};

static const struct obj_layout obj312 = {
    .uni_state = 32, .uni_length = 16, .ascii_data = 40, .compact_utf8 = 48, .compact_data = 56,
    .var_size = 16, .bytes_data = 32,
};

static const struct layout py311 = {
    .ts_cframe = 56, .cframe_current = 8,
    .fr_code = 32, .fr_previous = 48, .fr_instr = 56, .fr_owner = 69, .fr_is_entry = 68, .owner_cstack = -1,
    .co_firstlineno = 72, .co_filename = 112, .co_qualname = 128, .co_linetable = 136, .co_code = 184,
    .obj = &obj39, .ts_native_tid = 160, .holder = HOLDER_CURRENT,
};

static const struct layout py312 = {
    .ts_cframe = 56, .cframe_current = 0,
    .fr_code = 0, .fr_previous = 8, .fr_instr = 56, .fr_owner = 70, .fr_is_entry = -1, .owner_cstack = 3,
    .co_firstlineno = 68, .co_filename = 112, .co_qualname = 128, .co_linetable = 136, .co_code = 192,
    .obj = &obj312, .ts_native_tid = 144, .holder = HOLDER_GIL, .interp_gil = 384,
};

/* 3.9 and 3.10 (offsets checked against each version's headers): ts->frame, f_back, f_code, f_lasti. */
static const struct layout py39 = {
    .ts_cframe = 24, .ts_direct = 1, .fr_code = 32, .fr_previous = 24, .fr_instr = 104, .fr_is_entry = -1,
    .owner_cstack = -1, .co_firstlineno = 40, .co_filename = 104, .co_qualname = 112, .co_linetable = 120,
    .obj = &obj39, .frame_objects = 1, .lasti_bytes = 1, .table = TABLE_LNOTAB,
};

static const struct layout py310 = {
    .ts_cframe = 24, .ts_direct = 1, .fr_code = 32, .fr_previous = 24, .fr_instr = 96, .fr_is_entry = -1,
    .owner_cstack = -1, .co_firstlineno = 40, .co_filename = 104, .co_qualname = 112, .co_linetable = 120,
    .obj = &obj39, .frame_objects = 1, .lasti_bytes = 0, .table = TABLE_LINES,
};

/* 3.13: the thread state holds the current frame; f_executable (at f_code's place) holds the code object,
 * instr_ptr (at prev_instr's place) the instruction being executed. */
static const struct layout py313 = {
    .ts_cframe = 72, .ts_direct = 1,
    .fr_code = 0, .fr_previous = 8, .fr_instr = 56, .fr_owner = 70, .fr_is_entry = -1, .owner_cstack = 3,
    .co_firstlineno = 68, .co_filename = 112, .co_qualname = 128, .co_linetable = 136, .co_code = 200,
    .obj = &obj312, .ts_native_tid = 160, .holder = HOLDER_GIL, .interp_gil = 16,
};

struct ot_py ot_py;

static void *sym(const char *name)
{
    void *(*real)(void *, const char *) = (void *(*)(void *, const char *))ot_real_dlsym_fn();
    return real ? real(RTLD_DEFAULT, name) : NULL;
}

/* Sets everything the walk reads, then publishes the state with a release store: a thread that reads
 * PY_ON (acquire) sees the layout and symbols complete. */
void ot_py_publish(int state)
{
    __atomic_store_n(&ot_py.state, state, __ATOMIC_RELEASE);
}

void ot_py_probe(void)
{
    struct ot_py *p = &ot_py;
    p->get_tstate = (void *(*)(void))sym("PyGILState_GetThisThreadState");
    if (!p->get_tstate || !ot_opt.python) {
        ot_py_publish(PY_ABSENT);
        return;
    }
    const unsigned long *hex = sym("Py_Version");
    const char *(*getver)(void) = (const char *(*)(void))sym("Py_GetVersion");
    unsigned major = 0, minor = 0, micro = 0;
    if (hex) {
        major = (unsigned)(*hex >> 24) & 0xff;
        minor = (unsigned)(*hex >> 16) & 0xff;
        micro = (unsigned)(*hex >> 8) & 0xff;
    } else if (getver) {
        sscanf(getver(), "%u.%u.%u", &major, &minor, &micro);
    }
    snprintf(p->version, sizeof p->version, "%u.%u.%u", major, minor, micro);
    if (major == 3 && minor == 9)
        p->L = &py39;
    else if (major == 3 && minor == 10)
        p->L = &py310;
    else if (major == 3 && minor == 11)
        p->L = &py311;
    else if (major == 3 && minor == 12)
        p->L = &py312;
    else if (major == 3 && minor == 13)
        p->L = &py313;
    p->is_initialized = (int (*)(void))sym("Py_IsInitialized");
    p->code_type = sym("PyCode_Type");
    p->unicode_type = sym("PyUnicode_Type");
    p->bytes_type = sym("PyBytes_Type");
    p->main_interp = (void *(*)(void))sym("PyInterpreterState_Main");
    if (!p->main_interp)
        p->main_interp = (void *(*)(void))sym("PyInterpreterState_Head");
    p->thread_head = (void *(*)(void *))sym("PyInterpreterState_ThreadHead");
    p->gil_current = (void *(*)(void))sym("_PyThreadState_UncheckedGet");
    p->get_arena = (void (*)(void *))sym("PyObject_GetArenaAllocator");
    if (!p->L || !p->is_initialized || !p->code_type || !p->unicode_type || !p->bytes_type) {
        ot_log("Python %s: frame layout not supported (3.9 to 3.13 are); stacks stay native", p->version);
        ot_py_publish(PY_OFF);
        return;
    }
    void *eval = sym("_PyEval_EvalFrameDefault");
    Dl_info info;
    const ElfW(Sym) *es = NULL;
    if (eval && dladdr1(eval, &info, (void **)&es, RTLD_DL_SYMENT) && es && es->st_size) {
        p->eval_lo = (uintptr_t)eval;
        p->eval_hi = p->eval_lo + es->st_size;
    }
    void *runtime = sym("_PyRuntime");
    es = NULL;
    if (runtime && dladdr1(runtime, &info, (void **)&es, RTLD_DL_SYMENT) && es && es->st_size) {
        p->runtime_lo = (uintptr_t)runtime;
        p->runtime_hi = p->runtime_lo + es->st_size;
    }
    ot_py_publish(PY_ON);
}

const char *ot_python_version(void)
{
    int state = __atomic_load_n(&ot_py.state, __ATOMIC_ACQUIRE);
    return state == PY_ON || state == PY_OFF ? ot_py.version : "";
}
