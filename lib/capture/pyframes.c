/* Python frames, read from C without the GIL.
 *
 * At a driver call the calling thread is inside native code, so its own Python frame chain cannot change
 * under us, whether or not it holds the GIL; taking the GIL here could deadlock (a GIL holder may wait for
 * this thread). So the chain is read directly: the thread's state comes from PyGILState_GetThisThreadState
 * (a thread-local lookup), and the frames from the interpreter's own structures, whose layout is fixed per
 * CPython minor version (3.9 to 3.13, each checked against its own headers; other versions are declined with
 * one line on stderr). 3.9 and 3.10 keep a chain of frame objects; 3.11 and later, interpreter frames.
 *
 * Each distinct (code object, instruction) is interned once: its file, qualified name and line (from the
 * code object's location table) are copied out at first sight, so a later snapshot never touches a code
 * object that may have died. A per-thread cache makes repeated call sites cost a few loads each.
 *
 * The layout is checked before it is trusted: until one walk has validated every code object's type,
 * reads go through process_vm_readv, which fails instead of faulting. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/buf.h"
#include "capture/pylines.h"
#include "driver/real.h"
#include "internal.h"

/* The str and bytes objects a code object points at: str lost its wstr fields in 3.12, which moved its
 * data 8 bytes (ASCII) and 16 bytes (compact) closer to the header. */
struct obj_layout {
    unsigned uni_state, uni_length, ascii_data, compact_utf8, compact_data;
    unsigned var_size, bytes_data;
};

static const struct obj_layout obj39 = {
    .uni_state = 32, .uni_length = 16, .ascii_data = 48, .compact_utf8 = 56, .compact_data = 72,
    .var_size = 16, .bytes_data = 32,
};

static const struct obj_layout obj312 = {
    .uni_state = 32, .uni_length = 16, .ascii_data = 40, .compact_utf8 = 48, .compact_data = 56,
    .var_size = 16, .bytes_data = 32,
};

struct layout {
    unsigned ts_cframe, cframe_current;                  /* thread state -> _PyCFrame -> current frame */
    int ts_direct;                                       /* 3.13: ts_cframe is the current frame itself */
    unsigned fr_code, fr_previous, fr_instr, fr_owner;   /* _PyInterpreterFrame */
    int fr_is_entry;                                     /* 3.11: offset of is_entry; -1 otherwise */
    int owner_cstack;                                    /* 3.12: owner value of C-stack shim frames */
    unsigned co_firstlineno, co_filename, co_qualname, co_linetable, co_code;
    const struct obj_layout *obj;                        /* str and bytes objects */
    /* 3.9 and 3.10: a chain of frame objects, one eval-loop run each, with f_lasti an int (3.9: a byte
     * offset, 3.10: code units) and an older line table. co_qualname is then co_name. */
    int frame_objects;
    int lasti_bytes;    /* f_lasti counts bytes (3.9) */
    int table;          /* TABLE_LOCATIONS (3.11+), TABLE_LINES (3.10), TABLE_LNOTAB (3.9) */
    /* Borrowing (a native thread's allocation takes a waiting Python thread's stack): the thread state's
     * next (same offset, 8, in every version), its OS thread id (0: not kept, 3.9 and 3.10), and how to
     * tell which thread state holds the GIL. */
    unsigned ts_native_tid;
    int holder;          /* HOLDER_CURRENT or HOLDER_GIL */
    unsigned interp_gil; /* 3.12, 3.13: PyInterpreterState.ceval.gil */
};

/* 3.9 to 3.11: _PyThreadState_UncheckedGet() is the runtime's current thread state, the GIL holder (NULL
 * while nobody holds it). 3.12 and 3.13: that is thread-local; the interpreter's GIL (a
 * _gil_runtime_state: interval, last_holder at 8, locked at 16) says who holds it. */
enum { HOLDER_CURRENT = 0, HOLDER_GIL = 1 };

enum { TABLE_LOCATIONS = 0, TABLE_LINES = 1, TABLE_LNOTAB = 2 };

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

enum { PY_UNPROBED, PY_ABSENT, PY_ON, PY_OFF };
static int py_state;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static const struct layout *L;
static void *(*get_tstate)(void);
static int (*is_initialized)(void);
static void *(*main_interp)(void), *(*thread_head)(void *), *(*gil_current)(void);
static const void *code_type, *unicode_type, *bytes_type;
static uintptr_t eval_lo, eval_hi;
static char version[32];
static int validated; /* one walk has confirmed the layout: plain loads from now on */

static void *sym(const char *name)
{
    void *(*real)(void *, const char *) = (void *(*)(void *, const char *))ot_real_dlsym_fn();
    return real ? real(RTLD_DEFAULT, name) : NULL;
}

/* Sets everything walk() reads, then publishes the state with a release store: a thread that reads
 * PY_ON (acquire) sees the layout and symbols complete. */
