/* Checked reads, and each distinct (code object, instruction) interned once: its file, qualified name
 * and line (from the code object's location table) are copied out at first sight, so a later snapshot
 * never touches a code object that may have died. The ids are the snapshot's PYFRAMES entries. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "capture/pyframes.h"
#include "capture/pylines.h"
#include "capture/python.h"
#include "common/buf.h"

/* ---- memory reads ---- */

/* getpid() is a system call (glibc keeps no copy), and the checked reads need it each time; the child of
 * a fork forgets it (ot_pyframes_forked). */
static pid_t pid_cache;

pid_t ot_py_self_pid(void)
{
    pid_t p = __atomic_load_n(&pid_cache, __ATOMIC_RELAXED);
    if (!p) {
        p = getpid();
        __atomic_store_n(&pid_cache, p, __ATOMIC_RELAXED);
    }
    return p;
}

void ot_py_pid_forked(void)
{
    __atomic_store_n(&pid_cache, 0, __ATOMIC_RELAXED);
}

/* Used until the layout is validated, on objects seen for the first time (interning), and on other
 * threads' frames (borrowing); never on the hot path. */
int ot_py_checked_read(const void *addr, void *out, size_t n)
{
    if ((uintptr_t)addr < 4096)
        return -1;
    struct iovec local = {out, n}, remote = {(void *)addr, n};
    return process_vm_readv(ot_py_self_pid(), &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

/* An object's first bytes in one call: at least need of them, up to n, the remote range cut at each page
 * (a call never splits an element, so the elements before an unmapped page still come). Returns how many
 * came, or -1 when fewer than need. A first sight read each field with a call of its own (~15 a frame: the
 * main thread of bench/step_mix.py made 1,379 such calls, each 4-6 us here, 1-2 on the H200). */
#define READ_SOME_MAX 4
static ssize_t read_some(const void *addr, void *out, size_t need, size_t n)
{
    if ((uintptr_t)addr < 4096)
        return -1;
    struct iovec local[READ_SOME_MAX], remote[READ_SOME_MAX];
    uintptr_t a = (uintptr_t)addr, e = a + n;
    int k = 0;
    while (a < e && k < READ_SOME_MAX) {
        const uintptr_t next = (a | 4095) + 1, end = next < e ? next : e;
        local[k] = (struct iovec){(char *)out + (a - (uintptr_t)addr), end - a};
        remote[k++] = (struct iovec){(void *)a, end - a};
        a = end;
    }
    const ssize_t got = process_vm_readv(ot_py_self_pid(), local, (unsigned long)k, remote, (unsigned long)k, 0);
    return got >= (ssize_t)need ? got : -1;
}

static inline void take(void *dst, const char *buf, unsigned off, size_t n)
{
    memcpy(dst, buf + off, n);
}

/* Copies a str object as UTF-8 (at most cap-1 bytes). An ASCII string (file names, qualified names) in one
 * call with its header when it is short. */
#define STR_INLINE 192
static void read_str(const void *obj, char *out, size_t cap)
{
    const struct layout *L = ot_py.L;
    out[0] = 0;
    if (!obj)
        return;
    char buf[64 + STR_INLINE];
    const unsigned hdr = L->obj->ascii_data;
    if (hdr > 64 || L->obj->uni_state + 4 > hdr || L->obj->uni_length + 8 > hdr)
        return;
    const ssize_t got = read_some(obj, buf, hdr, hdr + STR_INLINE);
    void *type;
    uint32_t state;
    int64_t len;
    if (got < 0)
        return;
    take(&type, buf, 8, sizeof type);
    take(&state, buf, L->obj->uni_state, 4);
    take(&len, buf, L->obj->uni_length, 8);
    if (type != ot_py.unicode_type)
        return;
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || len < 0)
        return;
    if (ascii) {
        size_t n = (size_t)len < cap - 1 ? (size_t)len : cap - 1;
        if (hdr + n <= (size_t)got) {
            memcpy(out, buf + hdr, n);
            out[n] = 0;
        } else if (ot_py_checked_read((const char *)obj + hdr, out, n) == 0) {
            out[n] = 0;
        }
        return;
    }
    const char *utf8 = NULL;
    if (ot_py_checked_read((const char *)obj + L->obj->compact_utf8, &utf8, sizeof utf8) == 0 && utf8) {
        size_t n = 0;
        while (n < cap - 1 && ot_py_checked_read(utf8 + n, &out[n], 1) == 0 && out[n])
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
            if (ot_py_checked_read(data + i * kind, &cp, kind))
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

#define LT_INLINE 512 /* a line table this long or shorter comes with its header */

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
    const struct layout *L = ot_py.L;
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
    /* The code object's type and fields in one call: every offset read lies within its fixed part */
    char cb[256];
    unsigned cend = 16;
    const unsigned offs[4] = {L->co_filename, L->co_qualname, L->co_linetable, L->co_firstlineno};
    for (int k = 0; k < 4; k++)
        if (offs[k] + 8 > cend)
            cend = offs[k] + 8;
    void *type = NULL;
    if (cend > sizeof cb || read_some(code, cb, cend, cend) < 0)
        goto out;
    take(&type, cb, 8, sizeof type);
    if (type != ot_py.code_type)
        goto out;
    char file[1024], func[256];
    void *fo = NULL, *qo = NULL, *lt = NULL;
    int first = 0;
    take(&fo, cb, L->co_filename, sizeof fo);
    take(&qo, cb, L->co_qualname, sizeof qo);
    take(&lt, cb, L->co_linetable, sizeof lt);
    take(&first, cb, L->co_firstlineno, sizeof first);
    read_str(fo, file, sizeof file);
    read_str(qo, func, sizeof func);
    int line = -1;
    /* The line table (a bytes object): its header and, when short, its bytes in one call */
    char lb[64 + LT_INLINE];
    const unsigned lh = L->obj->bytes_data;
    ssize_t lgot;
    int64_t ltlen = 0;
    void *lttype = NULL;
    if (lt && lh <= 64 && L->obj->var_size + 8 <= lh && (lgot = read_some(lt, lb, lh, lh + LT_INLINE)) >= 0) {
        take(&lttype, lb, 8, sizeof lttype);
        take(&ltlen, lb, L->obj->var_size, 8);
        if (lttype == ot_py.bytes_type && ltlen > 0 && ltlen < (1 << 24)) {
            uint8_t *buf = (size_t)ltlen <= (size_t)lgot - lh ? (uint8_t *)lb + lh : malloc((size_t)ltlen);
            if (buf && (buf == (uint8_t *)lb + lh || ot_py_checked_read((const char *)lt + lh, buf, (size_t)ltlen) == 0))
                line = L->table == TABLE_LINES   ? ot_py_line_310(buf, (size_t)ltlen, first, lasti)
                       : L->table == TABLE_LNOTAB ? ot_py_line_39(buf, (size_t)ltlen, first, lasti)
                                                  : ot_py_line_311(buf, (size_t)ltlen, first, lasti);
            if (buf != (uint8_t *)lb + lh)
                free(buf);
        }
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

uint32_t ot_py_frame_id(struct cache_entry *cache, const void *code, uint64_t lasti, const void *name)
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