static void publish(int state)
{
    __atomic_store_n(&py_state, state, __ATOMIC_RELEASE);
}

static void probe(void)
{
    get_tstate = (void *(*)(void))sym("PyGILState_GetThisThreadState");
    if (!get_tstate || !ot_opt.python) {
        publish(PY_ABSENT);
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
    snprintf(version, sizeof version, "%u.%u.%u", major, minor, micro);
    if (major == 3 && minor == 9)
        L = &py39;
    else if (major == 3 && minor == 10)
        L = &py310;
    else if (major == 3 && minor == 11)
        L = &py311;
    else if (major == 3 && minor == 12)
        L = &py312;
    else if (major == 3 && minor == 13)
        L = &py313;
    is_initialized = (int (*)(void))sym("Py_IsInitialized");
    code_type = sym("PyCode_Type");
    unicode_type = sym("PyUnicode_Type");
    bytes_type = sym("PyBytes_Type");
    main_interp = (void *(*)(void))sym("PyInterpreterState_Main");
    if (!main_interp)
        main_interp = (void *(*)(void))sym("PyInterpreterState_Head");
    thread_head = (void *(*)(void *))sym("PyInterpreterState_ThreadHead");
    gil_current = (void *(*)(void))sym("_PyThreadState_UncheckedGet");
    if (!L || !is_initialized || !code_type || !unicode_type || !bytes_type) {
        ot_log("Python %s: frame layout not supported (3.9 to 3.13 are); stacks stay native", version);
        publish(PY_OFF);
        return;
    }
    void *eval = sym("_PyEval_EvalFrameDefault");
    Dl_info info;
    const ElfW(Sym) *es = NULL;
    if (eval && dladdr1(eval, &info, (void **)&es, RTLD_DL_SYMENT) && es && es->st_size) {
        eval_lo = (uintptr_t)eval;
        eval_hi = eval_lo + es->st_size;
    }
    publish(PY_ON);
}

/* ---- memory reads ---- */

/* getpid() is a system call (glibc keeps no copy), and the checked reads need it each time; the child of
 * a fork forgets it (ot_pyframes_forked). */
static pid_t pid_cache;

static pid_t self_pid(void)
{
    pid_t p = __atomic_load_n(&pid_cache, __ATOMIC_RELAXED);
    if (!p) {
        p = getpid();
        __atomic_store_n(&pid_cache, p, __ATOMIC_RELAXED);
    }
    return p;
}

/* Until the layout is validated, reads go through process_vm_readv, which fails instead of faulting; after
 * that they are plain loads (the hot path: a handful per frame). */
static int slow_read(const void *addr, void *out, size_t n)
{
    if ((uintptr_t)addr < 4096)
        return -1;
    struct iovec local = {out, n}, remote = {(void *)addr, n};
    return process_vm_readv(self_pid(), &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

static inline int rd_u8(const void *base, unsigned off, char *out)
{
    if (OT_LIKELY(__atomic_load_n(&validated, __ATOMIC_RELAXED))) {
        *out = *((const char *)base + off);
        return 0;
    }
    return slow_read((const char *)base + off, out, 1);
}

/* Always checked: used on objects seen for the first time (interning), never on the hot path. */
static int checked_read(const void *addr, void *out, size_t n)
{
    if ((uintptr_t)addr < 4096)
        return -1;
    struct iovec local = {out, n}, remote = {(void *)addr, n};
    return process_vm_readv(self_pid(), &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

static inline void *rd_ptr(const void *base, unsigned off)
{
    if (OT_LIKELY(__atomic_load_n(&validated, __ATOMIC_RELAXED)))
        return *(void *const *)((const char *)base + off);
    void *p = NULL;
    return slow_read((const char *)base + off, &p, sizeof p) == 0 ? p : NULL;
}

static int is_type(const void *obj, const void *type)
{
    void *t = NULL;
    return checked_read((const char *)obj + 8, &t, sizeof t) == 0 && t == type;
}

/* Copies a str object as UTF-8 (at most cap-1 bytes). */
static void read_str(const void *obj, char *out, size_t cap)
{
    out[0] = 0;
    if (!obj || !is_type(obj, unicode_type))
        return;
    uint32_t state = 0;
    int64_t len = 0;
    if (checked_read((const char *)obj + L->obj->uni_state, &state, 4) || checked_read((const char *)obj + L->obj->uni_length, &len, 8))
        return;
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || len < 0)
        return;
    if (ascii) {
        size_t n = (size_t)len < cap - 1 ? (size_t)len : cap - 1;
        if (checked_read((const char *)obj + L->obj->ascii_data, out, n) == 0)
            out[n] = 0;
        return;
    }
    const char *utf8 = NULL;
    if (checked_read((const char *)obj + L->obj->compact_utf8, &utf8, sizeof utf8) == 0 && utf8) {
        size_t n = 0;
        while (n < cap - 1 && checked_read(utf8 + n, &out[n], 1) == 0 && out[n])
            n++;
        out[n] = 0;
        return;
    }
    /* No cached UTF-8: encode from the 1-, 2- or 4-byte code units. */
    size_t o = 0;
    const char *data = (const char *)obj + L->obj->compact_data;
    for (int64_t i = 0; i < len && o + 4 < cap; i++) {
        uint32_t cp = 0;
        if (kind == 1 || kind == 2 || kind == 4) {
            if (checked_read(data + i * kind, &cp, kind))
                break;
        } else {
            break;
        }
        if (cp < 0x80) {
            out[o++] = (char)cp;
        } else if (cp < 0x800) {
            out[o++] = (char)(0xc0 | cp >> 6);
            out[o++] = (char)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            out[o++] = (char)(0xe0 | cp >> 12);
            out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            out[o++] = (char)(0x80 | (cp & 0x3f));
        } else {
            out[o++] = (char)(0xf0 | cp >> 18);
            out[o++] = (char)(0x80 | ((cp >> 12) & 0x3f));
            out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            out[o++] = (char)(0x80 | (cp & 0x3f));
        }
    }
    out[o] = 0;
}

/* ---- the interned frames ---- */

/* Keyed by the code object's address, the instruction and the qualified-name object: a code object that
 * died and whose memory now holds another function's code differs in its name object. */
struct pyframe {
    uint64_t code, lasti, name;
    char *function, *file;
    int line;
};

static pthread_mutex_t pylock = PTHREAD_MUTEX_INITIALIZER;
static struct pyframe *table; /* index = id - 1 */
static uint32_t ntable, captable;
static uint32_t *pyindex;
static uint32_t pyindex_mask;

static uint64_t key_hash(uint64_t code, uint64_t lasti)
{
    return (code ^ (lasti * 0x9E3779B97F4A7C15ull)) * 0xff51afd7ed558ccdull;
}

static int index_grow(void)
{
    uint32_t cap = pyindex ? (pyindex_mask + 1) * 2 : 1024;
    uint32_t *n = calloc(cap, sizeof *n);
    if (!n)
        return -1;
    for (uint32_t id = 1; id <= ntable; id++) {
        uint32_t i = (uint32_t)(key_hash(table[id - 1].code, table[id - 1].lasti) >> 20) & (cap - 1);
        while (n[i])
            i = (i + 1) & (cap - 1);
        n[i] = id;
    }
    free(pyindex);
    pyindex = n;
    pyindex_mask = cap - 1;
    return 0;
}

/* Returns the id for (code, lasti), resolving it on first sight; 0 when the code object fails its checks. */
static uint32_t intern(const void *code, uint64_t lasti, const void *name)
{
    pthread_mutex_lock(&pylock);
    uint32_t id = 0;
    if (!pyindex && index_grow() != 0)
        goto out;
    uint32_t i = (uint32_t)(key_hash((uint64_t)(uintptr_t)code, lasti) >> 20) & pyindex_mask;
    for (; pyindex[i]; i = (i + 1) & pyindex_mask) {
        struct pyframe *f = &table[pyindex[i] - 1];
        if (f->code == (uint64_t)(uintptr_t)code && f->lasti == lasti && f->name == (uint64_t)(uintptr_t)name) {
            id = pyindex[i];
            goto out;
        }
    }
    if (!is_type(code, code_type))
        goto out;
    char file[1024], func[256];
    void *fo = NULL, *qo = NULL, *lt = NULL;
    int first = 0;
    checked_read((const char *)code + L->co_filename, &fo, sizeof fo);
    checked_read((const char *)code + L->co_qualname, &qo, sizeof qo);
    checked_read((const char *)code + L->co_linetable, &lt, sizeof lt);
    checked_read((const char *)code + L->co_firstlineno, &first, sizeof first);
    read_str(fo, file, sizeof file);
    read_str(qo, func, sizeof func);
    int line = -1;
    int64_t ltlen = 0;
    if (lt && is_type(lt, bytes_type) && checked_read((const char *)lt + L->obj->var_size, &ltlen, 8) == 0 && ltlen > 0 &&
        ltlen < (1 << 24)) {
        uint8_t *buf = malloc((size_t)ltlen);
        if (buf && checked_read((const char *)lt + L->obj->bytes_data, buf, (size_t)ltlen) == 0)
            line = L->table == TABLE_LINES   ? ot_py_line_310(buf, (size_t)ltlen, first, lasti)
                   : L->table == TABLE_LNOTAB ? ot_py_line_39(buf, (size_t)ltlen, first, lasti)
                                              : ot_py_line_311(buf, (size_t)ltlen, first, lasti);
        free(buf);
    }
    if (ntable == captable) {
        uint32_t nc = captable ? captable * 2 : 1024;
        struct pyframe *t = realloc(table, nc * sizeof *t);
        if (!t)
            goto out;
        table = t;
        captable = nc;
    }
    struct pyframe *f = &table[ntable];
    f->code = (uint64_t)(uintptr_t)code;
    f->lasti = lasti;
    f->name = (uint64_t)(uintptr_t)name;
    f->function = strdup(func);
    f->file = strdup(file);
    f->line = line;
    id = ++ntable;
    pyindex[i] = id;
    if (ntable * 2 > pyindex_mask + 1)
        index_grow();
out:
    pthread_mutex_unlock(&pylock);
    return id;
}

/* A per-thread cache of recent (code, lasti) -> id: the common case takes no lock. */
#define CACHE 256
struct cache_entry {
    uint64_t code, lasti, name;
    uint32_t id;
};

static uint32_t frame_id(struct cache_entry *cache, const void *code, uint64_t lasti, const void *name)
{
    if (!cache)
        return intern(code, lasti, name);
    struct cache_entry *c = &cache[(key_hash((uint64_t)(uintptr_t)code, lasti) >> 24) & (CACHE - 1)];
    if (c->id && c->code == (uint64_t)(uintptr_t)code && c->lasti == lasti && c->name == (uint64_t)(uintptr_t)name)
        return c->id;
    uint32_t id = intern(code, lasti, name);
    if (id) {
        c->code = (uint64_t)(uintptr_t)code;
        c->lasti = lasti;
        c->name = (uint64_t)(uintptr_t)name;
        c->id = id;
    }
    return id;
}

/* ---- the walk and the merge ---- */

#define MAXPY 128

/* One walk: the chain innermost first as (code, instruction) pairs, whether each frame is the outermost
 * of one run of the eval loop, and (after interning) its PYFRAMES id. */
struct chain {
    int n;
    const void *code[MAXPY];
    const char *instr[MAXPY];
    uint8_t entry[MAXPY];
    uint32_t id[MAXPY];
};

/* A thread's cache, and its previous walk: in a loop the same call sites come back, and a chain equal to
 * the last one in every (code, instruction) pair has the same ids, found with three memcmp and no lookup.
 * The code objects are alive (the frames hold them), so equal pointers mean the same code.
 * Mapped at the thread's first walk rather than kept in static TLS: glibc carves a thread's static TLS out
 * of its stack, and these 11 KB made pthread_create fail on PTHREAD_STACK_MIN stacks (issue 15, item 5). */
struct lent {
    void *ts, *cframe, *frame;
    const void *code;
    const char *instr;
    uint32_t tid;
    uint64_t walked_ns;
    struct chain c;
};
struct py_thread {
    struct cache_entry cache[CACHE];
    struct chain last;
    struct lent lent; /* a native thread's last borrow (borrow_again) */
};
#define PY_THREAD_NONE ((struct py_thread *)1) /* none to be had (exited, or mmap failed): walks go uncached */
static __thread struct py_thread *py_tls __attribute__((tls_model("initial-exec")));
static pthread_key_t py_key;
static int py_key_ok;
static pthread_once_t py_key_once = PTHREAD_ONCE_INIT;

/* At thread exit. Destructors that run after this one may still allocate: they walk uncached. */
static void py_thread_free(void *p)
{
    py_tls = PY_THREAD_NONE;
    munmap(p, sizeof(struct py_thread));
}

static void py_key_make(void)
{
    py_key_ok = pthread_key_create(&py_key, py_thread_free) == 0;
}

static struct py_thread *py_thread_get(void)
{
    struct py_thread *t = py_tls;
    if (OT_LIKELY(t != NULL))
        return t == PY_THREAD_NONE ? NULL : t;
    py_tls = PY_THREAD_NONE;
    pthread_once(&py_key_once, py_key_make);
    t = py_key_ok ? mmap(NULL, sizeof *t, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    if (t == MAP_FAILED)
        return NULL;
    pthread_setspecific(py_key, t);
    py_tls = t;
    return t;
}

/* The chain as plain loads; called once the layout is validated. */
static int gather_fast(void *frame, struct chain *c)
{
    const unsigned o_owner = L->fr_owner, o_prev = L->fr_previous, o_code = L->fr_code, o_instr = L->fr_instr;
    const int cstack = L->owner_cstack;
    /* Versions without is_entry read a byte that is there (the owner) and mask it off: no branch a frame. */
    const unsigned o_entry = L->fr_is_entry >= 0 ? (unsigned)L->fr_is_entry : o_owner;
    const char entry_mask = L->fr_is_entry >= 0 ? (char)0xff : 0;
    int n = 0;
    for (int guard = 0; frame && n < MAXPY && guard < 4 * MAXPY; guard++) {
        const char *f = frame;
        frame = *(void *const *)(f + o_prev);
        if (f[o_owner] == cstack) {
            if (n)
                c->entry[n - 1] = 1;
            continue;
        }
        const void *code = *(void *const *)(f + o_code);
        if (!code)
            return -1;
        c->code[n] = code;
        c->instr[n] = *(const char *const *)(f + o_instr);
        c->entry[n] = (f[o_entry] & entry_mask) != 0;
        n++;
    }
    return n;
}

/* The same through checked reads, until one walk has validated the layout. */
static int gather_checked(void *frame, struct chain *c)
{
    int n = 0;
    for (int guard = 0; frame && n < MAXPY && guard < 4 * MAXPY; guard++) {
        char owner = 0, e = 0;
        if (rd_u8(frame, L->fr_owner, &owner))
            return -1;
        void *prev = rd_ptr(frame, L->fr_previous);
        if (L->owner_cstack >= 0 && owner == L->owner_cstack) {
            if (n)
                c->entry[n - 1] = 1;
            frame = prev;
            continue;
        }
        c->code[n] = rd_ptr(frame, L->fr_code);
        c->instr[n] = rd_ptr(frame, L->fr_instr);
        if (!c->code[n])
            return -1;
        if (L->fr_is_entry >= 0)
            rd_u8(frame, (unsigned)L->fr_is_entry, &e);
        c->entry[n] = e != 0;
        n++;
        frame = prev;
    }
    return n;
}

/* 3.9 and 3.10: frame objects, each its own run of the eval loop. instr holds f_lasti as a number. */
static int gather_objects(void *frame, struct chain *c, int fast)
{
    int n = 0;
    for (int guard = 0; frame && n < MAXPY && guard < 4 * MAXPY; guard++) {
        const void *code = rd_ptr(frame, L->fr_code);
        void *prev = rd_ptr(frame, L->fr_previous);
        int lasti = 0;
        if (fast)
            lasti = *(const int *)((const char *)frame + L->fr_instr);
        else if (slow_read((const char *)frame + L->fr_instr, &lasti, sizeof lasti))
            return -1;
        if (!code)
            return -1;
        c->code[n] = code;
        c->instr[n] = (const char *)(uintptr_t)(lasti < 0 ? 0 : lasti);
        c->entry[n] = 1;
        n++;
        frame = prev;
    }
    return n;
}

/* Frame i's instruction, counted in code units from the start of its code object. */
static uint64_t instr_index(const struct chain *c, int i)
{
    if (L->frame_objects)
        return (uint64_t)(uintptr_t)c->instr[i] >> (L->lasti_bytes ? 1 : 0);
    const char *begin = (const char *)c->code[i] + L->co_code;
    return c->instr[i] >= begin ? (uint64_t)(c->instr[i] - begin) / 2 : 0;
}

static int walk(struct chain *c)
{
    if (!is_initialized())
        return 0;
    void *ts = get_tstate();
    if (!ts)
        return 0;
    void *cf = rd_ptr(ts, L->ts_cframe);
    void *frame = L->ts_direct ? cf : cf ? rd_ptr(cf, L->cframe_current) : NULL;
    int fast = __atomic_load_n(&validated, __ATOMIC_ACQUIRE);
    int n = L->frame_objects ? gather_objects(frame, c, fast) : fast ? gather_fast(frame, c) : gather_checked(frame, c);
    int bad = n < 0;
    if (n > 0)
        c->entry[n - 1] = 1;
    c->n = n < 0 ? 0 : n;
    struct py_thread *t = py_thread_get();
    struct chain *last = t ? &t->last : NULL;
    if (!bad && fast && last && n == last->n && memcmp(c->code, last->code, (size_t)n * sizeof c->code[0]) == 0 &&
        memcmp(c->instr, last->instr, (size_t)n * sizeof c->instr[0]) == 0 &&
        memcmp(c->entry, last->entry, (size_t)n) == 0) {
        memcpy(c->id, last->id, (size_t)n * sizeof c->id[0]);
        return n;
    }
    for (int i = 0; i < n && !bad; i++) {
        uint64_t lasti = instr_index(c, i);
        c->id[i] = frame_id(t ? t->cache : NULL, c->code[i], lasti, rd_ptr(c->code[i], L->co_qualname));
        bad |= c->id[i] == 0;
    }
    if (bad) {
        if (last)
            last->n = 0;
        if (!fast) {
            ot_log("Python %s: frame layout check failed; stacks stay native", version);
            publish(PY_OFF);
        }
        return 0;
    }
    if (n && !fast)
        __atomic_store_n(&validated, 1, __ATOMIC_RELEASE);
    if (n && last)
        memcpy(last, c, sizeof *last);
    return n;
}

/* ---- borrowing: a native thread's allocation takes a waiting Python thread's stack ---- */

/* Autograd's device threads, NCCL's and the libraries' own threads allocate with no Python frame while a
 * Python thread waits for them in a call that released the GIL (loss.backward() waits in
 * _engine_run_backward). Their allocations then carry that thread's Python stack, flagged borrowed. The
 * rule is general: a thread of the interpreter, not this one, with Python frames, that does not hold the
 * GIL; the main thread first when it is one, else the most recently started.
 *
 * The other thread may return and pop its frames at any moment, and its thread state may be freed, so
 * every read here goes through process_vm_readv (one call per thread state and per frame), never a plain
 * load; no lock is taken (the interpreter's own head lock could be held by a thread that waits on us). */

#define MAX_THREADS 64
#define TS_BYTES 176 /* the largest thread state offset read below, rounded up */

/* 3.12, 3.13: the main interpreter's GIL, found once. It lives in the interpreter's (static) state as long
 * as the process: plain loads are safe there, unlike in a thread state. */
static void *gil_state;

/* The thread state that holds the GIL, or NULL (nobody holds it, or it cannot be told). */
static void *gil_holder(void *interp)
{
    if (L->holder == HOLDER_CURRENT)
        return gil_current ? gil_current() : NULL;
    if (!gil_state) {
        void *g = NULL;
        int locked = 0;
        if (!interp || checked_read((const char *)interp + L->interp_gil, &g, sizeof g) || !g ||
            checked_read((const char *)g + 16, &locked, sizeof locked) || (locked != 0 && locked != 1))
            return NULL;
        gil_state = g;
    }
    void *last_holder = __atomic_load_n((void *const *)((const char *)gil_state + 8), __ATOMIC_RELAXED);
    return __atomic_load_n((const int *)((const char *)gil_state + 16), __ATOMIC_RELAXED) == 1 ? last_holder : NULL;
}

/* The bytes of one frame that the walk reads: code, previous, instruction and owner. */
static unsigned frame_need(void)
{
    unsigned need = L->fr_code + 8;
    need = need > L->fr_previous + 8 ? need : L->fr_previous + 8;
    unsigned instr_end = L->fr_instr + (L->frame_objects ? 4 : 8); /* f_lasti is an int */
    need = need > instr_end ? need : instr_end;
    if (!L->frame_objects)
        need = need > L->fr_owner + 1 ? need : L->fr_owner + 1;
    return need;
}

/* A chain read frame by frame with one checked read each. */
static int gather_borrowed(void *frame, struct chain *c)
{
    unsigned need = frame_need();
    char f[128];
    int n = 0;
    for (int guard = 0; frame && n < MAXPY && guard < 4 * MAXPY; guard++) {
        if (need > sizeof f || checked_read(frame, f, need))
            return -1;
        void *prev, *code;
        memcpy(&prev, f + L->fr_previous, sizeof prev);
        memcpy(&code, f + L->fr_code, sizeof code);
        if (L->frame_objects) {
            int lasti;
            memcpy(&lasti, f + L->fr_instr, sizeof lasti);
            if (!code)
                return -1;
            c->code[n] = code;
            c->instr[n] = (const char *)(uintptr_t)(lasti < 0 ? 0 : lasti);
            c->entry[n++] = 1;
        } else if (L->owner_cstack >= 0 && f[L->fr_owner] == L->owner_cstack) {
            if (n)
                c->entry[n - 1] = 1;
        } else {
            if (!code)
                return -1;
            c->code[n] = code;
            memcpy(&c->instr[n], f + L->fr_instr, sizeof c->instr[n]);
            c->entry[n++] = L->fr_is_entry >= 0 && f[L->fr_is_entry] != 0;
        }
        frame = prev;
    }
    return n;
}

/* A native thread's last borrow. While the lender still waits at the same innermost frame (the same
 * thread state, _PyCFrame, frame, code and instruction, and it does not hold the GIL), its chain is the
 * one read before: checked with one vectored read instead of a walk (a read costs a system call, a few
 * microseconds on a loaded machine). A full walk all the same every BORROW_RECHECK_NS, since a deeper
 * frame could differ under an equal innermost one, and another thread may have started waiting. */
static void *single; /* the interpreter's only thread state at the last walk, or NULL */
#define BORROW_RECHECK_NS 10000000ull

static int borrow_again(struct lent *l, struct chain *c, uint32_t *lender)
{
    if (!l || !l->ts || ot_now_ns() - l->walked_ns > BORROW_RECHECK_NS)
        return 0;
    char ts[TS_BYTES], fr[128], cf[64];
    unsigned need = frame_need(), ncf = L->cframe_current + 8;
    struct iovec local[4] = {{ts, sizeof ts}, {fr, need}}, remote[4] = {{l->ts, sizeof ts}, {l->frame, need}};
    int k = 2;
    size_t total = sizeof ts + need;
    if (l->cframe) {
        local[k] = (struct iovec){cf, ncf};
        remote[k++] = (struct iovec){l->cframe, ncf};
        total += ncf;
    }
    if (process_vm_readv(self_pid(), local, (unsigned long)k, remote, (unsigned long)k, 0) != (ssize_t)total)
        return 0;
    void *p, *code;
    memcpy(&p, ts + L->ts_cframe, sizeof p);
    if (p != (l->cframe ? l->cframe : l->frame))
        return 0;
    if (l->cframe) {
        memcpy(&p, cf + L->cframe_current, sizeof p);
        if (p != l->frame)
            return 0;
    }
    memcpy(&code, fr + L->fr_code, sizeof code);
    if (code != l->code)
        return 0;
    if (L->frame_objects) {
        int lasti;
        memcpy(&lasti, fr + L->fr_instr, sizeof lasti);
        if ((const char *)(uintptr_t)(lasti < 0 ? 0 : lasti) != l->instr)
            return 0;
    } else {
        memcpy(&p, fr + L->fr_instr, sizeof p);
        if (p != l->instr)
            return 0;
    }
    if (gil_holder(NULL) == l->ts)
        return 0;
    memcpy(c, &l->c, sizeof *c);
    *lender = l->tid;
    return c->n;
}

void ot_pyframes_forked(void)
{
    __atomic_store_n(&pid_cache, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&single, NULL, __ATOMIC_RELAXED);
    if (py_tls && py_tls != PY_THREAD_NONE)
        py_tls->lent.ts = NULL;
}

/* Fills c with the lender's chain (ids interned); returns its length, 0 when no thread waits, and sets
 * *lender to the lender's OS thread id (0 when this CPython keeps none and it is not the main thread). */
static int borrow_off;    /* the layout check failed: no borrowing in this process */
static int holder_misses; /* full walks in a row whose GIL holder the thread list lacked */
#define HOLDER_MISSES_MAX 16

static int borrow(struct chain *c, uint32_t *lender)
{
    if (!main_interp || !thread_head || __atomic_load_n(&borrow_off, __ATOMIC_RELAXED))
        return 0;
    struct py_thread *t = py_thread_get();
    struct lent *l = t ? &t->lent : NULL;
    int n = borrow_again(l, c, lender);
    if (n)
        return n;
    if (l)
        l->ts = NULL;
    void *interp = main_interp();
    if (!interp)
        return 0;
    void *self = get_tstate(), *holder = gil_holder(interp), *head = thread_head(interp);
    /* The interpreter had one thread state at the last walk, and the head is still it (a new thread
     * state would be the head): when it is this thread's or holds the GIL, nobody waits, and no read is
     * needed (the main thread of a one-thread program runs Python while a library's thread allocates). */
    if (head && head == __atomic_load_n(&single, __ATOMIC_RELAXED) && (head == self || head == holder))
        return 0;
    /* Candidates: thread states other than this thread's and the GIL holder's, with a Python frame
     * (autograd's own threads have a thread state and no frame). The list runs newest first, so the main
     * thread's state is its last: it is the one when it is a candidate, else the newest candidate. */
    void *pick = NULL, *cf = NULL, *frame = NULL;
    char ts[TS_BYTES], pick_ts[TS_BYTES];
    int holder_seen = 0, main_picked = 0;
    __atomic_store_n(&single, NULL, __ATOMIC_RELAXED);
    for (void *th = head; th && n < MAX_THREADS; n++) {
        if (checked_read(th, ts, sizeof ts))
            return 0;
        void *next, *tcf = NULL, *tframe = NULL;
        memcpy(&next, ts + 8, sizeof next);
        holder_seen |= th == holder;
        if (th != self && th != holder) {
            memcpy(&tcf, ts + L->ts_cframe, sizeof tcf);
            if (L->ts_direct)
                tframe = tcf, tcf = NULL;
            else if (tcf && checked_read((const char *)tcf + L->cframe_current, &tframe, sizeof tframe))
                tframe = NULL;
        }
        if (tframe && (!pick || !next)) {
            pick = th, cf = tcf, frame = tframe, main_picked = !next;
            memcpy(pick_ts, ts, sizeof ts);
        }
        th = next;
    }
    if (holder && !holder_seen && n < MAX_THREADS) {
        /* The GIL names a thread state the interpreter does not list. Once, that is a thread exiting
         * (its state leaves the list before it lets the GIL go); walk after walk, this CPython's layout is
         * not the one expected (a patch release that moved a field): borrowing stops, said once. */
        if (__atomic_add_fetch(&holder_misses, 1, __ATOMIC_RELAXED) == HOLDER_MISSES_MAX) {
            __atomic_store_n(&borrow_off, 1, __ATOMIC_RELAXED);
            ot_log("Python %s: the GIL's holder is not among the interpreter's threads; native threads' "
                   "allocations keep no Python stack", version);
        }
        return 0;
    }
    if (holder)
        __atomic_store_n(&holder_misses, 0, __ATOMIC_RELAXED);
    if (n == 1)
        __atomic_store_n(&single, head, __ATOMIC_RELAXED);
    if (!pick)
        return 0;
    uint32_t tid = 0;
    if (L->ts_native_tid) {
        unsigned long ntid;
        memcpy(&ntid, pick_ts + L->ts_native_tid, sizeof ntid);
        tid = (uint32_t)ntid;
    }
    if (!tid && main_picked)
        tid = (uint32_t)self_pid();
    if ((n = gather_borrowed(frame, c)) <= 0)
        return 0;
    c->entry[n - 1] = 1;
    for (int i = 0; i < n; i++) {
        uint64_t lasti = instr_index(c, i);
        void *name = NULL;
        if (checked_read((const char *)c->code[i] + L->co_qualname, &name, sizeof name))
            return 0;
        if (!(c->id[i] = frame_id(t ? t->cache : NULL, c->code[i], lasti, name)))
            return 0;
    }
    c->n = n;
    *lender = tid;
    if (l) {
        *l = (struct lent){.ts = pick, .cframe = cf, .frame = frame, .code = c->code[0], .instr = c->instr[0],
                           .tid = tid, .walked_ns = ot_now_ns()};
        memcpy(&l->c, c, sizeof *c);
    }
    return n;
}

/* Puts the Python frames where the interpreter ran them: each native frame inside the eval loop is
 * replaced by the Python frames that run of the loop executed. Apart from ot_python_merge, so that a
 * program without Python never reserves its 5 KB of stack (threads with 16 KiB stacks allocate too). */
static __attribute__((noinline)) int merge(uint64_t *frames, int n, int max, unsigned *flags)
{
    struct chain c;
    int np = walk(&c);
    if (np == 0) {
        if (__atomic_load_n(&py_state, __ATOMIC_ACQUIRE) != PY_ON)
            return n;
        uint32_t lender = 0;
        if (!is_initialized() || (np = borrow(&c, &lender)) == 0) {
            *flags |= OT_STACK_NO_PYTHON; /* a native thread of a Python process, no thread waiting */
            return n;
        }
        *flags |= OT_STACK_BORROWED | (lender & OT_STACK_LENDER_MAX) << OT_STACK_LENDER_SHIFT;
    }
    uint64_t native[OT_MAX_FRAMES];
    memcpy(native, frames, (size_t)n * sizeof *frames);
    int out = 0, p = 0, i;
    const uintptr_t eval_first = eval_lo + 1, eval_span = eval_hi - eval_lo; /* return addresses in (lo, hi] */
    for (i = 0; i < n && out < max; i++) {
        uintptr_t a = (uintptr_t)(native[i] >> 1);
        if (a - eval_first < eval_span && p < np) {
            /* The run: from p to its outermost frame (entry), or to the chain's end; found first, then
             * copied in one loop (a frame-at-a-time loop with three exits was most of the merge). */
            int q = p;
            while (q < np - 1 && !c.entry[q])
                q++;
            int take = q + 1 - p < max - out ? q + 1 - p : max - out;
            for (int k = 0; k < take; k++)
                frames[out + k] = ((uint64_t)c.id[p + k] << 1) | OT_FRAME_PYTHON;
            out += take;
            p += take;
            continue;
        }
        frames[out++] = native[i];
    }
    while (p < np && out < max)
        frames[out++] = ((uint64_t)c.id[p++] << 1) | OT_FRAME_PYTHON;
    if (i < n || p < np) /* the Python frames made the stack longer than a stack may be */
        *flags |= OT_STACK_TRUNCATED;
    return out;
}

int ot_python_merge(uint64_t *frames, int n, int max, unsigned *flags)
{
    int state = __atomic_load_n(&py_state, __ATOMIC_ACQUIRE);
    if (OT_UNLIKELY(state == PY_UNPROBED)) {
        pthread_once(&probe_once, probe);
        state = __atomic_load_n(&py_state, __ATOMIC_ACQUIRE);
    }
    return state == PY_ON ? merge(frames, n, max, flags) : n;
}

const char *ot_python_version(void)
{
    int state = __atomic_load_n(&py_state, __ATOMIC_ACQUIRE);
    return state == PY_ON || state == PY_OFF ? version : "";
}

void ot_pyframes_serialize(struct ot_buf *b)
{
    pthread_mutex_lock(&pylock);
    ot_buf_uv(b, ntable);
    for (uint32_t i = 0; i < ntable; i++) {
        ot_buf_uv(b, i + 1);
        ot_buf_cstr(b, table[i].function);
        ot_buf_cstr(b, table[i].file);
        ot_buf_uv(b, table[i].line < 0 ? 0 : (uint64_t)table[i].line);
    }
    pthread_mutex_unlock(&pylock);
}
